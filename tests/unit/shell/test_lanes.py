"""The lane driver (infercrane.shell.lanes): each endpoint at its own pace in one run.

The waits, the registration and the deleter are test doubles (named so): a double of the readiness
wait whose replicas become ready after a set delay or fail, a registration that records when each
key was registered, and a deleter that records what it deleted and when. The real ones run in the
integration tier (tests/integration/test_rollout.py).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from infercrane.core.errors import NotReady
from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollout import plan
from infercrane.core.plan.states import ReplicaState
from infercrane.core.stops import CanaryRejected, RolloutStopped
from infercrane.live.status.verdicts import Verdict
from infercrane.shell import lanes, stages
from infercrane.shell.components import AHEAD

DEFAULT = RolloutPolicy(max_unavailable=1, max_surge=0)
SURGE = RolloutPolicy(max_unavailable=0, max_surge=1)


@dataclass
class UrnDouble:
    """Stands in for a component's URN output: answered at once, as by an engine with nothing queued."""

    value: str

    async def future(self) -> str:
        return self.value


@dataclass
class ComponentDouble:
    """Stands in for a ReplicaComponent: its name, summary and URN."""

    key: str

    @property
    def urn(self) -> UrnDouble:
        return UrnDouble(f"urn:pulumi:test::infercrane::infercrane:index:Replica::obj-{self.key}")

    @property
    def name(self) -> str:
        return f"obj-{self.key}"

    @property
    def summary(self) -> dict[str, Any]:
        return {"key": self.key}


class EngineGone(Exception):
    """What the engine raises when it fails an apply (the double's stand-in)."""


@dataclass
class WaitsDouble:
    """Stands in for shell.awaiting.Waits: a key is ready ``load[key]`` seconds after it is
    registered (default ``default``), or fails when listed in ``fails``; the wait of
    ``engine_fails`` raises :class:`EngineGone` after 0.05 s, as an apply the engine failed."""

    load: dict[str, float] = field(default_factory=dict)
    default: float = 0.05
    fails: set[str] = field(default_factory=set)
    engine_fails: str | None = None
    draining: dict[str, str] = field(default_factory=dict)  # key -> what of it still drains (never ends)
    asked_drained: list[frozenset[str]] = field(default_factory=list)

    list_seconds: float = 0.0  # the real check LISTs the Deployments in a thread: the lane yields meanwhile
    held: set[str] = field(default_factory=set)  # keys waited as held canaries (none: the double holds nothing)
    holding: bool = False  # whether a surge canary's old pods are held (the real rule: shell.awaiting.Waits.holdable)
    said: list[str] = field(default_factory=list)  # what the double did, in order: "hold e", "wait a0 held", "unheld a0"

    back: set[str] = field(default_factory=set)  # keys that serve again (the real check: Waits.serving)
    warmed: list[tuple[frozenset[str], frozenset[str]]] = field(default_factory=list)  # (a stage's keys, the next's)
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(4))

    async def serving(self, keys: Any) -> set[str]:
        return set(keys) & self.back

    async def blocking(self, fn: Any, *args: Any) -> Any:
        """The real one's: a thread of the run's own (shell.awaiting.blocking_pool)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args))

    def holdable(self, e: Any, keys: frozenset[str]) -> set[str]:
        return set(keys) & set(e.canary) if self.holding and e.mode == "surge" else set()

    async def hold(self, e: Any, note: Any) -> None:
        self.said.append(f"hold {','.join(e.held)}")

    def say_unheld(self, e: Any, note: Any) -> None:
        self.said += [f"unheld canary {','.join(e.held)}"] if e.held else []

    async def unheld(self, c: ComponentDouble) -> tuple[Verdict, None]:
        self.held.discard(c.key)
        self.said.append(f"unheld {c.key}")
        return await self.of(c)

    async def warm(self, e: Any, keys: Any, note: Any, upcoming: Any = ()) -> None:
        self.warmed.append(
            (frozenset(keys), frozenset(upcoming))
        )  # warm-first: the real Waits' in tests/integration/test_model_images.py

    async def drained(self, keys: frozenset[str]) -> str:
        self.asked_drained.append(frozenset(keys))
        await asyncio.sleep(self.list_seconds)
        return "; ".join(self.draining[k] for k in sorted(keys) if k in self.draining)

    async def of(self, c: ComponentDouble) -> tuple[Verdict, None]:
        self.said.append(f"wait {c.key}" + (" held" if c.key in self.held else ""))
        if c.key == self.engine_fails:
            await asyncio.sleep(0.05)
            raise EngineGone("Resource monitor has terminated, shutting down")
        await asyncio.sleep(self.load.get(c.key, self.default))
        if c.key in self.fails:
            return Verdict("failed", "FailedScheduling: 0/3 nodes are available"), None
        return Verdict("ready", ""), None


class Journal:
    """When each key was registered and deleted (seconds since start)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.registered: dict[str, float] = {}
        self.deleted: dict[str, float] = {}

    def register(self, key: str) -> ComponentDouble:
        self.registered[key] = time.monotonic() - self.t0
        return ComponentDouble(key)

    def delete(self, keys: Collection[str]) -> Mapping[str, str]:
        for k in keys:
            self.deleted[k] = time.monotonic() - self.t0
        return {f"obj-{k}": k for k in keys}


