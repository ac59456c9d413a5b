"""plan, deploy (idempotent), destroy: the CLI's engine operations and their summaries.

Per replica, the engine's steps become one action word (plan: create / configure / unchanged /
replace / delete; deploy: created / configured / unchanged / replaced / deleted). A deploy is
recorded in the stack's outputs (by the same ``up``) with its idempotency key and the stack's intent
hash, so a retry with the same key and intent reports the recorded result without a second change,
and the same key with another intent is refused. Engine layer.
"""

from __future__ import annotations

import datetime as dt
import functools
import secrets
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from infercrane.core import config as cfg
from infercrane.core import naming, urns
from infercrane.core.actions import Action
from infercrane.core.errors import (
    CacheRefused,
    ClusterError,
    ConfigError,
    GuardError,
    IdempotencyConflict,
    InferCraneError,
    PreflightRefused,
)
from infercrane.core.events import Applied, Note, Sink, discard
from infercrane.core.intent import intent as replica_intent
from infercrane.core.manifests import render_checked
from infercrane.core.render import RenderedReplica
from infercrane.core.rollout import Rollout
from infercrane.core.urns import KIND_OF_TOKEN, component_of
from infercrane.engine.workspace import Engine
from infercrane.shell.channel import Prepared
from infercrane.shell.gate import Gate

if TYPE_CHECKING:  # the SDK (~0.2 s to import) is imported by the engine's start, beside the preflight
    from pulumi.automation import EngineEvent


@dataclass
class ReplicaAction:
    name: str  # the replica's object name: its component's logical name
    action: Action
    key: str | None = None
    gpu: str | None = None
    image: str | None = None
    objects: list[str] = field(default_factory=list)


def _both(first: Callable[[EngineEvent], None], second: Callable[[EngineEvent], None] | None) -> Callable[[EngineEvent], None]:
    if second is None:
        return first

    def both(event: EngineEvent) -> None:
        first(event)
        second(event)

    return both


def applied_events(sink: Sink) -> Callable[[EngineEvent], None]:
    """The engine's events as the person's progress: an :class:`~infercrane.core.events.Applied`
    for every Kubernetes object (a component's child, ``$`` in its URN) whose outputs are in."""

    def on_event(event: EngineEvent) -> None:
        out = event.res_outputs_event
        meta = getattr(out, "metadata", None)
        if meta is None or "$" not in str(meta.urn):  # components and the provider are not objects
            return
        replica = component_of(str(meta.urn))
        if replica is not None:
            sink(Applied(replica))

    return on_event


class EventCollector:
    """Collects per-replica operations from engine events (by component name)."""

    def __init__(self) -> None:
        self.ops: dict[str, set[Action]] = {}

    def __call__(self, event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata is None:
            return
        name = component_of(pre.metadata.urn)
        if name is not None:
            self.ops.setdefault(name, set()).add(Action.of_step(pre.metadata.op))


def summarize(
    config: cfg.InferCraneConfig,
    collector: EventCollector,
    rendered: Sequence[RenderedReplica],
    keys: Mapping[str, str] | None = None,
) -> list[ReplicaAction]:
    """One action per replica of the config, then one ``delete`` per replica only the engine saw
    (``keys``: object name -> key, for the replicas the state names)."""
    out = []
    known = set()
    for r in rendered:
        known.add(r.name)
        out.append(
            ReplicaAction(
                r.name,
                Action.strongest(collector.ops.get(r.name, set())),
                key=r.replica.key,
                gpu=r.replica.gpu,
                image=config.image_for(r.replica),
                objects=[f"{m['kind']}/{m['metadata']['name']}" for m in r.manifests],
            )
        )
    for name in sorted(collector.ops):
        if name not in known and Action.DELETE in collector.ops[name]:
            out.append(ReplicaAction(name, Action.DELETE, key=(keys or {}).get(name)))
    return out


# Raised by the program's own checks inside `pulumi up`, before anything is applied.
REFUSED_BEFORE_APPLY: Final = (ConfigError, GuardError, ClusterError, PreflightRefused, CacheRefused)


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


def plan_rollout(config: cfg.InferCraneConfig, stack: str, rendered: Sequence[RenderedReplica], report: Any) -> Rollout | None:
    """The waves from what runs to ``rendered`` (None when the preflight refused: nothing rolls)."""
    if report is None:
        return None
    from infercrane.live import membership

    return membership.plan_rollout(config, rendered, report, naming.stack_id(stack))


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


def _inputs(config: cfg.InferCraneConfig, state: Mapping[str, Any], sink: Sink, **fields: Any) -> dict[str, Any]:
    """One engine run's :class:`~infercrane.shell.program.Channel` fields for a deploy."""
    return {"config": config, "driven": True, "legacy": urns.legacy_names(state), "progress": sink, **fields}


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


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash and the target identity."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [replica_intent(config, r) for r in config.replicas]
    return naming.intent_hash({"stack": parts})


def new_idempotency_key() -> str:
    return "deploy-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


@dataclass
class DeployResult:
    key: str
    intent: str
    status: str  # succeeded | replayed
    actions: list[ReplicaAction]
    recorded_at: str
    rollout: Rollout | None = None  # the waves this deploy rolled (None: replayed, or refused)


def delete_orphans(config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any]) -> dict[str, str]:
    """Delete the live objects of keys that left the config but that ``state`` -- what Pulumi knew
    when the last step began -- does not record (lost state, a killed run): Pulumi cannot delete
    what it does not know, and a key that leaves the config is deleted. Only objects with this stack's exact ownership, each with a uid
    precondition; run after the last step, when every replica of the config is ready.
    Returns object name -> key of what was deleted."""
    from infercrane.live import cluster

    t = config.kubernetes
    stack_id = naming.stack_id(stack)
    keep = {r.key for r in config.replicas} | set(urns.recorded_objects(state))
    client = cluster.client(t)
    deleted: dict[str, str] = {}
    for (kind, name), obj in sorted(cluster.live_by_name(client, t, t.object_kinds).items()):
        key = ((obj.get("metadata") or {}).get("annotations") or {}).get(naming.ANNOTATION_KEY)
        if key is None or key in keep or naming.not_owned(obj, namespace=t.namespace, stack=stack_id):
            continue
        if obj["metadata"].get("deletionTimestamp"):
            continue  # already going
        cluster.delete_exact(client, kind, name, t.namespace, str(obj["metadata"]["uid"]))
        deleted[name] = str(key)
    return deleted


