"""The exhaustive check finds each defect it was built for (``tests/rollout_model.py``): with the
rule that fixes it reverted, a violation and the events that lead to it -- the ``…_is_found``
habit. Beside test_rollout_exhaustive.py (the invariants held) so the two run side by side."""

from __future__ import annotations

import pytest

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from infercrane.core.plan import canary_keys, ledger, rollout, states, waves
from tests import rollout_model as model
from tests.unit.core.plan.worlds import capped, required, violations


def test_counting_an_available_but_unsettled_replica_as_down_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 1 reverted: only a settled replica counts as up. An autoscaler adding a pod makes a
    # replica available but unsettled; the planner restarts it beside the wave's own.
    monkeypatch.setattr(states.ReplicaState, "available", property(lambda self: self == states.ReplicaState.SETTLED))
    # The lanes' stop for a replica planned as down that serves (shell.stages.serving_again) would
    # catch it at the stage since: reverted too, to show the planner's own defect.
    monkeypatch.setattr(model, "SERVING_AGAIN_STOPS", False)
    world = model.World((model.change("a", "update", 2, RolloutPolicy(max_unavailable=1)),), pool=2)
    found = violations(world)
    assert any("below its floor" in v and "autoscaler scales" in v for v in found), found


def test_a_surge_cut_before_its_deletion_without_retiring_the_surplus_first_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 2 reverted: the surplus old replica is kept to the end; on a pool of exactly the
    # budget the next surge never schedules, on every rerun; on a larger pool it holds a GPU more.
    monkeypatch.setattr(rollout, "_over_budget", lambda *args: False)
    tight = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=3)
    found = violations(tight)
    assert any("never reach the config" in v for v in found), found  # (first reached by a kill mid-wave)
    wide = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=4)
    assert any("above its budget" in v for v in violations(wide))


def test_a_stage_that_goes_on_while_its_deleted_pods_still_drain_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 3 reverted: deletions in the background -- the object vanishes, its pod still drains
    # holding its GPU, and the successor starts beside it.
    monkeypatch.setattr(waves, "STAGE_DELETION", "Background")
    world = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=1)),), pool=4)
    found = violations(world)
    assert any("above its budget" in v and "deletions gone" in v for v in found), found


def test_a_counterexample_prints_as_the_events_that_lead_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waves, "STAGE_DELETION", "Background")
    world = model.World((model.change("a", "cutover", 1, RolloutPolicy(max_unavailable=1)),), pool=2, max_adversities=0)
    (first, *_) = violations(world)
    assert first.startswith("endpoint a: 2 GPUs held, above its budget 1")
    assert "after: rerun -> lane a deletes ['ao0'] -> lane a deletions gone -> schedule an0" in first, first


def test_a_required_canary_left_without_a_baseline_by_a_killed_run_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first-step canary reverted: only a wave of units can be the canary. A run killed after an
    # in-place cutover stopped its first old replica leaves a state the required canary refuses forever.
    real = canary_keys.choose
    monkeypatch.setattr(
        canary_keys,
        "choose",
        lambda units, mode, policy, members, targets, release, moving, first: real(
            units, mode, policy, members, targets, release, moving, []
        ),
    )
    (world,) = [w for w in model.canary_worlds(range(2, 4)) if w.endpoints[0].after[0][0] == "an0" and len(w.endpoints[0].before) == 2
                and w.endpoints[0].policy.max_unavailable == 1]  # fmt: skip
    found = violations(world)
    assert any("never reach the config" in v and "lane a deletes ['ao0'] -> killed" in v for v in found), found


def test_a_rerun_after_a_kill_during_the_bake_that_ignores_the_judging_mark_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The judging mark reverted: the rerun sees the canary's release "already serving" and rolls it on.
    monkeypatch.setattr(model, "JUDGING_MARKS", False)
    found = violations(required(max_adversities=1, autoscaler=False))
    assert any("available on a release no canary accepted" in v and "-> killed -> rerun" in v for v in found), found


