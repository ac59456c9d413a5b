"""plan and deploy (idempotent): the CLI's engine operations and their results.

Per replica, the engine's steps become one :class:`~infercrane.core.plan.actions.Action`
(:mod:`infercrane.engine.changes`); what the state and the cluster decide before and after a run
is in :mod:`infercrane.engine.observed`, what a killed run left in :mod:`infercrane.engine.recovery`; destroy is :mod:`infercrane.engine.teardown`. A deploy is
recorded in the stack's outputs (by the same ``up``) with its idempotency key and the stack's intent
hash, so a retry with the same key and intent reports the recorded result without a second change,
and the same key with another intent is refused. Engine layer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.errors import (
    CanaryRejected,
    CanaryRetryRefused,
    IdempotencyConflict,
    InferCraneError,
    PreflightRefused,
    RolledBack,
    RolloutStopped,
)
from infercrane.core.events import Note, Sink, discard
from infercrane.core.model import config as cfg
from infercrane.core.model.kinds import WORKLOADS
from infercrane.core.plan.actions import Action
from infercrane.core.plan.rollback import Rollback, plan_rollback
from infercrane.core.plan.waves import EndpointRollout, Rollout
from infercrane.core.plan.workload import release_of
from infercrane.core.render.intent import intent as replica_intent
from infercrane.core.state import urns
from infercrane.engine.changes import EventCollector, ReplicaAction, applied_events, both, summarize
from infercrane.engine.deletions import delete_going, delete_keys, delete_orphans_after_rollout, foreign_deletions
from infercrane.engine.observed import Observed, could_need_refresh
from infercrane.engine.recovery import resolve_pending_creates, vouch_for
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import StackContext
from infercrane.shell.channel import Channel, Pinned, Prepared
from infercrane.shell.gate import Gate, Handover


def _channel(
    ctx: StackContext,
    state: Mapping[str, Any],
    sink: Sink,
    late: Handover,
    gate: Gate | None = None,
    delete: Callable[[Collection[str]], Mapping[str, str]] | None = None,
    recheck: Callable[[], Sequence[str]] | None = None,
) -> Channel:
    """One engine run's :class:`~infercrane.shell.channel.Channel` for a deploy."""
    channel = Channel(
        context=ctx,
        driven=True,
        legacy=urns.legacy_names(state),
        progress=sink,
        gate=gate,
        delete=delete,
        recheck=recheck,
    )
    channel.hand_over(late)
    return channel


def warned(sink: Sink) -> Callable[[str], None]:
    """Where a check's warning goes in a command: a note on the caller's sink."""
    return lambda warning: sink(Note(f"warning: {warning}"))


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash, the target identity, each endpoint's rollout policy
    and the serving evidence asked for (how the change is carried out and what proves it done are
    part of what a deploy is asked to do: a key recorded under one policy, or under ``check``, is not
    replayed for another, or for ``require``)."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [replica_intent(config, r) for r in config.replicas]
    endpoints = sorted({r.name for r in config.replicas})
    policies = {e: config.rollout_for(e).model_dump(mode="json", exclude={"max_extra_gpus"}) for e in endpoints}
    for policy in policies.values():  # an endpoint without a canary hashes as before canaries were
        if policy.get("canary") is None:
            policy.pop("canary", None)
    intent: dict[str, object] = {"stack": parts, "rollout": policies, "servingEvidence": config.kubernetes.serving_evidence}
    if config.kubernetes.rollout.max_extra_gpus is not None:  # the stack's, not an endpoint's (set: the intent changes)
        intent["maxExtraGpus"] = config.kubernetes.rollout.max_extra_gpus
    if config.kubernetes.canary_metrics.prometheus is not None:  # what a canary is judged from (set: the intent changes)
        intent["canaryPrometheus"] = config.kubernetes.canary_metrics.prometheus
    return naming.intent_hash(intent)


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


