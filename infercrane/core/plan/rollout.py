"""The rollout planner: how each endpoint moves from the replicas that run now to the replicas the
config names, in waves, under its rollout policy -- and the lane of stages that carries each endpoint's out.

A replica's identity is its durable key. Per endpoint, comparing what runs (:class:`LiveReplica`, read
from the live objects) with what the config renders (:class:`Target`):

- a key whose pods would not change (same pod template) and a new key that replaces nothing cost
  nothing and are applied in the endpoint's first stage;
- a key that runs but is not available (a failed wave's replica, one a killed deploy left loading, a
  surge under way) already counts against ``maxUnavailable``, as it does for the Deployment
  controller: it is applied in the first stage too, and when the endpoint has available replicas to
  take down, the first wave waits until it is available again -- a rerun never takes one more down;
- an available key whose pod template changes (new image, revision, args, GPU, endpoint name) is an
  *update*: its pods restart;
- a new key takes the place of an available key that leaves the config: a *replacement pair*;
- available keys that leave without a new key taking their place (a smaller endpoint) are deleted
  last, once everything else is ready; keys that leave while not available are deleted at once;
- a key whose live objects are of another form than the config renders (``workloadApi`` switched:
  a Deployment becoming an InferenceService) *moves*: its old form is its own predecessor, a
  replacement pair of one key -- in place its old form goes before its new form starts, with a
  surge its new form starts first.

Updates and replacements are the units of a rollout, rolled ``maxUnavailable`` at a time *in
place* (the old replica stops, then its successor starts: never more GPUs than the endpoint holds)
or, with ``maxSurge >= 1``, ``maxSurge`` at a time as a *surge* (the successor starts first and the
old one stops only once it is ready). An old replica is deleted only after the wave before its own
is ready, never because a new one failed: a stage that fails stops its lane before its deletions.

One engine run carries the whole rollout. Each endpoint is a :class:`Lane` of :class:`Stage` s
that moves at its own pace: a stage's keys are registered with their new manifests and waited for
(ready and serving); then what the stage ends by deleting is deleted by exact ownership and waited
for until gone; then the lane's next stage begins -- never when the slowest endpoint's wave is
done. A key not reached yet is not registered yet, so Pulumi leaves it as recorded; a lane whose
stage fails stops there while the others go on, and the run then fails, so Pulumi deletes
nothing. A change whose every endpoint needs one stage is what a plain ``pulumi up`` may do;
anything longer needs ``infercrane deploy``. Pure core.

One module, past 300 lines: one algorithm, read top to bottom; the types it plans with are in :mod:`~infercrane.core.plan.waves`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.ledger import Gpus, gpus
from infercrane.core.plan.states import ReplicaState
from infercrane.core.plan.waves import IN_PLACE, SURGE, EndpointRollout, Lane, Mode, Rollout, Stage, Wave


@dataclass(frozen=True)
class LiveReplica:
    """A replica that runs now: its live workload object, owned by this stack, in its rollout state."""

    key: str
    endpoint: str
    state: ReplicaState
    gpus: int
    product: str = ""  # the GPU product its pods are placed on (the product label's value)
    release: str = ""  # what its pods run (core.plan.workload.release_of; "" unknown)
    #: Its pods hold more than its own count now (live.status.verdicts.holds_more): a rolling
    #: update's old pod beside the new one, a pod still terminating.
    surplus: bool = False

    @property
    def available(self) -> bool:
        """A pod answers now, settled or not: never counted down."""
        return self.state.available


@dataclass(frozen=True)
class Target:
    """A replica of the config, and whether applying it restarts a live replica's pods."""

    key: str
    endpoint: str
    gpus: int
    restarts: bool = False
    moves: bool = False  # it runs in another form (another workload kind): its old form goes, its new one starts
    product: str = ""  # the GPU product it asks for
    release: str = ""  # what its pods will run (core.plan.workload.release_of; "" unknown)


@dataclass
class _Schedule:
    """One endpoint's plan in its own wave numbers; its lane's stages by :func:`_lane`."""

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


