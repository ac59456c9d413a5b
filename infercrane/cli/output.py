"""Everything the CLI prints on stdout, formatted in one place from the layers' typed results.

Each function takes a result (dataclasses of the engine and live layers, the validated config)
and returns the text for a person or the JSON document for a machine (``--json``): the same
facts, keys in camelCase. Notes for the person during a command go to stderr elsewhere (progress).
CLI layer.

A plan's rollout, in lines and as a document, is :mod:`~infercrane.cli.rollout_text`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infercrane.cli.documents import as_json, dumps
from infercrane.cli.rollout_text import estimate_lines, rollout_doc, rollout_lines
from infercrane.core.plan.actions import Action

if TYPE_CHECKING:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.promotion import Change
    from infercrane.core.render import RenderedReplica
    from infercrane.engine.changes import ReplicaAction
    from infercrane.engine.operations import DeployResult
    from infercrane.engine.planning import PlanResult
    from infercrane.engine.teardown import DestroyResult
    from infercrane.live.doctor import Check
    from infercrane.live.takeover import TakeoverResult


# -- validate ---------------------------------------------------------------------------------
def validate_ok(stack: str, config: InferCraneConfig, rendered: Sequence[RenderedReplica], *, as_doc: bool) -> str:
    if as_doc:
        return dumps({"ok": True, "stack": stack, "replicas": [r.replica.key for r in rendered]})
    n = sum(len(r.manifests) for r in rendered)
    return f"stack {stack}: valid ({len(rendered)} replica(s), {n} object(s), workload API {config.kubernetes.workload_api})"


def validate_failed(stack: str, problems: Sequence[str]) -> str:
    return dumps({"ok": False, "stack": stack, "problems": list(problems)})


# -- plan / deploy -----------------------------------------------------------------------------
def actions_table(actions: Sequence[ReplicaAction], *, done: bool) -> list[str]:
    """One line per replica, in the plan's words (``configure``) or the deploy's (``configured``)."""
    lines = []
    for a in actions:
        word = a.action.done if done else a.action.planned
        if a.action is Action.DELETE:
            lines.append(f"  {word:<11} key {a.key or '(not in the state)'}  ({a.name}: removed from the config)")
            continue
        lines.append(f"  {word:<11} key {a.key}  gpu {a.gpu}  image {a.image}  {', '.join(a.objects)}")
    return lines


def plan(stack: str, result: PlanResult, *, as_doc: bool) -> str:
    pending = result.changes_pending
    if as_doc:
        return dumps(
            {
                "stack": stack,
                "changesPending": pending,
                "basis": result.basis,
                "whyPreview": result.why_preview,
                "replicas": result.actions,
                "rollout": rollout_doc(result.rollout),
                "estimate": result.estimate.as_json() if result.estimate is not None and result.changes_pending else None,
                "rejectedBefore": result.rejected,
            }
        )
    lines = [f"plan for stack {stack}:", *actions_table(result.actions, done=False), *rollout_lines(result.rollout)]
    if result.estimate is not None and pending:
        lines += estimate_lines(result.estimate)
    lines += [
        f"  rejected before: endpoint {endpoint}'s release ({said}); deploy refuses it without --retry-rejected"
        for endpoint, said in result.rejected.items()
    ]
    if result.basis == "read-only":
        lines.append(
            ("changes pending" if pending else "no changes") + " (read-only: from the live objects and their managedFields)"
        )
    elif result.basis == "state+live":
        lines.append("no changes (proven by the stack's state and a live dry run; --full-preview runs pulumi preview)")
    else:
        lines.append("changes pending" if pending else "no changes")
    return "\n".join(lines)


def deploy(stack: str, result: DeployResult, *, as_doc: bool) -> str:
    if as_doc:
        return dumps(
            {
                "stack": stack,
                "idempotencyKey": result.key,
                "status": result.status,
                "intent": result.intent,
                "recordedAt": result.recorded_at,
                "replicas": result.actions,
                "rollout": rollout_doc(result.rollout),
            }
        )
    if result.status == "replayed":
        return f"deploy {result.key}: already applied at {result.recorded_at} with the same intent; nothing changed"
    return "\n".join(
        [
            f"deploy {result.key}: succeeded at {result.recorded_at}",
            *actions_table(result.actions, done=True),
            *rollout_lines(result.rollout),
        ]
    )


# -- inspect / destroy / doctor / takeover ------------------------------------------------------
def inspect(
    stack: str,
    records: list[dict[str, Any]],
    endpoints: Mapping[str, Any] | None = None,
    canaries: Mapping[str, str] | None = None,
    *,
    as_doc: bool,
) -> str:
    """``canaries``: endpoint -> its canary's last verdict in words (endpoints under a canary policy)."""
    if as_doc:
        doc = {"stack": stack, "replicas": list(records), "endpoints": dict(endpoints or {})}
        return dumps(doc | ({"canaries": dict(canaries)} if canaries else {}))
    from infercrane.live.inspect import render_text

    text = render_text(records, dict(endpoints or {}))
    return "\n".join([*(f"endpoint {e}: last canary verdict: {words}" for e, words in sorted((canaries or {}).items())), text])