def deploy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    key: str,
    on_output: Callable[[str], None] | None = None,
    sink: Sink = discard,
    *,
    retry_rejected: bool = False,
) -> DeployResult:
    """:func:`_deploy` -- and when it is refused before anything is applied on a stack that did
    not exist (a context missing from the kubeconfig, a foreign object), the stack the engine's
    start created beside the preflight is removed and its stack file put back: a refused command
    writes nothing."""
    from infercrane.project import paths

    path = paths.stack_file(engine.stack_name, engine.project_dir)
    before = path.read_bytes() if path.is_file() else None
    try:
        return _deploy(engine, config, key, on_output, sink, retry_rejected=retry_rejected)
    except InferCraneError as exc:
        if exc.applied_nothing and engine.created:
            engine.forget_new(before)
        raise


def _deploy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    key: str,
    on_output: Callable[[str], None] | None = None,
    sink: Sink = discard,
    *,
    retry_rejected: bool = False,
) -> DeployResult:
    """``pulumi up`` guarded by an idempotency key (see module docstring), rolled in waves.

    The rollout (:mod:`infercrane.core.plan.rollout`) is planned from what runs now and carried out
    by one ``pulumi up``: each endpoint's lane at its own pace (:mod:`infercrane.shell.lanes`),
    what a stage ends by deleting handed to :func:`delete_going` (exact ownership, until gone). A
    lane whose wave fails stops there while the others go on; the run then fails naming each
    stopped endpoint, the old replicas a stopped lane did not reach keep serving, and the same
    command again plans from what runs then -- it continues where it stopped.

    The record is the stack output ``deploys`` (the last :data:`program.DEPLOY_HISTORY` keys with
    their intent and time), written by the ``up`` that completes the deploy -- so it exists only
    if the whole deploy succeeded, costs no extra engine call, and is gone with the state it
    describes (a replay never claims a result that no longer stands)."""

    intent = stack_intent(config)
    ctx = StackContext.connect(engine.stack_name, config)  # worked out once: every check and deletion below takes them
    engine.vouch = vouch_for(ctx)
    state = engine.state()  # the idempotency record, pending operations, recorded objects, slot names
    history = [h for h in urns.stack_outputs(state).get("deploys") or [] if isinstance(h, dict)]
    record = next((h for h in reversed(history) if h.get("key") == key), None)
    if record and record.get("intent") != intent:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used at {record.get('at')} for a different intent "
            f"({str(record.get('intent'))[:19]}…, now {intent[:19]}…); nothing was applied.",
            fix="use a new --idempotency-key for a new intent (or omit it to get one)",
        )
    ctx = ctx.verify_caches(warned(sink), defer_refusal=True)  # the model caches the cluster verified, mapped
    rendered = ctx.render()
    looked: Observed | None = None  # a replay's check, made before anything else
    if record:
        # The record says this intent was deployed; a replay also needs what runs to say so: the
        # state and the live objects exactly this intent, no replica of another left, all ready.
        # Re-running an older key (a rollback) finds the newer release running, and applies its own.
        looked = Observed(ctx, state, rendered, ctx.preflight(rendered, defer_refusal=True))
        doubts = looked.replay_doubts()
        if not doubts:
            return DeployResult(key, intent, "replayed", [], str(record.get("at")))
        sink(Note(f"note: idempotency key {key} was deployed at {record.get('at')}, but {doubts[0]}: applying its intent again"))
    ctx.live.prime_openapi_soon()  # an update will run: its provider reads the document
    for note in resolve_pending_creates(engine, ctx, state):
        sink(Note(note))
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    collector = EventCollector()
    config = ctx.config
    run = functools.partial(
        engine.apply, on_output=on_output, on_event=both(collector, applied_events(sink)), skip_checkpoints=True
    )
    # The first run starts now, beside the preflight, when no verdict of it could make that run
    # need --refresh (shell/gate.py); else the engine's start (its imports, `stack select`) does.
    early = looked is None and not ctx.caches_refused and not could_need_refresh(ctx, state, rendered)
    gate = Gate() if early else None
    recorded = urns.recorded_objects(state)  # what Pulumi knows before the run, key -> manifests
    names = {naming.object_name(k): k for k in recorded}
    deleted: dict[str, str] = {}  # object name -> key, of what the rollout's lanes deleted

    def delete(keys: Collection[str]) -> Mapping[str, str]:
        gone = delete_going(ctx, recorded, keys)
        deleted.update(gone)
        return gone

    def recheck() -> list[str]:  # before the run, and again once its lanes are done
        return foreign_deletions(ctx, recorded, held=(), applied={r.key for r in config.replicas})

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        started: Future[Any]
        if gate is None:
            started = pool.submit(lambda: engine.stack)
        else:
            started = pool.submit(
                run, refresh=False, channel=_channel(ctx, state, sink, Handover(), gate, delete=delete, recheck=recheck)
            )
        try:
            seen = looked or Observed(ctx, state, rendered, ctx.preflight(rendered, defer_refusal=True))
            for note in seen.report.notes(ctx.config) if seen.report else []:
                sink(Note(note))
            rollout = seen.rollout
            rejected = rejected_before(engine, rollout)
            if rejected and not retry_rejected:
                raise CanaryRetryRefused(engine.stack_name, [(e, said) for e, (_, said) in rejected.items()])
            if rejected:  # retried: planned again, the rejected release's replicas proving nothing
                rollout = ctx.rollout(rendered, seen.report, state, frozenset(r for r, _ in rejected.values()))
                sink(Note(f"note: retrying the release a canary rejected for {', '.join(rejected)} (--retry-rejected)"))
        except BaseException as exc:
            if gate is not None:
                gate.call_off(exc if isinstance(exc, InferCraneError) else InferCraneError("the deploy was interrupted"))
            raise
        if gate is None:
            started.result()
        if rollout is not None and rollout.stages > 1:
            waves = max(len(e.waves) for e in rollout.endpoints)
            sink(
                Note(
                    f"rollout: {len(rollout.lanes)} endpoint(s), each at its own pace (up to {waves} wave(s)) in one `pulumi up`"
                )
            )
        late = Handover(
            rollout=rollout,
            deploy_record={
                "history": history,
                "entry": {"key": key, "intent": intent, "at": at},
                "canaries": urns.stack_outputs(state).get("canaries") or {},  # each endpoint's last verdict, kept
            },
            # Refused caches: the program verifies them itself, and refuses inside the update.
            prepared=None if ctx.caches_refused else Prepared(rendered, seen.report),
        )
        if gate is not None and seen.needs_refresh():
            # A recorded object is gone (or drifted under a record Pulumi would trust): the run
            # started early cannot refresh. It is called off -- it registered only its provider --
            # and the run starts again, with --refresh.
            again = InferCraneError("called off: the run starts again with --refresh")
            gate.call_off(again)
            try:
                started.result()
            except InferCraneError as exc:
                if exc is not again:
                    raise
            gate = None
        try:
            foreign = recheck()
            if foreign:
                raise PreflightRefused(foreign, [])
            if gate is not None:
                gate.open(late)
                started.result()
            else:
                run(refresh=seen.needs_refresh(), channel=_channel(ctx, state, sink, late, delete=delete, recheck=recheck))
        except InferCraneError as exc:
            remember_rejections(engine, rollout, exc, at, sink)
            ended = roll_back(ctx, state, rollout, Prepared(rendered, seen.report), exc, run, sink, set(deleted.values()))
            if ended is exc:
                raise
            raise ended from exc
        for endpoint in rejected:  # retried, and deployed: no longer refused
            engine.remove_tag(REJECTED_TAG + endpoint)
        unknown = {n: k for n, k in deleted.items() if k not in recorded}
        if unknown:
            sink(Note(f"note: deleted {', '.join(sorted(set(unknown.values())))} (not in the state) as the rollout planned"))
        names |= deleted
        for name in deleted:
            collector.ops.setdefault(name, set()).add(Action.DELETE)
    finally:
        if gate is not None:
            gate.call_off(InferCraneError("the deploy stopped before its first update could go on"))  # a no-op once open
        pool.shutdown(wait=True)
    orphans = delete_orphans_after_rollout(ctx, state)  # the state before the run: what Pulumi knew
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


