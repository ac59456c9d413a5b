"""The exhaustive check of the real planner (``tests/rollout_model.py``): every reachable state of
small worlds, under every interleaving, keeps the rollout's promises -- and the check finds each
defect it was built for when the rule that fixes it is reverted."""

from __future__ import annotations

import time

import pytest

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from tests import rollout_model as model
from tests.unit.core.plan.worlds import capped, violations

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


@pytest.mark.exhaustive
def test_surges_sharing_a_ledger_never_hold_more_than_it_lends_and_always_finish() -> None:
    # pool 5: exactly the endpoints' own and the one GPU the ledger lends (the surges take turns);
    # pool 6: room for both surges at once, yet the run never holds more than the ledger lends.
    explored, failed = model.check(iter([capped(5), capped(6)]))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 10_000


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
    found = violations(world)
    assert any("3 GPUs held, above its budget 2" in v and "lane a canary rejected" in v for v in found), found


@pytest.mark.exhaustive
def test_a_lost_state_and_another_lanes_engine_failure_keep_every_release_judged() -> None:
    lost = [w for w in model.release_worlds() if w.lost_state]
    failing = [w for w in model.release_worlds() if w.engine_failures and w.endpoints[1].after[0][0] == "bo0"]
    explored, failed = model.check(iter([*lost, *failing]))
    assert not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 500_000


@pytest.mark.exhaustive
def test_a_new_release_pushed_mid_rollout_is_judged_by_its_own_canary_and_keeps_the_floor() -> None:
    """Issue #64: the config moves on to a third release while the change still rolls (after a
    kill or a stopped wave): no replica runs it beyond its canary without an ACCEPT of its own, a
    rejected one is retried only as itself, and the floor, the budget and convergence hold -- a
    surge cutover's replica left loading too (recreated: test_rollout_found.py)."""
    third = [w for w in model.release_worlds() if w.third_release]
    explored, failed = model.check(iter(third))
    assert len(third) == 4 and not failed, "\n".join(f"{r.world}:\n  " + "\n  ".join(r.violations) for r in failed)
    assert explored > 600_000
