"""An exhaustive check of the real rollout planner: every reachable state of a small world, under
every interleaving of what can happen, against the rollout's promises.

The world is one or two endpoints sharing one GPU pool of one product, one GPU per pod; each
replica is a Deployment (Recreate in place, RollingUpdate maxSurge 1 with a surge policy) whose
pods are Pending (no GPU), starting, available or terminating (still holding its GPU). What the
model does *not* copy is the planner: every rerun builds :class:`LiveReplica` s from Deployment
objects through the live layer's own rule (``verdicts.replica_state``) and calls
:func:`infercrane.core.plan.rollout.plan`; a lane waits by ``verdicts.deployment_verdict``; a
stage's deletion keeps the object until its pods are gone exactly when ``STAGE_DELETION`` says
Foreground. What it models by hand: the Deployment controller, the scheduler (any Pending pod
may take any free GPU: every order is explored, which is the scheduler's choice, not ours) and
the lanes' sequencing (apply a stage's keys, wait until they are settled, delete, wait until gone,
next stage), with a stage's applies taken as one step.

Events: a pod is scheduled, becomes available, finishes draining (in any order: a slow drain is
one that comes late); a lane's wait succeeds or runs out of budget (a wave that fails); a
deletion is refused or does not finish in time; the process is killed at any step boundary; a
rerun (the same command) when no run is under way; an autoscaler adds a pod and later removes
it; an available pod restarts out of band; under a canary policy, the canary's verdict (accepted:
its lane goes on; rejected: its lane stops before the stage's deletions and, once every lane has
ended, the same command rolls the canary back: the real rollback planner's lane,
``core.plan.rollback``, each restored key back to its revision at the run's start; a same-key
surge canary is *held* -- its Deployment keeps the old pod beside the ready canary
(``live.status.hold``) until an ACCEPT releases it, or the rollback's wait does once the old
template is back; a hold a killed run left may expire between runs), and after a
rejection the previous config deployed (a rollback: the config becomes every key's revision 0, reached by
reruns of it). A release is what a revision's pods run; a command refuses a run whose required
canary has no baseline, as the CLI does. Killed runs, refused deletions, autoscaler scale-ups
and out-of-band restarts are *adversities*, bounded per path.

Invariants at every state, counted from the change's start (every replica settled on its old
template):

- **floor**: per endpoint, replicas with an available pod >= min(before, after) - maxUnavailable,
  less the replicas an out-of-band restart holds down now (a restart is over once its replica
  serves again, or, deleted meanwhile, once a replica that was not down serves in its place);
- **budget**: per endpoint, GPUs held by its pods, terminating ones included, <= max(before,
  after) + maxSurge; once an autoscaler scaled one of its replicas to two pods, that pod and a
  second surge pod more (a Deployment's own rolling update does not count its terminating pods);
- **promise**: during a run without adversity, available replicas >= the ``lowest ready`` its plan
  printed; a run that began with every replica settled and rolls to its end without adversity
  reached exactly that minimum (from a state with pods in flight, a pod that becomes available on
  its own may keep the run above it);
- **idle**: no plan deletes an available replica among the ones "not available";
- **release** (a) no replica beyond a canary is available on a release no canary accepted; (b) a
  REJECT ends rolled back or remembered; (c) a rollback never deletes a replica that served
  before the deploy; (g) a held canary's REJECT restarts nothing: its rollback, when nothing
  adverse happened, starts no pod of a key that was settled on the release it goes back to;
- **convergence**: from every reachable state, reruns alone (no adversity; waits may still run
  out) reach the config -- every replica of the target settled on its template, nothing else
  left -- whenever the pool holds every endpoint's budget at once; after a rollback, its config.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from infercrane.core.plan import ledger, replicas, rollout, waves
from infercrane.core.plan.rollback import Rollback, plan_rollback
from infercrane.live.status import verdicts

PENDING, STARTING, AVAILABLE, TERMINATING = "pending", "starting", "available", "terminating"
#: The lanes apply a key only once none of its pods is terminating (shell.lanes); False: the rule reverted.
DRAINED_FIRST = True
#: A rerun plans a release whose judging mark a run left as unproven (engine.rejections.judged); False: reverted.
JUDGING_MARKS = True
#: A canary's REJECT survives another lane's engine failure (shell.lanes.roll); False: reverted (the engine's error alone).
VERDICTS_SURVIVE_ENGINE_FAILURE = True
#: A rerun counts each endpoint's own GPUs from the stack's record of the change's start, and what
#: a run cut short left beyond it as lent already (core.plan.marks' gpus mark, waves.Rollout.lent);
#: False: reverted (from what runs -- a surge's leftover pod counted as the endpoint's own).
GPU_RECORD = True
#: A stage stops when a key its plan counted as down serves again (shell.stages.serving_again); False: reverted.
SERVING_AGAIN_STOPS = True
#: A same-key surge canary's old pod is held beside it until the verdict (live.status.hold); False: reverted.
HOLDS = True
#: A REJECT's hold is released only by the rollback's wait, once the old template is back; False: at the REJECT.
RELEASE_AFTER_REVERT = True
#: A stage's recreated keys (waves.Stage.recreate) are deleted and gone before they are applied;
#: A replica whose Deployment counts a pod more than it asks for (a rolling update's still-loading
#: old pod beside its new one) holds GPUs lent already at a rerun's start (LiveReplica.surplus);
#: False: reverted (only available replicas counted so).
SURPLUS_COUNTED = True
#: False: reverted (updated: the rolling update keeps a down replica's old pod, and its GPU).
RECREATES = True


class Pod(NamedTuple):
    key: str
    rev: int
    phase: str


class Obj(NamedTuple):
    key: str
    rev: int
    replicas: int
    deleting: bool
    held: bool = False  # a canary's hold: its Deployment's minReadySeconds keeps its old pods (live.status.hold)


class LaneAt(NamedTuple):
    stage: int
    phase: str  # "wait" | "gone" | "done" | "stopped"


class Run(NamedTuple):
    lanes: tuple[LaneAt, ...]
    plan: tuple[tuple[waves.Stage, ...], ...]  # per lane: its stages (apply, delete, borrow, keep)
    endpoints: tuple[str, ...]  # each lane's endpoint
    promised: tuple[tuple[str, int], ...]  # endpoint -> lowest ready its plan printed
    low: tuple[tuple[str, int], ...]  # endpoint -> lowest available so far in this run
    adverse: bool  # an adversity happened during this run
    steady: bool  # it began with every replica settled and no pod in flight: its path is the plan's own
    ledger: ledger.Ledger  # what the lanes borrowed (core.plan.ledger), against the world's maxExtraGpus
    ceiling: int  # with maxExtraGpus: the endpoints' own GPUs (the plan's) plus it -- the most the run may hold
    borrowing: tuple[tuple[str, int], ...] = ()  # endpoint -> its GPUs at the change's start: the gpus marks its start writes
    target: tuple[tuple[str, int], ...] = ()  # the config this run rolls to: key -> revision
    # Per lane with a canary, its rollback should the canary be rejected (core.plan.rollback,
    # planned from the objects at the run's start: what the state recorded before it): its stages
    # and the revisions its restored keys go back to.
    backs: tuple[tuple[tuple[waves.Stage, ...], tuple[tuple[str, int], ...]] | None, ...] = ()
    rejected: tuple[int, ...] = ()  # lanes whose canary was rejected: rolled back once every lane has ended
    rollback: bool = False  # this run is the rollback the rejecting command runs
    restarts: frozenset[str] | None = None  # the plan's keys whose template changes: only they wait for a drain (None: all)
    releases: tuple[str, ...] = ()  # per lane: the release its endpoint moves to ("" none)
    judging: frozenset[str] = frozenset()  # endpoints whose canary this run marked as being judged
    accepted: frozenset[str] = frozenset()  # endpoints whose canary this run accepted
    served: frozenset[str] = frozenset()  # keys with an available pod when the run began (a rollback never deletes one)
    halted: bool = False  # the engine failed an apply: no lane applies or deletes anything more
    canary_keys: frozenset[str] = frozenset()  # the keys its plan made canaries
    holds: frozenset[str] = frozenset()  # keys its canary stages wait for as held (shell.awaiting.Waits.holdable)
    places: frozenset[str] = frozenset()  # keys it holds before their canary template (waves.EndpointRollout.held)
    noload: frozenset[str] = frozenset()  # a rollback's held canaries: restored without starting a pod
    settled_at_start: tuple[tuple[str, int], ...] = ()  # key -> revision, of the keys settled when it began
    down: frozenset[str] = frozenset()  # keys its plan counted as not available (waves.EndpointRollout.down)


class State(NamedTuple):
    objs: tuple[Obj, ...]
    pods: tuple[Pod, ...]
    run: Run | None
    adversities: int
    restarts: tuple[str, ...]  # the keys an out-of-band restart took down that have not served since
    scaled: tuple[str, ...]  # endpoints an autoscaler scaled up
    rejected: bool = False  # a canary was rejected: the previous config may be deployed (a rollback)
    back: bool = False  # the previous config was deployed: the config is now every key's revision 0
    third: bool = False  # the config moved on to a third release mid-rollout (World.third_release)
    refused: frozenset[str] = frozenset()  # the releases a canary rejected (their tags): a rerun of one is its retry
    # The release marks (core.plan.marks): (endpoint, release) a run began to judge and never ended.
    judging: frozenset[tuple[str, str]] = frozenset()
    accepted: frozenset[tuple[str, str]] = frozenset()  # (endpoint, release) some canary verdict accepted
    canaries: frozenset[str] = frozenset()  # keys some run planned as a canary
    # A restarted key deleted while down, and the key that serves in its place (the floor allows it
    # again while that one does not serve: a rollback that removes the stand-in is back where it began).
    stood_in: tuple[tuple[str, str], ...] = ()
    # What the Pulumi state records, key -> revision: written when a run ends (a killed one writes
    # nothing: its checkpoints are skipped), lost with the state. None: as at the change's start.
    recorded: tuple[tuple[str, int], ...] | None = None
    # The stack's gpus marks (core.plan.marks): endpoint -> its GPUs when the change began, written
    # before a run whose lanes borrow, removed when a run ends with that endpoint's lane done.
    started: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Endpoint:
    name: str
    before: tuple[str, ...]  # keys settled on revision 0 at the change's start
    after: tuple[tuple[str, int], ...]  # the config: key, revision
    policy: RolloutPolicy

    @property
    def budget(self) -> int:
        return max(len(self.before), len(self.after)) + self.policy.max_surge

    @property
    def floor(self) -> int:
        return min(len(self.before), len(self.after)) - self.policy.max_unavailable

    @property
    def surge(self) -> bool:
        return self.policy.max_surge >= 1


@dataclass(frozen=True)
class World:
    endpoints: tuple[Endpoint, ...]
    pool: int
    max_adversities: int = 2
    autoscaler: bool = True
    max_extra: int | None = None  # rollout.maxExtraGpus: the surges of all endpoints borrow from one ledger
    lost_state: bool = False  # the Pulumi state may be lost (or never had the replicas: takeover) between runs
    engine_failures: bool = False  # the engine may fail an apply while other lanes go on (their verdicts kept)
    third_release: bool = False  # mid-rollout, the config may move on to a third release (every key of the change at revision 2)

    def endpoint_of(self, key: str) -> Endpoint:
        return self._endpoints[key]

    @functools.cached_property
    def _endpoints(self) -> dict[str, Endpoint]:
        return {k: e for e in self.endpoints for k in (*e.before, *dict(e.after))}

    @property
    def fits(self) -> bool:
        """The pool holds every endpoint's own GPUs and what their surges may borrow at once (all
        of them, or ``max_extra``)."""
        surges = sum(e.policy.max_surge for e in self.endpoints)
        extra = surges if self.max_extra is None else min(surges, self.max_extra)
        return self.pool >= sum(e.budget - e.policy.max_surge for e in self.endpoints) + extra

    @property
    def target(self) -> dict[str, int]:
        return {k: rev for e in self.endpoints for k, rev in e.after}

    def config(self, back: bool, third: bool = False) -> dict[str, int]:
        """The config a run rolls to: the change's, after a rollback the one before it, or a third
        release the config moved on to mid-rollout (the change's keys, each at revision 2)."""
        if back:
            return {k: 0 for e in self.endpoints for k in e.before}
        return {k: 2 for k in self.target} if third else self.target

    @property
    def canary(self) -> bool:
        return any(e.policy.canary is not None for e in self.endpoints)


def change(name: str, kind: str, n: int, policy: RolloutPolicy) -> Endpoint:
    """One endpoint's change of ``kind`` over ``n`` replicas: ``update`` (every pod template
    changes), ``cutover`` (n new keys replace n old ones), ``shrink`` (n -> n-1, the rest updated),
    ``grow`` (n -> n+1, the rest updated)."""
    old = tuple(f"{name}o{i}" for i in range(n))
    if kind == "update":
        return Endpoint(name, old, tuple((k, 1) for k in old), policy)
    if kind == "cutover":
        return Endpoint(name, old, tuple((f"{name}n{i}", 1) for i in range(n)), policy)
    if kind == "shrink":
        return Endpoint(name, old, tuple((k, 1) for k in old[:-1]), policy)
    if kind == "grow":
        return Endpoint(name, old, tuple((k, 1) for k in old) + ((f"{name}n0", 1),), policy)
    raise ValueError(kind)


# ---------------------------------------------------------------------------------------------
# The cluster: objects as the live layer reads them, and the controllers.


def deployment(o: Obj, pods: tuple[Pod, ...]) -> dict[str, Any]:
    """The Deployment object a LIST would return for ``o`` and its pods."""
    mine = [p for p in pods if p.key == o.key]
    live = [p for p in mine if p.phase != TERMINATING]
    # Held, the current template's pods are ready but not available (minReadySeconds); the old ones are.
    counted = [p for p in live if p.phase == AVAILABLE and not (o.held and p.rev == o.rev)]
    meta: dict[str, Any] = {"name": o.key, "generation": 1}
    if o.deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"replicas": o.replicas},
        "status": {
            "observedGeneration": 1,
            "replicas": len(live),
            "updatedReplicas": sum(p.rev == o.rev for p in live),
            "availableReplicas": len(counted),
            "readyReplicas": sum(p.phase == AVAILABLE for p in live),
            "terminatingReplicas": len(mine) - len(live),
        },
    }


