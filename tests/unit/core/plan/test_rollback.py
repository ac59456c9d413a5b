"""A rejected canary's rollback (core.plan.rollback), planned from the real planner's rollouts:
what goes back, what goes, what cannot, and in which order under the endpoint's own policy."""

from __future__ import annotations

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollback import plan_rollback
from infercrane.core.plan.rollout import plan
from infercrane.core.plan.states import ReplicaState
from infercrane.core.plan.waves import Rollout
from infercrane.core.stops import CanaryRejected, RolloutStopped

OLD, NEW = "rel-old", "rel-new"
IN_PLACE = RolloutPolicy(max_unavailable=1, max_surge=0, canary=CanaryPolicy())
SURGE = RolloutPolicy(max_unavailable=0, max_surge=1, canary=CanaryPolicy())


def rolled(members: list[LiveReplica], targets: list[Target], policy: RolloutPolicy) -> Rollout:
    return plan(members, targets, lambda name: policy)


def m(key: str, release: str = OLD) -> LiveReplica:
    return LiveReplica(key, "e", ReplicaState.SETTLED, 1, release=release)


def t(key: str, restarts: bool = False) -> Target:
    return Target(key, "e", 1, restarts=restarts, release=NEW)


def steps(r: Rollout, before: dict[str, str]) -> list[tuple[list[str], list[str]]]:
    (e,), (lane,) = r.endpoints, r.lanes
    back = plan_rollback(e, lane, before).lane
    return [(sorted(s.apply), sorted(s.delete)) for s in back.stages]


def test_an_update_in_place_puts_the_canary_back_on_the_manifests_recorded_before_and_moves_nothing_else() -> None:
    r = rolled([m("a0"), m("a1"), m("a2")], [t("a0", True), t("a1", True), t("a2", True)], IN_PLACE)
    (e,), (lane,) = r.endpoints, r.lanes
    back = plan_rollback(e, lane, {"a0": OLD, "a1": OLD, "a2": OLD})
    assert e.canary == ("a0",) and (back.restore, back.remove, back.left) == (("a0",), (), ())
    assert steps(r, {"a0": OLD, "a1": OLD, "a2": OLD}) == [(["a0"], [])]
    assert back.describe() == "e: a0 back to the release recorded before this deploy (in place)"


def test_a_surge_cutover_removes_the_canarys_new_replica_once_nothing_needs_restoring() -> None:
    r = rolled([m("a0"), m("a1")], [t("b0"), t("b1")], SURGE)
    (e,) = r.endpoints
    assert e.canary == ("b0",)
    assert steps(r, {"a0": OLD, "a1": OLD}) == [([], ["b0"])], "a0, which the canary would replace, never stopped"


def test_an_in_place_cutover_removes_the_canary_first_then_makes_the_replica_it_replaced_again() -> None:
    r = rolled([m("a0"), m("a1")], [t("b0"), t("b1")], IN_PLACE)
    (e,), (lane,) = r.endpoints, r.lanes
    back = plan_rollback(e, lane, {"a0": OLD, "a1": OLD})
    assert (back.restore, back.remove) == (("a0",), ("b0",))
    assert steps(r, {"a0": OLD, "a1": OLD}) == [([], ["b0"]), (["a0"], [])], "in place: its GPU is free before a0 starts"
    assert back.describe() == (
        "e: a0 back to the release recorded before this deploy; remove b0 (brought by this deploy) "
        "(in place: removed first, then restored)"
    )


def test_a_surge_update_restores_beside_the_canary_borrowing_what_the_canary_borrowed() -> None:
    r = rolled([m("a0"), m("a1")], [t("a0", True), t("a1", True)], SURGE)
    (e,), (lane,) = r.endpoints, r.lanes
    bake = next(s for s in lane.stages if s.bake)
    back = plan_rollback(e, lane, {"a0": OLD, "a1": OLD})
    ((stage,),) = [back.lane.stages]
    assert stage.apply == {"a0"} and stage.borrow == bake.borrow