#: A stack tag per endpoint whose release a canary rejected: ``<release> <outcome> at <time>, record
#: <digest>``. Kept in the stack's backend (not the stack file, not the CI job): a rerun, a re-run
#: job or another machine finds it; deploying that release again needs ``--retry-rejected``.
REJECTED_TAG: Final = "infercrane:rejected:"


def rejected_before(engine: Engine, rollout: Rollout | None) -> dict[str, tuple[str, str]]:
    """endpoint -> (its release, the rejection in words), for each endpoint ``rollout`` moves to a
    release a canary rejected before (the tags are read only when it moves one: one Pulumi CLI call)."""
    moving = {e.endpoint: e.release for e in rollout.endpoints if e.release} if rollout is not None else {}
    if not moving:
        return {}
    out = {}
    for name, value in engine.tags().items():
        endpoint = name.removeprefix(REJECTED_TAG)
        release, _, said = value.partition(" ")
        if name.startswith(REJECTED_TAG) and moving.get(endpoint) == release:
            out[endpoint] = (release, said)
    return out


def last_verdicts(engine: Engine, endpoints: Collection[str]) -> dict[str, str]:
    """endpoint -> its canary's last verdict in words (``inspect``): the later of the one the stack
    output ``canaries`` records (a deploy that finished) and the rejection the stack remembers (its
    tag; the deploy that rejected it failed, and wrote no output)."""
    seen: dict[str, tuple[str, str]] = {}  # endpoint -> (when, words)
    for endpoint, v in (urns.stack_outputs(engine.state()).get("canaries") or {}).items():
        if endpoint in endpoints and isinstance(v, dict):
            at = str(v.get("at") or "")
            seen[endpoint] = (at, f"{v.get('outcome')} at {at or 'an earlier deploy'}, record {v.get('digest')}")
    for name, value in engine.tags().items():
        endpoint = name.removeprefix(REJECTED_TAG)
        if name.startswith(REJECTED_TAG) and endpoint in endpoints:
            said = value.partition(" ")[2]  # <outcome> at <time>, record <digest>
            at = said.partition(" at ")[2].partition(",")[0]
            if at >= seen.get(endpoint, ("", ""))[0]:  # ISO times, UTC: their order is the text's
                seen[endpoint] = (at, f"{said}; that release is refused unless deploy --retry-rejected")
    return {endpoint: words for endpoint, (_, words) in sorted(seen.items())}