def settled(o: Obj, pods: tuple[Pod, ...], *, held: bool = False) -> bool:
    """Ready by the lanes' rule; ``held``: by a held canary's (its old pods beside it)."""
    return not o.deleting and verdicts.deployment_verdict(deployment(o, pods), 0, held=held).state == "ready"


def _stop(pods: list[Pod], pod: Pod) -> None:
    pods.remove(pod)
    if pod.phase != PENDING:  # a pod never scheduled has nothing to drain: gone at once
        pods.append(pod._replace(phase=TERMINATING))


def controllers(world: World, objs: tuple[Obj, ...], pods: tuple[Pod, ...]) -> tuple[tuple[Obj, ...], tuple[Pod, ...]]:
    """The Deployment controller and the garbage collector, run to rest (deterministic)."""
    out = list(pods)
    kept = []
    for o in objs:
        mine = [p for p in out if p.key == o.key and p.phase != TERMINATING]
        if o.deleting:
            for p in mine:
                _stop(out, p)
            if waves.STAGE_DELETION == "Foreground" and any(p.key == o.key for p in out):
                kept.append(o)  # stays until its pods are gone
            continue
        kept.append(o)
        cur = [p for p in mine if p.rev == o.rev]
        old = [p for p in mine if p.rev != o.rev]
        if not world.endpoint_of(o.key).surge:  # Recreate: every old pod gone before a new one
            for p in old:
                _stop(out, p)
            if any(p.key == o.key and p.rev != o.rev for p in out):
                continue
        else:  # RollingUpdate maxSurge 1, maxUnavailable 0 (held: the new pods never count as available)
            available = sum(p.phase == AVAILABLE for p in (old if o.held else mine))
            # The controller's reconcileOldReplicaSets: old pods go only while the new ones that are not
            # available leave room (maxScaledDown = all - minAvailable - the new ones not available),
            # unavailable ones first -- an old pod still loading stays while its successor loads too.
            room = len(cur) + len(old) - o.replicas - (len(cur) - (0 if o.held else sum(p.phase == AVAILABLE for p in cur)))
            for p in sorted(old, key=lambda p: p.phase == AVAILABLE):
                if room > 0 and (p.phase != AVAILABLE or available - 1 >= o.replicas):
                    _stop(out, p)
                    old.remove(p)
                    available -= p.phase == AVAILABLE
                    room -= 1
            while old and len(cur) + len(old) < o.replicas + 1 and len(cur) < o.replicas:
                cur.append(Pod(o.key, o.rev, PENDING))
                out.append(cur[-1])
            if old:
                continue
        while len(cur) < o.replicas:
            cur.append(Pod(o.key, o.rev, PENDING))
            out.append(cur[-1])
        for p in sorted(cur, key=lambda p: [PENDING, STARTING, AVAILABLE].index(p.phase))[: len(cur) - o.replicas]:
            _stop(out, p)
    return tuple(sorted(kept)), tuple(sorted(out))


