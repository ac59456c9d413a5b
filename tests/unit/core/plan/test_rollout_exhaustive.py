"""The exhaustive check of the real planner (``tests/rollout_model.py``): every reachable state of
small worlds, under every interleaving, keeps the rollout's promises -- and the check finds each
defect it was built for when the rule that fixes it is reverted."""

from __future__ import annotations

import time

import pytest

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from infercrane.core.plan import ledger, rollout, states, waves
from tests import rollout_model as model

POLICIES = [(1, 0), (2, 0), (0, 1), (1, 1)]


@pytest.mark.parametrize(
    "pools",
    [pytest.param(range(2), id="fast bound"), pytest.param(range(2, 3), id="pools of two more", marks=pytest.mark.exhaustive)],
)
def test_every_reachable_state_keeps_the_floor_the_gpu_budget_the_printed_lowest_and_a_way_to_the_config(pools: range) -> None:
    """Every change kind at 2 replicas under each policy, on pools of the budget and one more (the
    fast tier's bound: >= 10^5 states), and two more (`make test`)."""
    began = time.perf_counter()
    explored, failed = model.check(
        model.worlds(range(2, 3), POLICIES, ["update", "cutover", "shrink", "grow"], pools, pairs=False)
    )
    seconds = time.perf_counter() - began
    print(f"exhaustive rollout check: {explored} states in {seconds:.1f} s")
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored >= 100_000


@pytest.mark.exhaustive
def test_two_endpoints_sharing_one_pool_keep_their_promises() -> None:
    worlds = [
        model.World(
            (
                model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=1, max_surge=0)),
                model.change("b", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),
            ),
            pool=pool,
            max_adversities=1,
        )
        for pool in (4, 5)
    ]
    explored, failed = model.check(iter(worlds))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 10_000


def capped(pool: int, cap: int = 1, adversities: int = 1) -> model.World:
    """Two endpoints surging on one pool, their extra GPUs lent by one ledger of ``cap``."""
    surge = RolloutPolicy(max_unavailable=0, max_surge=1)
    return model.World(
        (model.change("a", "cutover", 2, surge), model.change("b", "update", 2, surge)),
        pool=pool,
        max_extra=cap,
        max_adversities=adversities,
    )


@pytest.mark.exhaustive
def test_surges_sharing_a_ledger_never_hold_more_than_it_lends_and_always_finish() -> None:
    # pool 5: exactly the endpoints' own and the one GPU the ledger lends (the surges take turns);
    # pool 6: room for both surges at once, yet the run never holds more than the ledger lends.
    explored, failed = model.check(iter([capped(5), capped(6)]))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 10_000


def test_surges_that_ignore_the_ledger_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ledger reverted: every lane takes what it borrows, whatever is lent already.
    monkeypatch.setattr(ledger.Ledger, "take", lambda self, endpoint, need: self)
    found = _violations(capped(6, adversities=0))
    assert any("above its ceiling 5 (maxExtraGpus 1)" in v for v in found), found


def _violations(world: model.World) -> list[str]:
    return model.explore(world).violations


def test_counting_an_available_but_unsettled_replica_as_down_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 1 reverted: only a settled replica counts as up. An autoscaler adding a pod makes a
    # replica available but unsettled; the planner restarts it beside the wave's own.
    monkeypatch.setattr(states.ReplicaState, "available", property(lambda self: self == states.ReplicaState.SETTLED))
    # The lanes' stop for a replica planned as down that serves (shell.lanes.serving_again) would
    # catch it at the stage since: reverted too, to show the planner's own defect.
    monkeypatch.setattr(model, "SERVING_AGAIN_STOPS", False)
    world = model.World((model.change("a", "update", 2, RolloutPolicy(max_unavailable=1)),), pool=2)
    found = _violations(world)
    assert any("below its floor" in v and "autoscaler scales" in v for v in found), found


def test_a_surge_cut_before_its_deletion_without_retiring_the_surplus_first_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 2 reverted: the surplus old replica is kept to the end; on a pool of exactly the
    # budget the next surge never schedules, on every rerun; on a larger pool it holds a GPU more.
    monkeypatch.setattr(rollout, "_over_budget", lambda *args: False)
    tight = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=3)
    found = _violations(tight)
    assert any("never reach the config" in v for v in found), found  # (first reached by a kill mid-wave)
    wide = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=4)
    assert any("above its budget" in v for v in _violations(wide))


