"""What plan and deploy decide before and after an engine run, from the stack's state and the live
cluster: the preflight's report and the model caches, whether a run needs ``--refresh`` or can start
beside the preflight, whether nothing is left to do, what a killed run left behind (pending
creates, a damaged checkpoint). What is deleted, and how, is :mod:`infercrane.engine.deletions`.
Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from infercrane.core import naming
from infercrane.core.errors import (
    CacheRefused,
    ClusterError,
    ConfigError,
    GuardError,
    InferCraneError,
    PreflightRefused,
    bullets,
)
from infercrane.core.events import Note, Sink
from infercrane.core.model import config as cfg
from infercrane.core.plan.waves import Rollout
from infercrane.core.render import RenderedReplica
from infercrane.core.state import urns
from infercrane.core.state.urns import KIND_OF_TOKEN
from infercrane.engine.facts import Facts
from infercrane.engine.workspace import Engine

if TYPE_CHECKING:  # lightkube is imported where a request is made
    from lightkube import Client

# Raised by the program's own checks inside `pulumi up`, before anything is applied.
REFUSED_BEFORE_APPLY: Final = (ConfigError, GuardError, ClusterError, PreflightRefused, CacheRefused)


def stack_outputs(state: dict[str, Any]) -> dict[str, Any]:
    """The stack outputs recorded in a state (``Engine.state``): the root Stack resource's outputs."""
    root: dict[str, Any] = next((r for r in state.get("resources") or [] if r.get("type") == "pulumi:pulumi:Stack"), {})
    return dict(root.get("outputs") or {})


def resolve_pending_creates(engine: Engine, facts: Facts, state: dict[str, Any]) -> list[str]:
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
    t = facts.config.kubernetes
    live = cluster.live_by_name(facts.client, t, KIND_OF_TOKEN.values())
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
        reasons = naming.not_owned(obj, namespace=t.namespace, stack=facts.stack_id) if obj is not None else []
        if reasons:
            foreign.append(f"{kind}/{name}: {'; '.join(reasons)}")
    if foreign:
        raise InferCraneError(
            "an interrupted update left pending creates for objects that are not this stack's; nothing was applied:\n"
            + bullets(foreign),
            fix="rename or delete the foreign objects yourself, then deploy again",
        )
    engine.refresh(clear_pending_creates=True)
    return [
        f"note: cleared {len(pending)} pending create(s) left by an interrupted update ({', '.join(names)}); "
        "the live objects carry this stack's exact ownership and are applied again"
    ]


def vouch_for(facts: Facts) -> Callable[[Mapping[str, Any]], str | None]:
    """The check a repair runs before it restores Pulumi's backup checkpoint of ``stack``
    (:func:`infercrane.engine.backend.repair_torn_writes`): the live objects of this stack's exact
    ownership that existed when the backup was written must be recorded in it. One LIST per kind,
    run only when a checkpoint is damaged."""

    def vouch(checkpoint: Mapping[str, Any]) -> str | None:
        from infercrane.live import cluster

        t = facts.config.kubernetes
        live = {
            ref: str(obj["metadata"].get("creationTimestamp") or "")
            for ref, obj in cluster.live_by_name(facts.client, t, t.object_kinds).items()
            if not naming.not_owned(obj, namespace=t.namespace, stack=facts.stack_id)
        }
        older = urns.unrecorded_before(checkpoint, live)
        return f"it does not record {', '.join(older)}, which existed when it was written" if older else None

    return vouch


def live_check(facts: Facts, rendered: Sequence[RenderedReplica]) -> Any:
    """The preflight's report (ownership, conflicts, strict dry run, live vs rendered, what runs),
    or None when it refuses: the program's own preflight then refuses again inside the update,
    where the refusal is recorded as a failed update (promote's health gate reads the history)."""
    from infercrane.live import preflight

    manifests = [m for r in rendered for m in r.manifests]
    try:
        return preflight.run(facts.config, manifests, facts.stack_id, facts.client)
    except PreflightRefused:
        return None


