"""A lane's stages, one step each: what comes before a stage's templates (GPUs borrowed, warm-first,
a planned-down key serving again, recreations, drains), its replicas registered and waited for,
the canary's verdict, the held canaries released, the stage's deletions. A lane that ends in a
stage raises :class:`_Ended` with where, in words, and the stop or engine failure it records;
:func:`~infercrane.shell.lanes.roll` runs the lanes side by side. Pulumi shell.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from infercrane.core.errors import InferCraneError
from infercrane.core.plan.waves import EndpointRollout, Lane, Stage
from infercrane.core.stops import CanaryRejected, StillDraining
from infercrane.shell.awaiting import Waits, not_ready
from infercrane.shell.components import Ahead, ReplicaComponent
from infercrane.shell.lender import Lender

if TYPE_CHECKING:
    from infercrane.core.plan import canary
    from infercrane.live.evidence import served
    from infercrane.live.status import verdicts

Result = tuple["verdicts.Verdict", "served.Evidence | None"]
_T = TypeVar("_T")


@dataclass
class LanesOutcome:
    """What the lanes did: the replicas registered (with each wait's result), the lanes that
    stopped, and where each endpoint ended."""

    components: list[ReplicaComponent] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    stopped: list[tuple[str, str, InferCraneError]] = field(default_factory=list)  # endpoint, where, why
    crashed: list[tuple[str, str, BaseException]] = field(default_factory=list)  # endpoint, where, what the engine failed
    ended: dict[str, str] = field(default_factory=dict)  # endpoint -> where it ended, in words
    verdicts: dict[str, canary.CanaryVerdict] = field(default_factory=dict)  # endpoint -> its canary's verdict

    @property
    def finished(self) -> list[str]:
        """The endpoints whose lane ran to its end."""
        return [endpoint for endpoint, where in self.ended.items() if where == "finished"]

    @property
    def accepted(self) -> list[str]:
        """The endpoints whose canary was accepted."""
        return [endpoint for endpoint, v in self.verdicts.items() if v.outcome == "ACCEPT"]

    def summary(self) -> str:
        """Each endpoint's end, one clause each: ``qwen finished; llama halted before wave 2/3``."""
        return "; ".join(f"{endpoint} {where}" for endpoint, where in self.ended.items())


async def serving_again(e: EndpointRollout | None, keys: Collection[str], waits: Waits) -> InferCraneError | None:
    """Why a stage must not touch ``keys``: one the plan counted as not available serves again
    (a restart out of band that came back). The plan spent no unavailability on it, so restarted or
    deleted now it would take the endpoint below its floor; a rerun plans with it serving."""
    planned_down = set(keys) & set(e.down) if e is not None else set()
    back = sorted(await waits.serving(planned_down)) if planned_down else []
    if not back:
        return None
    return InferCraneError(
        f"{', '.join(back)} of endpoint {e.endpoint if e else ''} serves again since this deploy planned it as not "
        "available: restarted or deleted now, it would take the endpoint below its floor",
        fix="rerun the same command: it plans from what runs now",
    )


class _Ended(Exception):
    """A lane ends in a stage: where it ended, in words, and what it records -- a stop (where, why)
    or the engine's own failure (where, what), which halts every lane."""

    def __init__(
        self, ended: str, stop: tuple[str, InferCraneError] | None = None, crash: tuple[str, BaseException] | None = None
    ) -> None:
        super().__init__(ended)
        self.ended, self.stop, self.crash = ended, stop, crash


def _stopped(where: str, exc: InferCraneError, at: str = "at") -> _Ended:
    return _Ended(f"stopped {at} {where}: {exc.message}", (where, exc))


@dataclass
class Lanes:
    """One run of :func:`~infercrane.shell.lanes.roll`: what every lane shares (its arguments, the outcome, the lender, the pace)."""

    endpoints: Mapping[str, EndpointRollout]
    register: Callable[[str], ReplicaComponent]
    waits: Waits
    delete: Callable[[Collection[str]], Mapping[str, str]]
    note: Callable[[str], None]
    order: Mapping[str, int]
    max_extra_gpus: int | None
    restarts: frozenset[str] | None
    recreate: Callable[[Collection[str]], Mapping[str, str]] | None
    outcome: LanesOutcome
    lender: Lender
    halted: asyncio.Event
    ahead: Ahead = field(default_factory=Ahead)  # one pace for every lane: a wave of all endpoints at once is one burst

    def changed(self, stage: Stage) -> frozenset[str]:
        """The keys a stage restarts (one applied as it runs changes nothing)."""
        return stage.apply if self.restarts is None else stage.apply & self.restarts

    async def lane(self, lane: Lane) -> None:
        try:
            for i, stage in enumerate(lane.stages):
                e = self.endpoints.get(lane.endpoint)
                where = e.where(stage) if e is not None else "its stage"
                upcoming = next((c for later in lane.stages[i + 1 :] if (c := self.changed(later))), frozenset())
                try:
                    await self.stage(lane.endpoint, e, stage, where, upcoming)
                except _Ended as end:
                    self.outcome.ended[lane.endpoint] = end.ended
                    if end.stop is not None:
                        self.outcome.stopped.append((lane.endpoint, *end.stop))
                    if end.crash is not None:
                        self.outcome.crashed.append((lane.endpoint, *end.crash))
                        self.halted.set()
                    return
                if i == len(lane.stages) - 1:
                    self.outcome.ended[lane.endpoint] = "finished"
        finally:
            await self.lender.ended(lane.endpoint)

    async def stage(self, endpoint: str, e: EndpointRollout | None, stage: Stage, where: str, upcoming: frozenset[str]) -> None:
        """One stage of a lane, to its end; a lane that ends in it raises :class:`_Ended`."""
        if self.halted.is_set():
            raise _Ended(f"halted before {where} (the engine failed)")
        await self.borrow(endpoint, stage, where)
        if e is not None and (stage.wave is not None or e.first_before_waves or e.idle_first):
            self.note(f"rollout: {e.describe(stage)}")
        self.outcome.ended[endpoint] = f"stopped in {where}"
        changing = self.changed(stage)
        await self.before(e, stage, where, changing, upcoming)
        held = self.waits.holdable(e, stage.apply) if stage.bake and e is not None else set()
        components, results = await self.apply(e, stage, where, changing, held)
        self.judge(endpoint, e, stage, where, not_ready(components, results))
        if stage.bake and e is not None and e.canary_policy is not None:
            await self.bake(endpoint, e, where)
        if held:
            # Accepted: the held canaries' holds end, their old pods drain -- waited for as
            # every wave is, before anything the stage deletes and before the next stage.
            unheld = [c for c in components if c.summary["key"] in held]
            released = await self.engine_step(where, asyncio.gather(*(self.waits.unheld(c) for c in unheld)))
            if (failure := not_ready(unheld, list(released))) is not None:
                raise _stopped(where, failure)
        if stage.delete:
            await self.deletions(e, stage, where)
        await self.lender.keep(endpoint, stage.keep)  # its deletions are gone: what they held is free

    async def borrow(self, endpoint: str, stage: Stage, where: str) -> None:
        """The GPUs a stage holds beyond its endpoint's own, from the lender."""
        if not stage.borrow or self.max_extra_gpus is None:
            return
        try:
            lent = await self.lender.take(endpoint, stage.borrow, where, self.note)
        except InferCraneError as exc:
            raise _stopped(where, exc, "before") from exc
        if not lent or self.halted.is_set():
            raise _Ended(f"halted before {where} (the engine failed)")

    async def before(
        self, e: EndpointRollout | None, stage: Stage, where: str, changing: frozenset[str], upcoming: frozenset[str]
    ) -> None:
        """What comes before a stage's templates: warm-first, a planned-down key serving again, the
        recreated keys' objects gone, the changed keys' old pods drained."""
        await self.waits.warm(e, changing, self.note, upcoming)  # warm-first: the release onto their nodes while they serve
        # A key it restarts or deletes (one applied with the template it runs changes nothing).
        if back := await serving_again(e, changing | stage.delete, self.waits):
            raise _stopped(where, back, "before")
        if stage.recreate and self.recreate is not None:  # deleted, with its pods, before it is made again
            try:
                await self.waits.blocking(self.recreate, stage.recreate)
            except InferCraneError as exc:
                raise _stopped(where, exc, "before") from exc
        # A key whose old pod drains gets its template once it is gone.
        if draining := (await self.waits.drained(changing) if changing else ""):
            raise _Ended(f"stopped before {where}: {draining}", (where, StillDraining(draining)))

    async def engine_step(self, where: str, step: Awaitable[_T]) -> _T:
        """``step``'s result; a refusal stops the lane, any other failure is the engine's own (an
        apply it failed): it halts every lane and is raised by :func:`roll`."""
        try:
            return await step
        except InferCraneError as exc:
            raise _stopped(where, exc) from exc
        except Exception as exc:  # noqa: BLE001 - the engine's own error, raised by roll
            raise _Ended(f"failed by the engine at {where}", crash=(where, exc)) from exc

    async def apply(
        self, e: EndpointRollout | None, stage: Stage, where: str, changing: frozenset[str], held: set[str]
    ) -> tuple[list[ReplicaComponent], list[Result]]:
        """The stage's replicas registered with their new templates (a canary's old pods held
        first) and waited for; recorded in the outcome."""
        components: list[ReplicaComponent] = []

        async def registered() -> list[Result]:
            if held and e is not None:
                await self.waits.hold(e, self.note)  # before the canary's template: the old pods stay
                self.waits.held |= held
            elif stage.bake and e is not None:
                self.waits.say_unheld(e, self.note)
            for key in sorted(stage.apply, key=lambda k: self.order.get(k, len(self.order))):
                first = stage.wave is not None or key in changing  # its pod is new: ahead of those carried over
                components.append(await self.ahead.register(functools.partial(self.register, key), first=first))
            return list(await asyncio.gather(*(self.waits.of(c) for c in components)))

        results = await self.engine_step(where, registered())
        self.outcome.components += components
        self.outcome.results += results
        return components, results

    def judge(self, endpoint: str, e: EndpointRollout | None, stage: Stage, where: str, failure: InferCraneError | None) -> None:
        """A stage whose replicas are not ready stops its lane; a canary that never became ready is
        rejected by it, so the same command remembers it and rolls it back -- never left down on a
        release nobody judged."""
        if failure is None:
            return
        if stage.bake and e is not None and e.canary_policy is not None:
            never = CanaryRejected(
                f"canary {endpoint}: REJECT -- its replicas did not become ready: {failure.message}",
                e.canary_policy.required,
                not_verifiable=False,
                outcome="REJECT",
                digest="none (never ready)",
            )
            raise _Ended(f"stopped at {where}: the canary never became ready", (f"{where} (the canary)", never))
        raise _stopped(where, failure)

    async def bake(self, endpoint: str, e: EndpointRollout, where: str) -> None:
        """The canary's bake and verdict; one that stops the release stops the lane."""
        assert e.canary_policy is not None
        verdict = await self.waits.bake(e, self.note)
        self.outcome.verdicts[endpoint] = verdict
        self.note(f"rollout: {verdict.line()}")
        if verdict.stops:
            rejected = CanaryRejected(
                verdict.line(),
                e.canary_policy.required,
                not_verifiable=verdict.outcome == "NOT VERIFIABLE",
                outcome=verdict.outcome,
                digest=verdict.digest,
            )
            raise _Ended(f"stopped at {where}: the canary's verdict is {verdict.outcome}", (f"{where} (the canary)", rejected))

    async def deletions(self, e: EndpointRollout | None, stage: Stage, where: str) -> None:
        """What the stage ends by deleting, deleted -- never while the engine fails, never a key
        planned down that serves again."""
        if self.halted.is_set():
            raise _Ended(f"halted after {where}, before its deletions (the engine failed)")
        after = f"the deletions after {where}"
        if back := await serving_again(e, stage.delete, self.waits):
            raise _Ended(f"stopped at {after}: {back.message}", (after, back))
        try:
            await self.waits.blocking(self.delete, stage.delete)
        except InferCraneError as exc:
            raise _Ended(f"stopped at {after}: {exc.message}", (after, exc)) from exc
