"""The update a deploy carries out (:func:`~infercrane.engine.operations.deploy`): its one engine
run, started early beside the preflight when it may be, handed the planned rollout once it is
known; what its lanes delete, recorded; its end -- the canary and GPU marks it began ended, a
failure remembered and rolled back. Engine layer.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import InferCraneError, PreflightRefused
from infercrane.core.events import Note, Sink
from infercrane.core.plan.actions import Action
from infercrane.core.plan.marks import REJECTED_TAG
from infercrane.core.plan.waves import Rollout
from infercrane.core.render import RenderedReplica
from infercrane.core.state import urns
from infercrane.core.stops import CanaryRetryRefused, RolloutStopped
from infercrane.engine.changes import EventCollector, applied_events, both
from infercrane.engine.deletions import delete_going, delete_workloads, foreign_deletions
from infercrane.engine.observed import Observed, could_need_refresh
from infercrane.engine.recovery import resolve_pending_creates
from infercrane.engine.rejections import (
    Judged,
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


@dataclass
class Update:
    """One deploy's engine run: started early beside the preflight when no verdict of it could make
    that run need --refresh (:mod:`infercrane.shell.gate`), else once the rollout is planned; what
    its lanes delete, recorded; its end -- the marks it began ended, a failure rolled back."""

    engine: Engine
    ctx: StackContext
    state: dict[str, Any]
    sink: Sink
    on_output: Callable[[str], None] | None
    at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    collector: EventCollector = field(default_factory=EventCollector)
    deleted: dict[str, str] = field(default_factory=dict)  # object name -> key, of what the rollout's lanes deleted
    gate: Gate | None = None
    started: Future[Any] | None = None
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))

    def __post_init__(self) -> None:
        self.recorded = urns.recorded_objects(self.state)  # what Pulumi knows before the run, key -> manifests
        self.names = {naming.object_name(k): k for k in self.recorded}

    def apply(self, *, refresh: bool, channel: Channel) -> Any:
        on_event = both(self.collector, applied_events(self.sink))
        return self.engine.apply(
            on_output=self.on_output, on_event=on_event, skip_checkpoints=True, refresh=refresh, channel=channel
        )

    def delete(self, keys: Collection[str]) -> Mapping[str, str]:
        gone = delete_going(self.ctx, self.recorded, keys)
        self.deleted.update(gone)
        return gone

    def recheck(self) -> list[str]:  # before the run, and again once its lanes are done
        return foreign_deletions(self.ctx, self.recorded, held=(), applied={r.key for r in self.ctx.config.replicas})

    def channel(self, late: Handover, gate: Gate | None = None) -> Channel:
        """One engine run's :class:`~infercrane.shell.channel.Channel` for this deploy."""
        channel = Channel(
            context=self.ctx,
            driven=True,
            legacy=urns.legacy_names(self.state),
            progress=self.sink,
            gate=gate,
            delete=self.delete,
            recreate=functools.partial(delete_workloads, self.ctx),
            recheck=self.recheck,
        )
        channel.hand_over(late)
        return channel

    def replayed(self, seen: Observed, record: Mapping[str, Any]) -> str | None:
        """When the recorded deploy still stands: the state and the live objects exactly this intent,
        no replica of another left, all ready (re-running an older key, a rollback, finds the newer
        release running and applies its own): its time, else None."""
        doubts = seen.replay_doubts()
        if not doubts:
            return str(record.get("at"))
        self.sink(
            Note(
                f"note: idempotency key {record.get('key')} was deployed at {record.get('at')}, but {doubts[0]}: applying its intent again"
            )
        )
        return None

    def begin(self, ctx: StackContext, rendered: Sequence[RenderedReplica], *, replay: bool = False) -> None:
        """Before the preflight's verdict: the pending creates a killed run left resolved, and the
        first run started now when it may be (else the engine's start: its imports, `stack select`)."""
        self.ctx = ctx
        ctx.live.prime_openapi_soon()  # an update will run: its provider reads the document
        for note in resolve_pending_creates(self.engine, ctx, self.state):
            self.sink(Note(note))
        if not replay and not ctx.caches_refused and not could_need_refresh(ctx, self.state, rendered):
            self.gate = Gate()
            self.started = self.pool.submit(self.apply, refresh=False, channel=self.channel(Handover(), self.gate))
        else:
            self.started = self.pool.submit(lambda: self.engine.stack)

    def judge(self, seen: Observed, retry_rejected: bool) -> tuple[Judged, list[str], list[str]]:
        """The rollout planned with the stack's marks; a release a canary rejected refused unless
        retried; the marks of the canaries it bakes and of the GPUs it borrows begun."""
        marked = judged(self.engine, seen, retry_rejected=retry_rejected)
        if marked.rejected and not retry_rejected:
            raise CanaryRetryRefused(self.engine.stack_name, [(e, said) for e, (_, said) in marked.rejected.items()])
        if marked.rejected:  # retried: planned again, the rejected release's replicas proving nothing
            self.sink(Note(f"note: retrying the release a canary rejected for {', '.join(marked.rejected)} (--retry-rejected)"))
        if marked.unjudged:
            self.sink(
                Note(
                    f"note: the canary of {', '.join(marked.unjudged)} was never judged (a deploy ended during its bake, "
                    "or is still baking): its replicas on that release are judged again before it goes further"
                )
            )
        judging = begin_judging(self.engine, marked.rollout, self.at)  # a run that ends without a verdict leaves this mark
        borrowing = begin_borrowing(
            self.engine, marked.rollout, marked.started, self.at
        )  # a run cut short leaves what its lanes own
        return marked, judging, borrowing

    def handover(self, seen: Observed, rollout: Rollout | None, record: dict[str, Any]) -> Handover:
        """What the run is handed once the rollout is planned (the engine's start waited for)."""
        if self.gate is None and self.started is not None:
            self.started.result()
        if rollout is not None and rollout.stages > 1:
            waves = max(len(e.waves) for e in rollout.endpoints)
            self.sink(
                Note(
                    f"rollout: {len(rollout.lanes)} endpoint(s), each at its own pace (up to {waves} wave(s)) in one `pulumi up`"
                )
            )
        outputs = urns.stack_outputs(self.state)
        return Handover(
            rollout=rollout,
            deploy_record={
                **record,
                "canaries": outputs.get("canaries") or {},  # each endpoint's last verdict, kept
                "starts": outputs.get("starts") or {},  # each replica's last start, kept
            },
            # Refused caches: the program verifies them itself, and refuses inside the update.
            prepared=None if self.ctx.caches_refused else Prepared(seen.rendered, seen.report),
        )

    def update(self, seen: Observed, late: Handover, marked: Judged, judging: list[str], borrowing: list[str]) -> None:
        """The update carried out; a failure ends the marks the run settled and is rolled back."""
        if self.gate is not None and self.started is not None and seen.needs_refresh():
            # A recorded object is gone (or drifted under a record Pulumi would trust): the run
            # started early cannot refresh. It is called off -- it registered only its provider --
            # and the run starts again, with --refresh.
            again = InferCraneError("called off: the run starts again with --refresh")
            self.gate.call_off(again)
            try:
                self.started.result()
            except InferCraneError as exc:
                if exc is not again:
                    raise
            self.gate = None
        rollout = marked.rollout
        try:
            if foreign := self.recheck():
                raise PreflightRefused(foreign, [])
            if self.gate is not None and self.started is not None:
                self.gate.open(late)
                self.started.result()
            else:
                self.apply(refresh=seen.needs_refresh(), channel=self.channel(late))
        except InferCraneError as exc:
            judged_now = remember_rejections(
                self.engine, rollout, exc, self.at, self.sink
            )  # a rejection is the verdict's mark now
            if isinstance(exc, RolloutStopped):  # an endpoint that finished, or whose canary was accepted, is judged
                stopped = {endpoint for endpoint, _, _ in exc.stopped}
                judged_now += [e for e in judging if e not in stopped or e in exc.accepted]
                end_borrowing(self.engine, [e for e in borrowing if e in exc.finished])  # its lane ran to its end
            end_judging(self.engine, judged_now)
            prepared = Prepared(seen.rendered, seen.report)
            ended = roll_back(self.ctx, self.state, rollout, prepared, exc, self.apply, self.sink, set(self.deleted.values()))
            if ended is exc:
                raise
            raise ended from exc
        for endpoint in marked.rejected:  # retried, and deployed: no longer refused
            self.engine.remove_tag(REJECTED_TAG + endpoint)
        end_judging(self.engine, {*judging, *marked.unjudged})  # every lane done: every canary accepted
        end_borrowing(self.engine, borrowing)  # every lane done: each endpoint holds its own
        unknown = {n: k for n, k in self.deleted.items() if k not in self.recorded}
        if unknown:
            self.sink(Note(f"note: deleted {', '.join(sorted(set(unknown.values())))} (not in the state) as the rollout planned"))
        self.names |= self.deleted
        for name in self.deleted:
            self.collector.ops.setdefault(name, set()).add(Action.DELETE)