def describe_step(rollout: Rollout, index: int) -> str:
    """``step 2/3: qwen wave 2/2 (down a1, up b1)`` -- what one engine run of a rollout does."""
    parts = []
    for e in rollout.endpoints:
        w = index - rollout.first_wave_step
        if index < rollout.first_wave_step and e.replaced_first:
            parts.append(f"{e.endpoint}: stop {', '.join(e.replaced_first)} first (in place: frees its GPUs)")
        elif 0 <= w < len(e.waves):
            wave = e.waves[w]
            parts.append(f"{e.endpoint} wave {w + 1}/{len(e.waves)} (down {', '.join(wave.down)}; up {', '.join(wave.up)})")
    return f"rollout step {index + 1}/{len(rollout.steps)}: " + ("; ".join(parts) or "the rest")


def deploy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    key: str,
    on_output: Callable[[str], None] | None = None,
    sink: Sink = discard,
) -> DeployResult:
    """``pulumi up`` guarded by an idempotency key (see module docstring), rolled in waves.

    The rollout (:mod:`infercrane.core.rollout`) is planned from what runs now; each of its steps
    is one ``pulumi up`` that holds the replicas not rolled yet exactly as the state records them
    and waits for the step's replicas before Pulumi deletes the old ones. A failed step stops the
    rollout with the readiness failure; the old replicas it did not reach keep serving, and the
    same command again plans from what runs then -- it continues where it stopped.

    The record is the stack output ``deploys`` (the last :data:`program.DEPLOY_HISTORY` keys with
    their intent and time), written by the ``up`` that completes the deploy -- so it exists only
    if the whole deploy succeeded, costs no extra engine call, and is gone with the state it
    describes (a replay never claims a result that no longer stands)."""

    intent = stack_intent(config)
    engine.vouch = vouch_for(config, engine.stack_name)
    state = engine.state()  # the idempotency record, pending operations, recorded objects, slot names
    history = [h for h in stack_outputs(state).get("deploys") or [] if isinstance(h, dict)]
    record = next((h for h in reversed(history) if h.get("key") == key), None)
    if record and record.get("intent") != intent:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used at {record.get('at')} for a different intent "
            f"({str(record.get('intent'))[:19]}…, now {intent[:19]}…); nothing was applied.",
            fix="use a new --idempotency-key for a new intent (or omit it to get one)",
        )
    if record:
        return DeployResult(key, intent, "replayed", [], str(record.get("at")))
    prime_cluster(config)  # an update will run: its provider reads the document
    for note in resolve_pending_creates(engine, config, state):
        sink(Note(note))
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    collector = EventCollector()
    stack = engine.stack_name
    checked = verified(config, sink)
    config = checked or config
    rendered = render_checked(config, stack)
    run = functools.partial(
        engine.apply, on_output=on_output, on_event=_both(collector, applied_events(sink)), skip_checkpoints=True
    )
    # The first run starts now, beside the preflight, when no verdict of it could make that run
    # need --refresh (shell/gate.py); else the engine's start (its imports, `stack select`) does.
    gate = Gate() if checked and not could_need_refresh(config, stack, state, rendered) else None
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        started: Future[Any]
        if gate is None:
            started = pool.submit(lambda: engine.stack)
        else:
            placeholders: dict[str, Any] = {"step": None, "held": {}, "deploy_record": None, "prepared": None}
            started = pool.submit(run, refresh=False, inputs=_inputs(config, state, sink, gate=gate, **placeholders))
        try:
            report = live_check(config, stack, rendered) if checked else None
            rollout = plan_rollout(config, stack, rendered, report)
        except BaseException as exc:
            if gate is not None:
                gate.call_off(exc if isinstance(exc, InferCraneError) else InferCraneError("the deploy was interrupted"))
            raise
        if gate is None:
            started.result()
        steps = list(rollout.steps) if rollout is not None else [None]
        names = {naming.object_name(k): k for k in urns.recorded_objects(state)}
        for index, step in enumerate(steps):
            last = index == len(steps) - 1
            if rollout is not None and len(steps) > 1:
                sink(Note(describe_step(rollout, index)))
            recorded = urns.recorded_objects(state) if step is not None and not last else {}
            inputs = _inputs(
                config,
                state,
                sink,
                step=None if last else step,
                held={k: recorded[k] for k in (step.hold if step is not None else ()) if k in recorded},
                deploy_record={"history": history, "entry": {"key": key, "intent": intent, "at": at} if last else None},
                # The first run registers on the preflight made moments ago; later steps changed
                # the cluster, and their program checks it again.
                prepared=Prepared(rendered, report) if index == 0 and report is not None else None,
            )
            try:
                if index == 0 and gate is not None:
                    gate.open(inputs)
                    started.result()
                else:
                    run(refresh=index == 0 and needs_refresh(config, stack, state, rendered, report), inputs=inputs)
            except InferCraneError as exc:
                # Refused by the program's own checks inside the first update: nothing was applied.
                exc.applied_nothing = index == 0 and isinstance(exc, REFUSED_BEFORE_APPLY)
                if len(steps) > 1:
                    exc.args = (
                        f"the rollout stopped at step {index + 1}/{len(steps)}: the old replicas it had not reached keep "
                        f"serving; fix the cause and deploy again to continue from there.\n{exc.args[0]}",
                    )
                raise
            if not last:
                state = engine.state()
    finally:
        if gate is not None:
            gate.call_off(InferCraneError("the deploy stopped before its first update could go on"))  # a no-op once open
        pool.shutdown(wait=True)
    orphans = delete_orphans(config, stack, state)  # the state before the last step: what Pulumi knew
    if orphans:
        sink(
            Note(
                f"note: deleted {len(orphans)} replica(s) that left the config but were missing from the state: "
                + ", ".join(sorted(orphans.values()))
            )
        )
        for name in orphans:
            collector.ops.setdefault(name, set()).add(Action.DELETE)
    return DeployResult(key, intent, "succeeded", summarize(config, collector, rendered, names | orphans), at, rollout)