def run(coroutine: Any, default_executor: ThreadPoolExecutor | None = None) -> Any:
    """On a loop of its own, never set as the thread's (Pulumi's mocks tier uses the thread's)."""
    loop = asyncio.new_event_loop()
    if default_executor is not None:
        loop.set_default_executor(default_executor)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def four_replica_update(*endpoints: str) -> Any:
    members = [LiveReplica(f"{e}{i}", e, ReplicaState.SETTLED, 1) for e in endpoints for i in range(4)]
    targets = [Target(f"{e}{i}", e, 1, restarts=True) for e in endpoints for i in range(4)]
    return plan(members, targets, lambda name: DEFAULT)


def roll(
    rollout: Any, waits: WaitsDouble, journal: Journal, notes: list[str] | None = None, default: ThreadPoolExecutor | None = None
) -> stages.LanesOutcome:
    order = {k: i for i, k in enumerate(sorted(k for lane in rollout.lanes for k in lane.keys))}
    notes = [] if notes is None else notes
    return run(
        lanes.roll(
            rollout.lanes,
            {e.endpoint: e for e in rollout.endpoints},
            journal.register,  # type: ignore[arg-type]
            waits,  # type: ignore[arg-type]
            journal.delete,
            notes.append,
            order,
            max_extra_gpus=rollout.max_extra_gpus,
            restarts=rollout.restarts,
            lent=rollout.lent,
        ),
        default,
    )


def test_a_fast_endpoint_finishes_its_waves_without_waiting_for_a_slow_one() -> None:
    rollout = four_replica_update("fast", "slow")
    waits = WaitsDouble(load={f"slow{i}": 0.3 for i in range(4)}, default=0.02)
    journal = Journal()
    rolled = roll(rollout, waits, journal)
    assert rolled.stopped == []
    assert len(rolled.components) == 8
    # fast's 4 waves (4 x 0.02 s) are all registered before slow's second wave starts (0.3 s).
    assert journal.registered["fast3"] < journal.registered["slow1"]
    # each endpoint's waves in order, one after the other
    for e in ("fast", "slow"):
        times = [journal.registered[f"{e}{i}"] for i in range(4)]
        assert times == sorted(times)


def test_each_wave_warms_with_the_next_waves_keys_so_they_pull_while_it_restarts() -> None:
    rollout = four_replica_update("e")
    waits = WaitsDouble()
    roll(rollout, waits, Journal())
    waves = [(sorted(keys), sorted(upcoming)) for keys, upcoming in waits.warmed if keys]
    assert waves == [(["e0"], ["e1"]), (["e1"], ["e2"]), (["e2"], ["e3"]), (["e3"], [])]


def test_a_failed_wave_stops_only_its_endpoint_and_never_registers_its_later_replicas() -> None:
    rollout = four_replica_update("good", "bad")
    waits = WaitsDouble(fails={"bad1"})
    journal = Journal()
    rolled = roll(rollout, waits, journal)
    assert [(name, where) for name, where, _ in rolled.stopped] == [("bad", "wave 2/4")]
    (_, _, cause) = rolled.stopped[0]
    assert isinstance(cause, NotReady) and "replica bad1 (obj-bad1): FailedScheduling" in str(cause)
    assert {"good0", "good1", "good2", "good3"} <= set(journal.registered)  # the other endpoint rolled to the end
    assert "bad2" not in journal.registered and "bad3" not in journal.registered  # left as the state records them


def test_an_in_place_replacement_deletes_each_old_replica_after_the_wave_before_and_before_its_successor() -> None:
    rollout = plan(
        [LiveReplica("a0", "e", ReplicaState.SETTLED, 1), LiveReplica("a1", "e", ReplicaState.SETTLED, 1)],
        [Target("b0", "e", 1), Target("b1", "e", 1)],
        lambda n: DEFAULT,
    )
    journal = Journal()
    rolled = roll(rollout, WaitsDouble(), journal)
    assert rolled.stopped == []
    assert journal.deleted["a0"] <= journal.registered["b0"]  # in place: the old one frees its GPUs first
    assert journal.registered["b0"] < journal.deleted["a1"] <= journal.registered["b1"]


