"""The rollout planner: waves per endpoint under its policy, and each endpoint's lane of stages that carries them out."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollout import plan
from infercrane.core.plan.states import ReplicaState
from infercrane.core.plan.waves import Rollout, Wave

STARTING, AVAILABLE, SETTLED = ReplicaState.STARTING, ReplicaState.AVAILABLE, ReplicaState.SETTLED
DEFAULT = RolloutPolicy(max_unavailable=1, max_surge=0)
SURGE = RolloutPolicy(max_unavailable=0, max_surge=1)


def policy(p: RolloutPolicy) -> Callable[[str], RolloutPolicy]:
    return lambda name: p


def m(key: str, endpoint: str = "e", ready: bool = True, gpus: int = 1) -> LiveReplica:
    """A settled replica, or (``ready=False``) one with no pod available."""
    return LiveReplica(key, endpoint, SETTLED if ready else STARTING, gpus)


def t(key: str, endpoint: str = "e", restarts: bool = False, gpus: int = 1) -> Target:
    return Target(key, endpoint, gpus, restarts)


def stages(r: Rollout, endpoint: str = "e") -> list[tuple[list[str], list[str]]]:
    """One endpoint's lane: per stage, what it applies and what it then deletes."""
    (lane,) = [x for x in r.lanes if x.endpoint == endpoint]
    return [(sorted(s.apply), sorted(s.delete)) for s in lane.stages]


def test_a_cutover_in_place_stops_one_old_replica_before_each_new_one_and_never_needs_a_gpu_more() -> None:
    r = plan([m("a0"), m("a1")], [t("b0"), t("b1")], policy(DEFAULT))
    (e,) = r.endpoints
    assert e.waves == (Wave(down=("a0",), up=("b0",)), Wave(down=("a1",), up=("b1",)))
    assert (e.mode, e.lowest_ready, e.peak_gpus, e.extra_gpus, e.stages_needed) == ("in place", 1, 2, 0, 3)
    # a0 goes first (nothing new yet); b0 starts next and a1 goes once it is ready; then b1.
    assert stages(r) == [([], ["a0"]), (["b0"], ["a1"]), (["b1"], [])]


def test_a_cutover_with_surge_starts_each_new_replica_before_its_old_one_goes() -> None:
    r = plan([m("a0"), m("a1")], [t("b0"), t("b1")], policy(SURGE))
    (e,) = r.endpoints
    assert (e.mode, e.lowest_ready, e.peak_gpus, e.extra_gpus) == ("surge", 2, 3, 1)
    assert stages(r) == [(["b0"], ["a0"]), (["b1"], ["a1"])]  # each old one goes once its successor is ready


@pytest.mark.parametrize(
    ("unavailable", "waves", "lowest"),
    [(1, 4, 3), (2, 2, 2), (4, 1, 0)],
    ids=["one-at-a-time", "two-at-a-time", "all-at-once-allowed"],
)
def test_updates_roll_max_unavailable_at_a_time(unavailable: int, waves: int, lowest: int) -> None:
    keys = [f"k{i}" for i in range(4)]
    r = plan([m(k) for k in keys], [t(k, restarts=True) for k in keys], policy(RolloutPolicy(max_unavailable=unavailable)))
    (e,) = r.endpoints
    assert (len(e.waves), e.lowest_ready, e.peak_gpus) == (waves, lowest, 4)
    assert r.stages == waves
    assert stages(r)[0] == (keys[:unavailable], [])  # the rest are not registered yet: they stay as recorded


def test_a_reorder_or_a_metadata_change_is_one_stage_without_waves() -> None:
    r = plan([m("a"), m("b")], [t("b"), t("a")], policy(DEFAULT))
    assert stages(r) == [(["a", "b"], [])]
    assert r.endpoints[0].waves == () and r.beyond_one_step() == []