def destroy(stack: str, namespace: str, result: DestroyResult, *, as_doc: bool) -> str:
    if as_doc:
        return dumps(
            {
                "stack": stack,
                "deleted": result.deleted,
                "orphansDeleted": result.orphans,
                "refused": result.refused,
                "remaining": result.remaining,
            }
        )
    lines = []
    if result.orphans:
        lines.append(f"deleted {len(result.orphans)} owned object(s) missing from the state: {', '.join(result.orphans)}")
    lines += [f"refused: {r}; left untouched and dropped from the stack's state" for r in result.refused]
    if result.remaining:
        lines.append(f"destroy finished but {len(result.remaining)} owned object(s) remain: {', '.join(result.remaining)}")
    else:
        lines.append(f"destroy: zero objects owned by stack {stack} remain in namespace {namespace}")
    return "\n".join(lines)


def doctor(stack: str, checks: Sequence[Check], failed: int, *, as_doc: bool) -> str:
    if as_doc:
        return dumps({"stack": stack, "ok": not failed, "checks": list(checks)})
    lines = [f"  [{c.status}] {c.name}: {c.detail}" + (f"\n         hint: {c.hint}" if c.hint else "") for c in checks]
    lines.append(
        f"doctor: {len(checks) - failed}/{len(checks)} checks passed, warned or could not be verified by this identity"
        + ("" if not failed else f"; {failed} failed")
    )
    return "\n".join(lines)


def takeover(stack: str, result: TakeoverResult, *, dry_run: bool, as_doc: bool) -> str:
    if as_doc:
        return dumps({"stack": stack, "dryRun": dry_run, **as_json(result)})
    verb = "would take over" if dry_run else "took over"
    lines = [f"{verb} {len(result.taken)} object(s) for stack {stack}: {', '.join(result.taken) or 'none'}"]
    if result.already:
        lines.append(f"already this stack's: {', '.join(result.already)}")
    if result.missing:
        lines.append(f"not in the cluster (deploy creates them): {', '.join(result.missing)}")
    if result.taken and not dry_run:
        lines.append(f"next: `infercrane deploy --stack {stack}` applies to them (pods roll only where the template differs)")
    return "\n".join(lines)


# -- promote / local ------------------------------------------------------------------------------
def promotion_diff(changes: Sequence[Change], source: str, target: str) -> str:
    if not changes:
        return f"promote {source} -> {target}: nothing to change (the bundles are already equal)"
    lines = [f"promote {source} -> {target}:"]
    for c in changes:
        lines.append(f"  {c.key}: {c.field}: {c.old!r} -> {c.new!r}" if c.field != "(replica)" else f"  {c.key}: new replica")
    return "\n".join(lines)


def local_status(status: Mapping[str, Any], *, as_doc: bool) -> str:
    if as_doc:
        return dumps(status)
    state = "running" if status["running"] else "not running"
    lines = [f"local plane {state}; kubeconfig {status['kubeconfig']} (contexts {status['context']}, {status['adminContext']})"]
    if status.get("kubernetesVersion"):
        lines.append(f"  Kubernetes {status['kubernetesVersion']}")
    if status.get("podReadyDelaySeconds"):
        lines.append(f"  pods become Ready {status['podReadyDelaySeconds']:g} s after they start (simulated model load)")
    if status.get("realNodes"):
        lines.append(f"  real node(s): {', '.join(status['realNodes'])}")
    lines += [f"  {name}: {'up' if up else 'down'}" for name, up in status["processes"].items()]
    return "\n".join(lines)


def local_env(kubeconfig: str, env: Mapping[str, str]) -> str:
    """Shell exports for the local plane (``eval "$(infercrane local env)"``), with the contexts explained."""
    import shlex

    from infercrane.local.layout import ADMIN_CONTEXT, CONTEXT, VIEWER_CONTEXT

    lines = [
        f"# contexts in {kubeconfig}:",
        f"#   {CONTEXT}: the deploying identity, bound to exactly the shipped Roles (stacks use it)",
        f"#   {VIEWER_CONTEXT} (current-context, for your kubectl): read-only -- deployments, services, events, pods, nodes, inferenceservices",
        f"#   {ADMIN_CONTEXT}: cluster admin (bootstrap, out-of-band edits)",
    ]
    for k, v in env.items():
        if k == "PULUMI_CONFIG_PASSPHRASE":
            lines.append("# stack local's passphrase protects no secret; other stacks need your own")
        lines.append(f"export {k}={shlex.quote(v)}")
    return "\n".join(lines)