def test_a_deletion_that_fails_stops_its_endpoint_with_the_deleters_words() -> None:
    from infercrane.core.errors import ClusterError

    rollout = plan(
        [LiveReplica("a0", "e", ReplicaState.SETTLED, 1), LiveReplica("a1", "e", ReplicaState.SETTLED, 1)],
        [Target("b0", "e", 1), Target("b1", "e", 1)],
        lambda n: DEFAULT,
    )

    def stuck(keys: Collection[str]) -> Mapping[str, str]:
        raise ClusterError(
            "1 object(s) the rollout deleted are still present 120 s later: Deployment x", fix="look for finalizers"
        )

    journal = Journal()
    order = {"b0": 0, "b1": 1}
    rolled = run(
        lanes.roll(
            rollout.lanes,
            {e.endpoint: e for e in rollout.endpoints},
            journal.register,
            WaitsDouble(),
            stuck,
            lambda _: None,
            order,
        )  # type: ignore[arg-type]
    )
    assert [(n, w) for n, w, _ in rolled.stopped] == [("e", "the deletions after the stage before its first wave")]
    assert journal.registered == {}  # b0 never started beside a0


def test_an_apply_the_engine_fails_is_raised_as_the_engine_gave_it() -> None:
    class EngineGone(Exception):
        pass

    class Failing(WaitsDouble):
        async def of(self, c: ComponentDouble) -> tuple[Verdict, None]:
            raise EngineGone("Resource monitor has terminated, shutting down")

    import pytest

    with pytest.raises(EngineGone, match="Resource monitor has terminated"):
        roll(four_replica_update("e"), Failing(), Journal())


def test_an_engine_failure_halts_every_lane_before_its_next_deletion_and_names_where_each_endpoint_ended() -> None:
    # Three endpoints: "fails" has its second wave's apply failed by the engine, "slow" is still
    # waiting on its first wave then, "quick" has one replacement to finish. None deletes or
    # registers anything after the failure; the engine's own error is raised, with each end.
    members = [LiveReplica(f"slow{i}", "slow", ReplicaState.SETTLED, 1) for i in range(2)]
    members += [LiveReplica(f"fails{i}", "fails", ReplicaState.SETTLED, 1) for i in range(2)]
    targets = [Target(f"slown{i}", "slow", 1) for i in range(2)] + [
        Target(f"fails{i}", "fails", 1, restarts=True) for i in range(2)
    ]
    rollout = plan(members, targets, lambda name: RolloutPolicy(max_unavailable=0, max_surge=1))

    journal = Journal()
    notes: list[str] = []
    order = {k: i for i, k in enumerate(sorted(k for lane in rollout.lanes for k in lane.keys))}
    import pytest

    with pytest.raises(EngineGone, match="Resource monitor has terminated"):
        run(
            lanes.roll(
                rollout.lanes,
                {e.endpoint: e for e in rollout.endpoints},
                journal.register,  # type: ignore[arg-type]
                WaitsDouble(load={"slown0": 0.2}, engine_fails="fails1"),  # type: ignore[arg-type]
                journal.delete,
                notes.append,
                order,
            )
        )
    assert "slow0" not in journal.deleted and "slown1" not in journal.registered  # slow's wave 1 was ready after the failure
    assert notes[-1] == (
        "rollout: halted by the engine's failure: slow halted after wave 1/2, before its deletions (the engine failed); "
        "fails failed by the engine at wave 2/2"
    )


def test_each_stage_before_the_waves_says_what_it_waits_for() -> None:
    members = [LiveReplica("r0", "e", ReplicaState.AVAILABLE, 1), LiveReplica("r1", "e", ReplicaState.SETTLED, 1)]
    rollout = plan(members, [Target("r0", "e", 1), Target("r1", "e", 1, restarts=True)], lambda n: SURGE)
    notes: list[str] = []
    order = {"r0": 0, "r1": 1}
    journal = Journal()
    run(
        lanes.roll(
            rollout.lanes,
            {e.endpoint: e for e in rollout.endpoints},
            journal.register,
            WaitsDouble(),
            journal.delete,
            notes.append,
            order,
        )
    )  # type: ignore[arg-type]
    assert notes == [
        "rollout: e: let r0 settle first (available, its own rollout under way: the waves wait for it)",
        "rollout: e wave 1/1 (down r1; up r1)",
    ]


def test_a_waves_budget_adds_the_drain_only_where_it_restarts_a_replica_in_place() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.live.status.readiness import AWAIT_MARGIN_SECONDS
    from infercrane.shell.awaiting import budgets

    config = InferCraneConfig.model_validate(
        {
            "kubernetes": {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "drain": {"preStopSeconds": 20}},
            "replicas": [{"key": k, "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"} for k in ("a", "new")],
        }
    )
    rollout = plan(
        [LiveReplica("a", "e", ReplicaState.SETTLED, 1)],
        [Target("a", "e", 1, restarts=True), Target("new", "e", 1)],
        lambda n: DEFAULT,
    )
    startup = config.replicas[0].startup_budget_seconds + AWAIT_MARGIN_SECONDS
    grace = config.drain_for(config.replicas[0]).grace_seconds
    assert grace == 20 + config.drain_for(config.replicas[0]).shutdown_seconds + 5
    assert budgets(config, rollout) == {"a": startup + grace, "new": startup}  # "new" replaces nothing
    assert budgets(config, None) == {"a": startup + grace, "new": startup + grace}  # plain `pulumi`: in place, any may