def test_a_stage_that_goes_on_while_its_deleted_pods_still_drain_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Defect 3 reverted: deletions in the background -- the object vanishes, its pod still drains
    # holding its GPU, and the successor starts beside it.
    monkeypatch.setattr(waves, "STAGE_DELETION", "Background")
    world = model.World((model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=1)),), pool=4)
    found = _violations(world)
    assert any("above its budget" in v and "deletions gone" in v for v in found), found


def test_a_counterexample_prints_as_the_events_that_lead_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waves, "STAGE_DELETION", "Background")
    world = model.World((model.change("a", "cutover", 1, RolloutPolicy(max_unavailable=1)),), pool=2, max_adversities=0)
    (first, *_) = _violations(world)
    assert first.startswith("endpoint a: 2 GPUs held, above its budget 1")
    assert "after: rerun -> lane a deletes ['ao0'] -> lane a deletions gone -> schedule an0" in first, first


@pytest.mark.exhaustive
def test_a_canary_its_rejection_and_the_rollback_keep_the_floor_the_budget_and_a_way_to_each_config() -> None:
    """The canary's step, its verdict either way, a rollback after a rejection (the previous config,
    reached by its own reruns), kills and out-of-band restarts, on pools of exactly the budget."""

    # every kind at 2 replicas, the updates at 3 (the other kinds at 3: `make check-rollout`)
    def update(e: model.Endpoint) -> bool:
        return e.after == tuple((k, 1) for k in e.before)

    worlds = [w for w in model.canary_worlds(range(2, 4)) if len(w.endpoints[0].before) == 2 or update(w.endpoints[0])]
    explored, failed = model.check(iter(worlds))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 100_000


def test_a_required_canary_left_without_a_baseline_by_a_killed_run_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first-step canary reverted: only a wave of units can be the canary. A run killed after an
    # in-place cutover stopped its first old replica leaves a state the required canary refuses forever.
    real = rollout._canary
    monkeypatch.setattr(
        rollout,
        "_canary",
        lambda units, mode, policy, members, targets, release, moving, first, down=(): real(
            units, mode, policy, members, targets, release, moving, [], down
        ),
    )
    (world,) = [w for w in model.canary_worlds(range(2, 4)) if w.endpoints[0].after[0][0] == "an0" and len(w.endpoints[0].before) == 2
                and w.endpoints[0].policy.max_unavailable == 1]  # fmt: skip
    found = _violations(world)
    assert any("never reach the config" in v and "lane a deletes ['ao0'] -> killed" in v for v in found), found


