"""One endpoint's rollout in its own wave numbers (:class:`Schedule`, planned by
:mod:`infercrane.core.plan.rollout`): walked step by step for the lowest number of available
replicas and each GPU product's peak (:func:`walk`), and carried out as its lane's stages
(:func:`lane`). Pure core.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.waves import SURGE, Lane, Mode, Stage

if TYPE_CHECKING:
    from infercrane.core.plan.replicas import LiveReplica


@dataclass
class Schedule:
    """One endpoint's plan in its own wave numbers; its lane's stages by :func:`lane`."""

    free: list[str] = field(default_factory=list)  # applied in the first step
    repair: list[str] = field(default_factory=list)  # not available: applied in the first step, before any wave
    recreate: list[str] = field(default_factory=list)  # not available, restarting under a surge: deleted, then created
    delete_first: list[str] = field(default_factory=list)  # deleted at the end of the prep step (before wave 0)
    delete_idle: list[str] = field(default_factory=list)  # deleted at the end of the first step
    retire_first: list[str] = field(default_factory=list)  # surplus available replicas the GPU budget retires before the waves
    idle_first: bool = False  # the idle ones go in a stage of their own, before new replicas take GPUs
    waves: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (ups, deletions at the end of that wave)
    delete_last: list[str] = field(default_factory=list)  # deleted at the end of the last step
    borrowed: list[tuple[Gpus, Gpus]] = field(default_factory=list)  # per walked stage: (borrow, keep) -- core.plan.ledger
    canary_wave: int | None = None  # the wave that is the canary (its stage bakes and is judged)
    canary_first: bool = False  # the canary is what the first step brings back (a killed run left it down)


def by_product(held: Iterable[tuple[str, int]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for product, n in held:
        out[product] += n
    return out


def walk(
    sched: Schedule,
    chunks: list[list[tuple[str, str | None]]],
    mode: Mode,
    running: Sequence[LiveReplica],
    new_gpus: dict[str, tuple[str, int]],
) -> Walked:
    """The lowest number of available replicas, each product's peak of GPUs held on the way the
    lane's own stages go, and what each stage holds -- computed from the schedule, step by step,
    never asserted. A deleted replica's GPUs count as free only once it is gone (the deletions
    wait for that)."""
    held = {m.key: (m.product, m.gpus) for m in running}  # key -> (product, GPUs its pods hold now)
    ready = {m.key for m in running if m.available}
    lowest = len(ready)
    peak: Counter[str] = by_product(held.values())
    stages: list[tuple[Counter[str], Counter[str]]] = []  # per stage: its peak, and what it holds once its deletions are gone

    def note(extra: Iterable[tuple[str, int]] = ()) -> None:
        nonlocal lowest
        lowest = min(lowest, len(ready))
        now = by_product([*held.values(), *extra])
        for product, n in now.items():
            peak[product] = max(peak[product], n)
            stages[-1][0][product] = max(stages[-1][0][product], n)

    def begin() -> None:
        stages.append((by_product(held.values()), Counter()))

    def end() -> None:
        stages[-1][1].clear()
        stages[-1][1].update(by_product(held.values()))

    def gone(keys: Iterable[str]) -> None:
        for k in keys:
            ready.discard(k)
            held.pop(k, None)

    if sched.idle_first:
        begin()
        gone(sched.delete_idle)
        note()
        end()
    # The first step: what costs nothing or must be available again starts beside what runs.
    begin()
    note([new_gpus[k] for k in sched.repair + sched.free if k not in held])
    for k in sched.repair + sched.free:
        held[k] = new_gpus[k]
        ready.add(k)
    note()
    gone(([] if sched.idle_first else sched.delete_idle) + sched.retire_first + sched.delete_first)
    note()
    end()
    for chunk, (ups, deletions) in zip(chunks, sched.waves, strict=True):
        begin()
        if mode == SURGE:
            # Each unit's new pod starts beside what runs (an update's old pod still holds its GPUs).
            note([new_gpus[up] for up, _ in chunk])
            gone([old for up, old in chunk if old is not None and old != up])  # a moved key's old form goes as its new one serves
            for up in ups:
                held[up] = new_gpus[up]
                ready.add(up)
            note()
        else:
            gone([up for up, old in chunk if old is None])  # an update restarts in place
            note()
            for up in ups:
                held[up] = new_gpus[up]
                ready.add(up)
            note()
            gone(deletions)
            note()
        end()
    gone(sched.delete_last)
    note()
    end()  # the last stage also deletes what leaves last
    return Walked(lowest, peak, stages)


@dataclass(frozen=True)
class Walked:
    lowest: int
    peak: Counter[str]
    stages: list[tuple[Counter[str], Counter[str]]]  # the walk's stages: idle (if first), prep, one per wave


def lane(endpoint: str, s: Schedule) -> Lane:
    """One endpoint's schedule as the stages of its lane: the idle replicas alone first when new
    ones need their GPUs; then what costs nothing or must be available again (then the first
    wave's old replicas, in place, the surplus the budget retires and the idle ones go); then one
    stage per wave (then what that wave ends by deleting); the available replicas that leave without
    a successor after the last."""
    borrowed = iter(s.borrowed)  # the walk's stages, in the same order: idle (if first), prep, one per wave

    def stage(apply: Iterable[str], delete: Iterable[str], wave: int | None = None, recreate: Iterable[str] = ()) -> Stage:
        borrow, keep = next(borrowed)
        return Stage(
            apply=frozenset(apply), delete=frozenset(delete), borrow=borrow, keep=keep, wave=wave, recreate=frozenset(recreate)
        )

    stages = [stage((), s.delete_idle)] if s.idle_first else []
    idle = [] if s.idle_first else s.delete_idle
    prep = stage(s.free + s.repair, idle + s.retire_first + s.delete_first, recreate=s.recreate)
    if prep.apply or prep.delete or not (s.waves or stages):
        stages.append(prep)
    stages += [stage(ups, gone, wave=i) for i, (ups, gone) in enumerate(s.waves)]
    if s.canary_wave is not None or s.canary_first:  # the canary's stage bakes and is judged before its deletions
        i = next(n for n, x in enumerate(stages) if x.wave == s.canary_wave and (s.canary_wave is not None or x.apply))
        stages[i] = dataclasses.replace(stages[i], bake=True)
    last = stages[-1]
    stages[-1] = dataclasses.replace(last, delete=last.delete | frozenset(s.delete_last))
    return Lane(endpoint=endpoint, stages=tuple(stages))
