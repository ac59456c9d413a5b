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

One module, past 300 lines: one algorithm, read top to bottom. The types it plans with are in
:mod:`~infercrane.core.plan.waves`, the schedule it walks and carries out as lanes in
:mod:`~infercrane.core.plan.schedule`, the canary's keys in :mod:`~infercrane.core.plan.canary_keys`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan import canary_keys
from infercrane.core.plan.ledger import Gpus, gpus
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.schedule import Schedule, Walked, by_product, lane, walk
from infercrane.core.plan.states import ReplicaState
from infercrane.core.plan.waves import IN_PLACE, SURGE, EndpointRollout, Mode, Rollout, Wave


def _over_budget(
    peak: Counter[str], before: Counter[str], after: Counter[str], new_gpus: dict[str, tuple[str, int]], policy: RolloutPolicy
) -> bool:
    """Whether a product's peak exceeds both what the endpoint holds of it now and the config's
    replicas plus ``maxSurge`` replicas' worth: the most a surge may hold."""
    widest = {p: max(n for q, n in new_gpus.values() if q == p) for p in after}
    return any(n > max(before[p], after[p] + policy.max_surge * widest.get(p, 0)) for p, n in peak.items())


def _chunks(items: Sequence[tuple[str, str | None]], size: int) -> list[list[tuple[str, str | None]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


@dataclass(frozen=True)
class _Keys:
    """An endpoint's keys by what the change does to them."""

    running: list[LiveReplica]
    targets: list[Target]
    adds: list[Target]  # keys that do not run yet
    moved: list[Target]  # keys that run in another form
    staying: list[Target]  # keys that run and stay in their form
    updates: list[Target]  # available keys whose pods restart
    not_available: list[str]  # staying keys not available now
    pairs: list[tuple[Target, LiveReplica]]  # a new key taking an available leaving key's place
    surplus: list[str]  # available keys leaving without a successor
    idle: list[str]  # keys leaving while not available

    @classmethod
    def of(cls, running: list[LiveReplica], targets: list[Target]) -> _Keys:
        by_key = {m.key for m in running}
        target_keys = {t.key for t in targets}
        available = {m.key for m in running if m.available}  # an available pod is up, settled or not: never counted down
        staying = [t for t in targets if t.key in by_key and not t.moves]
        leaving = [m for m in running if m.key not in target_keys]
        adds = [t for t in targets if t.key not in by_key]
        available_leaving = [m for m in leaving if m.available]
        pairs = list(zip(adds, available_leaving, strict=False))
        return cls(
            running,
            targets,
            adds,
            moved=[t for t in targets if t.key in by_key and t.moves],
            staying=staying,
            updates=[t for t in staying if t.restarts and t.key in available],
            not_available=[t.key for t in staying if t.key not in available],
            pairs=pairs,
            surplus=[m.key for m in available_leaving[len(pairs) :]],
            idle=[m.key for m in leaving if not m.available],
        )

    @property
    def free(self) -> list[str]:
        """Keys that cost nothing: available and unchanged, or new and replacing nothing."""
        available = {m.key for m in self.running if m.available}
        return [t.key for t in self.staying if t.key in available and not t.restarts] + self.new_keys

    @property
    def new_keys(self) -> list[str]:
        """New keys created in the first step: they replace nothing."""
        return [t.key for t in self.adds[len(self.pairs) :]]

    @property
    def units(self) -> list[tuple[str, str | None]]:
        """The rollout's units: (the key that comes up, the key it stops -- None: itself, in place)."""
        units: list[tuple[str, str | None]] = [(t.key, None) for t in self.updates]
        return units + [(t.key, t.key) for t in self.moved] + [(a.key, r.key) for a, r in self.pairs]


def _waves(sched: Schedule, chunks: list[list[tuple[str, str | None]]], mode: Mode) -> list[Wave]:
    """Each chunk of units as a wave, and what the schedule ends each wave by deleting: with a
    surge, the old ones once their successors are ready; in place, the next wave's old ones once
    this wave is ready (the first wave's go before it)."""
    waves = []
    for i, chunk in enumerate(chunks):
        ups = [up for up, _ in chunk]
        replaced = [old for _, old in chunk if old is not None]
        if mode == SURGE:
            sched.waves.append((ups, replaced))
        else:
            following = [old for _, old in chunks[i + 1] if old is not None] if i + 1 < len(chunks) else []
            sched.waves.append((ups, following))
            if i == 0:
                sched.delete_first = replaced
        # Both modes stop the same replicas and start the same ones; in place stops first, surge starts first.
        waves.append(Wave(down=tuple([up for up, old in chunk if old is None] + replaced), up=tuple(ups)))
    return waves


def _endpoint(
    name: str,
    running: list[LiveReplica],
    targets: list[Target],
    policy: RolloutPolicy,
    unproven: frozenset[str] = frozenset(),
    started: Gpus | None = None,
) -> tuple[EndpointRollout, Schedule]:
    k = _Keys.of(running, targets)
    sched = Schedule(free=k.free, delete_idle=k.idle)
    mode: Mode = SURGE if policy.max_surge >= 1 else IN_PLACE
    per_wave = policy.max_surge if mode == SURGE else policy.max_unavailable
    # A replica that is down and restarts has nothing serving to keep. Under a surge its Deployment's
    # rolling update would keep its old pod -- and its GPU -- until the new one is available (the
    # controller scales an old pod down only while the new ones leave room), a GPU more that the pool
    # may not have: it is *recreated* instead (its workload object deleted, then created again), so
    # its old pod goes before its new one starts, as in place (Recreate) -- no GPU more, and the
    # release it ran never serves again. Both cost nothing and come in the first step.
    sched.recreate = [t.key for t in k.staying if t.restarts and t.key in k.not_available] if mode == SURGE else []
    units = k.units
    j = canary_keys.judging(running, targets, units, [*k.not_available, *k.new_keys], mode, policy, unproven)
    canary_wave = 0 if j.canary and not j.in_flight else None
    sched.canary_wave, sched.canary_first = canary_wave, j.in_flight
    n = len(j.canary)
    chunks = _chunks(units[:n], n) + _chunks(units[n:], per_wave) if canary_wave == 0 else _chunks(units, per_wave)
    if chunks:
        sched.repair = k.not_available  # the waves take available replicas down: only once these are available again
    else:
        sched.free += k.not_available  # nothing available goes down: nothing to wait for
    # Replicas leaving while down still hold GPUs: when new replicas start in the first stage, they go first.
    running_keys = {m.key for m in running}
    sched.idle_first = bool(sched.delete_idle) and any(key not in running_keys for key in sched.free)
    waves = _waves(sched, chunks, mode)
    g = _gpus(k, sched, chunks, mode, policy, started)
    return _rollout_of(name, k, sched, chunks, mode, policy, waves, j, g), sched


@dataclass(frozen=True)
class _Gpus:
    """An endpoint's GPUs per product: held now, by the config, at the change's start, its own, lent
    already, and the walk's lowest availability and peaks."""

    now: dict[str, tuple[str, int]]  # key -> (product, GPUs), what runs
    new: dict[str, tuple[str, int]]  # key -> (product, GPUs), the config's
    before: Counter[str]
    at_start: Counter[str]
    own: Counter[str]
    unsettled: Counter[str]
    walked: Walked


def _gpus(
    k: _Keys, sched: Schedule, chunks: list[list[tuple[str, str | None]]], mode: Mode, policy: RolloutPolicy, started: Gpus | None
) -> _Gpus:
    """The endpoint's GPUs walked stage by stage, what each stage borrows set on ``sched``."""
    running, targets = k.running, k.targets
    # GPUs are counted per product: an endpoint moving from one product to another holds both on
    # the way, and a product's capacity is what it can spare -- never a sum across products.
    gpus_of = {m.key: (m.product, m.gpus) for m in running}
    new_gpus = {t.key: (t.product, t.gpus) for t in targets}
    before, after = by_product(gpus_of.values()), by_product(new_gpus.values())
    # Available replicas that leave without a successor go last, so the endpoint never shrinks first
    # -- unless that would hold more GPUs than the endpoint may: more than it holds now and more
    # than the config's replicas plus maxSurge replicas' worth (a surge cut before its old replica
    # was deleted leaves one surplus; starting the next surge beside it would need a GPU the pool
    # may not have, on every rerun). Then the surplus goes first: its successor already serves.
    sched.delete_last = k.surplus
    walked = walk(sched, chunks, mode, running, new_gpus)
    if k.surplus and mode == SURGE and _over_budget(walked.peak, before, after, new_gpus, policy):
        sched.retire_first, sched.delete_last = k.surplus, []
        walked = walk(sched, chunks, mode, running, new_gpus)
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
    unsettled = by_product((m.product, m.gpus) for m in running if m.state == ReplicaState.AVAILABLE or m.surplus)
    sched.borrowed = [
        (gpus({p: n - own[p] for p, n in during.items()}), gpus({p: n - own[p] for p, n in held.items()}))
        for during, held in walked.stages
    ]
    return _Gpus(gpus_of, new_gpus, before, at_start, own, unsettled, walked)


def _rollout_of(
    name: str,
    k: _Keys,
    sched: Schedule,
    chunks: list[list[tuple[str, str | None]]],
    mode: Mode,
    policy: RolloutPolicy,
    waves: list[Wave],
    j: canary_keys.Judging,
    g: _Gpus,
) -> EndpointRollout:
    """The endpoint's rollout in full, from its schedule, canary and GPUs."""
    running, peak, own = k.running, g.walked.peak, g.own
    state = {m.key: m.state for m in running}
    return EndpointRollout(
        endpoint=name,
        max_unavailable=policy.max_unavailable,
        max_surge=policy.max_surge,
        mode=mode,
        waves=tuple(waves),
        ready_before=sum(m.available for m in running),
        ready_after=len(k.targets),
        lowest_ready=g.walked.lowest,
        gpus_before=sum(n for _, n in g.now.values()),
        gpus_after=sum(n for _, n in g.new.values()),
        peak_gpus=sum(peak.values()),
        peak_by_product=tuple(sorted(peak.items())) if len(peak) > 1 else (),
        extra_gpus=sum(max(0, n - own[p]) for p, n in peak.items()),
        updates=len(k.updates),
        replacements=len(k.pairs),
        moves=len(k.moved),
        deleted_idle=tuple(sched.delete_idle),
        idle_first=sched.idle_first,
        replaced_first=tuple(sched.delete_first),
        repaired_first=tuple(sched.repair),
        recreated=tuple(sched.recreate),
        settling_first=tuple(t.key for t in k.staying if state[t.key] == ReplicaState.AVAILABLE and t.key in sched.free)
        if chunks
        else (),
        retired_first=tuple(sched.retire_first),
        deleted_last=tuple(sched.delete_last),
        canary=j.canary,
        baseline=j.baseline,
        canary_wave=sched.canary_wave,
        canary_first=sched.canary_first,
        release=j.release,
        canary_policy=policy.canary if k.units or j.alone else None,
        warm_first=policy.warm_first and mode == IN_PLACE,
        canary_unneeded=f"its release already serves on {j.already}" if j.already and policy.canary is not None else "",
        running=tuple(m.key for m in running),
        down=tuple(m.key for m in running if not m.available),
        started=gpus(g.at_start),
        lent=gpus({p: n + g.unsettled[p] - own[p] for p, n in g.before.items()}),
    )


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
    schedules: list[Schedule] = []
    for name in names:
        ts = [t for t in targets if t.endpoint == name]
        ms = [m for m in running if (target_keys[m.key].endpoint if m.key in target_keys else m.endpoint) == name]
        if not ts and not ms:
            continue
        policy = policy_for(name) if ts else RolloutPolicy.model_validate({})
        r, s = _endpoint(name, ms, ts, policy, unproven, (started or {}).get(name))
        rollouts.append(r)
        schedules.append(s)

    lanes = tuple(lane(r.endpoint, s) for r, s in zip(rollouts, schedules, strict=True))
    restarts = frozenset(t.key for t in targets if t.restarts)  # a target restarts only a live replica's pods
    return Rollout(endpoints=tuple(rollouts), lanes=lanes, max_extra_gpus=max_extra_gpus, restarts=restarts)