def test_a_replica_that_is_not_serving_costs_nothing_to_restart_or_to_delete() -> None:
    r = plan([m("a", ready=False), m("b"), m("gone", ready=False)], [t("a", restarts=True), t("b")], policy(DEFAULT))
    (e,) = r.endpoints
    assert e.waves == () and e.deleted_idle == ("gone",)
    assert stages(r) == [(["a", "b"], ["gone"])]


def test_serving_replicas_without_a_successor_go_last() -> None:
    r = plan([m("a"), m("b"), m("c")], [t("a", restarts=True)], policy(DEFAULT))
    (e,) = r.endpoints
    assert e.deleted_last == ("b", "c")
    assert stages(r) == [(["a"], ["b", "c"])]  # a rolls, then b and c go
    assert e.lowest_ready == 1  # b and c serve while a restarts; they go only once it is ready


def test_growth_alone_is_one_stage() -> None:
    r = plan([m("a")], [t("a"), t("b"), t("c")], policy(DEFAULT))
    assert stages(r) == [(["a", "b", "c"], [])]
    assert r.endpoints[0].gpus_after == 3 and r.endpoints[0].extra_gpus == 0


def test_each_endpoint_has_a_lane_of_its_own_under_its_own_policy() -> None:
    members = [m("x0", "x"), m("x1", "x"), m("y0", "y")]
    targets = [t("x0", "x", restarts=True), t("x1", "x", restarts=True), t("y1", "y")]
    r = plan(members, targets, lambda name: SURGE if name == "y" else DEFAULT)
    x, y = r.endpoints
    assert (x.endpoint, len(x.waves), x.mode) == ("x", 2, "in place")
    assert (y.endpoint, len(y.waves), y.mode) == ("y", 1, "surge")
    assert stages(r, "x") == [(["x0"], []), (["x1"], [])]  # x's second wave waits only for x's first
    assert stages(r, "y") == [(["y1"], ["y0"])]
    assert r.stages == 2


def test_a_moved_replica_counts_for_the_endpoint_it_moves_to() -> None:
    r = plan([m("a", "old"), m("b", "old")], [t("a", "new", restarts=True), t("b", "new", restarts=True)], policy(DEFAULT))
    (e,) = r.endpoints
    assert (e.endpoint, e.ready_before, len(e.waves)) == ("new", 2, 2)


@pytest.mark.parametrize(
    ("members", "targets", "beyond"),
    [
        ([m("a")], [t("a", restarts=True)], []),
        ([m("a"), m("b")], [t("a", restarts=True), t("b", restarts=True)], ["e"]),
        ([m("a")], [t("b")], ["e"]),  # in place: stop a first, then start b -- two stages
    ],
    ids=["one-update", "two-updates", "one-replacement-in-place"],
)
def test_what_one_plain_pulumi_up_may_do(members: list[LiveReplica], targets: list[Target], beyond: list[str]) -> None:
    assert [e.endpoint for e in plan(members, targets, policy(DEFAULT)).beyond_one_step()] == beyond


def test_all_at_once_says_what_a_single_run_would_do() -> None:
    (e,) = plan([m("a"), m("b"), m("c")], [t("a", restarts=True), t("b", restarts=True), t("d")], policy(DEFAULT)).endpoints
    assert (
        e.all_at_once()
        == "2 available replica(s) would restart together and 1 new replica(s) would need GPUs beside the ones they replace"
    )


