"""plan: what a deploy would do, from the state and the live objects when they prove nothing
changes (as fast as ``kubectl diff``), else from ``pulumi preview``; and the read-only plan an
identity that may only get and list can make. Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infercrane.core import naming
from infercrane.core.events import Note, Sink, discard, warning_notes
from infercrane.core.model import config as cfg
from infercrane.core.model.kinds import WORKLOADS
from infercrane.core.plan import duration
from infercrane.core.plan.actions import Action, replica_action
from infercrane.core.plan.waves import Rollout
from infercrane.core.state import urns
from infercrane.engine.changes import EventCollector, ReplicaAction, applied_events, both, summarize
from infercrane.engine.observed import Observed
from infercrane.engine.recovery import vouch_for
from infercrane.engine.rejections import judged
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import StackContext
from infercrane.shell.channel import Channel


@dataclass
class PlanResult:
    actions: list[ReplicaAction]
    basis: str  # "state+live" (proven no-op, no engine run), "pulumi preview" or "read-only" (no dry run, no engine run)
    why_preview: list[str] = field(default_factory=list)  # why the state+live proof did not hold
    rollout: Rollout | None = None  # the waves a deploy would roll (None: the preflight refuses)
    rejected: dict[str, str] = field(default_factory=dict)  # endpoint -> its canary's rejection of the release it moves to
    estimate: duration.Estimate | None = None  # how long the rollout takes, from the recorded starts (None: no rollout)

    @property
    def changes_pending(self) -> bool:
        return any(a.action is not Action.SAME for a in self.actions)


def plan(
    engine: Engine,
    config: cfg.InferCraneConfig,
    on_output: Callable[[str], None] | None = None,
    *,
    full: bool = False,
    sink: Sink = discard,
    policy_packs: Sequence[str] = (),
    read_only: bool = False,
) -> PlanResult:
    """The plan of a stack for ``config`` (the stack's, or with ``plan MODEL``'s intent added --
    the program gets it directly, the stack file is never touched). When the state and the live
    objects prove there is nothing to do (:meth:`Observed.no_op_doubts`), every replica is ``same`` without
    an engine run (as fast as ``kubectl diff``); otherwise -- or with ``full`` -- ``pulumi
    preview`` of the end state computes it (with ``--refresh`` when a live object drifted from its
    record, :meth:`Observed.needs_refresh`); with ``policy_packs`` always, the engine running those packs
    on it. The rollout's waves come from the live objects either way. ``read_only``:
    :func:`plan_read_only`."""
    if read_only:
        return plan_read_only(engine, config, sink, policy_packs=policy_packs, on_output=on_output)
    stack = engine.stack_name
    ctx = StackContext.connect(stack, config)  # worked out once: every check below takes them
    engine.vouch = vouch_for(ctx)
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(engine.state)  # in parallel with the preflight
        ctx, prepared = ctx.prepare(warning_notes(sink), defer_refusal=True)
        rendered, report = prepared.rendered, prepared.report
        seen = Observed(ctx, reading.result(), rendered, report)
    for note in report.notes(ctx.config) if report else []:
        sink(Note(note))
    why: list[str] = ["--full-preview"] if full else []
    if policy_packs:
        why.append("--policy-pack")  # the policies run in the engine, on the preview
    why += seen.no_op_doubts()
    marked = judged(engine, seen)
    rollout = marked.rollout
    rejected = {endpoint: said for endpoint, (_, said) in marked.rejected.items()}
    estimated = estimate(ctx.config, rollout, seen.state)
    if not why:
        return PlanResult(
            summarize(ctx.config, EventCollector(), rendered),
            "state+live",
            rollout=rollout,
            rejected=rejected,
            estimate=estimated,
        )
    collector = EventCollector()
    channel = Channel(
        context=ctx,
        rollout=rollout,  # in a preview only what it recreates matters: the deploy's own replace
        driven=True,
        legacy=urns.legacy_names(seen.state),
        prepared=None if ctx.caches_refused else prepared,
    )
    engine.preview(
        on_output=on_output,
        on_event=both(collector, applied_events(sink)),
        refresh=seen.needs_refresh(),
        channel=channel,
        **({"policy_packs": list(policy_packs)} if policy_packs else {}),
    )
    names = {naming.object_name(k): k for k in urns.recorded_objects(seen.state)}
    return PlanResult(summarize(ctx.config, collector, rendered, names), "pulumi preview", why, rollout, rejected, estimated)


def plan_read_only(
    engine: Engine,
    config: cfg.InferCraneConfig,
    sink: Sink = discard,
    *,
    policy_packs: Sequence[str] = (),
    on_output: Callable[[str], None] | None = None,
) -> PlanResult:
    """The plan an identity that may only get and list can make: no dry run and no engine run (both
    need ``patch``), no backend write (the state read as it is, never repaired; no engine, so no
    lock). Each object is judged from its live form and its ``managedFields``
    (:func:`infercrane.core.plan.fields.compare`), refused on the ownership and field-manager
    conflicts a deploy meets; a key the state records that left the config is deleted; the
    rollout's waves and GPUs are the full plan's. What only the API server can say is noted as not
    checkable. With ``policy_packs``, ``pulumi preview`` runs them on the program's resources as
    the same identity: the program's preflight read-only (:attr:`Channel.read_only`) and the
    provider's preview, refused its dry run, falling back to a diff of inputs (pulumi-kubernetes
    #2419); a violation fails the plan, as in the full plan."""
    ctx = StackContext.connect(engine.stack_name, config)
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(engine.state, repair=False)  # in parallel with the reads of the cluster
        ctx, prepared = ctx.prepare(warning_notes(sink), read_only=True)  # no run follows: a refusal raises now
        rendered, report = prepared.rendered, prepared.report
        assert report is not None  # a refusal raises: nothing is deferred to a run
        state = reading.result()
    for note in report.notes(ctx.config):
        sink(Note(note))
    seen = Observed(ctx, state, rendered, report)
    marked = judged(engine, seen)
    rollout = marked.rollout
    recreated = frozenset(rollout.recreated if rollout is not None else ())
    actions = [
        ReplicaAction(
            r.name,
            _replica_action(r.manifests, report.actions, recreate=r.replica.key in recreated),
            key=r.replica.key,
            gpu=r.replica.gpu,
            image=ctx.config.image_for(r.replica),
            objects=[f"{m['kind']}/{m['metadata']['name']}" for m in r.manifests],
        )
        for r in rendered
    ]
    keys = {r.key for r in ctx.config.replicas}
    actions += [
        ReplicaAction(naming.object_name(k), Action.DELETE, key=k) for k in sorted(urns.recorded_objects(state)) if k not in keys
    ]
    rejected = {endpoint: said for endpoint, (_, said) in marked.rejected.items()}
    if policy_packs:
        engine.existing()  # never created by a plan that may not write
        channel = Channel(
            context=ctx,
            driven=True,
            legacy=urns.legacy_names(state),
            prepared=prepared,
            read_only=True,
        )
        engine.preview(on_output=on_output, refresh=False, channel=channel, policy_packs=list(policy_packs))
    return PlanResult(
        actions,
        "read-only",
        ["--policy-pack"] if policy_packs else [],
        rollout=rollout,
        rejected=rejected,
        estimate=estimate(ctx.config, rollout, state),
    )


