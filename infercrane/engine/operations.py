"""deploy (idempotent): the CLI's engine operation and its result.

Per replica, the engine's steps become one :class:`~infercrane.core.plan.actions.Action`
(:mod:`infercrane.engine.changes`); the key and the stack's intent are
:mod:`infercrane.engine.idempotency`; what the state and the cluster decide before and after a
run is in :mod:`infercrane.engine.observed`, what a killed run left in
:mod:`infercrane.engine.recovery`, what a rejected canary leaves in
:mod:`infercrane.engine.rejections`; plan is :mod:`infercrane.engine.planning`, destroy
:mod:`infercrane.engine.teardown`. Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infercrane.core.errors import InferCraneError
from infercrane.core.events import Note, Sink, discard, warning_notes
from infercrane.core.model import config as cfg
from infercrane.core.plan.actions import Action
from infercrane.core.plan.waves import Rollout
from infercrane.engine import idempotency
from infercrane.engine.changes import ReplicaAction, summarize
from infercrane.engine.deletions import delete_orphans_after_rollout
from infercrane.engine.observed import Observed
from infercrane.engine.recovery import vouch_for
from infercrane.engine.updating import Update
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import StackContext


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
    """``pulumi up`` guarded by an idempotency key (:mod:`~infercrane.engine.idempotency`), rolled in waves.

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
    intent = idempotency.stack_intent(config)
    ctx = StackContext.connect(engine.stack_name, config)  # worked out once: every check and deletion below takes them
    engine.vouch = vouch_for(ctx)
    state = engine.state()  # the idempotency record, pending operations, recorded objects, slot names
    history = idempotency.history(state)
    record = idempotency.record_of(history, key, intent)
    run = Update(engine, ctx, state, sink, on_output)
    try:
        try:
            if record:  # a replay's check, made before anything else
                ctx, prepared = ctx.prepare(warning_notes(sink), defer_refusal=True)
                seen = Observed(ctx, state, prepared.rendered, prepared.report)
                if replayed := run.replayed(seen, record):
                    return DeployResult(key, intent, "replayed", [], replayed)
                run.begin(ctx, prepared.rendered, replay=True)
            else:
                ctx, prepared = ctx.prepare(warning_notes(sink), defer_refusal=True, beside=run.begin)
                seen = Observed(ctx, state, prepared.rendered, prepared.report)
            for note in seen.report.notes(ctx.config) if seen.report else []:
                sink(Note(note))
            marked, judging, borrowing = run.judge(seen, retry_rejected)
        except BaseException as exc:
            if run.gate is not None:
                run.gate.call_off(exc if isinstance(exc, InferCraneError) else InferCraneError("the deploy was interrupted"))
            raise
        late = run.handover(seen, marked.rollout, {"history": history, "entry": {"key": key, "intent": intent, "at": run.at}})
        run.update(seen, late, marked, judging, borrowing)
    finally:
        if run.gate is not None:
            run.gate.call_off(InferCraneError("the deploy stopped before its first update could go on"))  # a no-op once open
        run.pool.shutdown(wait=True)
    orphans = delete_orphans_after_rollout(ctx, state)  # the state before the run: what Pulumi knew
    if orphans:
        sink(
            Note(
                f"note: deleted {len(orphans)} replica(s) that left the config but were missing from the state: "
                + ", ".join(sorted(orphans.values()))
            )
        )
        for name in orphans:
            run.collector.ops.setdefault(name, set()).add(Action.DELETE)
    names = run.names | orphans
    return DeployResult(
        key, intent, "succeeded", summarize(ctx.config, run.collector, prepared.rendered, names), run.at, marked.rollout
    )