KEYS = st.sampled_from([f"k{i}" for i in range(8)])


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(KEYS, st.tuples(st.sampled_from("xy"), st.booleans()), max_size=6),
    st.dictionaries(KEYS, st.tuples(st.sampled_from("xy"), st.booleans()), max_size=6),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_every_rollout_applies_each_key_once_and_never_applies_a_key_after_deleting_it(
    live: dict[str, tuple[str, bool]], want: dict[str, tuple[str, bool]], unavailable: int, surge: int
) -> None:
    if unavailable == 0 and surge == 0:
        unavailable = 1
    p = RolloutPolicy(max_unavailable=unavailable, max_surge=surge)
    members = [m(k, e, ready) for k, (e, ready) in sorted(live.items())]
    targets = [t(k, e, restarts) for k, (e, restarts) in sorted(want.items())]
    r = plan(members, targets, policy(p))
    applied = [k for lane in r.lanes for s in lane.stages for k in s.apply]
    assert sorted(applied) == sorted(want)  # every key of the config, once, in one lane
    deleted = [k for lane in r.lanes for s in lane.stages for k in s.delete]
    assert sorted(deleted) == sorted(set(live) - set(want))  # every live key that leaves, once
    for lane in r.lanes:
        assert len({want[k][0] for k in lane.keys}) <= 1 and all(want[k][0] == lane.endpoint for k in lane.keys)
    for e in r.endpoints:
        if e.mode == "in place":
            assert all(len([k for k in w.down if k in live]) <= p.max_unavailable for w in e.waves)
        else:
            assert all(len(w.up) <= p.max_surge for w in e.waves)


def test_plan_text_shows_each_endpoints_waves_lowest_ready_and_gpus() -> None:
    from infercrane.cli.rollout_text import rollout_lines

    r = plan([m("a0"), m("a1"), m("keep", "other")], [t("b0"), t("b1"), t("keep", "other")], policy(DEFAULT))
    assert rollout_lines(r) == [
        "rollout: up to 3 stage(s) per endpoint, each endpoint at its own pace (`infercrane deploy` runs them in one "
        "`pulumi up`; plain `pulumi up` does one)",
        "  endpoint e: 2 -> 2 replica(s), 2 wave(s) in place (maxUnavailable 1, maxSurge 0); lowest ready 1; "
        "GPUs 2 -> 2, peak 2 (0 extra)",
        "    wave 1: down a0; up b0 (down, then up)",
        "    wave 2: down a1; up b1 (down, then up)",
    ]  # the unchanged endpoint is not listed


def test_the_plan_says_warm_first_for_an_in_place_endpoint_and_never_for_a_surge() -> None:
    from infercrane.cli.rollout_text import rollout_lines

    warm = RolloutPolicy(max_unavailable=1, warm_first=True)
    r = plan([m("a0"), m("a1")], [t("a0", restarts=True), t("a1", restarts=True)], policy(warm))
    (e,) = r.endpoints
    assert e.warm_first and (
        "    warm-first: before each wave, its release is pulled onto its replicas' nodes while they serve (needs the pod "
        "reader and deploy/kubernetes/warm-first/prefetcher.yaml; without them the waves pull cold)"
    ) in rollout_lines(r)
    surge = RolloutPolicy(max_unavailable=0, max_surge=1, warm_first=True)  # the new pod pulls while the old serves
    (e,) = plan([m("a0")], [t("a0", restarts=True)], policy(surge)).endpoints
    assert not e.warm_first


def test_each_stage_says_what_it_does_and_where_it_is() -> None:
    r = plan([m("a0"), m("a1")], [t("b0"), t("b1")], policy(DEFAULT))
    (e,), (lane,) = r.endpoints, r.lanes
    assert [e.describe(s) for s in lane.stages] == [
        "e: stop a0 first (in place: frees its GPUs)",
        "e wave 1/2 (down a0; up b0)",
        "e wave 2/2 (down a1; up b1)",
    ]
    assert [e.where(s) for s in lane.stages] == ["the stage before its first wave", "wave 1/2", "wave 2/2"]


def test_a_replica_that_is_not_serving_already_counts_as_unavailable_so_no_serving_one_goes_down_beside_it() -> None:
    # The retry of a failed wave: r0's new intent could not start, r1..r3 still serve the old one.
    keys = [f"r{i}" for i in range(4)]
    members = [m("r0", ready=False)] + [m(k) for k in keys[1:]]
    r = plan(members, [t(k, restarts=True) for k in keys], policy(DEFAULT))
    (e,) = r.endpoints
    assert e.repaired_first == ("r0",) and [w.up for w in e.waves] == [("r1",), ("r2",), ("r3",)]
    assert stages(r)[0] == (["r0"], [])  # the rerun restarts only r0 and waits for it
    assert (e.lowest_ready, e.stages_needed, r.stages) == (3, 4, 4)