def test_a_new_replica_of_a_larger_endpoint_is_its_canary_and_is_removed() -> None:
    r = rolled([m("a0")], [t("a0", True), t("a1")], IN_PLACE)
    (e,) = r.endpoints
    assert e.canary == ("a1",) and e.canary_first
    assert steps(r, {"a0": OLD}) == [([], ["a1"])]


def test_a_canary_that_ran_the_rejected_release_before_the_deploy_has_nothing_to_return_to() -> None:
    # A retried release: the replica ran it before this deploy too (the state recorded it so).
    r = plan([m("a0", NEW), m("a1")], [t("a0"), t("a1", True)], lambda name: IN_PLACE, unproven=frozenset({NEW}))
    (e,), (lane,) = r.endpoints, r.lanes
    back = plan_rollback(e, lane, {"a0": NEW, "a1": OLD})
    assert back.left == ("a0",) and not back.lane.stages


def test_the_deploys_error_says_each_canary_was_rolled_back_or_how_to_roll_it_back() -> None:
    rejected = CanaryRejected("canary e: REJECT -- slower", True, False, outcome="REJECT", digest="sha256:x")
    back = RolloutStopped([("e", "wave 1/3 (the canary)", rejected.after_rollback("rolled back: e: a0 …", failed=False))], 1)
    assert "Each was stopped by its canary's verdict and rolled back: it serves the release it served before." in str(back)
    assert "\n  rolled back: e: a0 …" in str(back) and "--retry-rejected" in str(back)
    stuck = RolloutStopped([("e", "wave 1/3 (the canary)", rejected.after_rollback("the rollback stopped: x", failed=True))], 1)
    assert "fix the cause and deploy again" in str(stuck)
    assert "roll the canary back by deploying the stack's previous config" in str(stuck)


def test_a_rejection_says_how_its_rollback_ended_and_the_fix_that_fits() -> None:
    from infercrane.core.plan.rollback import Rollback
    from infercrane.engine.rejections import _after_rollback

    rejected = CanaryRejected("canary e: REJECT -- slower", True, False, outcome="REJECT", digest="sha256:x")
    done = Rollback("e", "in place", ("a0",), (), ())
    said = _after_rollback(rejected, done, "")
    assert (
        said.rolled_back
        and "rolled back: e: a0 back to the release recorded before this deploy (in place); ready and serving again after 0 s"
        in str(said)
    )
    stopped = _after_rollback(rejected, done, "a0 not ready within its startup budget + margin")
    assert not stopped.rolled_back and "the rollback stopped: a0 not ready within" in str(stopped)
    assert "deploying the stack's previous config" in str(stopped)
    left = _after_rollback(rejected, Rollback("e", "in place", (), (), ("a0",)), "")
    assert not left.rolled_back and "not rolled back: a0 ran before this deploy with nothing in the state to return to" in str(
        left
    )


def test_a_canary_that_ran_before_the_deploy_without_a_record_is_left_never_deleted() -> None:
    """The first deploy after ``takeover`` (or a lost state): a0 and a1 serve, the state records
    nothing. The canary a0 was running when the rollout was planned: it served before this deploy,
    so the rollback leaves it (said), never deletes it. (Before, "not recorded" was taken as
    "brought by this deploy" and its Deployment and Service were deleted: issue #64, 3.)"""
    r = rolled([m("a0"), m("a1")], [t("a0", True), t("a1", True)], IN_PLACE)
    (e,), (lane,) = r.endpoints, r.lanes
    assert e.canary == ("a0",) and e.running == ("a0", "a1")
    back = plan_rollback(e, lane, {})  # nothing recorded
    assert (back.remove, back.restore, back.left) == ((), (), ("a0",))


def test_a_canary_the_deploy_created_is_removed_though_an_unrecorded_replica_beside_it_is_kept() -> None:
    r = rolled([m("a0"), m("a1")], [t("b0"), t("b1")], SURGE)
    (e,), (lane,) = r.endpoints, r.lanes
    back = plan_rollback(e, lane, {})  # a lost state: nothing recorded, a0 and a1 ran before
    assert (back.remove, back.restore) == (("b0",), ()), "b0 did not run when the rollout was planned"
