"""What a deploy deletes, and how -- never trusting a name alone.

Pulumi deletes what the program no longer registers by name, with no ownership or uid check:
before each engine run :func:`foreign_deletions` checks those objects live and refuses one that
is no longer this stack's. What Pulumi cannot delete because its state does not record it (lost
state, a killed run, the first deploy after ``takeover``) is deleted here, by this stack's exact
ownership with a uid precondition: what a rollout's stage ends by deleting, recorded or not
(:func:`delete_going`, waited for until gone, so the lane's next stage finds the GPUs free), and
after the run what is left of keys that left the config (:func:`delete_orphans_after_rollout`).
Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.errors import ClusterError, InferCraneError, PartlyApplied
from infercrane.core.model.kinds import KINDS, WORKLOADS
from infercrane.core.plan.waves import STAGE_DELETION
from infercrane.core.plan.workload import pod_of
from infercrane.core.state import urns
from infercrane.live.stack.context import StackContext

GONE_TIMEOUT_SECONDS: Final = 120.0  # what a stage waits for the objects it deleted to be gone, past their pods' grace
DEFAULT_GRACE_SECONDS: Final = 30  # a pod's terminationGracePeriodSeconds when its template sets none


def delete_orphans(ctx: StackContext, state: Mapping[str, Any]) -> dict[str, str]:
    """Delete the live objects of keys that left the config but that ``state`` -- what Pulumi knew
    when the run began -- does not record (lost state, a killed run): Pulumi cannot delete
    what it does not know, and a key that leaves the config is deleted. Only objects with this
    stack's exact ownership, each with a uid precondition; once the deploy's run is done, when every
    replica of the config is ready. Returns object name -> key of what was deleted."""
    keep = {r.key for r in ctx.config.replicas} | set(urns.recorded_objects(state))
    return _delete_owned(ctx, lambda key, kind: key not in keep, wait=False)


def delete_going(ctx: StackContext, recorded: Mapping[str, Sequence[Mapping[str, Any]]], keys: Collection[str]) -> dict[str, str]:
    """What a stage of a rollout's lane ends by deleting (:attr:`~infercrane.core.plan.waves.Stage.delete`):
    of a key that left the config, all of it; of a key that moved to another workload API or
    namespace, its old form only. Deleted here -- recorded by Pulumi or not -- by this stack's
    exact ownership with a uid precondition, and waited for until gone, so the lane's next stage
    finds the GPUs free; Pulumi's own deletion of the recorded ones at the end of the run then
    finds them gone. In the target namespace from one LIST per kind; in another namespace (a
    ``namespace`` switch), where the state records them. Returns object name -> key."""
    t = ctx.config.kubernetes
    current = set(t.object_kinds)
    configured = {r.key for r in ctx.config.replicas}
    deleted = _delete_owned(ctx, lambda key, kind: key in keys and (key not in configured or kind not in current), wait=True)
    elsewhere: dict[str, set[str]] = {}
    for key in keys:
        for m in recorded.get(key, ()):
            ns = (m.get("metadata") or {}).get("namespace", t.namespace)
            if ns != t.namespace:
                elsewhere.setdefault(ns, set()).add(str(m.get("kind")))
    for ns, kinds in sorted(elsewhere.items()):
        deleted |= _delete_owned(ctx, lambda key, kind: key in keys, wait=True, namespace=ns, kinds=kinds)
    return deleted


def delete_workloads(ctx: StackContext, keys: Collection[str]) -> dict[str, str]:
    """The workload object (Deployment, InferenceService) of each of ``keys`` -- keys of the config
    that a stage recreates (:attr:`~infercrane.core.plan.waves.Stage.recreate`): deleted here,
    recorded by Pulumi or not, by this stack's exact ownership with a uid precondition, in the
    foreground, and waited for until gone -- its pods with it. The stage then registers the key: a
    create where the state does not record it (a killed run's), else Pulumi's delete-before-replace,
    whose deletion finds it gone. Its Service stays. Returns object name -> key."""
    return _delete_owned(ctx, lambda key, kind: key in keys and kind in WORKLOADS, wait=True)


def delete_keys(ctx: StackContext, keys: Collection[str]) -> dict[str, str]:
    """Every object of ``keys`` in the target namespace -- keys of the config too (a rejected
    canary's new replicas, :mod:`infercrane.core.plan.rollback`) -- by this stack's exact ownership
    with a uid precondition, waited for until gone. Returns object name -> key."""
    return _delete_owned(ctx, lambda key, kind: key in keys, wait=True)


def _delete_owned(
    ctx: StackContext,
    wanted: Callable[[str, str], bool],
    *,
    wait: bool,
    namespace: str | None = None,
    kinds: Collection[str] | None = None,
) -> dict[str, str]:
    """Delete the objects in ``namespace`` (default: the target's) of ``kinds`` (default: the
    workload API's, and the others where this identity may list them) that ``wanted`` (key, kind)
    names and that carry this stack's exact ownership, each with a uid precondition."""
    from infercrane.live.client import failures
    from infercrane.live.status import gone

    t, stack_id = ctx.config.kubernetes, ctx.stack_id
    ns = namespace or t.namespace
    live = ctx.live if ns == t.namespace else ctx.live.at(ns)
    # Elsewhere the workload kinds were listed already (running.recorded_elsewhere); the others
    # are deleted here where this identity may list them, else by Pulumi, by name, at the run's end.
    listed = live.by_name(t.object_kinds, optional=KINDS) if kinds is None else live.by_name((), optional=set(kinds) & set(KINDS))
    deleted: dict[str, str] = {}
    sent: dict[tuple[str, str], str] = {}
    grace = 0  # the longest drain among them: a foreground deletion lasts until their pods are gone
    for (kind, name), obj in sorted(listed.items()):
        meta = obj.get("metadata") or {}
        key = (meta.get("annotations") or {}).get(naming.ANNOTATION_KEY)
        if key is None or meta.get("ownerReferences") or not wanted(str(key), kind):
            continue  # (an object with an owner is a controller's child, e.g. KServe's predictor: never ours)
        if naming.not_owned(obj, namespace=ns, stack=stack_id):
            continue  # not ours
        grace = max(grace, int(pod_of(obj).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)))
        if meta.get("deletionTimestamp"):
            if wait:  # already going (a killed run's deletion): its pods may still drain; waited for all the same
                sent[(kind, name)] = str(meta["uid"])
            continue
        try:
            live.delete_exact(kind, name, str(meta["uid"]), propagation=STAGE_DELETION if wait else "Background")
        except failures.Conflict:
            continue  # replaced by another object since it was listed: not the one we checked, left untouched
        deleted[name] = str(key)
        sent[(kind, name)] = str(meta["uid"])
    if wait and sent:
        timeout = grace + GONE_TIMEOUT_SECONDS
        left, _ = gone.wait_gone(live, sent, timeout=timeout)
        if left:
            raise ClusterError(
                f"{len(left)} object(s) the rollout deleted are still present {timeout:.0f} s later "
                f"(their pods drain within {grace} s): {', '.join(left)}",
                fix="look for finalizers on them and on their pods (`kubectl get -o yaml`), then deploy again",
            )
    return deleted


def delete_orphans_after_rollout(ctx: StackContext, state: Mapping[str, Any]) -> dict[str, str]:
    """:func:`delete_orphans` once the rollout is done: a failure there
    comes after every replica was applied, and says so (the CLI keeps the stack file's intent)."""
    try:
        return delete_orphans(ctx, state)
    except InferCraneError as exc:
        raise PartlyApplied(
            "every replica of the config is applied and ready, but deleting the replicas of keys that left the "
            f"config failed: {exc.args[0]}",
            fix="deploy again with the same --idempotency-key: it finds them still running and deletes them",
        ) from exc


def foreign_deletions(
    ctx: StackContext, recorded: Mapping[str, Sequence[Mapping[str, Any]]], *, held: Collection[str], applied: Collection[str]
) -> list[str]:
    """The objects an engine run would delete whose live namesake is not this stack's: Pulumi
    deletes by name, with no ownership or uid check (``destroy`` has both), so an object replaced
    since by a foreign one would go. Deleted are the recorded objects of keys the run does not
    register (neither ``held``, registered exactly as recorded, nor ``applied``), and of an applied
    key those the config no longer renders: another kind or namespace (a ``workloadApi`` or
    ``namespace`` switch). One LIST per namespace and kind; in a namespace other than the
    target's a kind this identity may not list is not checked."""
    t = ctx.config.kubernetes

    def deleted(key: str, m: Mapping[str, Any]) -> bool:
        if key in held:
            return False
        namespace = (m.get("metadata") or {}).get("namespace", t.namespace)
        return key not in applied or str(m.get("kind")) not in t.object_kinds or namespace != t.namespace

    leaving = [(key, m) for key, ms in sorted(recorded.items()) for m in ms if deleted(key, m)]
    kinds: dict[str, set[str]] = {}
    for _, m in leaving:
        kinds.setdefault((m.get("metadata") or {}).get("namespace", t.namespace), set()).add(str(m.get("kind")))
    live: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for ns, listed in sorted(kinds.items()):
        elsewhere = listed & set(KINDS) if ns != t.namespace else set()
        found = ctx.live.at(ns).by_name(listed & set(KINDS) - elsewhere, optional=elsewhere)
        live |= {(ns, kind, name): obj for (kind, name), obj in found.items()}
    out = []
    for key, m in leaving:
        meta = m.get("metadata") or {}
        ns = meta.get("namespace", t.namespace)
        obj = live.get((ns, str(m.get("kind")), str(meta.get("name"))))
        why = naming.ownership_mismatches(dict(obj), key=key, namespace=ns, stack=ctx.stack_id) if obj else []
        if why:
            out.append(
                f"{m.get('kind')} {ns}/{meta.get('name')} (recorded for key {key!r}, which "
                f"{'moves' if key in applied else 'leaves'}) is no longer this stack's: {'; '.join(why)}; "
                "deleting it by name would delete another's object"
            )
    return out