# ---------------------------------------------------------------------------------------------
# The command: a rerun plans from the live objects with the real planner; lanes carry it out.


@dataclass
class Planner:
    world: World
    plans: dict[Any, tuple[rollout.Rollout, list[str]]] = field(default_factory=dict)
    rested: dict[Any, tuple[tuple[Obj, ...], tuple[Pod, ...]]] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)

    def plan(
        self,
        objs: tuple[Obj, ...],
        pods: tuple[Pod, ...],
        back: bool = False,
        unproven: frozenset[str] = frozenset(),
        started: tuple[tuple[str, int], ...] = (),
        third: bool = False,
    ) -> rollout.Rollout:
        # A release is what a revision's pods run: the same for every key at that revision.
        members = [
            replicas.LiveReplica(
                o.key,
                self.world.endpoint_of(o.key).name,
                verdicts.replica_state("Deployment", deployment(o, pods)),
                1,
                release=f"rev{o.rev}",
                surplus=SURPLUS_COUNTED and verdicts.holds_more("Deployment", deployment(o, pods)),
            )
            for o in objs
        ]
        live = {o.key: o for o in objs}
        config = self.world.config(back, third)
        targets = [
            replicas.Target(k, e.name, 1, restarts=k in live and live[k].rev != config[k], release=f"rev{config[k]}")
            for e in self.world.endpoints
            for k in ([*e.before] if back else [k for k, _ in e.after])
        ]
        cache_key = (tuple(members), tuple(targets), unproven, started)
        if cache_key not in self.plans:
            policies = {e.name: e.policy for e in self.world.endpoints}
            r = rollout.plan(
                members,
                targets,
                lambda name: policies[name],
                max_extra_gpus=self.world.max_extra,
                unproven=unproven,
                started={e: ledger.gpus({"": n}) for e, n in started},
            )
            why = [
                f"plan deletes available replica {k} as not available"
                for e in r.endpoints
                for k in e.deleted_idle
                if any(m.key == k and m.available for m in members)
            ]
            self.plans[cache_key] = (r, why)
        r, why = self.plans[cache_key]
        self.findings += why
        return r

    def controllers(self, objs: tuple[Obj, ...], pods: tuple[Pod, ...]) -> tuple[tuple[Obj, ...], tuple[Pod, ...]]:
        """:func:`controllers`, remembered (the same cluster comes to rest the same way)."""
        out = self.rested.get((objs, pods))
        if out is None:
            out = self.rested[(objs, pods)] = controllers(self.world, objs, pods)
        return out


def available(world: World, pods: tuple[Pod, ...], objs: tuple[Obj, ...], endpoint: Endpoint) -> int:
    keys = {o.key for o in objs if world.endpoint_of(o.key) is endpoint}
    return len({p.key for p in pods if p.phase == AVAILABLE and p.key in keys})


def held(world: World, pods: tuple[Pod, ...], endpoint: Endpoint) -> int:
    return sum(p.phase != PENDING for p in pods if world.endpoint_of(p.key) is endpoint)


