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
from collections.abc import Callable, Collection, Mapping, Sequence

from infercrane.core.errors import InferCraneError
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.waves import EndpointRollout, Lane
from infercrane.core.stops import CanaryRejected, RolloutStopped
from infercrane.shell.awaiting import Waits
from infercrane.shell.components import ReplicaComponent
from infercrane.shell.lender import Lender
from infercrane.shell.stages import Lanes, LanesOutcome


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
    halted = asyncio.Event()
    run = Lanes(
        endpoints,
        register,
        waits,
        delete,
        note,
        order,
        max_extra_gpus,
        restarts,
        recreate,
        outcome,
        Lender(max_extra_gpus, [x.endpoint for x in lanes], halted, lent),
        halted,
    )
    await asyncio.gather(*(run.lane(x) for x in lanes))
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