def remember_rejections(engine: Engine, rollout: Rollout | None, exc: InferCraneError, at: str, sink: Sink = discard) -> None:
    """A rollout stopped by canary verdicts: each rejected release remembered as a stack tag. A tag
    the backend refuses is said as a warning, never raised: the rollback comes first."""
    releases = {e.endpoint: e.release for e in rollout.endpoints} if rollout is not None else {}
    for endpoint, _, cause in exc.stopped if isinstance(exc, RolloutStopped) else []:
        if isinstance(cause, CanaryRejected) and releases.get(endpoint):
            try:
                engine.set_tag(REJECTED_TAG + endpoint, f"{releases[endpoint]} {cause.outcome} at {at}, record {cause.digest}")
            except InferCraneError as err:
                sink(
                    Note(
                        f"warning: the rejection of endpoint {endpoint}'s release could not be remembered ({err.message}): "
                        "a rerun of the same config would give it another canary; the rollback goes on"
                    )
                )


def roll_back(
    ctx: StackContext,
    before: Mapping[str, Any],
    rollout: Rollout | None,
    prepared: Prepared,
    exc: InferCraneError,
    run: Callable[..., None],
    sink: Sink,
    deleted: Collection[str] = (),
) -> InferCraneError:
    """A rollout stopped by canary verdicts: each rejected canary rolled back by the command that
    rejected it (:mod:`infercrane.core.plan.rollback`) in one more engine run -- its keys registered
    as the state recorded them ``before`` the deploy, the keys it brought deleted, each endpoint's
    lane under its own policy and waited for (ready, serving). That run ends failed on purpose, so
    Pulumi deletes nothing it did not register. ``deleted``: the keys the stopped run's lanes
    deleted. Returns what the deploy ends with: ``exc`` itself when no canary stopped it, else
    ``exc`` with each rejection saying how its rollback ended."""
    if rollout is None or not isinstance(exc, RolloutStopped):
        return exc
    rejected = {endpoint for endpoint, _, cause in exc.stopped if isinstance(cause, CanaryRejected)}
    if not rejected:
        return exc
    recorded, summaries = urns.recorded_objects(before), urns.recorded_summaries(before)
    releases = {k: release_of(next((m for m in ms if m.get("kind") in WORKLOADS), {})) for k, ms in recorded.items()}
    lanes = {lane.endpoint: lane for lane in rollout.lanes}
    plans = {e.endpoint: (e, plan_rollback(e, lanes[e.endpoint], releases)) for e in rollout.endpoints if e.endpoint in rejected}
    for _, back in plans.values():
        sink(Note(f"rollback: {back.describe()}"))
    restore = {k for _, back in plans.values() for k in back.restore}
    lanes_back = tuple(back.lane for _, back in plans.values() if back.lane.stages)
    failed = ""
    started = time.monotonic()
    if lanes_back:
        channel = Channel(
            context=dataclasses.replace(
                ctx, config=ctx.config.model_copy(update={"replicas": _waited_as(ctx.config, plans.values(), summaries)})
            ),
            driven=True,
            progress=sink,
            rollout=Rollout(tuple(e for e, _ in plans.values()), lanes_back, rollout.max_extra_gpus),
            delete=lambda keys: delete_keys(ctx, keys),
            prepared=prepared,
            rollback={k: Pinned(recorded[k], summaries.get(k) or {"key": k}) for k in restore},
        )
        try:
            # A restored key a lane deleted before its canary started is gone, though the state
            # still records it: the run refreshes first, so registering it makes it again.
            run(refresh=bool(restore & set(deleted)), channel=channel)
            failed = "its run ended without saying its lanes were done"  # a rollback's run always ends failed
        except RolledBack:
            pass
        except InferCraneError as err:
            failed = err.message
    stopped = [
        (endpoint, where, _after_rollback(cause, plans[endpoint][1], failed, time.monotonic() - started))
        if isinstance(cause, CanaryRejected) and endpoint in plans
        else (endpoint, where, cause)
        for endpoint, where, cause in exc.stopped
    ]
    return RolloutStopped(stopped, len(rollout.lanes))


