"""The GPU ledger of one rollout (infercrane.core.plan.ledger): what the lanes borrow beyond each
endpoint's own, per product, against rollout.maxExtraGpus."""

from __future__ import annotations

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.ledger import Ledger, too_large
from infercrane.core.plan.rollout import Member, Target, plan
from infercrane.core.plan.states import ReplicaState

SURGE = RolloutPolicy(max_unavailable=0, max_surge=1)


def test_a_lane_takes_all_it_needs_or_nothing_and_gives_back_what_it_no_longer_holds() -> None:
    ledger = Ledger(2)
    a = ledger.take("a", (("L4", 1),))
    assert a is not None and a.out("L4") == 1
    assert a.take("b", (("L4", 2),)) is None  # 1 + 2 > 2: nothing of it is lent
    b = a.take("b", (("L4", 1), ("H100", 2)))
    assert b is not None and (b.out("L4"), b.out("H100")) == (2, 2)
    assert b.take("a", (("L4", 1),)) == b  # what a holds already counts toward its need
    freed = b.keep("a", ())
    assert freed.out("L4") == 1 and freed.of("a") == {}
    assert freed.keep("b", (("H100", 1),)).of("b") == {"H100": 1}  # keeps at most what it held


def test_no_cap_lends_whatever_is_asked() -> None:
    ledger = Ledger(None).take("a", (("L4", 7),))
    assert ledger is not None and ledger.out("L4") == 7
    assert too_large(None, {"a wave 1/1": (("L4", 7),)}) == []


def test_a_stage_wider_than_the_cap_is_named_before_anything_is_applied() -> None:
    members = [Member(f"a{i}", "a", ReplicaState.SETTLED, 2, "L4") for i in range(2)]
    targets = [Target(m.key, "a", 2, restarts=True, product="L4") for m in members]
    rollout = plan(members, targets, lambda name: SURGE, max_extra_gpus=1)
    assert rollout.never_lent() == [
        "endpoint a wave 1/2 borrows 2 GPU(s) of L4 at once",
        "endpoint a wave 2/2 borrows 2 GPU(s) of L4 at once",
    ]
    assert rollout.borrowed_at_once() == {"L4": 2}


def test_a_product_change_a_grow_and_an_in_place_roll_borrow_nothing() -> None:
    members = [Member(f"m{i}", "m", ReplicaState.SETTLED, 1, "A100") for i in range(2)]
    members += [Member(f"g{i}", "g", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    members += [Member(f"p{i}", "p", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    targets = [Target(f"m{i}", "m", 1, restarts=True, product="H100") for i in range(2)]  # moves product, in place
    targets += [Target(f"g{i}", "g", 1, product="L4") for i in range(3)]  # grows by one
    targets += [Target(f"p{i}", "p", 1, restarts=True, product="L4") for i in range(2)]
    rollout = plan(members, targets, lambda name: RolloutPolicy(), max_extra_gpus=0)
    assert [s.borrow for lane in rollout.lanes for s in lane.stages] == [()] * sum(len(x.stages) for x in rollout.lanes)
    assert rollout.never_lent() == []
