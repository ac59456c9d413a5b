"""What plan and deploy decide before and after an engine run, from the stack's state and the live
cluster: the preflight's report and the model caches, whether a run needs ``--refresh`` or can start
beside the preflight, whether nothing is left to do, what a killed run left behind (pending
creates, a damaged checkpoint, orphans of a lost state). Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from infercrane.core import config as cfg
from infercrane.core import naming, urns
from infercrane.core.errors import (
    CacheRefused,
    ClusterError,
    ConfigError,
    GuardError,
    InferCraneError,
    PreflightRefused,
)
from infercrane.core.events import Note, Sink
from infercrane.core.kinds import KINDS
from infercrane.core.manifests import render_checked
from infercrane.core.render import RenderedReplica
from infercrane.core.urns import KIND_OF_TOKEN
from infercrane.core.waves import Rollout
from infercrane.engine.workspace import Engine

# Raised by the program's own checks inside `pulumi up`, before anything is applied.
REFUSED_BEFORE_APPLY: Final = (ConfigError, GuardError, ClusterError, PreflightRefused, CacheRefused)
GONE_TIMEOUT_SECONDS: Final = 120.0  # what a step waits for the objects it deleted itself to be gone


def stack_outputs(state: dict[str, Any]) -> dict[str, Any]:
    """The stack outputs recorded in a state (``Engine.state``): the root Stack resource's outputs."""
    root: dict[str, Any] = next((r for r in state.get("resources") or [] if r.get("type") == "pulumi:pulumi:Stack"), {})
    return dict(root.get("outputs") or {})


def resolve_pending_creates(engine: Engine, config: cfg.InferCraneConfig, state: dict[str, Any]) -> list[str]:
    """Clear the pending CREATE operations an interrupted update left in the state (Pulumi warns
    about them on every run and never resolves them itself), after checking each live object.

    An object that exists and carries this stack's exact ownership is ours: clearing the pending
    operation lets the next ``up`` apply to it again (server-side apply adopts only after the
    preflight has verified that ownership). An object that does not exist needs nothing. An object
    with our name but not our ownership is refused: the state is left as it is, and nothing applied."""
    from infercrane.live import cluster

    pending = [op for op in state.get("pending_operations") or [] if op.get("type") == "creating"]
    if not pending:
        return []
    client = cluster.client(config.kubernetes)
    live = cluster.live_by_name(client, config.kubernetes, KIND_OF_TOKEN.values())
    stack_id = naming.stack_id(engine.stack_name)
    foreign = []
    names = []
    for op in pending:
        res = op.get("resource") or {}
        kind = KIND_OF_TOKEN.get(res.get("type", ""))
        name = ((res.get("inputs") or {}).get("metadata") or {}).get("name")
        if kind is None or name is None:
            continue
        names.append(f"{kind}/{name}")
        obj = live.get((kind, name))
        reasons = naming.not_owned(obj, namespace=config.kubernetes.namespace, stack=stack_id) if obj is not None else []
        if reasons:
            foreign.append(f"{kind}/{name}: {'; '.join(reasons)}")
    if foreign:
        raise InferCraneError(
            "an interrupted update left pending creates for objects that are not this stack's; nothing was applied:\n"
            + "\n".join(f"- {f}" for f in foreign),
            fix="rename or delete the foreign objects yourself, then deploy again",
        )
    engine.refresh(clear_pending_creates=True)
    return [
        f"note: cleared {len(pending)} pending create(s) left by an interrupted update ({', '.join(names)}); "
        "the live objects carry this stack's exact ownership and are applied again"
    ]