def _waited_as(
    config: cfg.InferCraneConfig, plans: Iterable[tuple[EndpointRollout, Rollback]], summaries: Mapping[str, Mapping[str, Any]]
) -> tuple[cfg.Replica, ...]:
    """The config's replicas for a rollback's wait: a restored key is waited for as the replica it
    was -- its own config (or, one that left the config, the canary's of its endpoint) with the
    model the state recorded for it (the names it serves)."""
    configured = {r.key: r for r in config.replicas}
    waited: dict[str, cfg.Replica] = {}
    for e, back in plans:
        ours = [configured[k] for k in e.canary if k in configured]
        for key in back.restore:
            base = configured.get(key) or (ours[0] if ours else None)
            if base is not None:
                model = (summaries.get(key) or {}).get("model") or base.model
                waited[key] = base.model_copy(update={"key": key, "model": model})
    return (*(waited.pop(r.key, r) for r in config.replicas), *waited.values())


def _after_rollback(cause: CanaryRejected, back: Rollback, failed: str, seconds: float = 0.0) -> CanaryRejected:
    """A rejection, saying how its rollback ended (``seconds``: how long it took, from the end of
    the lanes to every rolled-back replica ready and serving, or gone)."""
    if back.left:
        return cause.after_rollback(
            f"not rolled back: {', '.join(back.left)} ran the rejected release (or another workload API) before this "
            "deploy too; the state records nothing else to return to",
            failed=True,
        )
    if not back.lane.stages:
        return cause.after_rollback("nothing to roll back", failed=False)
    if failed:
        return cause.after_rollback(f"the rollback stopped: {failed}", failed=True)
    return cause.after_rollback(f"rolled back: {back.describe()}; ready and serving again after {seconds:.0f} s", failed=False)