def at_target(world: World, s: State) -> bool:
    target = world.config(s.back, s.third)
    return (
        s.run is None
        and {o.key: o.rev for o in s.objs} == target
        and all(settled(o, s.pods) for o in s.objs)
        and all(p.phase != TERMINATING for p in s.pods)
    )


def _apply(world: World, run: Run, objs: tuple[Obj, ...], keys: frozenset[str]) -> tuple[Obj, ...]:
    target = dict(run.target)
    live = {o.key: o for o in objs}
    for k in keys:
        o = live.get(k)
        live[k] = Obj(k, target[k], 1, False) if o is None else o._replace(rev=target[k])
    return tuple(sorted(live.values()))


def _delete(objs: tuple[Obj, ...], keys: frozenset[str]) -> tuple[Obj, ...]:
    return tuple(sorted(o._replace(deleting=True) if o.key in keys else o for o in objs))


def _low(world: World, run: Run, objs: tuple[Obj, ...], pods: tuple[Pod, ...]) -> Run:
    lows = dict(run.low)
    for e in world.endpoints:
        lows[e.name] = min(lows[e.name], available(world, pods, objs, e))
    return run._replace(low=tuple(sorted(lows.items())))


class Step(NamedTuple):
    event: str
    state: State
    good: bool  # reruns alone: no adversity