@dataclass
class PlanResult:
    actions: list[ReplicaAction]
    basis: str  # "state+live" (proven no-op, no engine run) or "pulumi preview"
    why_preview: list[str] = field(default_factory=list)  # why the state+live proof did not hold
    rollout: Rollout | None = None  # the waves a deploy would roll (None: the preflight refuses)

    @property
    def changes_pending(self) -> bool:
        return any(a.action is not Action.SAME for a in self.actions)


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


def plan(
    engine: Engine,
    config: cfg.InferCraneConfig,
    on_output: Callable[[str], None] | None = None,
    *,
    full: bool = False,
    sink: Sink = discard,
    policy_packs: Sequence[str] = (),
) -> PlanResult:
    """The plan of a stack for ``config`` (the stack's, or with ``plan MODEL``'s intent added --
    the program gets it directly, the stack file is never touched). When the state and the live
    objects prove there is nothing to do (:func:`proven_no_op`), every replica is ``same`` without
    an engine run (as fast as ``kubectl diff``); otherwise -- or with ``full`` -- ``pulumi
    preview`` of the end state computes it (with ``--refresh`` when a live object drifted from its
    record, :func:`needs_refresh`); with ``policy_packs`` always, the engine running those packs
    on it. The rollout's waves come from the live objects either way."""
    stack = engine.stack_name
    engine.vouch = vouch_for(config, stack)
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(engine.state)  # in parallel with the preflight
        checked = verified(config, sink)
        config = checked or config
        rendered = render_checked(config, stack)
        report = live_check(config, stack, rendered) if checked else None
        state = reading.result()
    rollout = plan_rollout(config, stack, rendered, report)
    why: list[str] = ["--full-preview"] if full else []
    if policy_packs:
        why.append("--policy-pack")  # the policies run in the engine, on the preview
    if report is None:
        why.append("the preflight refuses")
    elif report.drift:
        why.append(f"{len(report.drift)} live object(s) missing or different: {', '.join(report.drift[:3])}")
    why += proven_no_op(config, stack, state, rendered)
    if not why:
        return PlanResult(summarize(config, EventCollector(), rendered), "state+live", rollout=rollout)
    collector = EventCollector()
    inputs = {
        "config": config,
        "driven": True,
        "legacy": urns.legacy_names(state),
        "prepared": Prepared(rendered, report) if report is not None else None,
    }
    engine.preview(
        on_output=on_output,
        on_event=_both(collector, applied_events(sink)),
        refresh=needs_refresh(config, stack, state, rendered, report),
        inputs=inputs,
        **({"policy_packs": list(policy_packs)} if policy_packs else {}),
    )
    names = {naming.object_name(k): k for k in urns.recorded_objects(state)}
    return PlanResult(summarize(config, collector, rendered, names), "pulumi preview", why, rollout)