def surge_updates(endpoints: dict[str, int], cap: int | None) -> Any:
    """Each endpoint's replicas (1 GPU each, on one product) updated under maxSurge 1."""
    members = [LiveReplica(f"{e}{i}", e, ReplicaState.SETTLED, 1, "L4") for e, n in endpoints.items() for i in range(n)]
    targets = [Target(f"{e}{i}", e, 1, restarts=True, product="L4") for e, n in endpoints.items() for i in range(n)]
    return plan(members, targets, lambda name: SURGE, max_extra_gpus=cap)


def borrowed_over_time(journal: Journal, waits: WaitsDouble) -> int:
    """The most surge GPUs out at once: a surge wave's new pod holds its GPU from its registration
    until its wait ends and its old pod is deleted (the journal's deletion of that stage)."""
    spans = [(at, at + waits.default) for at in journal.registered.values()]
    return max(sum(a <= t < b for a, b in spans) for t, _ in spans)


def test_surges_of_several_endpoints_take_turns_for_the_stacks_extra_gpus() -> None:
    rollout = surge_updates({"a": 2, "b": 2, "c": 2}, cap=1)
    waits, journal, notes = WaitsDouble(default=0.05), Journal(), []
    rolled = roll(rollout, waits, journal, notes)
    assert rolled.stopped == [] and len(rolled.components) == 6
    assert borrowed_over_time(journal, waits) == 1
    assert any("waits to borrow 1 GPU(s) of L4 (rollout.maxExtraGpus 1; lent now: " in n for n in notes), notes


def test_without_a_cap_every_endpoints_surge_runs_at_once() -> None:
    rollout = surge_updates({"a": 2, "b": 2, "c": 2}, cap=None)
    waits, journal = WaitsDouble(default=0.05), Journal()
    roll(rollout, waits, journal)
    assert borrowed_over_time(journal, waits) == 3


def test_a_cap_of_two_lends_two_surges_at_a_time() -> None:
    rollout = surge_updates({"a": 2, "b": 2, "c": 2}, cap=2)
    waits, journal = WaitsDouble(default=0.05), Journal()
    roll(rollout, waits, journal)
    assert borrowed_over_time(journal, waits) == 2