def vouch_for(config: cfg.InferCraneConfig, stack: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The check a repair runs before it restores Pulumi's backup checkpoint of ``stack``
    (:func:`infercrane.engine.backend.repair_torn_writes`): the live objects of this stack's exact
    ownership that existed when the backup was written must be recorded in it. One LIST per kind,
    run only when a checkpoint is damaged."""

    def vouch(checkpoint: Mapping[str, Any]) -> str | None:
        from infercrane.live import cluster

        t = config.kubernetes
        stack_id = naming.stack_id(stack)
        live = {
            ref: str(obj["metadata"].get("creationTimestamp") or "")
            for ref, obj in cluster.live_by_name(cluster.client(t), t, t.object_kinds).items()
            if not naming.not_owned(obj, namespace=t.namespace, stack=stack_id)
        }
        older = urns.unrecorded_before(checkpoint, live)
        return f"it does not record {', '.join(older)}, which existed when it was written" if older else None

    return vouch


def live_check(config: cfg.InferCraneConfig, stack: str, rendered: Sequence[RenderedReplica] | None = None) -> Any:
    """The preflight's report (ownership, conflicts, strict dry run, live vs rendered, what runs),
    or None when it refuses: the program's own preflight then refuses again inside the update,
    where the refusal is recorded as a failed update (promote's health gate reads the history)."""
    from infercrane.live import preflight

    rendered = render_checked(config, stack) if rendered is None else rendered
    manifests = [m for r in rendered for m in r.manifests]
    try:
        return preflight.run(config, manifests, naming.stack_id(stack))
    except PreflightRefused:
        return None


def verified(config: cfg.InferCraneConfig, sink: Sink) -> cfg.InferCraneConfig | None:
    """``config`` with only the model caches the cluster verifies mapped (``prefer``: the others
    noted, their replicas download), or None when a required cache is not there: the program
    then refuses inside the update, where the refusal is recorded (as :func:`live_check`)."""
    from infercrane.live import preflight

    try:
        verdict = preflight.verify_cache(config)
    except CacheRefused:
        return None
    for warning in verdict.warnings:
        sink(Note(f"warning: {warning}"))
    return verdict.config


def plan_rollout(
    config: cfg.InferCraneConfig, stack: str, rendered: Sequence[RenderedReplica], report: Any, state: Mapping[str, Any]
) -> Rollout | None:
    """The waves from what runs to ``rendered`` (None when the preflight refused: nothing rolls),
    counting the replicas the state records in another namespace (a ``namespace`` switch)."""
    if report is None:
        return None
    from infercrane.live import membership

    elsewhere = membership.recorded_elsewhere(config, urns.recorded_namespaces(state))
    return membership.plan_rollout(config, rendered, report, naming.stack_id(stack), elsewhere)


def prime_cluster(config: cfg.InferCraneConfig) -> None:
    """Have the API server build the OpenAPI document the provider reads on ``up`` while this
    command renders and runs its preflight (:func:`infercrane.live.cluster.prime_openapi`): one
    daemon thread, nothing waits for it."""
    import threading

    from infercrane.live import cluster

    def prime() -> None:
        try:
            cluster.prime_openapi(cluster.client(config.kubernetes))
        except Exception:  # noqa: BLE001, S110 - a bad kubeconfig is the preflight's to report
            pass

    threading.Thread(target=prime, name="prime-openapi", daemon=True).start()


def could_need_refresh(
    config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any], rendered: Sequence[RenderedReplica]
) -> bool:
    """Whether some verdict of the preflight could make the first run need ``--refresh``
    (:func:`needs_refresh`): only an object whose record Pulumi would trust can. With none -- a
    first deploy, a lost state, every object changing -- the run can start before the preflight
    is done (:mod:`infercrane.shell.gate`)."""
    from importlib.metadata import version

    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
    every = [f"{m['kind']}/{m['metadata']['name']}" for r in rendered for m in r.manifests]
    return bool(urns.trusted_but_stale(state, urns.registrations(stack, rendered, provider), every))


def delete_orphans(config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any]) -> dict[str, str]:
    """Delete the live objects of keys that left the config but that ``state`` -- what Pulumi knew
    when the last step began -- does not record (lost state, a killed run): Pulumi cannot delete
    what it does not know, and a key that leaves the config is deleted. Only objects with this
    stack's exact ownership, each with a uid precondition; run after the last step, when every
    replica of the config is ready. Returns object name -> key of what was deleted."""
    keep = {r.key for r in config.replicas} | set(urns.recorded_objects(state))
    return _delete_owned(config, stack, lambda key, kind: key not in keep, wait=False)


def delete_unrecorded(config: cfg.InferCraneConfig, stack: str, keys: Collection[str]) -> dict[str, str]:
    """What a rollout step deletes at its end (:attr:`~infercrane.core.waves.Step.delete`) that the
    state does not record -- after lost state or a takeover, Pulumi does not know the old keys --
    deleted here, by this stack's exact ownership with a uid precondition, and waited for until
    gone, so the next step's replicas find the GPUs free: a key that left the config, all of it;
    a key that moved to another workload API, its old form only. Returns object name -> key."""
    current = set(config.kubernetes.object_kinds)
    configured = {r.key for r in config.replicas}
    return _delete_owned(
        config, stack, lambda key, kind: key in keys and (key not in configured or kind not in current), wait=True
    )


def _delete_owned(config: cfg.InferCraneConfig, stack: str, wanted: Callable[[str, str], bool], *, wait: bool) -> dict[str, str]:
    from infercrane.live import cluster, failures, readiness

    t = config.kubernetes
    stack_id = naming.stack_id(stack)
    client = cluster.client(t)
    deleted: dict[str, str] = {}
    sent: dict[tuple[str, str], str] = {}
    for (kind, name), obj in sorted(cluster.live_by_name(client, t, t.object_kinds, optional=KINDS).items()):
        meta = obj.get("metadata") or {}
        key = (meta.get("annotations") or {}).get(naming.ANNOTATION_KEY)
        if key is None or meta.get("ownerReferences") or not wanted(str(key), kind):
            continue  # (an object with an owner is a controller's child, e.g. KServe's predictor: never ours)
        if naming.not_owned(obj, namespace=t.namespace, stack=stack_id) or meta.get("deletionTimestamp"):
            continue  # not ours, or already going
        try:
            with failures.request(f"delete {kind}/{name}", t):
                cluster.delete_exact(client, kind, name, t.namespace, str(meta["uid"]))
        except failures.Conflict:
            continue  # replaced by another object since it was listed: not the one we checked, left untouched
        deleted[name] = str(key)
        sent[(kind, name)] = str(meta["uid"])
    if wait and sent:
        left, _ = readiness.wait_gone(client, t, sent, timeout=GONE_TIMEOUT_SECONDS)
        if left:
            raise ClusterError(
                f"{len(left)} object(s) the rollout deleted are still present {GONE_TIMEOUT_SECONDS:.0f} s later: {', '.join(left)}",
                fix="look for finalizers on them (`kubectl get -o yaml`), then deploy again",
            )
    return deleted


