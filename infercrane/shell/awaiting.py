"""The program's wait on ``up``: every replica's workload ready, for the whole stack with one
poller, its progress published as typed events on the caller's sink (the Channel) or, under plain
``pulumi``, as log lines. Pulumi shell.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import pulumi

from infercrane.core import naming
from infercrane.core.errors import NotReady
from infercrane.core.events import Readiness
from infercrane.core.model import config as cfg
from infercrane.core.plan.waves import EndpointRollout, Rollout
from infercrane.shell.channel import Channel
from infercrane.shell.components import ReplicaComponent
from infercrane.shell.progress import evidence_note, publish_snapshot, readiness_progress
from infercrane.shell.warming import WarmAhead

if TYPE_CHECKING:
    from infercrane.core.plan import canary
    from infercrane.live.evidence import served
    from infercrane.live.stack.context import StackContext
    from infercrane.live.status import verdicts


T = TypeVar("T")
#: What a lane may block a thread for at once: its wave's warm and the next wave's, and one of a
#: bake, a hold, a delete or a recreate.
BLOCKING_PER_LANE: Final = 3


def blocking_pool(rollout: Rollout | None) -> ThreadPoolExecutor:
    """The threads for the lanes' blocking waits (pulls, bakes, deletions), enough for every lane
    at once: on the loop's default executor (Pulumi's: 4 x its parallelism, 32 on 2 cores) they
    would queue behind each other and behind the engine's own calls -- 33 endpoints baking their
    canaries at once would bake in two rounds, and stall every registration meanwhile."""
    lanes = len(rollout.lanes) if rollout is not None else 1
    return ThreadPoolExecutor(max_workers=BLOCKING_PER_LANE * max(1, lanes), thread_name_prefix="infercrane-wait")


def running_under_mocks() -> bool:
    """True only in the Pulumi-mocks test tier (the monitor is the SDK's MockMonitor)."""
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.settings import get_monitor

    try:
        return isinstance(get_monitor(), MockMonitor)
    except Exception:  # noqa: BLE001 - no monitor at all: not mocks
        return False


def budgets(config: cfg.InferCraneConfig, rollout: Rollout | None) -> dict[str, float]:
    """Each replica's wait: its startup budget + the margin, plus its pod's drain where its wave
    restarts it in place -- its new pod starts only once the old one has drained. Without a
    rollout handed over (plain `pulumi`), every replica of an in-place endpoint may restart so."""
    from infercrane.live.status import readiness

    drained = (
        rollout.restarts_in_place()
        if rollout is not None
        else {r.key for r in config.replicas if config.rollout_for(r.name).max_surge == 0}
    )
    return {
        r.key: r.startup_budget_seconds
        + readiness.AWAIT_MARGIN_SECONDS
        + (config.drain_for(r).grace_seconds if r.key in drained else 0)
        for r in config.replicas
    }


def unheld_notes(kind: str, e: EndpointRollout) -> list[str]:
    """What a deploy says of ``e``'s same-key surge canaries when its workload cannot hold them: an
    InferenceService's predictor Deployment is KServe's, whose reconcile patches a hold back out at
    once (tests/integration/test_controllers.py)."""
    if kind == "Deployment":
        return []
    return [
        f"rollout: {e.endpoint}: {key}'s old pod is not held (its predictor Deployment is KServe's, whose reconcile "
        "takes a hold back): it goes once the canary is available, and a rollback loads it again"
        for key in e.held
    ]


class Waits:
    """The readiness wait of one run: one poller for the whole stack, and each replica, once
    ready, asked what it serves (:class:`~infercrane.live.evidence.served.Checker`)."""

    def __init__(self, config: cfg.InferCraneConfig, channel: Channel, context: StackContext | None) -> None:
        from infercrane.live.client.api import Live
        from infercrane.live.evidence import served
        from infercrane.live.status import readiness

        t = config.kubernetes
        self.channel, self.policy = channel, t.serving_evidence
        self.publish = readiness_progress(channel)
        live = context.live if context is not None else Live.connect(t)
        self.live, self.kind = live, t.object_kinds[0]
        self.waiter = readiness.FleetWaiter(live, self.kind, report=functools.partial(publish_snapshot, self.publish))
        self.held: set[str] = set()  # surge canaries whose old pods are held beside them (live.status.hold)
        self.checker = served.Checker.from_env(live, config)
        self.config, self.replicas = config, {r.key: r for r in config.replicas}
        self.budgets = budgets(config, channel.rollout)
        self.ready_at: dict[str, datetime] = {}  # key -> when its wait saw it ready (the ledger's "healthy" without the pods)
        self.served_at: dict[str, datetime] = {}  # key -> when its engine was seen serving (the ledger's "served")
        # Whose prefetch pods are whose: the context's stack identity, worked out once per run.
        self.stack = context.stack_id if context is not None else naming.stack_id(pulumi.get_stack())
        self.pool = blocking_pool(channel.rollout)
        self.ahead = WarmAhead.of(live, config, self.stack, self.pool)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread of this run's own (:func:`blocking_pool`)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args))

    async def ready_and_serving(self, c: ReplicaComponent, generation: int) -> tuple[verdicts.Verdict, served.Evidence | None]:
        """``c``'s verdict once its workload (applied at ``generation``) is ready or failed, and
        the evidence of a ready one; its verdict fails when the evidence is against it."""
        key = c.summary["key"]
        zero_ok = self.replicas[key].scaling == "external"  # the count is an autoscaler's, which may be 0
        verdict = await self.waiter.wait(c.name, generation, self.budgets[key], zero_ok=zero_ok, held=key in self.held)
        if verdict.state != "ready":
            return verdict, None
        self.ready_at[key] = datetime.now(UTC)
        evidence = await self.checker.check_soon(self.replicas[key])
        if evidence.state == "serving":
            self.served_at[key] = datetime.now(UTC)
        return evidence.verdict(self.policy), evidence

    def starts(self, components: Collection[ReplicaComponent]) -> dict[str, dict[str, Any]]:
        """The startup ledger of ``components`` (:func:`infercrane.live.status.ledger.take`)."""
        from infercrane.live.status import ledger

        names = {c.summary["key"]: c.name for c in components}
        return ledger.take(self.live, self.config, names, self.ready_at, self.served_at)

    async def of(self, c: ReplicaComponent) -> tuple[verdicts.Verdict, served.Evidence | None]:
        """:meth:`ready_and_serving`, from when ``c``'s workload is applied (its output resolves)."""
        meta = await c.workload.metadata.future()  # type: ignore[attr-defined]
        return await self.ready_and_serving(c, int(getattr(meta, "generation", None) or 0))

    def holdable(self, e: EndpointRollout, keys: Collection[str]) -> set[str]:
        """Of a canary stage's ``keys``, those waited as held: every canary key of a surge endpoint
        whose workload is a Deployment (a rerun's canary keeps the hold a killed run placed)."""
        if self.kind != "Deployment" or e.mode != "surge" or e.canary_policy is None:
            return set()
        return set(keys) & set(e.canary)

    async def hold(self, e: EndpointRollout, note: Callable[[str], None]) -> None:
        """Hold the old pod of each of ``e``'s same-key surge canaries (:attr:`EndpointRollout.held`)
        before its template is applied; one that cannot be held rolls unheld, said so."""
        from infercrane.core import naming
        from infercrane.live.status import hold

        assert e.canary_policy is not None
        for key in e.held:
            why = await self.blocking(hold.hold, self.live, naming.object_name(key), e.canary_policy.bake_seconds)
            note(
                f"rollout: {e.endpoint}: {key}'s old pod is held serving beside its canary until the verdict"
                if not why
                else f"rollout: {e.endpoint}: {key}'s old pod is not held ({why}): it goes once the canary is available"
            )

    def say_unheld(self, e: EndpointRollout, note: Callable[[str], None]) -> None:
        for line in unheld_notes(self.kind, e):
            note(line)

    async def unheld(self, c: ReplicaComponent) -> tuple[verdicts.Verdict, served.Evidence | None]:
        """``c``, held until now, waited for as every replica is: its hold released
        (:meth:`~infercrane.live.status.readiness.FleetWaiter.wait`), its old pods gone."""
        key = c.summary["key"]
        self.held.discard(key)
        return await self.ready_and_serving(c, 0)

    async def serving(self, keys: Collection[str]) -> set[str]:
        """Of ``keys``, those with a pod available now."""
        from infercrane.core import naming

        names = {naming.object_name(k): k for k in keys}
        return {names[n] for n in await self.waiter.serving(names)}

    async def drained(self, keys: Collection[str]) -> str:
        """Until none of ``keys`` has a pod still terminating (:meth:`FleetWaiter.drained`), within
        the longest of their drains plus the margin: "" then, else what still drains."""
        from infercrane.core import naming
        from infercrane.live.status import readiness

        known = [self.replicas[k] for k in keys if k in self.replicas]
        grace = max((self.config.drain_for(r).grace_seconds for r in known), default=self.config.kubernetes.drain.grace_seconds)
        return await self.waiter.drained([naming.object_name(k) for k in keys], grace + readiness.AWAIT_MARGIN_SECONDS)

    async def warm(
        self, e: EndpointRollout | None, keys: Collection[str], note: Callable[[str], None], upcoming: Collection[str] = ()
    ) -> None:
        """An in-place wave's release onto its nodes first, and its next wave's while it restarts (:class:`WarmAhead`)."""
        if e is not None and e.warm_first:  # planned in place under rollout.warmFirst: no thread otherwise
            for line in await self.ahead.before(e.endpoint, keys, upcoming):
                note(f"rollout: {e.endpoint}: {line}")

    async def bake(self, e: EndpointRollout, note: Callable[[str], None]) -> canary.CanaryVerdict:
        """The canary of ``e``, ready: baked beside its baseline and judged (:func:`~infercrane.live.evidence.baking.bake`)."""
        from infercrane.live.evidence import baking
        from infercrane.live.evidence import held as holding

        current = functools.partial(holding.current_replica_set, self.live)
        held = self.held & set(e.canary)
        return await self.blocking(functools.partial(baking.bake, self.config, e, self.checker, note, held=held, current=current))

    def close(self) -> None:
        self.ahead.stop()  # a wave warmed ahead that never came: its pods deleted within a poll
        self.checker.close()
        self.pool.shutdown(wait=False)  # a warm stopped above ends within a poll, on its own


def await_readiness(
    components: list[ReplicaComponent], config: cfg.InferCraneConfig, channel: Channel, context: StackContext | None
) -> pulumi.Output[Taken] | None:
    """On ``up``: wait until every replica's workload (Deployment, or InferenceService in KServe
    mode) is ready, for the whole stack with one poller, then ask it what it serves.

    Each replica's wait starts when its workload is applied (its output resolves) and ends
    ready or failed within its startup budget + margin; a ready one is asked at once, while the
    others still wait (:class:`~infercrane.live.evidence.served.Checker`): serving other names or refusing
    the key fails it, and so does no answer at all under ``servingEvidence: require``. All
    failures are raised together as one :class:`NotReady`, so ``pulumi up`` fails with every
    reason. Resolves to each waited replica's evidence (key -> its output form). Not on preview,
    not under mocks.
    """
    if pulumi.runtime.is_dry_run() or running_under_mocks() or not components:
        return None
    waits = Waits(config, channel, context)

    def wait(c: ReplicaComponent) -> pulumi.Output[tuple[verdicts.Verdict, served.Evidence | None]]:
        return c.workload.metadata.apply(  # type: ignore[attr-defined,no-any-return]
            lambda meta: waits.ready_and_serving(c, int(getattr(meta, "generation", None) or 0))
        )

    def check(results: list[tuple[verdicts.Verdict, served.Evidence | None]]) -> Taken:
        waits.close()
        failure = not_ready(components, results)
        if failure is not None:
            channel.error = failure
            raise pulumi.RunError(str(failure))
        return Taken.of(waits, components, results, channel)

    return pulumi.Output.all(*[wait(c) for c in components]).apply(check)


def not_ready(
    components: list[ReplicaComponent], results: list[tuple[verdicts.Verdict, served.Evidence | None]]
) -> NotReady | None:
    """Every failed wait of ``components`` as one :class:`NotReady`, or None when all are ready."""
    failures = [(c.summary["key"], c.name, v.reason) for c, (v, _) in zip(components, results, strict=True) if v.state != "ready"]
    if not failures:
        return None
    lost = all(v.api_lost for v, _ in results if v.state != "ready")
    return NotReady(failures, len(components), api_lost=lost)


@dataclass(frozen=True)
class Taken:
    """What a run's waits took, for the stack's outputs: each waited replica's serving evidence and
    its start (key -> their output forms)."""

    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    starts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        waits: Waits,
        components: list[ReplicaComponent],
        results: list[tuple[verdicts.Verdict, served.Evidence | None]],
        channel: Channel,
    ) -> Taken:
        """Every replica ready and serving: said once; the evidence taken (:func:`evidence_taken`) and
        the startup ledger (:meth:`Waits.starts`)."""
        waits.publish(Readiness(len(components), len(components)))
        return cls(evidence_taken(components, results, channel), waits.starts(components))


def evidence_taken(
    components: list[ReplicaComponent], results: list[tuple[verdicts.Verdict, served.Evidence | None]], channel: Channel
) -> dict[str, dict[str, Any]]:
    """The evidence the waits took, as lines on the caller's sink and as the output form (key -> it)."""
    from infercrane.live.evidence import said

    taken = {c.summary["key"]: e for c, (_, e) in zip(components, results, strict=True) if e is not None}
    for line in said.lines(taken):
        evidence_note(channel)(line)
    return {key: e.as_output() for key, e in taken.items()}