def verified(facts: Facts, sink: Sink) -> cfg.InferCraneConfig | None:
    """``config`` with only the model caches the cluster verifies mapped (``prefer``: the others
    noted, their replicas download), or None when a required cache is not there: the program
    then refuses inside the update, where the refusal is recorded (as :func:`live_check`)."""
    from infercrane.live import preflight

    try:
        verdict = preflight.verify_cache(facts.config, facts.client)
    except CacheRefused:
        return None
    for warning in verdict.warnings:
        sink(Note(f"warning: {warning}"))
    return verdict.config


def plan_rollout(facts: Facts, rendered: Sequence[RenderedReplica], report: Any, state: Mapping[str, Any]) -> Rollout | None:
    """The waves from what runs to ``rendered`` (None when the preflight refused: nothing rolls),
    counting the replicas the state records in another namespace (a ``namespace`` switch)."""
    if report is None:
        return None
    from infercrane.live import membership

    elsewhere = membership.recorded_elsewhere(facts.config, urns.recorded_namespaces(state), facts.client)
    return membership.plan_rollout(facts.config, rendered, report, facts.stack_id, elsewhere)


def prime_cluster(client: Client) -> None:
    """Have the API server build the OpenAPI document the provider reads on ``up`` while this
    command renders and runs its preflight (:func:`infercrane.live.cluster.prime_openapi`): one
    daemon thread, nothing waits for it."""
    import threading

    from infercrane.live import cluster

    def prime() -> None:
        try:
            cluster.prime_openapi(client)
        except Exception:  # noqa: BLE001, S110 - a bad kubeconfig is the preflight's to report
            pass

    threading.Thread(target=prime, name="prime-openapi", daemon=True).start()


def could_need_refresh(facts: Facts, state: Mapping[str, Any], rendered: Sequence[RenderedReplica]) -> bool:
    """Whether some verdict of the preflight could make the first run need ``--refresh``
    (:func:`needs_refresh`): only an object whose record Pulumi would trust can. With none -- a
    first deploy, a lost state, every object changing -- the run can start before the preflight
    is done (:mod:`infercrane.shell.gate`)."""
    every = [f"{m['kind']}/{m['metadata']['name']}" for r in rendered for m in r.manifests]
    return bool(urns.trusted_but_stale(state, facts.registrations(rendered), every))


def needs_refresh(facts: Facts, state: Mapping[str, Any], rendered: Sequence[RenderedReplica], report: Any) -> bool:
    """Whether the engine must read the recorded objects back first (``--refresh``): only when a
    live object drifted from a record Pulumi would otherwise trust (:func:`urns.trusted_but_stale`).
    A new object or an intended change needs no refresh -- at fleet size it is one GET per object."""
    if report is None or not report.drift:
        return False
    return bool(urns.trusted_but_stale(state, facts.registrations(rendered), report.drift))


def proven_no_op(facts: Facts, state: Mapping[str, Any], rendered: Sequence[RenderedReplica]) -> list[str]:
    """Why a ``pulumi preview`` could have something to do; empty when it cannot.

    Nothing to do is proven when (1) the checkpoint records exactly the resources the program
    registers for this config, with exactly the inputs it would send (the rendered manifests and
    the provider's explicit settings and SDK version), with no pending operation, and (2) every
    live object is present and a strict server-side dry run of its manifest changes nothing (the
    preflight, run before this). Pulumi's own diff compares the same two things: recorded inputs
    with new inputs, and -- with server-side apply -- a dry run against the live object."""
    return urns.state_matches(state, facts.registrations(rendered))


def replay_doubts(facts: Facts, state: Mapping[str, Any], rendered: Sequence[RenderedReplica], report: Any) -> list[str]:
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

    keys = {r.key for r in facts.config.replicas}
    members = membership.members(facts.config, report.live, facts.stack_id)
    left = sorted(m.key for m in members if m.key not in keys)
    if left:
        return [f"replica(s) {', '.join(left)} of keys that left the config still run"]
    waiting = sorted(m.key for m in members if not m.ready)
    if waiting:
        return [f"replica(s) {', '.join(waiting)} are not ready"]
    return [f"the state differs: {why}" for why in proven_no_op(facts, state, rendered)]