def needs_refresh(
    config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any], rendered: Sequence[RenderedReplica], report: Any
) -> bool:
    """Whether the engine must read the recorded objects back first (``--refresh``): only when a
    live object drifted from a record Pulumi would otherwise trust (:func:`urns.trusted_but_stale`).
    A new object or an intended change needs no refresh -- at fleet size it is one GET per object."""
    if report is None or not report.drift:
        return False
    from importlib.metadata import version

    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
    return bool(urns.trusted_but_stale(state, urns.registrations(stack, rendered, provider), report.drift))


def proven_no_op(
    config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any], rendered: Sequence[RenderedReplica]
) -> list[str]:
    """Why a ``pulumi preview`` could have something to do; empty when it cannot.

    Nothing to do is proven when (1) the checkpoint records exactly the resources the program
    registers for this config, with exactly the inputs it would send (the rendered manifests and
    the provider's explicit settings and SDK version), with no pending operation, and (2) every
    live object is present and a strict server-side dry run of its manifest changes nothing (the
    preflight, run before this). Pulumi's own diff compares the same two things: recorded inputs
    with new inputs, and -- with server-side apply -- a dry run against the live object."""
    from importlib.metadata import version

    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
    return urns.state_matches(state, urns.registrations(stack, rendered, provider))


def replay_doubts(
    config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any], rendered: Sequence[RenderedReplica], report: Any
) -> list[str]:
    """Why what runs does not show a deploy of ``config`` as complete; empty when it does -- the
    evidence a replay needs beyond its record: the preflight passes, every live object is exactly
    the rendered one, the state records exactly this config's resources (:func:`proven_no_op`), no
    replica of a key that left the config is left (an orphan deletion that failed), and every
    replica is ready."""
    if report is None:
        return ["the preflight refuses now"]
    if report.drift:
        return [f"{len(report.drift)} live object(s) are missing or differ ({', '.join(report.drift[:3])})"]
    from infercrane.live import membership

    stack_id = naming.stack_id(stack)
    keys = {r.key for r in config.replicas}
    members = membership.members(config, report.live, stack_id)
    left = sorted(m.key for m in members if m.key not in keys)
    if left:
        return [f"replica(s) {', '.join(left)} of keys that left the config still run"]
    waiting = sorted(m.key for m in members if not m.ready)
    if waiting:
        return [f"replica(s) {', '.join(waiting)} are not ready"]
    return [f"the state differs: {why}" for why in proven_no_op(config, stack, state, rendered)]


def foreign_deletions(
    config: cfg.InferCraneConfig,
    stack: str,
    recorded: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    held: Collection[str],
    applied: Collection[str],
) -> list[str]:
    """The objects an engine run would delete whose live namesake is not this stack's: Pulumi
    deletes by name, with no ownership or uid check (``destroy`` has both), so an object replaced
    since by a foreign one would go. Deleted are the recorded objects of keys the run does not
    register (neither ``held``, registered exactly as recorded, nor ``applied``), and of an applied
    key those the config no longer renders: another kind or namespace (a ``workloadApi`` or
    ``namespace`` switch). One LIST per namespace and kind; in a namespace other than the
    target's a kind this identity may not list is not checked."""
    from infercrane.live import cluster

    t = config.kubernetes

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
        there = t.model_copy(update={"namespace": ns})
        elsewhere = listed & set(KINDS) if ns != t.namespace else set()
        found = cluster.live_by_name(cluster.client(t), there, listed & set(KINDS) - elsewhere, optional=elsewhere)
        live |= {(ns, kind, name): obj for (kind, name), obj in found.items()}
    stack_id = naming.stack_id(stack)
    out = []
    for key, m in leaving:
        meta = m.get("metadata") or {}
        ns = meta.get("namespace", t.namespace)
        obj = live.get((ns, str(m.get("kind")), str(meta.get("name"))))
        why = naming.ownership_mismatches(dict(obj), key=key, namespace=ns, stack=stack_id) if obj else []
        if why:
            out.append(
                f"{m.get('kind')} {ns}/{meta.get('name')} (recorded for key {key!r}, which "
                f"{'moves' if key in applied else 'leaves'}) is no longer this stack's: {'; '.join(why)}; "
                "deleting it by name would delete another's object"
            )
    return out
