"""What a run records as the stack's outputs: the starts and the canaries' starts beside their verdicts."""

from __future__ import annotations

from infercrane.shell import outputs


def test_a_replica_this_run_did_not_start_keeps_the_start_the_stack_carried() -> None:
    earlier = {"a": {"healthy": 40.0}, "b": {"healthy": 50.0}}
    assert outputs.last_starts(earlier, {"b": {"healthy": 9.0}}) == {"a": {"healthy": 40.0}, "b": {"healthy": 9.0}}


def test_a_verdict_carries_its_canaries_starts_beside_its_record_never_the_baselines() -> None:
    verdict = {
        "record": {
            "measured": [
                {"replica": "r0", "side": "canary"},
                {"replica": "r1", "side": "baseline"},
                {"replica": "r0 (old pod)", "side": "baseline"},
            ]
        }
    }
    starts = {"r0": {"healthy": 12.0}, "r1": {"healthy": 11.0}}
    assert outputs.canary_starts(verdict, starts) == {"starts": {"r0": {"healthy": 12.0}}}
    assert outputs.canary_starts(verdict, {}) == {}