@pytest.mark.exhaustive
def test_a_reject_dropped_by_another_lanes_engine_failure_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "VERDICTS_SURVIVE_ENGINE_FAILURE", False)
    (world,) = [w for w in model.release_worlds() if w.engine_failures and w.endpoints[1].after[0][0] == "bo0"]
    found = violations(world)
    assert any("ended with neither its canary rolled back nor its rejection remembered" in v for v in found), found


def test_a_rollback_that_deletes_an_unrecorded_replica_that_served_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # "Not recorded" taken as "brought by this deploy" again: the rollback forgets what ran.
    import dataclasses

    real = model.plan_rollback
    monkeypatch.setattr(model, "plan_rollback", lambda e, lane, before: real(dataclasses.replace(e, running=()), lane, before))
    found = violations(required(max_adversities=1, autoscaler=False, lost_state=True))
    assert any("the rollback deletes ['ao0'], which served before the deploy" in v for v in found), found


def test_a_replica_moved_before_the_waves_and_left_out_of_the_canary_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first step's canary reverted to what runs the release already: a replica restarted out of
    # band on the old release is moved by the first step, neither canary nor baseline.
    real = canary_keys.choose

    def as_before(units, mode, policy, members, targets, release, moving, first):  # type: ignore[no-untyped-def]
        live = {m.key: m.release for m in members}
        kept = [k for k in first if live.get(k, release) == release]
        return real(units, mode, policy, members, targets, release, moving, kept)

    monkeypatch.setattr(canary_keys, "choose", as_before)
    found = violations(required(n=3, max_adversities=1, autoscaler=False))  # a0 down, a1 the canary, a2 the baseline
    assert any("available on a release no canary accepted" in v and "restarted out of band" in v for v in found), found


@pytest.mark.exhaustive
def test_the_ledger_restarting_from_what_runs_after_a_killed_surge_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #64, d: a rerun after a surge cut short (killed, or its lane stopped) counts each
    endpoint's own from the stack's record of the change's start (the gpus mark), and what the cut
    surge left running beyond it as lent already -- so no other lane borrows maxExtraGpus again.
    Reverted (own counted from what runs), the check finds own 4 + 1 held as 6."""
    assert not violations(capped(6))
    monkeypatch.setattr(model, "GPU_RECORD", False)
    found = violations(capped(6))
    assert any("6 GPUs held, above its ceiling 5" in v and "-> rerun -> schedule bo0" in v for v in found), found


@pytest.mark.parametrize(
    ("switch", "path"),
    [
        ("HOLDS", "rerun -> schedule ao0 -> ao0 available -> ao0 drained -> lane a canary rejected"),
        ("RELEASE_AFTER_REVERT", "rerun -> schedule ao0 -> ao0 available -> lane a canary rejected -> ao0 drained"),
    ],
)
def test_a_same_key_surge_canary_whose_reject_starts_its_old_release_again_is_found(
    monkeypatch: pytest.MonkeyPatch, switch: str, path: str
) -> None:
    """Issue #64: a same-key surge canary's old pod is held serving beside it until the verdict, so
    its REJECT restarts nothing. Without the hold, the old pod goes as soon as the canary is
    available; with the hold released at the REJECT (before the rollback put the old template back),
    the canary becomes available and the old pod goes then -- either way the rollback starts the
    old release in a new pod, one more model load, which the check finds."""
    world = required(mu=0, ms=1, max_adversities=1, autoscaler=False)
    assert not violations(world)
    monkeypatch.setattr(model, switch, False)
    found = violations(world)
    assert any("the rollback starts a pod of ['ao0'], whose old pod was held" in v and path in v for v in found), found


def test_an_unheld_canary_as_kserve_rolls_it_breaks_no_release_rule_and_costs_one_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """An InferenceService's same-key surge canary is unheld (KServe takes a hold on its predictor
    back: tests/integration/test_controllers.py). The check with the hold off is KServe's
    case: every rule holds -- floor, GPUs, release, convergence -- and what it finds is only the
    REJECT's price, the old release loaded again (docs/canary.md says so)."""
    world = required(mu=0, ms=1, max_adversities=2, autoscaler=False)
    monkeypatch.setattr(model, "HOLDS", False)
    found = violations(world)
    assert found and all(v.startswith("the rollback starts a pod of ['ao0'], whose old pod was held") for v in found), found