def estimate(config: cfg.InferCraneConfig, rollout: Rollout | None, state: Mapping[str, Any]) -> duration.Estimate | None:
    """How long ``rollout`` takes (:mod:`infercrane.core.plan.duration`), each start expected from
    the starts the stack's outputs recorded (``starts``); each drain the replica's preStop wait (a
    key that left the config: the target's)."""
    if rollout is None:
        return None
    recorded = urns.stack_outputs(state).get("starts") or {}
    replicas = {
        r.key: duration.Replica(
            duration.expected_start(r.gpu, config.image_for(r), recorded), config.drain_for(r).pre_stop_seconds
        )
        for r in config.replicas
    }
    leaving = config.kubernetes.drain.pre_stop_seconds
    for key in {k for lane in rollout.lanes for s in lane.stages for k in s.delete} - replicas.keys():
        replicas[key] = duration.Replica(duration.Expected(0.0, ""), leaving)
    return duration.estimate(rollout, replicas)


def _replica_action(manifests: Sequence[Mapping[str, Any]], actions: Mapping[str, Action], *, recreate: bool = False) -> Action:
    """A replica's action from its objects' (:func:`~infercrane.core.plan.actions.replica_action`,
    the full plan's rule: a Service deleted out of band is the replica's create in both). With
    ``recreate`` (a key the rollout recreates: down, restarting under a surge), its workload object
    that changes is deleted and made again -- replaced, as in the full plan's preview, whatever else
    of the replica is created (a run killed between its objects left its Service unmade)."""
    by_kind: dict[str, set[Action]] = {}
    for m in manifests:
        action = actions.get(f"{m['kind']}/{m['metadata']['name']}", Action.SAME)
        if recreate and action is Action.UPDATE and m["kind"] in WORKLOADS:
            action = Action.REPLACE
        by_kind.setdefault(str(m["kind"]), set()).add(action)
    return replica_action(by_kind)