def _by_product(held: Iterable[tuple[str, int]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for product, n in held:
        out[product] += n
    return out


def _chunks(items: Sequence[tuple[str, str | None]], size: int) -> list[list[tuple[str, str | None]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _walk(
    sched: _Schedule,
    chunks: list[list[tuple[str, str | None]]],
    mode: Mode,
    running: Sequence[LiveReplica],
    new_gpus: dict[str, tuple[str, int]],
) -> _Walked:
    """The lowest number of available replicas, each product's peak of GPUs held on the way the
    lane's own stages go, and what each stage holds -- computed from the schedule, step by step,
    never asserted. A deleted replica's GPUs count as free only once it is gone (the deletions
    wait for that)."""
    held = {m.key: (m.product, m.gpus) for m in running}  # key -> (product, GPUs its pods hold now)
    ready = {m.key for m in running if m.available}
    lowest = len(ready)
    peak: Counter[str] = _by_product(held.values())
    stages: list[tuple[Counter[str], Counter[str]]] = []  # per stage: its peak, and what it holds once its deletions are gone

    def note(extra: Iterable[tuple[str, int]] = ()) -> None:
        nonlocal lowest
        lowest = min(lowest, len(ready))
        now = _by_product([*held.values(), *extra])
        for product, n in now.items():
            peak[product] = max(peak[product], n)
            stages[-1][0][product] = max(stages[-1][0][product], n)

    def begin() -> None:
        stages.append((_by_product(held.values()), Counter()))

    def end() -> None:
        stages[-1][1].clear()
        stages[-1][1].update(_by_product(held.values()))

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
    return _Walked(lowest, peak, stages)


@dataclass(frozen=True)
class _Walked:
    lowest: int
    peak: Counter[str]
    stages: list[tuple[Counter[str], Counter[str]]]  # the walk's stages: idle (if first), prep, one per wave


def _over_budget(
    peak: Counter[str], before: Counter[str], after: Counter[str], new_gpus: dict[str, tuple[str, int]], policy: RolloutPolicy
) -> bool:
    """Whether a product's peak exceeds both what the endpoint holds of it now and the config's
    replicas plus ``maxSurge`` replicas' worth: the most a surge may hold."""
    widest = {p: max(n for q, n in new_gpus.values() if q == p) for p in after}
    return any(n > max(before[p], after[p] + policy.max_surge * widest.get(p, 0)) for p, n in peak.items())


def _endpoint(
    name: str,
    running: list[LiveReplica],
    targets: list[Target],
    policy: RolloutPolicy,
    unproven: frozenset[str] = frozenset(),
    started: Gpus | None = None,
) -> tuple[EndpointRollout, _Schedule]:
    by_key = {m.key: m for m in running}
    target_keys = {t.key for t in targets}
    sched = _Schedule()
    adds = [t for t in targets if t.key not in by_key]
    moved = [t for t in targets if t.key in by_key and t.moves]
    staying = [t for t in targets if t.key in by_key and not t.moves]
    # A replica with an available pod is up, settled or not (a surge, a scale-up under way): never counted down.
    updates = [t for t in staying if t.restarts and by_key[t.key].available]
    sched.free = [t.key for t in staying if by_key[t.key].available and not t.restarts]
    not_available = [t.key for t in staying if not by_key[t.key].available]
    leaving = [m for m in running if m.key not in target_keys]
    available_leaving = [m for m in leaving if m.available]
    sched.delete_idle = [m.key for m in leaving if not m.available]
    pairs = list(zip(adds, available_leaving, strict=False))
    sched.free += [t.key for t in adds[len(pairs) :]]
    surplus = [m.key for m in available_leaving[len(pairs) :]]

    mode: Mode = SURGE if policy.max_surge >= 1 else IN_PLACE
    per_wave = policy.max_surge if mode == SURGE else policy.max_unavailable
    # A replica that is down and restarts has nothing serving to keep. Under a surge its Deployment's
    # rolling update would keep its old pod -- and its GPU -- until the new one is available (the
    # controller scales an old pod down only while the new ones leave room), a GPU more that the pool
    # may not have: it is *recreated* instead (its workload object deleted, then created again), so
    # its old pod goes before its new one starts, as in place (Recreate) -- no GPU more, and the
    # release it ran never serves again. Both cost nothing and come in the first step.
    sched.recreate = [t.key for t in staying if t.restarts and t.key in not_available] if mode == SURGE else []
    units: list[tuple[str, str | None]] = [(t.key, None) for t in updates]
    units += [(t.key, t.key) for t in moved] + [(a.key, r.key) for a, r in pairs]
    # A canary (core.plan.canary judges it): the first wave of the available replicas' units, judged
    # beside the baseline (the replicas still on the old release while it bakes) -- or what the
    # first step starts on the new release: replicas a killed run left down on it, new keys that
    # replace nothing, or (``unproven``: a release a canary rejected, retried) the replicas still on
    # it, which prove nothing by running. A release already serving elsewhere needs none.
    # An endpoint none of whose replicas serves now (every one restarting, say) while they run another
    # release: what the first step starts runs the config's unjudged. A required canary has no
    # baseline for it -- the plan says so (refused) rather than start it unjudged.
    new_keys = [t.key for t in adds[len(pairs) :]]  # created in the first step: they replace nothing
    releases = {t.key: t.release for t in targets}
    down_elsewhere = [m.key for m in running if not m.available and m.release and m.release != releases.get(m.key)]
    starts = [(k, None) for k in [*not_available, *new_keys] if releases.get(k)]
    judged_alone = not units and bool(down_elsewhere and starts) and policy.canary is not None and policy.canary.required
    release = _release(units or (starts if judged_alone else []), targets)
    moving = {up for up, _ in units} | {old for _, old in units if old is not None}
    already = _already_available(release, moving, [m for m in running if m.release not in unproven])
    retried = [m.key for m in running if m.available and m.release in unproven and m.key not in moving and m.key in target_keys]
    # What starts on the release before the available replicas' units -- the first step's replicas --
    # is part of the canary, never unjudged.
    canary, baseline, in_flight = (
        _canary(units, mode, policy, running, targets, release, moving, [*not_available, *new_keys, *retried])
        if not already
        else ((), (), False)
    )
    canary_wave = 0 if canary and not in_flight else None
    sched.canary_wave, sched.canary_first = canary_wave, in_flight
    chunks = (
        _chunks(units[: len(canary)], len(canary)) + _chunks(units[len(canary) :], per_wave)
        if canary_wave == 0
        else _chunks(units, per_wave)
    )
    if chunks:
        sched.repair = not_available  # the waves take available replicas down: only once these are available again
    else:
        sched.free += not_available  # nothing available goes down: nothing to wait for
    # Replicas leaving while down still hold GPUs: when new replicas start in the first stage, they go first.
    sched.idle_first = bool(sched.delete_idle) and any(k not in by_key for k in sched.free)
    waves = []
    for i, chunk in enumerate(chunks):
        ups = [up for up, _ in chunk]
        replaced = [old for _, old in chunk if old is not None]
        if mode == SURGE:
            sched.waves.append((ups, replaced))  # the old ones go once their successors are ready
        else:
            following = [old for _, old in chunks[i + 1] if old is not None] if i + 1 < len(chunks) else []
            sched.waves.append((ups, following))  # the next wave's old ones go once this wave is ready
            if i == 0:
                sched.delete_first = replaced
        # Both modes stop the same replicas and start the same ones; in place stops first, surge starts first.
        waves.append(Wave(down=tuple([up for up, old in chunk if old is None] + replaced), up=tuple(ups)))

    # GPUs are counted per product: an endpoint moving from one product to another holds both on
    # the way, and a product's capacity is what it can spare -- never a sum across products.
    gpus_of = {m.key: (m.product, m.gpus) for m in running}
    new_gpus = {t.key: (t.product, t.gpus) for t in targets}
    before, after = _by_product(gpus_of.values()), _by_product(new_gpus.values())
    # Available replicas that leave without a successor go last, so the endpoint never shrinks first
    # -- unless that would hold more GPUs than the endpoint may: more than it holds now and more
    # than the config's replicas plus maxSurge replicas' worth (a surge cut before its old replica
    # was deleted leaves one surplus; starting the next surge beside it would need a GPU the pool
    # may not have, on every rerun). Then the surplus goes first: its successor already serves.
    sched.delete_last = surplus
    walked = _walk(sched, chunks, mode, running, new_gpus)
    if surplus and mode == SURGE and _over_budget(walked.peak, before, after, new_gpus, policy):
        sched.retire_first, sched.delete_last = surplus, []
        walked = _walk(sched, chunks, mode, running, new_gpus)
    lowest, peak = walked.lowest, walked.peak
    # What each stage borrows beyond the endpoint's own GPUs: what it held when the change began
    # (``started``: the stack's record, after a run cut short; else what it holds now) or the
    # config's, whichever is more. A surge cut short holds more than its own: that is borrowed
    # already (``lent``), never counted as its own -- or another lane would borrow it again.
    at_start = Counter(dict(started)) if started is not None else before
    own = at_start | after
    # A replica available but not settled may hold a pod more than its own (a surge under way, a
    # pod still terminating), and so does one not available whose Deployment counts a pod more (a
    # rolling update keeps a still-loading old pod beside its new one): lent already too, until
    # its lane's first stage has waited it settled.
    unsettled = _by_product((m.product, m.gpus) for m in running if m.state == ReplicaState.AVAILABLE or m.surplus)
    sched.borrowed = [
        (gpus({p: n - own[p] for p, n in during.items()}), gpus({p: n - own[p] for p, n in held.items()}))
        for during, held in walked.stages
    ]

    return (
        EndpointRollout(
            endpoint=name,
            max_unavailable=policy.max_unavailable,
            max_surge=policy.max_surge,
            mode=mode,
            waves=tuple(waves),
            ready_before=sum(m.available for m in running),
            ready_after=len(targets),
            lowest_ready=lowest,
            gpus_before=sum(n for _, n in gpus_of.values()),
            gpus_after=sum(n for _, n in new_gpus.values()),
            peak_gpus=sum(peak.values()),
            peak_by_product=tuple(sorted(peak.items())) if len(peak) > 1 else (),
            extra_gpus=sum(max(0, n - own[p]) for p, n in peak.items()),
            updates=len(updates),
            replacements=len(pairs),
            moves=len(moved),
            deleted_idle=tuple(sched.delete_idle),
            idle_first=sched.idle_first,
            replaced_first=tuple(sched.delete_first),
            repaired_first=tuple(sched.repair),
            recreated=tuple(sched.recreate),
            settling_first=tuple(t.key for t in staying if by_key[t.key].state == ReplicaState.AVAILABLE and t.key in sched.free)
            if chunks
            else (),
            retired_first=tuple(sched.retire_first),
            deleted_last=tuple(sched.delete_last),
            canary=canary,
            baseline=baseline,
            canary_wave=canary_wave,
            canary_first=sched.canary_first,
            release=release,
            canary_policy=policy.canary if units or judged_alone else None,
            warm_first=policy.warm_first and mode == IN_PLACE,
            canary_unneeded=f"its release already serves on {already}" if already and policy.canary is not None else "",
            running=tuple(m.key for m in running),
            down=tuple(m.key for m in running if not m.available),
            started=gpus(at_start),
            lent=gpus({p: n + unsettled[p] - own[p] for p, n in before.items()}),
        ),
        sched,
    )


def _release(units: Sequence[tuple[str, str | None]], targets: Sequence[Target]) -> str:
    """The one release every unit moves to ("" none, unknown, or several)."""
    releases = {t.key: t.release for t in targets}
    wanted = {releases.get(up, "") for up, _ in units}
    return next(iter(wanted)) if len(wanted) == 1 else ""


def _already_available(release: str, moving: Collection[str], running: Sequence[LiveReplica]) -> str:
    """The replica that does not move and already serves ``release`` ("" none): a rerun after an
    accepted canary, or a return to the release the rest of the endpoint serves (a rollback),
    needs no canary -- the release is proven beside the others already."""
    if not release:
        return ""
    return next((m.key for m in running if m.available and m.key not in moving and m.release == release), "")


def _canary(
    units: Sequence[tuple[str, str | None]],
    mode: Mode,
    policy: RolloutPolicy,
    running: Sequence[LiveReplica],
    targets: Sequence[Target],
    release: str,
    moving: Collection[str],
    first_step: Sequence[str],
) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The canary's keys, its baseline's, and whether the canary is what starts before the units --
    the keys of ``first_step`` that will run ``release`` (applied with the
    config's manifests: a replica left down on another release and then the config changed moves
    to it too) -- or none when the policy asks for no canary, nothing available changes, or no
    replica would stay on the old release to compare with. The baseline: later units' old
    replicas; with a surge, the old replicas the canary replaces (they go once it is judged); and
    the endpoint's available replicas that do not move, on a release of their own."""
    if policy.canary is None or not units:
        return (), (), False
    runs = {t.key: t.release for t in targets}  # as each will run once applied
    in_flight = [k for k in first_step if release and runs.get(k) == release]
    size = 0 if in_flight else min(policy.canary.replicas, len(units))
    first, rest = units[:size], units[size:]
    baseline = [old if old is not None else up for up, old in rest]
    if mode == SURGE:
        baseline += [old for up, old in first if old is not None and old != up]
    if release:  # one release moves in: the replicas that do not move, on another, are the old release too
        baseline += [m.key for m in running if m.available and m.key not in moving and m.release and m.release != release]
    if not baseline:
        return (), (), False
    return tuple(in_flight or [up for up, _ in first]), tuple(sorted(set(baseline))), bool(in_flight)


def plan(
    running: Sequence[LiveReplica],
    targets: Sequence[Target],
    policy_for: Callable[[str], RolloutPolicy],
    *,
    max_extra_gpus: int | None = None,
    unproven: frozenset[str] = frozenset(),
    started: Mapping[str, Gpus] | None = None,
) -> Rollout:
    """The rollout from ``running`` (what runs) to ``targets`` (the config, in its order).
    ``started``: endpoint -> the GPUs it held when the change began, as the stack recorded them
    before a run that was cut short (:mod:`infercrane.core.plan.marks`); an endpoint without one
    held what it holds now.

    A kept key counts for the endpoint the config puts it in; a leaving key for the endpoint it
    served. Each endpoint is a lane of its own: its next stage begins when its own previous one is
    done, whatever the other endpoints do -- and, with ``max_extra_gpus``, when the stack's GPU
    ledger can lend what the stage borrows (:mod:`infercrane.core.plan.ledger`)."""
    target_keys = {t.key: t for t in targets}
    names = list(dict.fromkeys([t.endpoint for t in targets] + [m.endpoint for m in running if m.key not in target_keys]))
    rollouts: list[EndpointRollout] = []
    schedules: list[_Schedule] = []
    for name in names:
        ts = [t for t in targets if t.endpoint == name]
        ms = [m for m in running if (target_keys[m.key].endpoint if m.key in target_keys else m.endpoint) == name]
        if not ts and not ms:
            continue
        policy = policy_for(name) if ts else RolloutPolicy.model_validate({})
        r, s = _endpoint(name, ms, ts, policy, unproven, (started or {}).get(name))
        rollouts.append(r)
        schedules.append(s)

    lanes = tuple(_lane(r.endpoint, s) for r, s in zip(rollouts, schedules, strict=True))
    restarts = frozenset(t.key for t in targets if t.restarts)  # a target restarts only a live replica's pods
    return Rollout(endpoints=tuple(rollouts), lanes=lanes, max_extra_gpus=max_extra_gpus, restarts=restarts)


def _lane(endpoint: str, s: _Schedule) -> Lane:
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