def test_a_surge_still_under_way_finishes_before_another_starts() -> None:
    keys = [f"r{i}" for i in range(3)]
    # A killed deploy left r0 mid-surge on the new template: its old pod serves, its new one loads.
    mid_surge = LiveReplica("r0", "e", AVAILABLE, gpus=1)
    r = plan([mid_surge] + [m(k) for k in keys[1:]], [t("r0")] + [t(k, restarts=True) for k in keys[1:]], policy(SURGE))
    (e,) = r.endpoints
    assert (e.repaired_first, e.settling_first) == ((), ("r0",)) and [w.up for w in e.waves] == [("r1",), ("r2",)]
    assert (e.ready_before, e.lowest_ready) == (3, 3)  # its old pod serves throughout
    assert stages(r)[0] == (["r0"], [])  # the first stage waits until its surge is done
    assert (
        e.describe(r.lanes[0].stages[0]) == "e: let r0 settle first (available, its own rollout under way: the waves wait for it)"
    )
    assert all(len(w.up) <= 1 for w in e.waves) and r.stages == 3


def test_a_replica_available_but_unsettled_is_up_and_its_update_is_a_wave_of_its_own() -> None:
    # An autoscaler is adding a pod to q0 and q1 (one pod available of two): both serve. Under the
    # default policy they restart one at a time, never together in a first step.
    members = [LiveReplica(k, "e", AVAILABLE, 1) for k in ("q0", "q1")] + [m("q2"), m("q3")]
    r = plan(members, [t(f"q{i}", restarts=True) for i in range(4)], policy(DEFAULT))
    (e,) = r.endpoints
    assert e.repaired_first == () and [w.down for w in e.waves] == [("q0",), ("q1",), ("q2",), ("q3",)]
    assert (e.ready_before, e.lowest_ready) == (4, 3)


def test_an_available_replica_that_leaves_without_a_successor_goes_last() -> None:
    r = plan([LiveReplica("a", "e", AVAILABLE, 1), m("b")], [t("b", restarts=True)], policy(DEFAULT))
    (e,) = r.endpoints
    assert (e.deleted_idle, e.deleted_last) == ((), ("a",))
    assert stages(r) == [(["b"], ["a"])]


def test_a_surge_cut_before_its_old_replica_was_deleted_retires_the_surplus_first() -> None:
    # o0..o3 -> n0..n3 with maxSurge 1 was cut after n0 became ready, before o0 was deleted: five
    # replicas hold five GPUs, the endpoint's budget (4 + 1). Another surge beside all five would
    # need a sixth on every rerun; one old replica goes first instead -- n0 already serves.
    members = [m(f"o{i}") for i in range(4)] + [m("n0")]
    r = plan(members, [t(f"n{i}") for i in range(4)], policy(SURGE))
    (e,) = r.endpoints
    assert (e.gpus_before, e.peak_gpus, e.lowest_ready) == (5, 5, 4)
    assert e.retired_first == ("o3",) and e.deleted_last == ()
    assert stages(r)[0] == (["n0"], ["o3"])


def test_replicas_not_serving_need_no_stage_of_their_own_when_nothing_serving_goes_down() -> None:
    r = plan([m("a", ready=False), m("b", ready=False)], [t("a", restarts=True), t("b", restarts=True)], policy(DEFAULT))
    (e,) = r.endpoints
    assert (e.repaired_first, e.waves, stages(r)) == ((), (), [(["a", "b"], [])])