def test_a_stage_that_takes_down_a_replica_that_serves_again_since_its_plan_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #64, e: the floor is the endpoint's own -- it allows only the replicas an out-of-band
    restart holds down now, no longer every restart so far (which let a planner take two down after
    one restart that had healed). With it the check found a stage deleting (or restarting) a replica
    its plan counted as down that had come back meanwhile: below the floor. Fixed: such a stage
    stops its lane (shell.stages.serving_again) and a rerun plans with it serving."""
    world = model.World(
        (model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=2, autoscaler=False
    )
    assert not violations(world)
    monkeypatch.setattr(model, "SERVING_AGAIN_STOPS", False)
    found = violations(world)
    assert any(
        "1 available, below its floor 2" in v
        and "ao0 restarted out of band -> rerun -> ao0 available -> lane a deletes ['ao0']" in v
        for v in found
    ), found


@pytest.mark.exhaustive
def test_a_still_loading_pod_a_rolling_update_keeps_is_counted_lent_at_a_reruns_start_or_it_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make check-rollout` found it (two surge endpoints, one GPU of maxExtraGpus): a run whose
    wave failed left a replica restarting out of band beside its new pod -- the rolling update
    keeps the loading old pod until the new one is available -- so it held two pods' GPUs while
    not available; the rerun counted only available replicas as holding more than their own, and
    lent the extra GPU again to the other endpoint: 6 GPUs held above the ceiling of 5. Fixed: a
    replica whose Deployment counts more pods than it asks for holds its surplus lent already
    (LiveReplica.surplus, live.status.verdicts.holds_more)."""
    a = model.change("a", "update", 2, RolloutPolicy(max_unavailable=0, max_surge=1))
    b = model.change("b", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1))
    world = model.World((a, b), pool=6, max_adversities=1, max_extra=1)
    assert not violations(world)
    monkeypatch.setattr(model, "SURPLUS_COUNTED", False)
    found = violations(world)
    assert any(
        "6 GPUs held, above its ceiling 5" in v
        and "ao0 restarted out of band -> schedule ao0 -> lane a wave runs out of budget -> rerun" in v
        for v in found
    ), found


def test_surges_that_ignore_the_ledger_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ledger reverted: every lane takes what it borrows, whatever is lent already.
    monkeypatch.setattr(ledger.Ledger, "take", lambda self, endpoint, need: self)
    found = violations(capped(6, adversities=0))
    assert any("above its ceiling 5 (maxExtraGpus 1)" in v for v in found), found


@pytest.mark.exhaustive
def test_a_down_replica_restarted_by_its_rolling_update_keeping_the_old_pods_gpu_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A surge cutover a0,a1 -> n0,n1 cut short with n0 applied but still loading, then a third
    release: n0 restarts. Updated in place, its rolling update keeps the old pod -- and its GPU --
    until the new one is available (the controller's maxScaledDown, test_controllers.py), and the
    pool of 3 has no GPU for the new pod: stuck. (Before the recreate, the planner retired a1 first
    for that GPU: one available replica below the floor until n0 served.) Recreated, its old pod goes
    first (the third-release worlds of test_rollout_exhaustive.py hold every invariant)."""
    monkeypatch.setattr(model, "RECREATES", False)
    surge = RolloutPolicy(max_unavailable=0, max_surge=1, canary=CanaryPolicy(required=True))
    world = model.World((model.change("a", "cutover", 2, surge),), pool=3, autoscaler=False, third_release=True)
    found = violations(world)
    assert any(
        "state(s) from which reruns alone never reach the config" in v and "the config moves on to a third release -> rerun" in v
        for v in found
    ), found
