"""A rollout in one engine run: every endpoint's lane at its own pace. Pulumi shell.

Each lane (:class:`~infercrane.core.plan.waves.Lane`) is one task of the program: a stage's
replicas are registered with their new manifests, waited for (ready, and serving what they
should), then what the stage ends by deleting is deleted by the caller's deleter (exact
ownership, a uid precondition, until gone), then the lane's next stage begins. A replica whose
stage has not come yet is not registered yet: Pulumi leaves it as its state records it, and,
because every lane is awaited before the program returns, deletes nothing while a lane still
runs. A lane that fails stops there -- its replicas not reached yet are never registered -- while
the others go on; the program then fails, so Pulumi's own end-of-run deletions do not happen.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infercrane.core.errors import CanaryRejected, InferCraneError, RolloutStopped, StillDraining
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.waves import EndpointRollout, Lane, Stage
from infercrane.shell.awaiting import Waits, not_ready
from infercrane.shell.components import Ahead, ReplicaComponent
from infercrane.shell.lender import Lender

if TYPE_CHECKING:
    from infercrane.core.plan import canary
    from infercrane.live.evidence import served
    from infercrane.live.status import verdicts

Result = tuple["verdicts.Verdict", "served.Evidence | None"]


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


async def roll(
    lanes: Sequence[Lane],
    endpoints: Mapping[str, EndpointRollout],
    register: Callable[[str], ReplicaComponent],
    waits: Waits,
    delete: Callable[[Collection[str]], Mapping[str, str]],
    note: Callable[[str], None],
    order: Mapping[str, int],
    *,
    max_extra_gpus: int | None = None,
    restarts: frozenset[str] | None = None,
    lent: tuple[tuple[str, Gpus], ...] = (),
    recreate: Callable[[Collection[str]], Mapping[str, str]] | None = None,
) -> LanesOutcome:
    """Run every lane to its end or its first failure, side by side. A failure of the engine
    itself (an apply it failed, a registration that raised) halts every lane: none deletes or
    registers anything more, and the engine's error is raised once all have stopped, with where
    each endpoint ended. With ``max_extra_gpus``, each stage borrows what it holds beyond its
    endpoint's own GPUs from one :class:`Lender`, which starts with ``lent`` (what a run cut short
    left the endpoints holding beyond their own: :attr:`~infercrane.core.plan.waves.Rollout.lent`). A stage's keys of ``restarts`` (None: all) wait
    until no pod of theirs is terminating before they are applied (:attr:`~infercrane.core.plan.waves.Rollout.restarts`);
    a wave's keys and those that restart then go ahead of the keys carried over as they are, at the
    program's pace (:class:`~infercrane.shell.components.Ahead`): their pods are the run's long pole.
    A stage's keys it recreates lose their workload object to ``recreate`` first (gone, with its
    pods), then are registered: created again."""
    outcome = LanesOutcome(ended={x.endpoint: "not started" for x in lanes})
    loop = asyncio.get_running_loop()
    halted = asyncio.Event()
    lender = Lender(max_extra_gpus, [x.endpoint for x in lanes], halted, lent)
    ahead = Ahead()  # one pace for every lane: a wave of all endpoints at once is one burst

    async def lane(lane: Lane) -> None:
        try:
            await stages(lane)
        finally:
            await lender.ended(lane.endpoint)

    def changed(stage: Stage) -> frozenset[str]:  # the keys a stage restarts (one applied as it runs changes nothing)
        return stage.apply if restarts is None else stage.apply & restarts

    async def stages(lane: Lane) -> None:
        e = endpoints.get(lane.endpoint)
        for i, stage in enumerate(lane.stages):
            where = e.where(stage) if e is not None else "its stage"
            if halted.is_set():
                outcome.ended[lane.endpoint] = f"halted before {where} (the engine failed)"
                return
            if stage.borrow and max_extra_gpus is not None:
                try:
                    lent = await lender.take(lane.endpoint, stage.borrow, where, note)
                except InferCraneError as exc:
                    outcome.stopped.append((lane.endpoint, where, exc))
                    outcome.ended[lane.endpoint] = f"stopped before {where}: {exc.message}"
                    return
                if not lent or halted.is_set():
                    outcome.ended[lane.endpoint] = f"halted before {where} (the engine failed)"
                    return
            if e is not None and (stage.wave is not None or e.first_before_waves or e.idle_first):
                note(f"rollout: {e.describe(stage)}")
            outcome.ended[lane.endpoint] = f"stopped in {where}"
            changing = changed(stage)
            upcoming = next((c for later in lane.stages[i + 1 :] if (c := changed(later))), frozenset())
            await waits.warm(e, changing, note, upcoming)  # warm-first: the release onto their nodes while they serve
            # A key it restarts or deletes (one applied with the template it runs changes nothing).
            if back := await serving_again(e, changing | stage.delete, waits):
                outcome.stopped.append((lane.endpoint, where, back))
                outcome.ended[lane.endpoint] = f"stopped before {where}: {back.message}"
                return
            if stage.recreate and recreate is not None:  # deleted, with its pods, before it is made again
                try:
                    await loop.run_in_executor(None, recreate, stage.recreate)
                except InferCraneError as exc:
                    outcome.stopped.append((lane.endpoint, where, exc))
                    outcome.ended[lane.endpoint] = f"stopped before {where}: {exc.message}"
                    return
            draining = (
                await waits.drained(changing) if changing else ""
            )  # a key whose old pod drains gets its template once it is gone
            if draining:
                outcome.stopped.append((lane.endpoint, where, StillDraining(draining)))
                outcome.ended[lane.endpoint] = f"stopped before {where}: {draining}"
                return
            components = []
            held = waits.holdable(e, stage.apply) if stage.bake and e is not None else set()
            try:
                if held and e is not None:
                    await waits.hold(e, note)  # before the canary's template: the old pods stay
                    waits.held |= held
                elif stage.bake and e is not None:
                    waits.say_unheld(e, note)
                for key in sorted(stage.apply, key=lambda k: order.get(k, len(order))):
                    first = stage.wave is not None or key in changing  # its pod is new: ahead of those carried over
                    components.append(await ahead.register(functools.partial(register, key), first=first))
                results = list(await asyncio.gather(*(waits.of(c) for c in components)))
            except InferCraneError as exc:
                outcome.stopped.append((lane.endpoint, where, exc))
                outcome.ended[lane.endpoint] = f"stopped at {where}: {exc.message}"
                return
            except Exception as exc:  # noqa: BLE001 - an apply the engine failed: the engine's own error, raised below
                outcome.crashed.append((lane.endpoint, where, exc))
                halted.set()
                outcome.ended[lane.endpoint] = f"failed by the engine at {where}"
                return
            outcome.components += components
            outcome.results += results
            failure = not_ready(components, results)
            if failure is not None and stage.bake and e is not None and e.canary_policy is not None:
                # A canary that never became ready is judged by it: rejected, so the same command
                # remembers it and rolls it back -- never left down on a release nobody judged.
                never = CanaryRejected(
                    f"canary {lane.endpoint}: REJECT -- its replicas did not become ready: {failure.message}",
                    e.canary_policy.required,
                    not_verifiable=False,
                    outcome="REJECT",
                    digest="none (never ready)",
                )
                outcome.stopped.append((lane.endpoint, f"{where} (the canary)", never))
                outcome.ended[lane.endpoint] = f"stopped at {where}: the canary never became ready"
                return
            if failure is not None:
                outcome.stopped.append((lane.endpoint, where, failure))
                outcome.ended[lane.endpoint] = f"stopped at {where}: {failure.message}"
                return
            if stage.bake and e is not None and e.canary_policy is not None:
                verdict = await waits.bake(e, note)
                outcome.verdicts[lane.endpoint] = verdict
                note(f"rollout: {verdict.line()}")
                if verdict.stops:
                    rejected = CanaryRejected(
                        verdict.line(),
                        e.canary_policy.required,
                        not_verifiable=verdict.outcome == "NOT VERIFIABLE",
                        outcome=verdict.outcome,
                        digest=verdict.digest,
                    )
                    outcome.stopped.append((lane.endpoint, f"{where} (the canary)", rejected))
                    outcome.ended[lane.endpoint] = f"stopped at {where}: the canary's verdict is {verdict.outcome}"
                    return
            if held:
                # Accepted: the held canaries' holds end, their old pods drain -- waited for as
                # every wave is, before anything the stage deletes and before the next stage.
                unheld = [c for c in components if c.summary["key"] in held]
                try:
                    settled = list(await asyncio.gather(*(waits.unheld(c) for c in unheld)))
                except InferCraneError as exc:
                    outcome.stopped.append((lane.endpoint, where, exc))
                    outcome.ended[lane.endpoint] = f"stopped at {where}: {exc.message}"
                    return
                except Exception as exc:  # noqa: BLE001 - the engine's own error, raised below
                    outcome.crashed.append((lane.endpoint, where, exc))
                    halted.set()
                    outcome.ended[lane.endpoint] = f"failed by the engine at {where}"
                    return
                failure = not_ready(unheld, settled)
                if failure is not None:
                    outcome.stopped.append((lane.endpoint, where, failure))
                    outcome.ended[lane.endpoint] = f"stopped at {where}: {failure.message}"
                    return
            if stage.delete:
                if halted.is_set():
                    outcome.ended[lane.endpoint] = f"halted after {where}, before its deletions (the engine failed)"
                    return
                if back := await serving_again(e, stage.delete, waits):
                    outcome.stopped.append((lane.endpoint, f"the deletions after {where}", back))
                    outcome.ended[lane.endpoint] = f"stopped at the deletions after {where}: {back.message}"
                    return
                try:
                    await loop.run_in_executor(None, delete, stage.delete)
                except InferCraneError as exc:
                    outcome.stopped.append((lane.endpoint, f"the deletions after {where}", exc))
                    outcome.ended[lane.endpoint] = f"stopped at the deletions after {where}: {exc.message}"
                    return
            await lender.keep(lane.endpoint, stage.keep)  # its deletions are gone: what they held is free
            if i == len(lane.stages) - 1:
                outcome.ended[lane.endpoint] = "finished"

    await asyncio.gather(*(lane(x) for x in lanes))
    if outcome.crashed:
        # The engine failed an apply (the API server gone, an object it refused): it ends the whole
        # update itself, and its own words say why -- raised as they came, never renamed; where
        # each endpoint ended is said beside them. A canary's verdict that stopped its release
        # meanwhile is never dropped for it: then the stop is raised with the engine's failure
        # beside it, so the command remembers the rejection and rolls the canary back.
        note(f"rollout: halted by the engine's failure: {outcome.summary()}")
        if any(isinstance(cause, CanaryRejected) for _, _, cause in outcome.stopped):
            failed = [(endpoint, where, InferCraneError(f"the engine failed: {exc}")) for endpoint, where, exc in outcome.crashed]
            raise RolloutStopped([*outcome.stopped, *failed], len(lanes), accepted=outcome.accepted, finished=outcome.finished)
        raise outcome.crashed[0][2]
    pairs = sorted(
        zip(outcome.components, outcome.results, strict=True), key=lambda p: order.get(p[0].summary["key"], len(order))
    )
    outcome.components = [c for c, _ in pairs]
    outcome.results = [r for _, r in pairs]
    outcome.stopped.sort(key=lambda s: [x.endpoint for x in lanes].index(s[0]))
    return outcome