def test_the_first_stage_names_the_replicas_brought_back_before_the_waves() -> None:
    r = plan([m("a", ready=False), m("b")], [t("a", restarts=True), t("b", restarts=True)], policy(DEFAULT))
    (e,), (lane,) = r.endpoints, r.lanes
    assert e.describe(lane.stages[0]) == "e: bring back a first (not available: the waves wait for it)"


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(KEYS, st.tuples(st.sampled_from("xy"), st.booleans()), max_size=6),
    st.dictionaries(KEYS, st.tuples(st.sampled_from("xy"), st.booleans()), max_size=6),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_no_stage_restarts_a_serving_replica_before_every_replica_not_serving_of_its_endpoint_serves_again(
    live: dict[str, tuple[str, bool]], want: dict[str, tuple[str, bool]], unavailable: int, surge: int
) -> None:
    if unavailable == 0 and surge == 0:
        unavailable = 1
    members = [m(k, e, ready) for k, (e, ready) in sorted(live.items())]
    targets = [t(k, e, restarts) for k, (e, restarts) in sorted(want.items())]
    r = plan(members, targets, policy(RolloutPolicy(max_unavailable=unavailable, max_surge=surge)))
    applied_at = {k: (lane.endpoint, i) for lane in r.lanes for i, s in enumerate(lane.stages) for k in s.apply}
    for k, (endpoint, restarts) in want.items():
        if k in live and live[k][1] and restarts:  # a serving replica whose pods restart
            down = [o for o, (e, _) in want.items() if e == endpoint and o in live and not live[o][1]]
            assert all(applied_at[o][0] == endpoint and applied_at[o][1] < applied_at[k][1] for o in down), (k, down)


def test_a_workload_api_switch_in_place_stops_each_old_form_before_its_new_form_starts() -> None:
    r = plan([m("a"), m("b")], [Target("a", "e", 1, moves=True), Target("b", "e", 1, moves=True)], policy(DEFAULT))
    (e,) = r.endpoints
    assert (e.lowest_ready, e.peak_gpus, e.extra_gpus, e.replaced_first) == (1, 2, 0, ("a",))
    assert stages(r) == [
        ([], ["a"]),  # a's old form goes first (in place: frees its GPUs)
        (["a"], ["b"]),  # a's new form starts; once it is ready b's old form goes
        (["b"], []),
    ]


def test_a_workload_api_switch_with_surge_starts_each_new_form_beside_its_old_one() -> None:
    r = plan([m("a"), m("b")], [Target("a", "e", 1, moves=True), Target("b", "e", 1, moves=True)], policy(SURGE))
    (e,) = r.endpoints
    assert (e.lowest_ready, e.peak_gpus, e.extra_gpus) == (2, 3, 1)
    assert stages(r) == [
        (["a"], ["a"]),  # the stage that starts a's new form ends with its old form gone
        (["b"], ["b"]),
    ]


def test_each_stage_names_the_live_keys_it_ends_by_deleting() -> None:
    r = plan([m("a0"), m("a1"), m("idle", ready=False)], [t("b0"), t("b1")], policy(DEFAULT))
    assert [d for _, d in stages(r)] == [["a0", "idle"], ["a1"], []]


def test_gpus_are_counted_per_product_never_summed_across_products() -> None:
    l40s = [LiveReplica(f"a{i}", "e", SETTLED, 1, product="NVIDIA-L40S") for i in range(2)]
    h100 = [Target(f"a{i}", "e", 1, restarts=True, product="NVIDIA-H100-80GB-HBM3") for i in range(2)]
    (e,) = plan(l40s, h100, policy(SURGE)).endpoints
    # Moving products with a surge: each H100 starts beside the L40S it replaces; no product ever
    # holds more than it holds before or after -- summed across products it would look like 1 extra.
    assert (e.gpus_before, e.gpus_after, e.extra_gpus) == (2, 2, 0)
    (same,) = plan(
        [LiveReplica(f"a{i}", "e", SETTLED, 1, product="NVIDIA-L40S") for i in range(2)],
        [Target(f"a{i}", "e", 1, restarts=True, product="NVIDIA-L40S") for i in range(2)],
        policy(SURGE),
    ).endpoints
    assert (same.peak_gpus, same.extra_gpus) == (3, 1)  # one product: the surge borrows one


