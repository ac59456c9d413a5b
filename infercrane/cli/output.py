"""Everything the CLI prints on stdout, formatted in one place from the layers' typed results.

Each function takes a result (dataclasses of the engine and live layers, the validated config)
and returns the text for a person or the JSON document for a machine (``--json``): the same
facts, keys in camelCase. Notes for the person during a command go to stderr elsewhere (progress).
CLI layer.

One module, past 300 lines: what the CLI prints is read and changed side by side, command by command.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from infercrane.core.plan.actions import Action
from infercrane.core.render import prefetch

if TYPE_CHECKING:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.model.endpoints import CanaryPolicy
    from infercrane.core.plan.duration import Estimate
    from infercrane.core.plan.waves import EndpointRollout, Rollout
    from infercrane.core.promotion import Change
    from infercrane.core.render import RenderedReplica
    from infercrane.engine.changes import ReplicaAction
    from infercrane.engine.operations import DeployResult
    from infercrane.engine.planning import PlanResult
    from infercrane.engine.teardown import DestroyResult
    from infercrane.live.doctor import Check
    from infercrane.live.takeover import TakeoverResult


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def as_json(value: Any) -> Any:
    """A result as plain JSON data: dataclasses by field (camelCase keys), recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):  # a policy of the config: its stack-file form
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [as_json(v) for v in value]
    return value


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(as_json(doc), indent=2)


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


def rollout_lines(rollout: Rollout | None) -> list[str]:
    """Per endpoint that changes: its policy, its waves in order, the lowest ready count, the GPUs."""
    if rollout is None:
        return []
    lines = [line for e in rollout.endpoints for line in endpoint_lines(e)]
    if lines:
        lines.insert(
            0,
            f"rollout: up to {rollout.stages} stage(s) per endpoint, each endpoint at its own pace (`infercrane deploy` "
            "runs them in one `pulumi up`; plain `pulumi up` does one)",
        )
        wanted = rollout.borrowed_at_once()
        if rollout.max_extra_gpus is not None and wanted:
            want = ", ".join(f"{n} of {p or 'their product'}" for p, n in sorted(wanted.items()))
            lines.append(
                f"  extra GPUs: at most {rollout.max_extra_gpus} of each product at once, all endpoints together "
                f"(rollout.maxExtraGpus); their surges want {want}"
                + (" at once: they take turns" if any(n > rollout.max_extra_gpus for n in wanted.values()) else "")
            )
    return lines


def changes(e: EndpointRollout) -> bool:
    """Whether the endpoint's rollout does anything."""
    return bool(e.waves or e.deleted_idle or e.deleted_last or e.retired_first or e.recreated or e.ready_before != e.ready_after)


