"""What a stack remembers of its canaries (core.plan.marks) and what the planner makes of it: a
release whose judging a run began and never ended is judged again, never taken as proven by the
replicas that run it; a replica the first step moves onto the release is part of the canary."""

from __future__ import annotations

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from infercrane.core.plan.marks import GPUS_TAG, JUDGING_TAG, REJECTED_TAG, Marks, gpus_value, judging_value, rejected_value
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollout import plan
from infercrane.core.plan.states import ReplicaState

OLD, NEW = "rel-old", "rel-new"
REQUIRED = CanaryPolicy(required=True)


def live(key: str, release: str, state: ReplicaState = ReplicaState.SETTLED) -> LiveReplica:
    return LiveReplica(key, "e", state, 1, release=release)


def target(key: str, restarts: bool) -> Target:
    return Target(key, "e", 1, restarts=restarts, release=NEW)


def test_the_marks_are_read_from_the_stacks_tags_by_endpoint_and_release() -> None:
    tags = {
        REJECTED_TAG + "qwen": rejected_value(NEW, "REJECT", "2026-12-06T10:00:00Z", "sha256:aa"),
        JUDGING_TAG + "llama": judging_value(NEW, "2026-12-06T11:00:00Z"),
        "other": "x",
    }
    marks = Marks.of(tags)
    assert marks.rejected == {"qwen": (NEW, "REJECT at 2026-12-06T10:00:00Z, record sha256:aa")}
    assert marks.judging == {"llama": NEW}


def test_a_deploy_killed_during_its_bake_leaves_a_release_the_rerun_judges_again() -> None:
    """Killed while a0's canary baked on the new release: a0 serves it, a1 and a2 the old one.
    Without the judging mark the rerun sees the release "already serving" on a0 and rolls it to a1
    and a2 with no verdict (issue #64, 1); with it, a0 is baked again before anything else moves."""
    running = [live("a0", NEW), live("a1", OLD), live("a2", OLD)]
    targets = [target("a0", False), target("a1", True), target("a2", True)]
    policy = RolloutPolicy(max_unavailable=1, canary=REQUIRED)
    blind = plan(running, targets, lambda name: policy)
    assert blind.endpoints[0].canary_unneeded == "its release already serves on a0"
    unjudged = Marks(judging={"e": NEW}).unjudged_in(blind)
    assert unjudged == {"e": NEW}
    rerun = plan(running, targets, lambda name: policy, unproven=frozenset(unjudged.values()))
    (e,), (lane,) = rerun.endpoints, rerun.lanes
    assert (e.canary, e.baseline, e.canary_first) == (("a0",), ("a1", "a2"), True)
    assert [(sorted(s.apply), s.bake) for s in lane.stages][0] == (["a0"], True)


def test_a_judging_mark_of_another_release_changes_nothing() -> None:
    running = [live("a0", OLD), live("a1", OLD)]
    r = plan(running, [target("a0", True), target("a1", True)], lambda name: RolloutPolicy(canary=REQUIRED))
    assert Marks(judging={"e": "rel-other"}).unjudged_in(r) == {}
    assert Marks(rejected={"e": ("rel-other", "REJECT at …")}).rejected_in(r) == {}


def test_a_replica_left_down_then_moved_by_the_first_step_is_part_of_the_canary() -> None:
    """a0 was left down on the old release by an earlier run; the config then changed. In place
    the first step brings it back on the new release: before, it was neither canary nor baseline
    and kept the release after a REJECT (issue #64, 4); now it is the canary, judged first."""
    running = [live("a0", OLD, ReplicaState.STARTING), live("a1", OLD), live("a2", OLD)]
    targets = [target("a0", True), target("a1", True), target("a2", True)]
    r = plan(running, targets, lambda name: RolloutPolicy(max_unavailable=1, canary=REQUIRED))
    (e,), (lane,) = r.endpoints, r.lanes
    assert (e.canary, e.canary_first) == (("a0",), True)
    assert lane.stages[0].bake and "a0" in lane.stages[0].apply


def test_with_a_surge_a_down_replicas_restart_onto_the_release_is_the_canary_recreated_first() -> None:
    running = [live("a0", OLD, ReplicaState.STARTING), live("a1", OLD), live("a2", OLD)]
    targets = [target("a0", True), target("a1", True), target("a2", True)]
    r = plan(running, targets, lambda name: RolloutPolicy(max_unavailable=0, max_surge=1, canary=REQUIRED))
    (e,), (lane,) = r.endpoints, r.lanes
    assert e.canary == ("a0",) and e.canary_first and e.recreated == ("a0",)
    assert [(sorted(s.apply), s.bake, sorted(s.recreate)) for s in lane.stages] == [
        (["a0"], True, ["a0"]),
        (["a1"], False, []),
        (["a2"], False, []),
    ]


def test_the_gpus_mark_reads_back_what_it_wrote_and_an_unreadable_one_is_no_mark() -> None:
    at = "2026-12-06T10:00:00Z"
    tags = {
        GPUS_TAG + "qwen": gpus_value((("NVIDIA-H100-80GB-HBM3", 1), ("NVIDIA-L40S", 2)), at),
        GPUS_TAG + "tiny": gpus_value((), at),
        GPUS_TAG + "odd": "lots since then",
    }
    assert gpus_value((("NVIDIA-L40S", 2),), at) == f"NVIDIA-L40S=2 since {at}"
    assert Marks.of(tags).started == {"qwen": (("NVIDIA-H100-80GB-HBM3", 1), ("NVIDIA-L40S", 2)), "tiny": ()}