@pytest.mark.exhaustive
def test_a_key_flipped_back_to_a_template_whose_pod_still_drains_holds_no_gpu_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by this check (issue #48): in place (Recreate), a key flipped back to the revision whose
    pod is still terminating -- a rerun of the rejected release right after its rollback restarted
    the canary, or the previous config right after a run restarted it -- got a new pod of that
    revision at once (the ReplicaSet counts no terminating pod), one GPU above the endpoint's budget.
    Fixed: a lane applies a key only once none of its pods is terminating (shell.lanes, by the
    Deployment's status.terminatingReplicas). Every canary world on a pool with room for the GPU
    more holds; with the rule reverted, the GPU more is found."""
    explored, failed = model.check(iter(model.canary_worlds(range(2, 3), slack=1)))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    monkeypatch.setattr(model, "DRAINED_FIRST", False)
    world = model.World(
        (model.change("a", "update", 2, RolloutPolicy(max_unavailable=1, canary=CanaryPolicy(required=True))),), pool=3
    )
    found = _violations(world)
    assert any("3 GPUs held, above its budget 2" in v and "lane a canary rejected" in v for v in found), found


# ---------------------------------------------------------------------------------------------
# The release invariants (issue #64): under a required canary no replica beyond a canary is ever
# available on a release no canary accepted; a REJECT ends rolled back or remembered, whatever else
# ends the run; a rollback never deletes a replica that served before the deploy.


def _required(kind: str = "update", mu: int = 1, ms: int = 0, n: int = 2, **kw: object) -> model.World:
    policy = RolloutPolicy(max_unavailable=mu, max_surge=ms, canary=CanaryPolicy(required=True))
    return model.World((model.change("a", kind, n, policy),), pool=n + ms, **kw)  # type: ignore[arg-type]


@pytest.mark.exhaustive
def test_a_lost_state_and_another_lanes_engine_failure_keep_every_release_judged() -> None:
    lost = [w for w in model.release_worlds() if w.lost_state]
    failing = [w for w in model.release_worlds() if w.engine_failures and w.endpoints[1].after[0][0] == "bo0"]
    explored, failed = model.check(iter([*lost, *failing]))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 500_000


def test_a_rerun_after_a_kill_during_the_bake_that_ignores_the_judging_mark_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The judging mark reverted: the rerun sees the canary's release "already serving" and rolls it on.
    monkeypatch.setattr(model, "JUDGING_MARKS", False)
    found = _violations(_required(max_adversities=1, autoscaler=False))
    assert any("available on a release no canary accepted" in v and "-> killed -> rerun" in v for v in found), found


@pytest.mark.exhaustive
def test_a_reject_dropped_by_another_lanes_engine_failure_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "VERDICTS_SURVIVE_ENGINE_FAILURE", False)
    (world,) = [w for w in model.release_worlds() if w.engine_failures and w.endpoints[1].after[0][0] == "bo0"]
    found = _violations(world)
    assert any("ended with neither its canary rolled back nor its rejection remembered" in v for v in found), found


def test_a_rollback_that_deletes_an_unrecorded_replica_that_served_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # "Not recorded" taken as "brought by this deploy" again: the rollback forgets what ran.
    import dataclasses

    real = model.plan_rollback
    monkeypatch.setattr(model, "plan_rollback", lambda e, lane, before: real(dataclasses.replace(e, running=()), lane, before))
    found = _violations(_required(max_adversities=1, autoscaler=False, lost_state=True))
    assert any("the rollback deletes ['ao0'], which served before the deploy" in v for v in found), found


def test_a_replica_moved_before_the_waves_and_left_out_of_the_canary_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first step's canary reverted to what runs the release already: a replica restarted out of
    # band on the old release is moved by the first step, neither canary nor baseline.
    real = rollout._canary

    def as_before(units, mode, policy, members, targets, release, moving, first, down=()):  # type: ignore[no-untyped-def]
        live = {m.key: m.release for m in members}
        kept = [k for k in first if live.get(k, release) == release]
        return real(units, mode, policy, members, targets, release, moving, kept, ())

    monkeypatch.setattr(rollout, "_canary", as_before)
    found = _violations(_required(n=3, max_adversities=1, autoscaler=False))  # a0 down, a1 the canary, a2 the baseline
    assert any("available on a release no canary accepted" in v and "restarted out of band" in v for v in found), found


@pytest.mark.exhaustive
def test_the_ledger_restarting_from_what_runs_after_a_killed_surge_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #64, d: a rerun after a surge cut short (killed, or its lane stopped) counts each
    endpoint's own from the stack's record of the change's start (the gpus mark), and what the cut
    surge left running beyond it as lent already -- so no other lane borrows maxExtraGpus again.
    Reverted (own counted from what runs), the check finds own 4 + 1 held as 6."""
    assert not _violations(capped(6))
    monkeypatch.setattr(model, "GPU_RECORD", False)
    found = _violations(capped(6))
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
    world = _required(mu=0, ms=1, max_adversities=1, autoscaler=False)
    assert not _violations(world)
    monkeypatch.setattr(model, switch, False)
    found = _violations(world)
    assert any("the rollback starts a pod of ['ao0'], whose old pod was held" in v and path in v for v in found), found


def test_a_stage_that_takes_down_a_replica_that_serves_again_since_its_plan_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #64, e: the floor is the endpoint's own -- it allows only the replicas an out-of-band
    restart holds down now, no longer every restart so far (which let a planner take two down after
    one restart that had healed). With it the check found a stage deleting (or restarting) a replica
    its plan counted as down that had come back meanwhile: below the floor. Fixed: such a stage
    stops its lane (shell.lanes.serving_again) and a rerun plans with it serving."""
    world = model.World(
        (model.change("a", "cutover", 2, RolloutPolicy(max_unavailable=0, max_surge=1)),), pool=2, autoscaler=False
    )
    assert not _violations(world)
    monkeypatch.setattr(model, "SERVING_AGAIN_STOPS", False)
    found = _violations(world)
    assert any(
        "1 available, below its floor 2" in v
        and "ao0 restarted out of band -> rerun -> ao0 available -> lane a deletes ['ao0']" in v
        for v in found
    ), found
