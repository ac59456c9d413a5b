"""The GPU ledger of one rollout (infercrane.core.plan.ledger): what the lanes borrow beyond each
endpoint's own, per product, against rollout.maxExtraGpus."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.ledger import Ledger, too_large
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollout import plan
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
    members = [LiveReplica(f"a{i}", "a", ReplicaState.SETTLED, 2, "L4") for i in range(2)]
    targets = [Target(m.key, "a", 2, restarts=True, product="L4") for m in members]
    rollout = plan(members, targets, lambda name: SURGE, max_extra_gpus=1)
    assert rollout.never_lent() == [
        "endpoint a wave 1/2 borrows 2 GPU(s) of L4 at once",
        "endpoint a wave 2/2 borrows 2 GPU(s) of L4 at once",
    ]
    assert rollout.borrowed_at_once() == {"L4": 2}


def test_a_product_change_a_grow_and_an_in_place_roll_borrow_nothing() -> None:
    members = [LiveReplica(f"m{i}", "m", ReplicaState.SETTLED, 1, "A100") for i in range(2)]
    members += [LiveReplica(f"g{i}", "g", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    members += [LiveReplica(f"p{i}", "p", ReplicaState.SETTLED, 1, "L4") for i in range(2)]
    targets = [Target(f"m{i}", "m", 1, restarts=True, product="H100") for i in range(2)]  # moves product, in place
    targets += [Target(f"g{i}", "g", 1, product="L4") for i in range(3)]  # grows by one
    targets += [Target(f"p{i}", "p", 1, restarts=True, product="L4") for i in range(2)]
    rollout = plan(members, targets, lambda name: RolloutPolicy(), max_extra_gpus=0)
    assert [s.borrow for lane in rollout.lanes for s in lane.stages] == [()] * sum(len(x.stages) for x in rollout.lanes)
    assert rollout.never_lent() == []


def test_max_extra_gpus_is_the_stacks_and_a_whole_number_each_said_with_the_fix() -> None:
    from infercrane.core.errors import ConfigError
    from infercrane.core.load import loading

    values: dict[str, Any] = {
        "infercrane:kubernetes": {"context": "c", "namespace": "n", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64},
        "infercrane:endpoints": {"e": {"rollout": {"maxExtraGpus": 1}}},
        "infercrane:replicas": [{"key": "k0", "model": "m/m", "name": "e", "gpu": "NVIDIA-L4"}],
    }
    with pytest.raises(ConfigError) as per_endpoint:
        loading.load(values, source="stacks/Pulumi.dev.yaml", env={})
    assert (
        "- stacks/Pulumi.dev.yaml: infercrane:endpoints.e.rollout.maxExtraGpus: is not a known setting\n"
        "    fix: maxExtraGpus is the whole stack's: set it under infercrane:kubernetes.rollout"
    ) in str(per_endpoint.value)
    values["infercrane:endpoints"] = {}
    values["infercrane:kubernetes"]["rollout"] = {"maxExtraGpus": -1}
    with pytest.raises(ConfigError) as negative:
        loading.load(values, source="stacks/Pulumi.dev.yaml", env={})
    assert (
        "- stacks/Pulumi.dev.yaml: infercrane:kubernetes.rollout.maxExtraGpus: -1: Input should be greater than or equal "
        "to 0\n    fix: use a whole number >= 0 (the extra GPUs of each product all endpoints' surges may hold at once), "
        "or leave it out: no stack limit"
    ) in str(negative.value)


def test_plan_says_what_the_surges_want_at_once_against_the_ledger_in_words_and_in_json() -> None:
    from infercrane.cli.rollout_text import rollout_doc, rollout_lines

    members = [LiveReplica(f"{e}{i}", e, ReplicaState.SETTLED, 1, "L4") for e in "ab" for i in range(2)]
    targets = [Target(m.key, m.endpoint, 1, restarts=True, product="L4") for m in members]
    capped = plan(members, targets, lambda name: SURGE, max_extra_gpus=1)
    assert rollout_lines(capped)[-1] == (
        "  extra GPUs: at most 1 of each product at once, all endpoints together (rollout.maxExtraGpus); "
        "their surges want 2 of L4 at once: they take turns"
    )
    doc = rollout_doc(capped)
    assert (doc["maxExtraGpus"], doc["extraGpusWanted"]) == (1, {"L4": 2})
    uncapped = plan(members, targets, lambda name: SURGE)
    assert not any("extra GPUs:" in line for line in rollout_lines(uncapped))
    assert rollout_doc(uncapped)["maxExtraGpus"] is None


def test_a_need_within_what_a_lane_holds_is_never_refused_even_over_the_cap() -> None:
    # A run cut short left a 2 GPUs beyond its own: the ledger starts with them lent, over a cap of 1.
    ledger = Ledger(1, (("a", (("L4", 2),)),))
    assert ledger.take("b", (("L4", 1),)) is None  # nothing is left to lend
    assert ledger.take("a", (("L4", 2),)) == ledger  # a takes nothing new: it goes on
    assert ledger.take("a", (("L4", 3),)) is None
    assert ledger.keep("a", ()).take("b", (("L4", 1),)) is not None  # a's deletions gone: b may borrow


def _cut_surge() -> tuple[list[LiveReplica], list[Target]]:
    """A surge cutover a0,a1 -> n0,n1 cut short (killed, or its lane stopped) after n0 started:
    a0, a1 and n0 run, one GPU each; the endpoint's own is 2."""
    members = [LiveReplica(k, "a", ReplicaState.SETTLED, 1, "L4") for k in ("a0", "a1", "n0")]
    return members, [Target(k, "a", 1, product="L4") for k in ("n0", "n1")]


def test_a_rerun_after_a_surge_cut_short_counts_the_leftover_as_lent_not_as_its_own() -> None:
    members, targets = _cut_surge()
    blind = plan(members, targets, lambda name: SURGE, max_extra_gpus=1)
    assert blind.lent == () and all(s.borrow == () for s in blind.lanes[0].stages)  # own 3: another lane may borrow 1 more
    rerun = plan(members, targets, lambda name: SURGE, max_extra_gpus=1, started={"a": (("L4", 2),)})
    (e,) = rerun.endpoints
    assert (e.started, e.lent, rerun.lent) == ((("L4", 2),), (("L4", 1),), (("a", (("L4", 1),)),))
    assert [s.borrow for s in rerun.lanes[0].stages] == [(("L4", 1),)] * len(rerun.lanes[0].stages)
    assert rerun.lanes[0].stages[-1].keep == ()  # its last deletions gone, it holds its own again
    assert rerun.never_lent() == []
    assert rerun.started() == {"a": (("L4", 2),)}  # the record it keeps until the lane finishes


def test_a_replica_whose_own_surge_is_under_way_holds_a_pod_more_lent_until_it_settles() -> None:
    members = [
        LiveReplica("b0", "b", ReplicaState.AVAILABLE, 1, "L4"),  # its Deployment's surge pod is starting
        LiveReplica("b1", "b", ReplicaState.SETTLED, 1, "L4"),
    ]
    rollout = plan(
        members,
        [Target("b0", "b", 1, product="L4"), Target("b1", "b", 1, restarts=True, product="L4")],
        lambda name: SURGE,
        max_extra_gpus=1,
    )
    assert rollout.lent == (("b", (("L4", 1),)),)
    first = rollout.lanes[0].stages[0]
    assert "b0" in first.apply and first.keep == ()  # b0 waited settled: given back