@dataclass
class PlanResult:
    actions: list[ReplicaAction]
    basis: str  # "state+live" (proven no-op, no engine run), "pulumi preview" or "read-only" (no dry run, no engine run)
    why_preview: list[str] = field(default_factory=list)  # why the state+live proof did not hold
    rollout: Rollout | None = None  # the waves a deploy would roll (None: the preflight refuses)
    rejected: dict[str, str] = field(default_factory=dict)  # endpoint -> its canary's rejection of the release it moves to

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
        ctx = ctx.verify_caches(warned(sink), defer_refusal=True)  # the model caches the cluster verified, mapped
        rendered = ctx.render()
        report = ctx.preflight(rendered, defer_refusal=True)
        seen = Observed(ctx, reading.result(), rendered, report)
    for note in report.notes(ctx.config) if report else []:
        sink(Note(note))
    why: list[str] = ["--full-preview"] if full else []
    if policy_packs:
        why.append("--policy-pack")  # the policies run in the engine, on the preview
    why += seen.no_op_doubts()
    rollout = seen.rollout
    rejected = {endpoint: said for endpoint, (_, said) in rejected_before(engine, rollout).items()}
    if not why:
        return PlanResult(summarize(ctx.config, EventCollector(), rendered), "state+live", rollout=rollout, rejected=rejected)
    collector = EventCollector()
    channel = Channel(
        context=ctx,
        driven=True,
        legacy=urns.legacy_names(seen.state),
        prepared=None if ctx.caches_refused else Prepared(rendered, report),
    )
    engine.preview(
        on_output=on_output,
        on_event=both(collector, applied_events(sink)),
        refresh=seen.needs_refresh(),
        channel=channel,
        **({"policy_packs": list(policy_packs)} if policy_packs else {}),
    )
    names = {naming.object_name(k): k for k in urns.recorded_objects(seen.state)}
    return PlanResult(summarize(ctx.config, collector, rendered, names), "pulumi preview", why, rollout, rejected)


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
        ctx = ctx.verify_caches(warned(sink), defer_refusal=True)
        rendered = ctx.render()
        report = ctx.preflight(rendered, read_only=True)
        assert report is not None  # a refusal raises: nothing is deferred to a run
        state = reading.result()
    for note in report.notes(ctx.config):
        sink(Note(note))
    seen = Observed(ctx, state, rendered, report)
    actions = [
        ReplicaAction(
            r.name,
            _replica_action([report.actions.get(f"{m['kind']}/{m['metadata']['name']}", Action.SAME) for m in r.manifests]),
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
    rollout = seen.rollout
    rejected = {endpoint: said for endpoint, (_, said) in rejected_before(engine, rollout).items()}
    if policy_packs:
        channel = Channel(
            context=ctx,
            driven=True,
            legacy=urns.legacy_names(state),
            prepared=None if ctx.caches_refused else Prepared(rendered, report),
            read_only=True,
        )
        engine.preview(on_output=on_output, refresh=False, channel=channel, policy_packs=list(policy_packs))
    return PlanResult(actions, "read-only", ["--policy-pack"] if policy_packs else [], rollout=rollout, rejected=rejected)


def _replica_action(objects: Sequence[Action]) -> Action:
    """A replica's action from its objects': replaced when one is, created when all are, unchanged when all are."""
    if Action.REPLACE in objects:
        return Action.REPLACE
    if objects and all(a is Action.CREATE for a in objects):
        return Action.CREATE
    if all(a is Action.SAME for a in objects):
        return Action.SAME
    return Action.UPDATE
