"""How long a rollout takes and the GPU-hours it holds, estimated from recorded starts."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane.core.model.endpoints import CanaryPolicy
from infercrane.core.plan import duration
from infercrane.core.plan.waves import EndpointRollout, Lane, Rollout, Stage, Wave


def recorded(gpu: str, image: str, *healthy: float) -> dict[str, dict[str, Any]]:
    return {f"{gpu}-{image}-{i}": {"gpu": gpu, "image": image, "healthy": h} for i, h in enumerate(healthy)}


def test_a_start_is_the_median_of_its_products_recorded_starts_with_its_image_first() -> None:
    starts = recorded("L40S", "img@sha256:a", 40, 60, 50) | recorded("L40S", "img@sha256:b", 200) | recorded("H100", "x", 9)
    same = duration.expected_start("L40S", "img@sha256:a", starts)
    assert same.seconds == 50 and same.basis == "3 recorded start(s) of L40S, this image"
    other = duration.expected_start("L40S", "img@sha256:new", starts)
    assert other.seconds == 55 and other.basis == "4 recorded start(s) of L40S, any image"


def test_a_product_never_started_gets_the_stated_default() -> None:
    start = duration.expected_start("B200", "img", recorded("L40S", "img", 40))
    assert start.seconds == duration.DEFAULT_START_SECONDS
    assert start.basis == f"no recorded start of B200: the default {duration.DEFAULT_START_SECONDS:g} s"


def endpoint(mode: str, waves: list[tuple[str, ...]], **kw: Any) -> EndpointRollout:
    return EndpointRollout(
        endpoint="e",
        max_unavailable=1,
        max_surge=1 if mode == "surge" else 0,
        mode=mode,  # type: ignore[arg-type]
        waves=tuple(Wave(w, w) for w in waves),
        ready_before=len(waves),
        ready_after=len(waves),
        lowest_ready=len(waves) - 1,
        gpus_before=len(waves),
        gpus_after=len(waves),
        peak_gpus=len(waves) + (1 if mode == "surge" else 0),
        **kw,
    )


REPLICAS = {k: duration.Replica(duration.Expected(40.0, "b"), drain_seconds=5.0) for k in ("a", "b")}


def test_in_place_each_wave_drains_its_old_pod_then_starts_the_new_one_and_holds_no_gpu_more() -> None:
    e = endpoint("in place", [("a",), ("b",)])
    lane = Lane("e", (Stage(frozenset({"a"}), wave=0), Stage(frozenset({"b"}), wave=1)))
    est = duration.estimate(Rollout((e,), (lane,), restarts=frozenset({"a", "b"})), REPLICAS)
    per_stage = duration.STAGE_SECONDS + 5 + 40 + duration.EVIDENCE_SECONDS
    assert [s.seconds for s in est.lanes[0].stages] == [per_stage, per_stage]
    assert [s.begins for s in est.lanes[0].stages] == [0, per_stage]
    assert est.seconds == pytest.approx(duration.RUN_SECONDS + 2 * per_stage)
    assert est.gpu_hours == 0 and est.bases == ("b",)


def test_a_surge_starts_beside_the_old_pod_and_holds_its_borrowed_gpus_for_the_stage_and_the_bake() -> None:
    policy = CanaryPolicy.model_validate({"bakeSeconds": 120})
    e = endpoint("surge", [("a",), ("b",)], canary=("a",), canary_wave=0, canary_policy=policy)
    lane = Lane(
        "e",
        (
            Stage(frozenset({"a"}), wave=0, bake=True, borrow=(("L40S", 1),)),
            Stage(frozenset({"b"}), wave=1, borrow=(("L40S", 1),)),
        ),
    )
    est = duration.estimate(Rollout((e,), (lane,), restarts=frozenset({"a", "b"})), REPLICAS)
    plain = duration.STAGE_SECONDS + 40 + duration.EVIDENCE_SECONDS  # no drain before: the old pod serves meanwhile
    assert [s.seconds for s in est.lanes[0].stages] == [plain + 120, plain]
    assert est.gpu_hours == pytest.approx((plain + 120 + plain) / 3600)


def test_a_key_applied_with_the_template_it_runs_starts_nothing_and_a_deleted_one_is_waited_until_gone() -> None:
    e = endpoint("in place", [("a",)])
    lane = Lane("e", (Stage(frozenset({"a"}), delete=frozenset({"b"}), wave=0),))
    est = duration.estimate(Rollout((e,), (lane,), restarts=frozenset()), REPLICAS)
    assert est.lanes[0].stages[0].seconds == duration.STAGE_SECONDS + 5  # b's drain only
    assert est.bases == ()


def test_lanes_run_side_by_side_so_the_rollout_takes_its_longest() -> None:
    slow = {"a": duration.Replica(duration.Expected(300.0, "x"), 0.0), "b": duration.Replica(duration.Expected(10.0, "y"), 0.0)}
    lanes = (Lane("e1", (Stage(frozenset({"a"}), wave=0),)), Lane("e2", (Stage(frozenset({"b"}), wave=0),)))
    est = duration.estimate(Rollout((), lanes), slow)
    assert est.seconds == pytest.approx(duration.RUN_SECONDS + duration.STAGE_SECONDS + 300 + duration.EVIDENCE_SECONDS)
    doc = est.as_json()
    assert [x["endpoint"] for x in doc["endpoints"]] == ["e1", "e2"] and doc["startsFrom"] == ["x", "y"]