def successors(world: World, planner: Planner, s: State) -> Iterator[Step]:
    """Every state one event leads to, with the controllers run to rest after it."""
    adverse_left = s.adversities < world.max_adversities

    def settle(objs: tuple[Obj, ...], pods: tuple[Pod, ...], run: Run | None, **kw: Any) -> State:
        objs, pods = planner.controllers(objs, pods)
        for _ in range(8):  # lanes move on at once where they can: enter stages, apply
            if run is None:
                break
            run, objs, changed = _advance(world, run, objs, pods)
            objs, pods = planner.controllers(objs, pods)
            if not changed:
                break
        if run is not None:
            run = _low(world, run, objs, pods)
            ended = all(lane.phase in ("done", "stopped") for lane in run.lanes)
            if ended:  # a run that ends (not killed) writes the state: what it registered, as it runs now
                kw["recorded"] = tuple(sorted((o.key, o.rev) for o in objs if not o.deleting))
            if ended and not run.rollback:
                kw["judging"] = _judged(run, kw.get("judging", s.judging))
                kw["started"] = _borrowed(run, kw.get("started", s.started))
            dropped = run.halted and not VERDICTS_SURVIVE_ENGINE_FAILURE  # the engine's error alone: the verdicts lost
            if ended and run.rejected and not run.rollback and dropped:
                planner.findings.append(
                    f"a REJECT of {', '.join(run.endpoints[i] for i in run.rejected)} ended with neither its canary "
                    "rolled back nor its rejection remembered (another lane's engine failure)"
                )
            elif ended and run.rejected and not run.rollback:
                # The command that rejected a canary remembers it (its tag), then rolls it back once
                # every lane has ended -- a rollback that never deletes a replica that served before.
                back = _rollback(world, run)
                for stage in back.plan if back is not None else ():
                    if stage_deletes := [k for st in stage for k in st.delete if k in run.served]:
                        planner.findings.append(f"the rollback deletes {sorted(stage_deletes)}, which served before the deploy")
                refused = s.refused | {run.releases[i] for i in run.rejected}
                return settle(objs, pods, back, **kw, rejected=True, refused=refused)
            if ended:
                if all(lane.phase == "done" for lane in run.lanes) and run.steady and not run.adverse:
                    for e, promised in run.promised:
                        if dict(run.low)[e] != promised:
                            planner.findings.append(
                                f"plan printed lowest ready {promised} for {e}; its run went to {dict(run.low)[e]}"
                            )
                run = None
        return s._replace(objs=objs, pods=pods, run=run, **kw)

    def adverse(st: State) -> State:
        run = st.run._replace(adverse=True) if st.run is not None else None
        return st._replace(adversities=st.adversities + 1, run=run)

    def begin(back: bool) -> Run | None:
        """A run of the same command towards ``back``'s config: planned now, by the real planner;
        None when the command refuses it -- a required canary with no baseline, as
        ``live.running.plan_rollout`` refuses it before anything is applied."""
        # A release whose judging a run left unfinished proves nothing by running (its judging
        # mark); after a rejection, the same config again is its retry (--retry-rejected).
        unproven = frozenset(r for _, r in s.judging) if JUDGING_MARKS else frozenset()
        third = s.third and not back
        unproven |= frozenset(s.refused) if not back else frozenset()
        r = planner.plan(s.objs, s.pods, back, unproven, s.started if GPU_RECORD else (), third)
        if any(e.no_canary and e.canary_policy is not None and e.canary_policy.required for e in r.endpoints):
            return None
        ends = [lane.endpoint for lane in r.lanes]
        # What the lanes act on: a stage's applies and deletions, whether it bakes a canary, what it
        # recreates, and with a ledger what it borrows and keeps.
        plan = tuple(
            tuple(
                waves.Stage(st.apply, st.delete, st.borrow, st.keep, bake=st.bake, recreate=st.recreate)
                if world.max_extra is not None
                else waves.Stage(st.apply, st.delete, bake=st.bake, recreate=st.recreate)
                for st in lane.stages
            )
            for lane in r.lanes
        )
        lanes = tuple(LaneAt(0, "enter") for _ in r.lanes)
        promised = tuple(sorted((e.endpoint, e.lowest_ready) for e in r.endpoints))
        lows = tuple(sorted((e.name, available(world, s.pods, s.objs, e)) for e in world.endpoints))
        steady = all(settled(o, s.pods) for o in s.objs) and all(p.phase == AVAILABLE for p in s.pods)
        ceiling = (
            sum(max(e.gpus_before, e.gpus_after) for e in r.endpoints) + world.max_extra if world.max_extra is not None else 0
        )
        for e, p in promised:
            if dict(lows)[e] < p:
                planner.findings.append(f"plan printed lowest ready {p} for {e} with only {dict(lows)[e]} available")
        target = tuple(sorted(world.config(back, third).items()))
        revs = dict(s.recorded or ())  # what the state recorded before the run: the rollback's "before"
        backs = tuple(
            _back(world, plan_rollback(e, lane, {k: f"rev{rev}" for k, rev in revs.items()}), revs) if e.canary else None
            for e, lane in zip(r.endpoints, r.lanes, strict=True)
        )
        return Run(
            lanes,
            plan,
            tuple(ends),
            promised,
            lows,
            False,
            steady,
            ledger.Ledger(world.max_extra, r.lent),
            ceiling,
            tuple(sorted((e, sum(n for _, n in held)) for e, held in r.started().items())) if GPU_RECORD else (),
            target,
            backs,
            restarts=r.restarts,
            releases=tuple(e.release for e in r.endpoints),
            judging=frozenset(e.endpoint for e in r.endpoints if e.canary and e.release and e.canary_policy is not None),
            served=frozenset(p.key for p in s.pods if p.phase == AVAILABLE),
            canary_keys=frozenset(k for e in r.endpoints for k in e.canary),
            holds=frozenset(k for e in r.endpoints if e.mode == waves.SURGE and e.canary_policy is not None for k in e.canary),
            places=frozenset(k for e in r.endpoints for k in e.held),
            settled_at_start=tuple(sorted((o.key, o.rev) for o in s.objs if settled(o, s.pods))),
            down=frozenset(k for e in r.endpoints for k in e.down) if SERVING_AGAIN_STOPS else frozenset(),
        )

    def begun(run: Run) -> dict[str, Any]:
        """What a run's start writes: its judging marks (before anything is applied), its canaries."""
        marks = {(e, rel) for e, rel in zip(run.endpoints, run.releases, strict=True) if e in run.judging}
        return {
            "judging": frozenset({(e, rel) for e, rel in s.judging if e not in run.judging} | marks),
            "canaries": s.canaries | run.canary_keys,
            "started": tuple(sorted({**dict(run.borrowing), **dict(s.started)}.items())),
        }

    # The cluster moves.
    free = world.pool - sum(p.phase != PENDING for p in s.pods)
    for pod in sorted(set(s.pods)):
        rest = list(s.pods)
        rest.remove(pod)
        if pod.phase == PENDING and free > 0:
            yield Step(f"schedule {pod.key}", settle(s.objs, tuple(sorted([*rest, pod._replace(phase=STARTING)])), s.run), True)
        elif pod.phase == STARTING:
            # A restart is over once its key serves again -- or, its key deleted meanwhile, once a
            # pod of its endpoint that was not itself down by a restart serves in its place.
            live = {o.key for o in s.objs}
            stand_in = pod.key not in s.restarts and not any(p.key == pod.key and p.phase == AVAILABLE for p in rest)
            gone = [k for k in s.restarts if k not in live and world.endpoint_of(k) is world.endpoint_of(pod.key)]
            replaced = gone[:1] if stand_in else []  # one pod stands in for one replica
            healed = tuple(k for k in s.restarts if k != pod.key and k not in replaced)
            stood = tuple(sorted({*s.stood_in, *((k, pod.key) for k in replaced)}))
            nxt = settle(s.objs, tuple(sorted([*rest, pod._replace(phase=AVAILABLE)])), s.run, restarts=healed, stood_in=stood)
            yield Step(f"{pod.key} available", nxt, True)
        elif pod.phase == TERMINATING:
            yield Step(f"{pod.key} drained", settle(s.objs, tuple(rest), s.run), True)
        elif pod.phase == AVAILABLE and adverse_left:
            restarts = tuple(sorted({*s.restarts, pod.key}))
            nxt = settle(s.objs, tuple(sorted([*rest, pod._replace(phase=STARTING)])), s.run, restarts=restarts)
            yield Step(f"{pod.key} restarted out of band", adverse(nxt), False)
    if world.autoscaler:
        for o in s.objs:
            e = world.endpoint_of(o.key).name
            if o.replicas == 1 and not o.deleting and adverse_left and e not in s.scaled:
                objs = tuple(sorted(x._replace(replicas=2) if x == o else x for x in s.objs))
                nxt = settle(objs, s.pods, s.run, scaled=tuple(sorted({*s.scaled, e})))
                yield Step(f"autoscaler scales {o.key} to 2", adverse(nxt), False)
            elif o.replicas == 2:
                objs = tuple(sorted(x._replace(replicas=1) if x == o else x for x in s.objs))
                yield Step(f"autoscaler scales {o.key} back to 1", settle(objs, s.pods, s.run), True)

    # A hold a killed run left ends by itself (its minReadySeconds pass: the bake and 10 minutes --
    # a run under way releases it long before): the rollout completes.
    for o in s.objs:
        if o.held and s.run is None:
            objs = tuple(sorted(x._replace(held=False) if x == o else x for x in s.objs))
            yield Step(f"the hold on {o.key} expires", settle(objs, s.pods, s.run), True)

    # The command: the same one again, or after a rejected canary the previous config (a rollback).
    if s.run is None:
        if not at_target(world, s) and (again := begin(s.back)) is not None:
            yield Step("rerun", settle(s.objs, s.pods, again, **begun(again)), True)
        if s.rejected and not s.back and (back := begin(True)) is not None:
            # the operator's choice, not a rerun: convergence is judged per config
            yield Step(
                "rollback: the previous config deployed", settle(s.objs, s.pods, back, **begun(back))._replace(back=True), False
            )
        if world.third_release and adverse_left and not (s.third or s.back) and any(o.rev == 1 for o in s.objs):
            # a new release pushed while the change is still rolling (the same keys, a third revision)
            yield Step("the config moves on to a third release", adverse(s._replace(third=True)), False)
        if world.lost_state and adverse_left and s.recorded:  # a lost state, or the first deploy after takeover
            yield Step("the state is lost", adverse(s._replace(recorded=())), False)
        return
    run = s.run
    if adverse_left:
        yield Step("killed", adverse(s._replace(run=None)), False)
        if world.engine_failures and not run.halted and len(run.lanes) > 1:
            yield Step("the engine fails an apply", adverse(settle(s.objs, s.pods, run._replace(halted=True))), False)
    for i, lane in enumerate(run.lanes):
        name = run.endpoints[i]
        stage = run.plan[i][lane.stage] if lane.stage < len(run.plan[i]) else waves.Stage(frozenset())
        apply, delete = stage.apply, stage.delete
        stopped, following = lane._replace(phase="stopped"), LaneAt(lane.stage + 1, "enter")

        def step(
            event: str,
            to: LaneAt,
            objs: tuple[Obj, ...] = s.objs,
            *,
            good: bool = True,
            i: int = i,
            keep: ledger.Gpus = (),
            accept: bool = False,
        ) -> Step:
            base, kw = run, {}
            if accept:  # the canary's verdict accepted its release: the lane goes on
                base = run._replace(accepted=run.accepted | {run.endpoints[i]})
                kw = {"accepted": s.accepted | {(run.endpoints[i], run.releases[i])}}
            if run.halted and to.phase in ("enter", "gone"):  # the engine failed: no lane goes further
                to = to._replace(phase="stopped")
            at = _at(base, i, to)
            if to.phase == "enter":  # its deletions are gone: it gives back what it no longer holds
                at = at._replace(ledger=at.ledger.keep(run.endpoints[i], keep))
            nxt = settle(objs, s.pods, at, **kw)
            return Step(event, nxt if good else adverse(nxt), good)

        if lane.phase == "wait":
            live = {o.key: o for o in s.objs}
            judged = name in run.accepted
            if not all(k in live and settled(live[k], s.pods, held=live[k].held and not judged) for k in apply):
                yield step(f"lane {name} wave runs out of budget", stopped)
            elif stage.bake and not judged and any(live[k].held for k in apply):
                # A held canary's verdict: rejected, the lane stops with the hold in place (the
                # rollback's wait releases it once the old template is back); accepted, the hold
                # ends and the lane waits for the old pods to go before it goes on.
                at = _at(run, i, stopped)._replace(rejected=(*run.rejected, i))
                objs = (
                    s.objs
                    if RELEASE_AFTER_REVERT
                    else tuple(sorted(o._replace(held=o.held and o.key not in apply) for o in s.objs))
                )
                yield Step(f"lane {name} canary rejected", settle(objs, s.pods, at), True)
                released = tuple(sorted(o._replace(held=False) if o.key in apply else o for o in s.objs))
                yield step(f"lane {name} canary accepted, its hold released", lane, released, accept=True)
            else:
                if (
                    stage.bake and not judged
                ):  # the canary's verdict: rejected, the lane stops before its deletions; accepted, it goes on
                    at = _at(run, i, stopped)._replace(rejected=(*run.rejected, i))
                    yield Step(f"lane {name} canary rejected", settle(s.objs, s.pods, at), True)
                accept = stage.bake and not judged
                if not delete:
                    yield step(f"lane {name} stage {lane.stage} ready", following, keep=stage.keep, accept=accept)
                elif run.halted:  # ready, but the engine failed: it deletes nothing
                    yield step(f"lane {name} stage {lane.stage} ready, halted", stopped, accept=accept)
                elif _serving_again(run, delete, s.pods):  # one it planned as down serves again: the lane stops
                    yield step(f"lane {name}: {sorted(delete & run.down)} serves again, stops", stopped, accept=accept)
                else:
                    yield step(
                        f"lane {name} deletes {sorted(delete)}",
                        lane._replace(phase="gone"),
                        _delete(s.objs, frozenset(delete)),
                        accept=accept,
                    )
                    if adverse_left:
                        yield step(f"lane {name}'s deletion refused", stopped, good=False)
        elif lane.phase == "gone":
            if not any(o.key in delete for o in s.objs):
                yield step(f"lane {name} deletions gone", following, keep=stage.keep)
            elif adverse_left:
                yield step(f"lane {name}'s deletion not gone in time", stopped, good=False)