def endpoint_lines(e: EndpointRollout) -> list[str]:
    """One endpoint's rollout as the plan says it ([] when it does nothing)."""
    lines: list[str] = []
    if changes(e):
        head = (
            f"  endpoint {e.endpoint}: {e.ready_before} -> {e.ready_after} replica(s), {len(e.waves)} wave(s) {e.mode} "
            f"(maxUnavailable {e.max_unavailable}, maxSurge {e.max_surge}); lowest ready {e.lowest_ready}; "
            f"GPUs {e.gpus_before} -> {e.gpus_after}, peak {e.peak_gpus} ({e.extra_gpus} extra)"
            + (f"; per product {', '.join(f'{p} {n}' for p, n in e.peak_by_product)}" if e.peak_by_product else "")
        )
        lines.append(head)
        if e.deleted_idle:
            lines.append(f"    first: delete {', '.join(e.deleted_idle)} (not available)")
        if e.repaired_first:
            lines.append(f"    first: bring back {', '.join(e.repaired_first)} (not available; already counts as unavailable)")
        if e.recreated:
            lines.append(
                f"    first: recreate {', '.join(e.recreated)} (not available: deleted, then made again -- "
                "its old pod goes before its new one starts, no GPU more)"
            )
            if e.canary_first and e.canary_policy is not None:
                lines.append(
                    f"      the canary {', '.join(e.canary)} (left on the new release by a killed run): "
                    f"{canary_words(e.canary_policy)}; beside the baseline {', '.join(e.baseline)}"
                )
        if e.settling_first:
            lines.append(f"    first: let {', '.join(e.settling_first)} settle (available, its own rollout under way)")
        if e.retired_first:
            lines.append(
                f"    first: delete {', '.join(e.retired_first)} (no successor; within the GPU budget only before the waves)"
            )
        for i, w in enumerate(e.waves, 1):
            order = "down, then up" if e.mode == "in place" else "up, then down"
            lines.append(f"    wave {i}: down {', '.join(w.down) or '-'}; up {', '.join(w.up) or '-'} ({order})")
            if e.canary_wave == i - 1 and e.canary_policy is not None:
                lines.append(f"      the canary: {canary_words(e.canary_policy)}; beside the baseline {', '.join(e.baseline)}")
        if e.warm_first and e.waves:
            lines.append(
                "    warm-first: before each wave, its release is pulled onto its replicas' nodes while they serve "
                f"(needs the pod reader and {prefetch.ROLE_FILE}; without them the waves pull cold)"
            )
        if e.canary_unneeded:
            lines.append(f"    no canary: {e.canary_unneeded} (the release is proven beside the others)")
        if e.no_canary:
            lines.append(f"    no canary: {e.no_canary} (canary.required is false: the release rolls without a verdict)")
        if e.deleted_last:
            lines.append(f"    last: delete {', '.join(e.deleted_last)} (no successor)")
    return lines


def span(seconds: float) -> str:
    """``95`` -> ``1 min 35 s``; ``40`` -> ``40 s``; ``4000`` -> ``1 h 6 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def estimate_lines(estimate: Estimate) -> list[str]:
    """What the rollout costs, as the plan says it: its expected duration, per endpoint when there
    are several, the GPU-hours beyond steady state, and what the starts were taken from."""
    longest = max(estimate.lanes, key=lambda lane: lane.seconds, default=None)
    head = f"  expected: about {span(estimate.seconds)}"
    if longest is not None and len(estimate.lanes) > 1:
        head += f" (the longest lane: endpoint {longest.endpoint}, {span(longest.seconds)})"
    lines = [head + f"; {estimate.gpu_hours:.2f} GPU-hours beyond steady state"]
    if len(estimate.lanes) > 1:
        lines += [
            f"    {lane.endpoint}: {span(lane.seconds)}, {lane.gpu_hours:.2f} GPU-hours" for lane in estimate.lanes[:MAX_LISTED]
        ]
        if len(estimate.lanes) > MAX_LISTED:
            lines.append(f"    and {len(estimate.lanes) - MAX_LISTED} more endpoint(s) (plan --json has each)")
    lines += [f"    starts from: {basis}" for basis in estimate.bases]
    return lines


MAX_LISTED = 20  # endpoints named one per line in a plan's estimate


def canary_words(policy: CanaryPolicy) -> str:
    """A canary policy as the plan says it: its bake, its minimum and its thresholds."""
    golden = f", {len(policy.golden)} golden request(s) answered as the baseline's" if policy.golden else ""
    return (
        f"bakes {policy.bake_seconds} s, judged on at least {policy.min_requests} requests each: ttft p95 at most "
        f"x{policy.max_ttft_p95_ratio:g} the baseline's, error ratio at most +{policy.max_error_ratio_increase:.1%}{golden}"
        + ("; required: no verdict, no release" if policy.required else "")
    )


def rollout_doc(rollout: Rollout | None) -> Any:
    if rollout is None:
        return None
    return {
        "stages": rollout.stages,
        "maxExtraGpus": rollout.max_extra_gpus,
        "extraGpusWanted": rollout.borrowed_at_once(),
        "endpoints": [
            {**as_json(e), "waves": [as_json(w) for w in e.waves], "extraGpus": e.extra_gpus, "stagesNeeded": e.stages_needed}
            for e in rollout.endpoints
        ],
    }


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