def test_an_in_place_endpoint_borrows_nothing_and_never_waits_for_a_surge() -> None:
    members = [LiveReplica(f"s{i}", "s", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    members += [LiveReplica(f"p{i}", "p", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    targets = [Target(m.key, m.endpoint, 1, restarts=True, product="L4") for m in members]
    rollout = plan(members, targets, lambda name: SURGE if name == "s" else DEFAULT, max_extra_gpus=1)
    assert all(not st.borrow for lane in rollout.lanes if lane.endpoint == "p" for st in lane.stages)
    assert [st.borrow for lane in rollout.lanes if lane.endpoint == "s" for st in lane.stages] == [(("L4", 1),)] * 2
    journal = Journal()
    roll(rollout, WaitsDouble(load={"s0": 0.3, "s1": 0.3}, default=0.02), journal)
    assert journal.registered["p1"] < journal.registered["s1"]  # p rolled on while s held the one extra GPU


def test_what_a_surge_cut_short_left_running_is_lent_already_and_no_other_lane_borrows_it() -> None:
    # a's surge cutover a0,a1 -> n0,n1 was cut short with n0 started: a holds 3 GPUs, its own 2
    # (the stack's record). b's surge waits until a's deletions have given that GPU back.
    members = [LiveReplica(k, "a", ReplicaState.SETTLED, 1, "L4") for k in ("a0", "a1", "n0")]
    members += [LiveReplica(f"b{i}", "b", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    targets = [Target(f"b{i}", "b", 1, restarts=True, product="L4") for i in range(2)]  # b's lane asks first
    targets += [Target(k, "a", 1, product="L4") for k in ("n0", "n1")]
    rollout = plan(members, targets, lambda name: SURGE, max_extra_gpus=1, started={"a": (("L4", 2),)})
    assert rollout.lent == (("a", (("L4", 1),)),)
    journal = Journal()
    rolled = roll(rollout, WaitsDouble(default=0.05), journal)
    assert rolled.stopped == [] and sorted(rolled.finished) == ["a", "b"]
    assert journal.registered["b0"] >= min(journal.deleted.values())  # not before a gave its leftover back


def test_a_lane_that_could_never_borrow_stops_naming_who_holds_the_ledger() -> None:
    # a's lane starts first and borrows the one GPU; its wave fails, so it stops holding it (its new
    # replica may still hold that GPU): b, waiting for it, stops instead of waiting forever.
    rollout = surge_updates({"a": 2, "b": 2}, cap=1)
    journal = Journal()
    rolled = roll(rollout, WaitsDouble(default=0.05, fails={"a0"}), journal)
    stopped = {e: why for e, _, why in rolled.stopped}
    assert set(stopped) == {"a", "b"} and "b0" not in journal.registered
    assert str(stopped["b"]) == (
        "wave 1/2 borrows 1 GPU(s) of L4 beyond the endpoint's own, and rollout.maxExtraGpus 1 is held by a, which "
        "stopped with it (their replicas may still hold those GPUs)\n"
        "    fix: fix what stopped them, then rerun the same command: it lends again only what their surges no longer hold"
    )


def test_a_lane_waiting_on_the_ledger_when_the_engine_fails_halts_and_says_so() -> None:
    # a borrows the one GPU; its wave's apply is failed by the engine while b waits to borrow.
    rollout = surge_updates({"a": 2, "b": 2}, cap=1)
    journal, notes = Journal(), []
    import pytest

    with pytest.raises(EngineGone):
        roll(rollout, WaitsDouble(engine_fails="a0"), journal, notes)
    assert "b0" not in journal.registered
    assert notes[-1] == (
        "rollout: halted by the engine's failure: a failed by the engine at wave 1/2; b halted before wave 1/2 (the engine failed)"
    )


@dataclass
class JudgingWaitsDouble(WaitsDouble):
    """:class:`WaitsDouble` whose canary bake answers ``outcome`` at once (a double of the bake:
    the real one reads the engines' /metrics, tests/integration/test_canary.py)."""

    outcome: str = "ACCEPT"
    baked: list[str] = field(default_factory=list)

    async def bake(self, e: Any, note: Any) -> Any:
        from infercrane.core.plan import canary, canary_record

        self.baked.append(e.endpoint)
        limits = canary_record.Thresholds(1, 1.5, 0.01, required=True)
        none = canary.Figures(0, 0, None)
        record = canary_record.Record(e.endpoint, limits, (), final=True)
        return canary.CanaryVerdict(self.outcome, (f"the double says {self.outcome}",), none, none, record.digest(), record)  # type: ignore[arg-type]


def canary_cutover() -> Any:
    from infercrane.core.model.endpoints import CanaryPolicy

    members = [LiveReplica(f"a{i}", "e", ReplicaState.SETTLED, 1) for i in range(3)]
    targets = [Target(f"b{i}", "e", 1) for i in range(3)]
    return plan(members, targets, lambda name: RolloutPolicy(max_unavailable=0, max_surge=1, canary=CanaryPolicy()))


def test_an_accepted_canary_goes_on_with_the_rest_of_the_release_and_its_deletions() -> None:
    waits, journal = JudgingWaitsDouble(), Journal()
    rolled = roll(canary_cutover(), waits, journal)
    assert waits.baked == ["e"] and rolled.ended == {"e": "finished"} and not rolled.stopped
    assert sorted(journal.deleted) == ["a0", "a1", "a2"] and rolled.verdicts["e"].outcome == "ACCEPT"


def test_a_rejected_canary_stops_its_lane_before_the_replica_it_replaces_is_deleted() -> None:
    waits, journal, notes = JudgingWaitsDouble(outcome="REJECT"), Journal(), []
    rolled = roll(canary_cutover(), waits, journal, notes)
    assert sorted(journal.registered) == ["b0"], "no replica after the canary moves"
    assert journal.deleted == {}, "the replica the canary replaces still serves"
    ((endpoint, where, why),) = rolled.stopped
    assert (endpoint, where) == ("e", "wave 1/3 (the canary)")
    assert why.message.startswith("canary e: REJECT -- the double says REJECT (record sha256:")
    assert "no other replica of the endpoint was moved to it" in why.message
    assert rolled.ended["e"] == "stopped at wave 1/3: the canary's verdict is REJECT"
    assert any(n.startswith("rollout: canary e: REJECT") for n in notes)


def test_a_canary_that_never_becomes_ready_is_rejected_so_the_command_rolls_it_back() -> None:
    waits, journal = JudgingWaitsDouble(fails={"b0"}), Journal()
    rolled = roll(canary_cutover(), waits, journal)
    ((endpoint, where, why),) = rolled.stopped
    assert (endpoint, where) == ("e", "wave 1/3 (the canary)") and waits.baked == []
    assert isinstance(why, CanaryRejected) and why.outcome == "REJECT"
    assert why.message.startswith("canary e: REJECT -- its replicas did not become ready: ")
    assert journal.deleted == {}, "the replica the canary replaces still serves"


def test_a_reject_is_raised_with_another_lanes_engine_failure_never_dropped_for_it() -> None:
    """Issue #64, 2: another endpoint's apply failed by the engine while the canary baked; the lanes
    halt, and the rejection comes back beside the engine's failure -- so the command remembers it
    and rolls the canary back -- where the engine's error alone was raised before."""
    from infercrane.core.model.endpoints import CanaryPolicy

    members = [LiveReplica(f"{e}{i}", e, ReplicaState.SETTLED, 1) for e in ("c", "f") for i in range(2)]
    targets = [Target(f"{e}{i}", e, 1, restarts=True) for e in ("c", "f") for i in range(2)]
    policies = {"c": RolloutPolicy(max_unavailable=1, canary=CanaryPolicy()), "f": RolloutPolicy(max_unavailable=1)}
    rollout = plan(members, targets, lambda name: policies[name])

    @dataclass
    class BakeThenFail(JudgingWaitsDouble):
        async def bake(self, e: Any, note: Any) -> Any:
            await asyncio.sleep(0.2)  # f's second wave fails in the engine meanwhile
            return await super().bake(e, note)

    waits = BakeThenFail(outcome="REJECT", engine_fails="f1")
    with pytest.raises(RolloutStopped) as caught:
        roll(rollout, waits, Journal())
    stopped = {endpoint: why for endpoint, _, why in caught.value.stopped}
    assert isinstance(stopped["c"], CanaryRejected) and stopped["c"].outcome == "REJECT"
    assert stopped["f"].message == "the engine failed: Resource monitor has terminated, shutting down"


def test_a_key_whose_old_pod_still_drains_past_its_drain_is_never_given_its_new_template() -> None:
    """A ReplicaSet counts no terminating pod: a key flipped back to the template of a pod still
    draining would start another pod beside it (the exhaustive check found the GPU more)."""
    r = plan([LiveReplica("a0", "e", ReplicaState.SETTLED, 1), LiveReplica("a1", "e", ReplicaState.SETTLED, 1)],
             [Target("a0", "e", 1, restarts=True), Target("a1", "e", 1, restarts=True)],
             lambda name: RolloutPolicy(max_unavailable=1))  # fmt: skip
    waits, journal = WaitsDouble(draining={"a1": "still terminating after 40 s: infercrane-a1 (1 pod(s))"}), Journal()
    rolled = roll(r, waits, journal)
    assert list(journal.registered) == ["a0"], "a1's template was never applied"
    ((endpoint, where, why),) = rolled.stopped
    assert (endpoint, where) == ("e", "wave 2/2")
    assert why.message.startswith("a replica's old pod is still terminating after 40 s: infercrane-a1 (1 pod(s))")
    assert rolled.ended["e"].startswith("stopped before wave 2/2: still terminating")
    assert frozenset({"a0"}) in waits.asked_drained, "every stage asks before it applies"


def test_only_the_keys_whose_template_changes_wait_for_a_drain_before_they_are_applied() -> None:
    """A key applied with its live template starts no pod: it asks nothing (one replica changed in
    a fleet of 1,000 asks once, not 1,000 times); a new key has no pod that could drain."""
    members = [LiveReplica("a0", "e", ReplicaState.SETTLED, 1), LiveReplica("b0", "f", ReplicaState.SETTLED, 1)]
    targets = [Target("a0", "e", 1, restarts=True), Target("b0", "f", 1), Target("c0", "g", 1)]
    r = plan(members, targets, lambda name: DEFAULT)
    assert r.restarts == frozenset({"a0"})
    waits, journal = WaitsDouble(), Journal()
    rolled = roll(r, waits, journal)
    assert sorted(journal.registered) == ["a0", "b0", "c0"] and not rolled.stopped
    assert waits.asked_drained == [frozenset({"a0"})]


@dataclass
class PacedUrn:
    """A component's URN output, answered when the engine double gets to it."""

    answer: asyncio.Future[str]

    def future(self) -> asyncio.Future[str]:
        return self.answer


@dataclass
class PacedComponentDouble(ComponentDouble):
    paced: PacedUrn | None = None

    @property
    def urn(self) -> PacedUrn:  # type: ignore[override]
        assert self.paced is not None
        return self.paced


@dataclass
class PacedEngine:
    """An engine double that answers the registrations' URNs one at a time, in the order they
    came, every ``step`` seconds (a real engine busy passing a fleet as the same)."""

    step: float
    order: list[str] = field(default_factory=list)
    queue: asyncio.Queue[tuple[str, asyncio.Future[str]]] = field(default_factory=asyncio.Queue)

    def register(self, key: str) -> PacedComponentDouble:
        self.order.append(key)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((key, answer))
        return PacedComponentDouble(key, PacedUrn(answer))

    async def run(self) -> None:
        while True:
            key, answer = await self.queue.get()
            await asyncio.sleep(self.step)
            answer.set_result(f"urn-{key}")


def test_a_replica_the_rollout_restarts_is_registered_ahead_of_the_replicas_carried_over() -> None:
    """One replica changed in a fleet: its lane checks its old pod has drained (a LIST) before it
    registers it, and the carried-over replicas' lanes queue at the program's pace meanwhile. It
    takes the next free place, not the last: at 1,000 replicas it was applied ~20 s after the
    preflight, once the engine had passed the other 999 as the same."""
    members = [LiveReplica(f"e{i}", f"e{i}", ReplicaState.SETTLED, 1) for i in range(100)]
    rollout = plan(members, [Target(f"e{i}", f"e{i}", 1, restarts=i == 0) for i in range(100)], lambda name: DEFAULT)
    waits = WaitsDouble(default=0.0, list_seconds=0.01)

    async def scenario() -> list[str]:
        engine = PacedEngine(step=0.005)
        answering = asyncio.ensure_future(engine.run())
        try:
            await lanes.roll(
                rollout.lanes,
                {e.endpoint: e for e in rollout.endpoints},
                engine.register,
                waits,  # type: ignore[arg-type]
                lambda keys: {},
                lambda note: None,
                {f"e{i}": i for i in range(100)},
                restarts=rollout.restarts,
            )
        finally:
            answering.cancel()
        return engine.order

    order = run(scenario())
    assert waits.asked_drained == [frozenset({"e0"})] and len(order) == 100
    # The first AHEAD carried over took the free places during its LIST, and the engine answered
    # about two of them meanwhile; it took the next free place then -- not the 100th.
    assert AHEAD <= order.index("e0") < AHEAD + 10, order.index("e0")


def same_key_surge_canary() -> Any:
    from infercrane.core.model.endpoints import CanaryPolicy

    members = [LiveReplica(f"a{i}", "e", ReplicaState.SETTLED, 1) for i in range(3)]
    targets = [Target(f"a{i}", "e", 1, restarts=True) for i in range(3)]
    return plan(members, targets, lambda name: RolloutPolicy(max_unavailable=0, max_surge=1, canary=CanaryPolicy()))


def test_a_same_key_surge_canary_is_held_before_its_template_and_released_only_once_accepted() -> None:
    """Issue #64: the canary's old pod is held (its Deployment's minReadySeconds) before its new
    template is applied, its wait is the held one, and the hold ends after the ACCEPT, before the
    next wave registers anything."""
    rollout = same_key_surge_canary()
    (e,) = rollout.endpoints
    assert e.held == ("a0",) and e.canary == ("a0",)
    waits, journal = JudgingWaitsDouble(holding=True), Journal()
    rolled = roll(rollout, waits, journal)
    assert rolled.ended == {"e": "finished"}
    assert waits.said[:4] == ["hold a0", "wait a0 held", "unheld a0", "wait a0"], waits.said
    assert waits.said[4:] == ["wait a1", "wait a2"] and waits.held == set()


def test_a_rejected_held_canary_keeps_its_hold_for_the_rollback_to_end() -> None:
    """A REJECT ends the lane with the hold in place: released before the rollback put the old
    template back, the canary's pod would become available and the old pod be deleted."""
    waits, journal = JudgingWaitsDouble(outcome="REJECT", holding=True), Journal()
    rolled = roll(same_key_surge_canary(), waits, journal)
    assert rolled.ended["e"] == "stopped at wave 1/3: the canary's verdict is REJECT"
    assert waits.said == ["hold a0", "wait a0 held"] and waits.held == {"a0"}


def test_a_same_key_surge_canary_its_workload_cannot_hold_rolls_unheld_and_the_deploy_says_so() -> None:
    """An InferenceService's canary: KServe's reconcile takes a hold on its predictor back, so the
    lane places none and says what that costs (tests/integration/test_controllers.py)."""
    from infercrane.shell.awaiting import unheld_notes

    rollout = same_key_surge_canary()
    waits, journal = JudgingWaitsDouble(holding=False), Journal()
    assert roll(rollout, waits, journal).ended == {"e": "finished"}
    assert waits.said[:2] == ["unheld canary a0", "wait a0"], waits.said
    (e,) = rollout.endpoints
    assert unheld_notes("Deployment", e) == []
    assert unheld_notes("InferenceService", e) == [
        "rollout: e: a0's old pod is not held (its predictor Deployment is KServe's, whose reconcile takes a hold back): "
        "it goes once the canary is available, and a rollback loads it again"
    ]


def test_an_in_place_canary_is_never_held() -> None:
    from infercrane.core.model.endpoints import CanaryPolicy

    members = [LiveReplica(f"a{i}", "e", ReplicaState.SETTLED, 1) for i in range(3)]
    targets = [Target(f"a{i}", "e", 1, restarts=True) for i in range(3)]
    rollout = plan(members, targets, lambda name: RolloutPolicy(max_unavailable=1, canary=CanaryPolicy()))
    assert rollout.endpoints[0].held == ()
    waits, journal = JudgingWaitsDouble(holding=True), Journal()
    roll(rollout, waits, journal)
    assert not any(s.startswith(("hold", "unheld")) or s.endswith("held") for s in waits.said), waits.said


def test_a_stage_stops_when_a_replica_its_plan_counted_as_down_serves_again() -> None:
    """A replica restarted out of band when the deploy planned comes back before its stage: taken
    down then it would take the endpoint below its floor (the plan spent no unavailability on it)."""
    members = [LiveReplica("a0", "e", ReplicaState.STARTING, 1), LiveReplica("a1", "e", ReplicaState.SETTLED, 1)]
    targets = [Target(f"b{i}", "e", 1) for i in range(2)]
    rollout = plan(members, targets, lambda name: RolloutPolicy(max_unavailable=0, max_surge=1))
    assert rollout.endpoints[0].down == ("a0",)
    waits, journal = WaitsDouble(back={"a0"}), Journal()
    rolled = roll(rollout, waits, journal)
    ((endpoint, where, why),) = rolled.stopped
    assert why.message == (
        "a0 of endpoint e serves again since this deploy planned it as not available: restarted or deleted now, "
        "it would take the endpoint below its floor"
    )
    assert why.fix == "rerun the same command: it plans from what runs now"
    assert "a0" not in journal.deleted


def test_a_recreated_key_loses_its_workload_before_it_is_registered_and_a_failed_deletion_stops_its_lane() -> None:
    from infercrane.core.errors import ClusterError

    # n0 was left loading by a killed surge, then the release moved on: recreated in the first step.
    rollout = plan(
        [
            LiveReplica("o0", "e", ReplicaState.SETTLED, 1),
            LiveReplica("o1", "e", ReplicaState.SETTLED, 1),
            LiveReplica("n0", "e", ReplicaState.STARTING, 1),
        ],
        [Target("n0", "e", 1, restarts=True), Target("n1", "e", 1)],
        lambda n: SURGE,
    )
    journal = Journal()
    recreated: dict[str, float] = {}

    def recreate(keys: Collection[str]) -> Mapping[str, str]:
        recreated.update({k: time.monotonic() - journal.t0 for k in keys})
        return {f"obj-{k}": k for k in keys}

    def roll_with(recreate: Any) -> stages.LanesOutcome:
        return run(
            lanes.roll(
                rollout.lanes,
                {e.endpoint: e for e in rollout.endpoints},
                journal.register,  # type: ignore[arg-type]
                WaitsDouble(),  # type: ignore[arg-type]
                journal.delete,
                lambda _: None,
                {"n0": 0, "n1": 1},
                restarts=rollout.restarts,
                recreate=recreate,
            )
        )

    rolled = roll_with(recreate)
    assert not rolled.stopped and set(recreated) == {"n0"} and recreated["n0"] <= journal.registered["n0"]
    assert "n0" not in journal.deleted  # the stage's deleter never sees it: its Service stays

    def stuck(keys: Collection[str]) -> Mapping[str, str]:
        raise ClusterError(
            "1 object(s) the rollout deleted are still present 120 s later: Deployment n0", fix="look for finalizers"
        )

    journal = Journal()
    rolled = roll_with(stuck)
    assert [(n, w) for n, w, _ in rolled.stopped] == [("e", "the stage before its first wave")]
    assert journal.registered == {}  # never registered over a workload that may still be there


class RefusingExecutor(ThreadPoolExecutor):
    """The loop's default executor, shared with the engine's own calls: no lane may block it."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a lane blocked a thread of the loop's default executor")


def test_the_lanes_deletions_and_recreations_block_threads_of_the_runs_own_never_the_loops_default() -> None:
    """Pulumi's own calls run on the loop's default executor (4 x its parallelism): a lane's delete
    queued there would wait behind every other lane's blocking wait, and hold up registrations."""
    # Each endpoint's two replicas move to two new keys under a surge: each wave deletes an old one.
    members = [LiveReplica(f"{e}{i}", e, ReplicaState.SETTLED, 1) for e in "ab" for i in range(2)]
    rollout = plan(members, [Target(f"{e}n{i}", e, 1) for e in "ab" for i in range(2)], lambda n: SURGE)
    journal = Journal()
    rolled = roll(rollout, WaitsDouble(), journal, default=RefusingExecutor(1))
    assert rolled.stopped == [] and len(rolled.components) == 4
    assert set(journal.deleted) == {"a0", "a1", "b0", "b1"}
