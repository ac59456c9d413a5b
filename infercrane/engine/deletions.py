"""What a deploy deletes, and how -- never trusting a name alone.

Pulumi deletes what the program no longer registers by name, with no ownership or uid check:
before each engine run :func:`foreign_deletions` checks those objects live and refuses one that
is no longer this stack's. What Pulumi cannot delete because its state does not record it (lost
state, a killed run, the first deploy after ``takeover``) is deleted here, by this stack's exact
ownership with a uid precondition: a rollout step's share at its end (:func:`delete_unrecorded`,
waited for until gone, so the next step finds the GPUs free), the rest after the last step
(:func:`delete_orphans_after_rollout`). Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.errors import ClusterError, InferCraneError
from infercrane.core.model.kinds import KINDS
from infercrane.core.state import urns
from infercrane.engine.facts import Facts

GONE_TIMEOUT_SECONDS: Final = 120.0  # what a step waits for the objects it deleted itself to be gone


def delete_orphans(facts: Facts, state: Mapping[str, Any]) -> dict[str, str]:
    """Delete the live objects of keys that left the config but that ``state`` -- what Pulumi knew
    when the last step began -- does not record (lost state, a killed run): Pulumi cannot delete
    what it does not know, and a key that leaves the config is deleted. Only objects with this
    stack's exact ownership, each with a uid precondition; run after the last step, when every
    replica of the config is ready. Returns object name -> key of what was deleted."""
    keep = {r.key for r in facts.config.replicas} | set(urns.recorded_objects(state))
    return _delete_owned(facts, lambda key, kind: key not in keep, wait=False)


def delete_unrecorded(facts: Facts, keys: Collection[str]) -> dict[str, str]:
    """What a rollout step deletes at its end (:attr:`~infercrane.core.plan.waves.Step.delete`) that the
    state does not record -- after lost state or a takeover, Pulumi does not know the old keys --
    deleted here, by this stack's exact ownership with a uid precondition, and waited for until
    gone, so the next step's replicas find the GPUs free: a key that left the config, all of it;
    a key that moved to another workload API, its old form only. Returns object name -> key."""
    current = set(facts.config.kubernetes.object_kinds)
    configured = {r.key for r in facts.config.replicas}
    return _delete_owned(facts, lambda key, kind: key in keys and (key not in configured or kind not in current), wait=True)


def _delete_owned(facts: Facts, wanted: Callable[[str, str], bool], *, wait: bool) -> dict[str, str]:
    from infercrane.live import failures, readiness

    t, live, stack_id = facts.config.kubernetes, facts.live, facts.stack_id
    deleted: dict[str, str] = {}
    sent: dict[tuple[str, str], str] = {}
    for (kind, name), obj in sorted(live.by_name(t.object_kinds, optional=KINDS).items()):
        meta = obj.get("metadata") or {}
        key = (meta.get("annotations") or {}).get(naming.ANNOTATION_KEY)
        if key is None or meta.get("ownerReferences") or not wanted(str(key), kind):
            continue  # (an object with an owner is a controller's child, e.g. KServe's predictor: never ours)
        if naming.not_owned(obj, namespace=t.namespace, stack=stack_id) or meta.get("deletionTimestamp"):
            continue  # not ours, or already going
        try:
            live.delete_exact(kind, name, str(meta["uid"]))
        except failures.Conflict:
            continue  # replaced by another object since it was listed: not the one we checked, left untouched
        deleted[name] = str(key)
        sent[(kind, name)] = str(meta["uid"])
    if wait and sent:
        left, _ = readiness.wait_gone(live, sent, timeout=GONE_TIMEOUT_SECONDS)
        if left:
            raise ClusterError(
                f"{len(left)} object(s) the rollout deleted are still present {GONE_TIMEOUT_SECONDS:.0f} s later: {', '.join(left)}",
                fix="look for finalizers on them (`kubectl get -o yaml`), then deploy again",
            )
    return deleted


def delete_orphans_after_rollout(facts: Facts, state: Mapping[str, Any]) -> dict[str, str]:
    """:func:`delete_orphans` once the rollout is done: a failure there
    comes after every replica was applied, and says so (the CLI keeps the stack file's intent)."""
    try:
        return delete_orphans(facts, state)
    except InferCraneError as exc:
        after = InferCraneError(
            "every replica of the config is applied and ready, but deleting the replicas of keys that left the "
            f"config failed: {exc.args[0]}",
            fix="deploy again with the same --idempotency-key: it finds them still running and deletes them",
        )
        after.applied_nothing = False
        raise after from exc


def foreign_deletions(
    facts: Facts, recorded: Mapping[str, Sequence[Mapping[str, Any]]], *, held: Collection[str], applied: Collection[str]
) -> list[str]:
    """The objects an engine run would delete whose live namesake is not this stack's: Pulumi
    deletes by name, with no ownership or uid check (``destroy`` has both), so an object replaced
    since by a foreign one would go. Deleted are the recorded objects of keys the run does not
    register (neither ``held``, registered exactly as recorded, nor ``applied``), and of an applied
    key those the config no longer renders: another kind or namespace (a ``workloadApi`` or
    ``namespace`` switch). One LIST per namespace and kind; in a namespace other than the
    target's a kind this identity may not list is not checked."""
    t = facts.config.kubernetes

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
        found = facts.live.at(ns).by_name(listed & set(KINDS) - elsewhere, optional=elsewhere)
        live |= {(ns, kind, name): obj for (kind, name), obj in found.items()}
    out = []
    for key, m in leaving:
        meta = m.get("metadata") or {}
        ns = meta.get("namespace", t.namespace)
        obj = live.get((ns, str(m.get("kind")), str(meta.get("name"))))
        why = naming.ownership_mismatches(dict(obj), key=key, namespace=ns, stack=facts.stack_id) if obj else []
        if why:
            out.append(
                f"{m.get('kind')} {ns}/{meta.get('name')} (recorded for key {key!r}, which "
                f"{'moves' if key in applied else 'leaves'}) is no longer this stack's: {'; '.join(why)}; "
                "deleting it by name would delete another's object"
            )
    return out