def _serving_again(run: Run, keys: frozenset[str], pods: tuple[Pod, ...]) -> bool:
    """Whether a key the run's plan counted as not available has an available pod now."""
    return any(p.key in keys & run.down and p.phase == AVAILABLE for p in pods)


def _judged(run: Run, marks: frozenset[tuple[str, str]]) -> frozenset[tuple[str, str]]:
    """The judging marks once ``run`` ended (not killed), as ``infercrane deploy`` leaves them: all
    of its endpoints' gone when every lane finished; else those of the endpoints it rejected (their
    rejection is the mark now), accepted or finished -- unless the engine's error alone ended it
    (then no verdict reaches the command, and every mark stays)."""
    if all(lane.phase == "done" for lane in run.lanes):
        return frozenset(m for m in marks if m[0] not in run.endpoints)
    if run.halted and not (run.rejected and VERDICTS_SURVIVE_ENGINE_FAILURE):
        return marks
    done = {e for e, lane in zip(run.endpoints, run.lanes, strict=True) if lane.phase == "done"}
    judged = {run.endpoints[i] for i in run.rejected} | run.accepted | done
    return frozenset(m for m in marks if m[0] not in judged)


def _borrowed(run: Run, marks: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The gpus marks once ``run`` ended (not killed), as ``infercrane deploy`` leaves them: those of
    the endpoints whose lane ran to its end removed -- unless the engine's error alone ended it
    (then the command knows no lane's end, and every mark stays)."""
    if run.halted and not run.rejected:
        return marks
    done = {e for e, lane in zip(run.endpoints, run.lanes, strict=True) if lane.phase == "done"}
    return tuple((e, n) for e, n in marks if e not in done)


def _back(world: World, back: Rollback, revs: dict[str, int]) -> tuple[tuple[waves.Stage, ...], tuple[tuple[str, int], ...]]:
    """A lane's rollback as the model carries it out: its stages, and its restored keys' revisions."""
    stages = tuple(st if world.max_extra is not None else waves.Stage(st.apply, st.delete) for st in back.lane.stages)
    return stages, tuple(sorted((k, revs[k]) for k in back.restore))


def _rollback(world: World, run: Run) -> Run | None:
    """The rollback run of ``run``'s rejected canaries (None: nothing to do): their lanes only,
    each key restored to its revision at ``run``'s start, a new ledger (a new engine run)."""
    backs = [(run.endpoints[i], back) for i in run.rejected if (back := run.backs[i]) is not None and back[0]]
    if not backs:
        return None
    return Run(
        tuple(LaneAt(0, "enter") for _ in backs),
        tuple(stages for _, (stages, _) in backs),
        tuple(endpoint for endpoint, _ in backs),
        (),  # no plan printed: no promise of its own (the floor and the budget hold at every state)
        run.low,
        run.adverse,
        False,
        ledger.Ledger(world.max_extra),
        run.ceiling,
        (),
        tuple(sorted(kv for _, (_, revs) in backs for kv in revs)),
        rollback=True,
        # A same-key surge canary that served before the deploy goes back without a model load:
        # its old pod was held serving through the bake (unless something adverse happened).
        noload=frozenset(
            k
            for i in run.rejected
            for st in run.plan[i]
            for k in st.apply & run.places
            if (k, dict(kv for _, (_, revs) in backs for kv in revs).get(k)) in run.settled_at_start
        ),
    )


def _at(run: Run, i: int, lane: LaneAt) -> Run:
    return run._replace(lanes=run.lanes[:i] + (lane,) + run.lanes[i + 1 :])


def _advance(world: World, run: Run, objs: tuple[Obj, ...], pods: tuple[Pod, ...]) -> tuple[Run, tuple[Obj, ...], bool]:
    """Lanes entering a stage apply its keys and wait; a lane past its last stage is done."""
    changed = False
    for i, lane in enumerate(run.lanes):
        if lane.phase == "enter" and run.halted:  # the engine failed: nothing more is applied
            run = _at(run, i, lane._replace(phase="stopped"))
            changed = True
            continue
        if lane.phase == "enter":
            if lane.stage >= len(run.plan[i]):
                run = _at(run, i, LaneAt(lane.stage, "done"))
                changed = True
                continue
            stage = run.plan[i][lane.stage]
            changing = stage.apply if run.restarts is None else stage.apply & run.restarts
            if _serving_again(run, changing | stage.delete, pods):  # the lane stops (shell.stages.serving_again)
                run = _at(run, i, lane._replace(phase="stopped"))
                changed = True
                continue
            if DRAINED_FIRST and any(p.key in changing and p.phase == TERMINATING for p in pods):
                continue  # a key whose pod still drains gets its new template once it is gone (shell.lanes)
            if RECREATES and stage.recreate:
                # Pulumi's delete-before-replace: the object deleted in the foreground (pulumi-kubernetes'
                # default) and waited for until gone -- its pods with it -- then created again.
                present = frozenset(o.key for o in objs if o.key in stage.recreate and not o.deleting)
                if present:
                    objs = _delete(objs, present)
                    changed = True
                if any(o.key in stage.recreate for o in objs):
                    continue
            if stage.borrow and world.max_extra is not None:  # the lane takes what it borrows, as shell.lender.Lender does
                taken = run.ledger.take(run.endpoints[i], stage.borrow)
                if taken is None:
                    holders = {e for e, _ in run.ledger.lent if e != run.endpoints[i]}
                    running = {e for e, at in zip(run.endpoints, run.lanes, strict=True) if at.phase not in ("done", "stopped")}
                    if not holders & running:  # nothing will ever be given back: it stops
                        run = _at(run, i, lane._replace(phase="stopped"))
                        changed = True
                    continue  # it waits for a lane to give back
                run = run._replace(ledger=taken)
            if stage.bake and HOLDS:  # the hold comes before the canary's template (shell.lanes)
                objs = tuple(sorted(o._replace(held=True) if o.key in stage.apply & run.places else o for o in objs))
            objs = _apply(world, run, objs, stage.apply)
            run = _at(run, i, lane._replace(phase="wait"))
            changed = True
        elif lane.phase == "wait":
            # A wait that did not place a hold (or whose canary is accepted) releases the one it
            # finds once its template is applied (live.status.readiness.FleetWaiter).
            keep = run.holds if run.endpoints[i] not in run.accepted else frozenset()
            apply = run.plan[i][lane.stage].apply
            if any(o.held and o.key in apply and o.key not in keep for o in objs):
                objs = tuple(sorted(o._replace(held=False) if o.key in apply and o.key not in keep else o for o in objs))
                changed = True
    return run, objs, changed


# ---------------------------------------------------------------------------------------------
# The search.


@dataclass
class Result:
    world: World
    states: int
    violations: list[str]

    def __bool__(self) -> bool:
        return not self.violations


def start(world: World) -> State:
    objs = tuple(sorted(Obj(k, 0, 1, False) for e in world.endpoints for k in e.before))
    pods = tuple(sorted(Pod(k, 0, AVAILABLE) for e in world.endpoints for k in e.before))
    return State(objs, pods, None, 0, (), (), recorded=tuple((o.key, o.rev) for o in objs))


def invariants(world: World, s: State) -> list[str]:
    out = []
    for e in world.endpoints:
        up = available(world, s.pods, s.objs, e)
        # (e) The floor is the endpoint's own: it allows only the replicas an out-of-band restart
        # holds down now, never one that restarted and serves again (nor its successor).
        down = {k for k in s.restarts if world.endpoint_of(k) is e}
        serving = {p.key for p in s.pods if p.phase == AVAILABLE}
        down |= {k for k, by in s.stood_in if world.endpoint_of(k) is e and by not in serving}
        if up < e.floor - len(down):
            out.append(f"endpoint {e.name}: {up} available, below its floor {e.floor - len(down)}")
        gpus = held(world, s.pods, e)
        # An autoscaled replica's worth is two pods: its own surge is two, and the autoscaler's pod one more.
        budget = e.budget + (1 + e.policy.max_surge if e.name in s.scaled else 0)
        if gpus > budget:
            out.append(f"endpoint {e.name}: {gpus} GPUs held, above its budget {budget}")
        if s.run is not None and not s.run.adverse and e.name in dict(s.run.promised):
            if up < dict(s.run.promised)[e.name]:
                out.append(
                    f"endpoint {e.name}: {up} available, below the lowest ready {dict(s.run.promised)[e.name]} its plan printed"
                )
    for e in world.endpoints:
        if e.policy.canary is None:
            continue
        # (a) no replica beyond a canary is available on a release no canary accepted (every one
        # begins on revision 0, the release that ran before the deploy)
        unjudged = {
            p.key
            for p in s.pods
            if p.phase == AVAILABLE and p.rev != 0 and world.endpoint_of(p.key) is e and (e.name, f"rev{p.rev}") not in s.accepted
        }
        if beyond := sorted(unjudged - s.canaries):
            out.append(f"endpoint {e.name}: {beyond} available on a release no canary accepted, beyond its canaries")
    if s.run is not None and s.run.rollback and not s.run.adverse:
        # (g) a REJECT of a held canary restarts nothing: its rollback starts no pod of it
        if loads := sorted({p.key for p in s.pods if p.key in s.run.noload and p.phase in (PENDING, STARTING)}):
            out.append(f"the rollback starts a pod of {loads}, whose old pod was held through the bake (one more model load)")
    if world.max_extra is not None and s.run is not None:
        # The ledger: the run's pods never hold more than the endpoints' own plus maxExtraGpus
        # (an autoscaled replica's pod and its own surge on top, as for each endpoint's budget) --
        # on a rerun too: the endpoints' own counted from the change's start, not from what runs.
        gpus = sum(held(world, s.pods, e) for e in world.endpoints)
        own = s.run.ceiling if s.run.steady else sum(e.budget - e.policy.max_surge for e in world.endpoints) + world.max_extra
        ceiling = own + sum(1 + e.policy.max_surge for e in world.endpoints if e.name in s.scaled)
        if gpus > ceiling:
            out.append(f"the stack: {gpus} GPUs held, above its ceiling {ceiling} (maxExtraGpus {world.max_extra})")
    return out


def explore(world: World, *, limit: int = 2_000_000) -> Result:
    """Every state reachable from the change's start; the invariants at each; convergence from each."""
    planner = Planner(world)
    first = start(world)
    ids: dict[State, int] = {first: 0}
    parent: list[tuple[int, str]] = [(-1, "start")]
    good_back: list[list[int]] = [[]]  # reversed good edges
    queue = deque([first])
    violations: list[str] = []
    order = [first]

    def trace(i: int) -> str:
        events = []
        while i > 0:
            i, event = parent[i]
            events.append(event)
        return " -> ".join(reversed(events)) or "(the start)"

    while queue:
        s = queue.popleft()
        i = ids[s]
        seen = len(planner.findings)
        for step in successors(world, planner, s):
            j = ids.get(step.state)
            if j is None:
                j = len(order)
                ids[step.state] = j
                order.append(step.state)
                parent.append((i, step.event))
                good_back.append([])
                queue.append(step.state)
                why = invariants(world, step.state)
                if why and len(violations) < 5:
                    violations.append(f"{'; '.join(why)}\n    after: {trace(j)}")
            if step.good:
                good_back[j].append(i)
            if len(planner.findings) > seen and len(violations) < 5:
                violations.append(f"{planner.findings[-1]}\n    after: {trace(i)} -> {step.event}")
                seen = len(planner.findings)
        if len(order) > limit:
            raise RuntimeError(f"more than {limit} states: bound the world")
    if world.fits:
        reach = {ids[s] for s in order if at_target(world, s)}
        todo = list(reach)
        while todo:
            j = todo.pop()
            for i in good_back[j]:
                if i not in reach:
                    reach.add(i)
                    todo.append(i)
        stuck = [i for i in range(len(order)) if i not in reach]
        if stuck:
            violations.append(
                f"{len(stuck)} state(s) from which reruns alone never reach the config; the first:\n    after: {trace(min(stuck))}"
            )
    return Result(world, len(order), violations)


def worlds(sizes: range, policies: list[tuple[int, int]], kinds: list[str], pools: range, pairs: bool) -> Iterator[World]:
    """The worlds of the check: each change kind and policy at each size and pool slack; with
    ``pairs``, two endpoints of two replicas sharing one pool."""
    for n, (mu, ms), kind, slack in itertools.product(sizes, policies, kinds, pools):
        if kind == "shrink" and n == 1:
            continue
        e = change("a", kind, n, RolloutPolicy(max_unavailable=mu, max_surge=ms))
        yield World((e,), pool=max(len(e.before), len(e.after)) + slack)
    if pairs:
        for (p1, p2), (k1, k2), slack in itertools.product(
            itertools.combinations_with_replacement(policies, 2), [("update", "cutover"), ("cutover", "cutover")], pools
        ):
            a = change("a", k1, 2, RolloutPolicy(max_unavailable=p1[0], max_surge=p1[1]))
            b = change("b", k2, 2, RolloutPolicy(max_unavailable=p2[0], max_surge=p2[1]))
            yield World((a, b), pool=4 + slack, max_adversities=1)
            if p1[1] and p2[1]:  # both surge: their extra GPUs lent by one ledger of one GPU
                yield World((a, b), pool=5 + slack, max_adversities=1, max_extra=1)


def canary_worlds(sizes: range, slack: int = 0) -> list[World]:
    """Every change kind under a required canary, in place and with a surge, on pools of the budget
    plus ``slack`` (slack 1 finds the open defect of a rollback onto a still-draining pod: issue #48)."""
    out = []
    for kind, (mu, ms), n in itertools.product(["update", "cutover", "shrink", "grow"], [(1, 0), (2, 0), (0, 1)], sizes):
        if kind == "shrink" and n < 3:
            continue
        e = change("a", kind, n, RolloutPolicy(max_unavailable=mu, max_surge=ms, canary=CanaryPolicy(required=True)))
        # At 3 replicas a cutover, grow or shrink under two adversities passes 2 million states: one there.
        adversities = 2 if n < 3 or kind == "update" else 1
        out.append(World((e,), pool=max(len(e.before), len(e.after)) + slack, max_adversities=adversities))
    return out


def release_worlds() -> list[World]:
    """The release invariants' own actions: a lost state (or the first deploy after ``takeover``)
    between runs under a required canary, in place and with a surge; and another endpoint's lane
    whose apply the engine fails while the canary bakes."""
    required = CanaryPolicy(required=True)
    out = [
        World(
            (change("a", kind, 2, RolloutPolicy(max_unavailable=mu, max_surge=ms, canary=required)),),
            pool=2 + ms,
            lost_state=True,
        )
        for kind, (mu, ms) in itertools.product(["update", "cutover"], [(1, 0), (0, 1)])
    ]
    # A new release pushed mid-rollout (a third revision of the change's keys), after a kill or a
    # stopped wave -- with a surge, a replica the kill left loading restarts (it is recreated).
    out += [
        World(
            (change("a", kind, 2, RolloutPolicy(max_unavailable=mu, max_surge=ms, canary=required)),),
            pool=2 + ms,
            autoscaler=False,
            third_release=True,
        )
        for kind, (mu, ms) in itertools.product(["update", "cutover"], [(1, 0), (0, 1)])
    ]
    out += [
        World(
            (
                change("a", "update", 2, RolloutPolicy(max_unavailable=1, canary=required)),
                change("b", kind, 2, RolloutPolicy(max_unavailable=1)),
            ),
            pool=4,
            max_adversities=1,
            autoscaler=False,
            engine_failures=True,
        )
        for kind in ("update", "cutover")
    ]
    return out


def check(ws: Iterator[World], report: Callable[[Result], None] = lambda r: None) -> tuple[int, list[Result]]:
    total, failed = 0, []
    for w in ws:
        r = explore(w)
        total += r.states
        report(r)
        if not r:
            failed.append(r)
    return total, failed


def main(argv: list[str]) -> int:
    """``python -m tests.rollout_model [SIZES]``: the larger bound (``make check-rollout``) --
    every change kind at each size (default 2,3,4 replicas), maxUnavailable 0-2 / maxSurge 0-1,
    pools from the endpoint's size to two more, and two endpoints sharing a pool; a line per world."""
    sizes = [int(n) for n in (argv[0] if argv else "2,3,4").split(",")]
    policies = [(1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    began = time.perf_counter()

    def report(r: Result) -> None:
        shape = ", ".join(
            f"{e.name}: {len(e.before)} -> {len(e.after)} {e.policy.max_unavailable}/{e.policy.max_surge}"
            for e in r.world.endpoints
        )
        cap = "" if r.world.max_extra is None else f", maxExtraGpus {r.world.max_extra}"
        canary = ", canary" if r.world.canary else ""
        canary += ", lost state" if r.world.lost_state else ""
        canary += ", engine failures" if r.world.engine_failures else ""
        canary += ", a third release" if r.world.third_release else ""
        print(f"{'ok  ' if r else 'FAIL'} {shape}, pool {r.world.pool}{cap}{canary}: {r.states} states", flush=True)
        for v in r.violations:
            print("     " + v.replace("\n", "\n     "), flush=True)

    ws = itertools.chain(
        *(worlds(range(n, n + 1), policies, ["update", "cutover", "shrink", "grow"], range(3), pairs=False) for n in sizes)
    )
    canaries = canary_worlds(range(min(sizes), min(max(sizes), 3) + 1))  # a required canary, its rejection, the rollback
    total, failed = check(
        itertools.chain(ws, worlds(range(0), policies, [], range(3), pairs=True), canaries, release_worlds()), report
    )
    print(f"{total} states in {time.perf_counter() - began:.0f} s; {len(failed)} world(s) with violations")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
