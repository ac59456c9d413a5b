"""A replica's start, stage by stage, from the scheduler's and the kubelet's Events (their own
words, as a kubelet of 1.36 writes them) and the pod's Ready condition."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from infercrane.live.status import ledger, startup

POD = "infercrane-a-5d8f9c7b6-x2x4q"
T0 = datetime(2026, 12, 7, 10, 0, 0, tzinfo=UTC)


def ev(
    reason: str, message: str, at: int, kind: str = "Pod", name: str = POD, last: int | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": name},
        "type": "Warning" if reason in ("Failed", "BackOff", "Unhealthy", "FailedScheduling") else "Normal",
        "reason": reason,
        "message": message,
        "firstTimestamp": f"2026-12-07T10:{at // 60:02d}:{at % 60:02d}Z",
        "lastTimestamp": f"2026-12-07T10:{(last or at) // 60:02d}:{(last or at) % 60:02d}Z",
    } | extra


SCHEDULED = ev("Scheduled", f"Successfully assigned ns/{POD} to node-0", 1)
PULLING = ev("Pulling", 'Pulling image "vllm/vllm-openai@sha256:aa"', 2)
PULLED = ev(
    "Pulled",
    'Successfully pulled image "vllm/vllm-openai@sha256:aa" in 40.512s (40.512s including waiting). Image size: 1 bytes.',
    43,
)
PRESENT = ev("Pulled", 'Container image "vllm/vllm-openai@sha256:aa" already present on machine', 2)
CREATED = ev("Created", "Created container: engine", 44)
STARTED = ev("Started", "Started container engine", 45)


def pod(ready_at: int | None = None, restarts: int = 0) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True" if ready_at is not None else "False"}
    if ready_at is not None:
        ready["lastTransitionTime"] = f"2026-12-07T10:{ready_at // 60:02d}:{ready_at % 60:02d}Z"
    return {
        "metadata": {"name": POD, "creationTimestamp": "2026-12-07T10:00:00Z"},
        "status": {"conditions": [ready], "containerStatuses": [{"name": "engine", "restartCount": restarts}]},
    }


def test_a_start_read_with_its_pod_has_every_stage_in_seconds_from_its_creation() -> None:
    (s,) = startup.starts([SCHEDULED, PULLING, PULLED, CREATED, STARTED], [pod(ready_at=125)]).values()
    assert s.stage == startup.HEALTHY
    out = s.as_output()
    assert out == {
        "pod": POD,
        "stage": "healthy",
        "scheduled": 1.0,
        "imagePulled": 43.0,
        "imagePresent": False,
        "pullSeconds": 40.5,
        "pulls": [{"image": "vllm/vllm-openai@sha256:aa", "present": False, "seconds": 40.5, "bytes": 1}],
        "started": 45.0,
        "healthy": 125.0,
        "restarts": 0,
    }
    assert startup.line(out) == "scheduled 1 s, image pulled 43 s (pull 40.5 s, 1 B), started 45 s, healthy 125 s"
    assert [startup.size_text(n) for n in (5_583_457_485, 268435456, 12288)] == ["5.2 GiB", "256 MiB", "12 KiB"]


def test_a_start_with_a_model_image_pulls_two_images_from_the_first_pulling_to_the_last_pulled() -> None:
    model = "registry.example/models/m@sha256:bb"
    events = [
        SCHEDULED,
        ev("Pulling", f'Pulling image "{model}"', 2),
        ev("Pulled", f'Successfully pulled image "{model}" in 20s (20s including waiting). Image size: 268435456 bytes.', 22),
        ev("Pulling", 'Pulling image "vllm/vllm-openai@sha256:aa"', 23),
        ev("Pulled", 'Container image "vllm/vllm-openai@sha256:aa" already present on machine', 23),
        CREATED,
        STARTED,
    ]
    (s,) = startup.starts(events, [pod(ready_at=125)]).values()
    out = s.as_output()
    assert (out["imagePulled"], out["imagePresent"], out["pullSeconds"]) == (23.0, False, 20.0)
    assert [(p["image"], p["present"], p["bytes"]) for p in out["pulls"]] == [
        (model, False, 268435456),
        ("vllm/vllm-openai@sha256:aa", True, None),
    ]
    assert startup.line(out).startswith("scheduled 1 s, image pulled 23 s (pull 20 s, 256 MiB)")
    both_present = [SCHEDULED, ev("Pulled", f'Container image "{model}" already present on machine', 2), PRESENT]
    (s,) = startup.starts(both_present).values()
    assert s.present and s.pull_seconds is None


def test_an_image_the_node_had_is_said_present_and_healthy_is_unknown_without_the_pod() -> None:
    (s,) = startup.starts([SCHEDULED, PRESENT, CREATED, STARTED]).values()
    assert s.present and s.pull_seconds is None and s.healthy is None
    assert s.stage == startup.LOADING  # from the Events alone: started, healthy not known
    # Timed from its first Event (the scheduler's), the pod's creation not read.
    assert (
        startup.line(s.as_output())
        == "scheduled 0 s, image present, started 44 s; now loading (its engine's /health not 200 yet)"
    )


@pytest.mark.parametrize(
    ("events", "stage", "since", "fix"),
    [
        (
            [ev("FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", 0)],
            "scheduling",
            0,
            "free or add a node",
        ),
        (
            [SCHEDULED, PULLING, ev("BackOff", 'Back-off pulling image "x"', 30)],
            "pulling its image",
            2,
            "check that the nodes can pull",
        ),
        ([SCHEDULED, PRESENT], "creating its container", 2, "read the kubelet's words"),
        (
            [SCHEDULED, PULLING, PULLED, CREATED, STARTED],
            "loading (its engine's /health not 200 yet)",
            45,
            "raise the replica's startupBudgetSeconds",
        ),
    ],
    ids=["scheduling", "pulling", "creating", "loading"],
)
def test_a_stalled_start_is_named_by_its_stage_with_the_time_spent_there_and_its_fix(
    events: list[dict[str, Any]], stage: str, since: int, fix: str
) -> None:
    now = datetime(2026, 12, 7, 10, 10, 0, tzinfo=UTC)
    said = startup.stalled(startup.starts(events), "infercrane-a", now)
    assert said.startswith(f"stalled {stage} for {600 - since} s -- fix: {fix}"), said


def test_a_restarted_engine_is_loading_again_since_its_last_start() -> None:
    restarted = ev("Started", "Started container engine", 45, last=200, count=2)
    all_starts = startup.starts([SCHEDULED, PRESENT, CREATED, restarted], [pod(restarts=1)])
    assert all_starts[POD].restarts == 1
    assert startup.stalled(all_starts, "infercrane-a", T0.replace(minute=5)).startswith(
        "stalled loading (its engine's /health not 200 yet) for 100 s"
    )


def test_only_the_current_replica_sets_newest_pod_is_judged_and_a_healthy_one_has_no_stall() -> None:
    old = "infercrane-a-1111111111-aaaaa"
    events = [ev("Scheduled", "…", 0, name=old), ev("Pulled", "already present on machine", 0, name=old)]
    events += [ev("Scheduled", "…", 50), PULLING]
    all_starts = startup.starts(events, [pod(ready_at=None)])
    now = T0.replace(minute=2)
    assert startup.stalled(all_starts, "infercrane-a", now, current="infercrane-a-5d8f9c7b6").startswith(
        "stalled pulling its image"
    )
    assert startup.stalled(all_starts, "infercrane-a", now, current="infercrane-a-1111111111").startswith(
        "stalled creating its container"
    )
    assert startup.stalled(startup.starts([SCHEDULED, PRESENT, STARTED], [pod(ready_at=50)]), "infercrane-a", now) == ""
    assert startup.stalled(all_starts, "infercrane-b", now) == "", "no trace of another replica's pods"


def test_a_kserve_predictors_pods_are_the_replicas() -> None:
    name = "infercrane-k"
    predictor_pod = f"{name}-predictor-7d9f-abcde"
    all_starts = startup.starts([ev("Scheduled", "…", 0, name=predictor_pod), ev("Pulling", "…", 1, name=predictor_pod)])
    assert [s.pod for s in startup.of_replica(all_starts, name)] == [predictor_pod]


def test_a_kubelet_event_stamped_to_the_second_never_ends_a_stage_before_the_one_before_it() -> None:
    """The scheduler stamps its Event to the microsecond (eventTime), the kubelet to the second: a
    pull stamped 10:00:00 after a scheduling at 10:00:00.3 ended in that same second."""
    scheduled = {
        "involvedObject": {"kind": "Pod", "name": POD},
        "reason": "Scheduled",
        "eventTime": "2026-12-07T10:00:00.300000Z",
    }
    present = ev("Pulled", "already present on machine", 0)
    started = ev("Started", "Started container engine", 0)
    out = startup.starts([scheduled, present, started], [pod(ready_at=6)])[POD].as_output()
    assert (out["scheduled"], out["imagePulled"], out["started"], out["healthy"]) == (0.3, 0.3, 0.3, 6.0), out


def test_the_ledger_records_each_replicas_newest_start_ended_by_what_the_deploy_saw() -> None:
    """Without the pods, *healthy* is when the deploy's wait saw the replica ready and *served* when
    its evidence was taken; an older pod of the replica is not its start."""
    older = "infercrane-a-1111111111-aaaaa"
    events = [
        ev("Scheduled", "old", 0, name=older),
        ev("Started", "old", 1, name=older),
        SCHEDULED,
        PULLING,
        PULLED,
        CREATED,
        STARTED,
    ]
    ready = {"a": datetime(2026, 12, 7, 10, 1, 30, tzinfo=UTC)}
    served = {"a": datetime(2026, 12, 7, 10, 1, 31, tzinfo=UTC)}
    records = ledger.records_of(startup.starts(events), {"a": "infercrane-a", "b": "infercrane-b"}, ready, served)
    assert set(records) == {"a"}  # b left no trace
    a = records["a"]
    assert a["pod"] == POD and a["stage"] == startup.HEALTHY
    assert (a["scheduled"], a["imagePulled"], a["started"], a["healthy"], a["served"]) == (0.0, 42.0, 44.0, 89.0, 90.0)
    assert startup.line(a).endswith("healthy 89 s, serving 90 s")


def test_the_ledger_takes_healthy_from_the_pods_ready_condition_when_the_pods_were_read() -> None:
    ready = {"a": datetime(2026, 12, 7, 10, 5, 0, tzinfo=UTC)}  # the wait saw it later than it was
    records = ledger.records_of(
        startup.starts([SCHEDULED, PRESENT, STARTED], [pod(ready_at=70)]), {"a": "infercrane-a"}, ready, {}
    )
    assert records["a"]["healthy"] == 70.0 and "served" not in records["a"]


def test_a_pod_scheduled_with_no_word_from_its_kubelet_is_waiting_for_its_node_not_pulling() -> None:
    """A kubelet says Pulling or Pulled within a second of the binding; one that says nothing (down,
    or a simulated node) is not guessed to be pulling."""
    (s,) = startup.starts([SCHEDULED]).values()
    assert s.stage == startup.NODE and s.since == T0.replace(second=1)
    said = startup.stalled({s.pod: s}, "infercrane-a", T0.replace(minute=2))
    assert said == f"stalled {startup.NODE} for 119 s -- fix: {startup.FIXES[startup.NODE]}"