def test_a_wave_that_restarts_a_replica_in_place_waits_for_its_old_pod_to_drain_and_only_that_one() -> None:
    members = [m("a"), m("b"), m("down", ready=False), m("old")]
    targets = [t("a", restarts=True), t("b"), t("down", restarts=True), t("new")]
    assert plan(members, targets, policy(DEFAULT)).restarts_in_place() == {"a", "down"}  # not b, not new
    # A surge starts beside it -- but a replica that is down is recreated: its old pod goes first.
    assert plan(members, targets, policy(SURGE)).restarts_in_place() == {"down"}


def test_a_replica_down_and_restarting_under_a_surge_is_recreated_first_and_costs_no_gpu_more() -> None:
    """A surge cutover cut short with n0 applied but loading, then a new release: n0 restarts. Its
    rolling update would keep the loading pod -- and its GPU -- beside the new one; recreated, the
    old pod goes first. So the surplus o1 needs no retiring before n0 serves: o0 and o1 keep the
    floor (before: o1 retired first for n0's second pod, one replica below it)."""
    members = [m("o0"), m("o1"), m("n0", ready=False)]
    r = plan(members, [t("n0", restarts=True), t("n1")], policy(SURGE))
    (e,), (lane,) = r.endpoints, r.lanes
    assert (e.recreated, e.repaired_first, e.lowest_ready, e.peak_gpus) == (("n0",), ("n0",), 2, 3)
    assert [(sorted(s.apply), sorted(s.delete), sorted(s.recreate)) for s in lane.stages] == [
        (["n0"], ["o1"], ["n0"]),  # n0 made again; the surplus o1 goes once it serves
        (["n1"], ["o0"], []),
    ]
    assert r.recreated == {"n0"}
    assert "recreate n0 (down: its old pod goes before its new one starts, no GPU more)" in e.describe(lane.stages[0])
    from infercrane.cli.rollout_text import rollout_lines

    assert any(line.startswith("    first: recreate n0 (not available: deleted, then made again") for line in rollout_lines(r))
    # In place the Deployment's own Recreate strategy does it: nothing to recreate.
    assert plan(members, [t("n0", restarts=True), t("n1")], policy(DEFAULT)).recreated == frozenset()


def test_plan_text_names_what_happens_before_the_waves() -> None:
    from infercrane.cli.rollout_text import rollout_lines

    # A surge cut before its deletion (a surplus to retire) beside a replica still settling.
    members = [m(f"o{i}") for i in range(2)] + [m("n0"), LiveReplica("s", "e", AVAILABLE, 1), m("k")]
    r = plan(members, [t("n0"), t("n1"), t("s"), t("k", restarts=True)], policy(SURGE))
    lines = rollout_lines(r)
    assert "    first: let s settle (available, its own rollout under way)" in lines, lines
    assert "    first: delete o1 (no successor; within the GPU budget only before the waves)" in lines, lines


def test_replicas_leaving_while_down_go_in_a_stage_of_their_own_before_new_replicas_need_their_gpus() -> None:
    # o0 restarted out of band (down) and leaves; o1 serves and is replaced; n1 is new beyond it.
    r = plan([m("o0", ready=False), m("o1")], [t("n0"), t("n1")], policy(DEFAULT))
    (e,), (lane,) = r.endpoints, r.lanes
    assert e.idle_first and stages(r)[0] == ([], ["o0"])
    assert e.describe(lane.stages[0]) == "e: delete o0 first (not available: frees GPUs for new replicas)"
    assert (e.peak_gpus, e.extra_gpus) == (2, 0)  # n1 starts only once o0 is gone
