"""deploy (idempotent): the CLI's engine operation and its result.

Per replica, the engine's steps become one :class:`~infercrane.core.plan.actions.Action`
(:mod:`infercrane.engine.changes`); what the state and the cluster decide before and after a run
is in :mod:`infercrane.engine.observed`, what a killed run left in :mod:`infercrane.engine.recovery`,
what a rejected canary leaves in :mod:`infercrane.engine.rejections`; plan is
:mod:`infercrane.engine.planning`, destroy :mod:`infercrane.engine.teardown`. A deploy is
recorded in the stack's outputs (by the same ``up``) with its idempotency key and the stack's intent
hash, so a retry with the same key and intent reports the recorded result without a second change,
and the same key with another intent is refused. Engine layer.
"""

from __future__ import annotations

import datetime as dt
import functools
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import (
    CanaryRetryRefused,
    IdempotencyConflict,
    InferCraneError,
    PreflightRefused,
    RolloutStopped,
)
from infercrane.core.events import Note, Sink, discard, warning_notes
from infercrane.core.model import config as cfg
from infercrane.core.plan.actions import Action
from infercrane.core.plan.marks import REJECTED_TAG
from infercrane.core.plan.waves import Rollout
from infercrane.core.render.intent import intent as replica_intent
from infercrane.core.state import urns
from infercrane.engine.changes import EventCollector, ReplicaAction, applied_events, both, summarize
from infercrane.engine.deletions import delete_going, delete_orphans_after_rollout, delete_workloads, foreign_deletions
from infercrane.engine.observed import Observed, could_need_refresh
from infercrane.engine.recovery import resolve_pending_creates, vouch_for
from infercrane.engine.rejections import (
    begin_borrowing,
    begin_judging,
    end_borrowing,
    end_judging,
    judged,
    remember_rejections,
    roll_back,
)
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import Prepared, StackContext
from infercrane.shell.channel import Channel
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
        recreate=functools.partial(delete_workloads, ctx),
        recheck=recheck,
    )
    channel.hand_over(late)
    return channel


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash, the target identity, each endpoint's rollout policy
    and the serving evidence asked for (how the change is carried out and what proves it done are
    part of what a deploy is asked to do: a key recorded under one policy, or under ``check``, is not
    replayed for another, or for ``require``)."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [replica_intent(config, r) for r in config.replicas]
    endpoints = sorted({r.name for r in config.replicas})
    # warmFirst enters only when on: a stack that never set it keeps its intent (and its records replay).
    policies = {
        e: config.rollout_for(e).model_dump(
            mode="json", exclude={"max_extra_gpus"} | (set() if config.rollout_for(e).warm_first else {"warm_first"})
        )
        for e in endpoints
    }
    for policy in policies.values():  # no canary: none in the hash (the stack's intent stays)
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

    The record is the stack output ``deploys`` (the last :data:`outputs.DEPLOY_HISTORY` keys with
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
    ctx = ctx.verify_caches(warning_notes(sink), defer_refusal=True)  # the model caches the cluster verified, mapped
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
            marked = judged(engine, seen, retry_rejected=retry_rejected)
            rollout, rejected = marked.rollout, marked.rejected
            if rejected and not retry_rejected:
                raise CanaryRetryRefused(engine.stack_name, [(e, said) for e, (_, said) in rejected.items()])
            if rejected:  # retried: planned again, the rejected release's replicas proving nothing
                sink(Note(f"note: retrying the release a canary rejected for {', '.join(rejected)} (--retry-rejected)"))
            if marked.unjudged:
                sink(
                    Note(
                        f"note: the canary of {', '.join(marked.unjudged)} was never judged (a deploy ended during its bake, "
                        "or is still baking): its replicas on that release are judged again before it goes further"
                    )
                )
            judging = begin_judging(engine, rollout, at)  # a run that ends without a verdict leaves this mark
            borrowing = begin_borrowing(engine, rollout, marked.started, at)  # a run cut short leaves what its lanes own
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
                "starts": urns.stack_outputs(state).get("starts") or {},  # each replica's last start, kept
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
            judged_now = remember_rejections(engine, rollout, exc, at, sink)  # a rejection is the verdict's mark now
            if isinstance(exc, RolloutStopped):  # an endpoint that finished, or whose canary was accepted, is judged
                stopped = {endpoint for endpoint, _, _ in exc.stopped}
                judged_now += [e for e in judging if e not in stopped or e in exc.accepted]
                end_borrowing(engine, [e for e in borrowing if e in exc.finished])  # its lane ran to its end
            end_judging(engine, judged_now)
            ended = roll_back(ctx, state, rollout, Prepared(rendered, seen.report), exc, run, sink, set(deleted.values()))
            if ended is exc:
                raise
            raise ended from exc
        for endpoint in rejected:  # retried, and deployed: no longer refused
            engine.remove_tag(REJECTED_TAG + endpoint)
        end_judging(engine, {*judging, *marked.unjudged})  # every lane done: every canary accepted
        end_borrowing(engine, borrowing)  # every lane done: each endpoint holds its own
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
