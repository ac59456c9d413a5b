"""The readiness rule (kubectl rollout status + the seed's generation guard) and the fleet waiter."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from infercrane.core import naming
from infercrane.core.model.target import KubernetesTarget
from infercrane.live.client.api import Live
from infercrane.live.status.readiness import NAMED_LIST_LIMIT, FleetWaiter
from infercrane.live.status.verdicts import Verdict, deployment_verdict, inference_service_verdict
from tests.unit.conftest import DIGEST


def run(coro: Any) -> Any:
    """Run a coroutine on a private loop (asyncio.run would unset the thread's loop for later tests)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def dep(
    generation: int, observed: int, *, replicas: int = 1, updated: int = 1, available: int = 1, **cond: Any
) -> dict[str, Any]:
    conditions = [{"type": t, **c} for t, c in cond.items()]
    return {
        "metadata": {"name": "infercrane-x", "generation": generation},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "conditions": conditions,
        },
    }


@pytest.mark.parametrize(
    ("obj", "applied", "state", "reason"),
    [
        (dep(2, 2), 2, "ready", ""),
        (dep(2, 1), 2, "waiting", "controller has not observed generation 2 yet"),
        (dep(1, 1), 2, "waiting", "controller has not observed generation 2 yet"),
        # Right after a Recreate: the controller observed the new generation but the old pod still
        # counts as available and nothing is updated yet -- a stale status must not count.
        (dep(3, 3, replicas=1, updated=0, available=1), 3, "waiting", "0 of 1 replica(s) updated"),
        (dep(3, 3, replicas=2, updated=1, available=1), 3, "waiting", "1 old replica(s) pending termination"),
        (dep(3, 3, replicas=1, updated=1, available=0), 3, "waiting", "0 of 1 updated replica(s) available"),
        (
            dep(2, 2, available=0, Progressing={"status": "False", "reason": "ProgressDeadlineExceeded", "message": "timed out"}),
            2,
            "failed",
            "ProgressDeadlineExceeded: timed out",
        ),
        (
            dep(2, 2, updated=0, available=0, ReplicaFailure={"status": "True", "message": "quota exceeded"}),
            2,
            "waiting",
            "0 of 1 replica(s) updated (ReplicaFailure: quota exceeded)",
        ),
        # A surge's old pod, deleted once the new one was available, still drains: not gone yet.
        (
            dep(2, 2) | {"status": dep(2, 2)["status"] | {"terminatingReplicas": 1}},
            2,
            "waiting",
            "1 old pod(s) still terminating (draining)",
        ),
        (dep(2, 2, replicas=0, updated=0, available=0), 2, "waiting", "0 of 1 replica(s) updated"),
    ],
    ids=[
        "ready",
        "unobserved",
        "older-generation",
        "recreate-stale",
        "old-pod",
        "not-available",
        "deadline",
        "replica-failure",
        "old-pod-draining",
        "asked-one-has-none",
    ],
)
def test_deployment_verdict_follows_rollout_status_and_never_trusts_a_stale_status(
    obj: dict[str, Any], applied: int, state: str, reason: str
) -> None:
    assert deployment_verdict(obj, applied) == Verdict(state, reason)  # type: ignore[arg-type]


def test_a_deployment_scaled_to_zero_is_ready_only_when_its_count_is_an_autoscalers() -> None:
    """scaling: external (KEDA, an HPA): the autoscaler owns the count and may ask for no pod -- then
    none is awaited, while a pod it scaled away is awaited until it goes. A count of ours is one
    pod: scaled to zero out of band, the replica serves nothing and is not ready."""
    zero = dep(2, 2, replicas=0, updated=0, available=0) | {"spec": {"replicas": 0}}
    assert deployment_verdict(zero, 2, zero_ok=True) == Verdict("ready")
    assert deployment_verdict(zero, 2) == Verdict("waiting", "0 of 0 updated replica(s) available")
    going = dep(2, 2, replicas=1, updated=0, available=1) | {"spec": {"replicas": 0}}
    assert deployment_verdict(going, 2, zero_ok=True) == Verdict("waiting", "1 old replica(s) pending termination")


def applied_at(obj: dict[str, Any], time: str) -> dict[str, Any]:
    obj["metadata"]["managedFields"] = [
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "time": "2026-12-01T12:00:09Z"},
        {"manager": "infercrane-provider-v1", "operation": "Apply", "time": time},
    ]
    return obj


TIMED_OUT = {
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "infercrane-x-old" has timed out progressing.',
    "lastUpdateTime": "2026-12-01T12:00:05Z",
}


def test_a_timeout_from_before_our_apply_is_the_old_rollouts_and_the_new_one_is_waited_for() -> None:
    # The fix applied right after a failed rollout: the controller observed the new template but
    # keeps the old ReplicaSet's timeout until the new one progresses.
    stale = applied_at(dep(4, 4, replicas=1, updated=0, available=0, Progressing=TIMED_OUT), "2026-12-01T12:00:05Z")
    assert deployment_verdict(stale, 4) == Verdict("waiting", "0 of 1 replica(s) updated")


def test_a_timeout_after_our_apply_fails_the_replica() -> None:
    fresh = applied_at(dep(4, 4, available=0, Progressing=TIMED_OUT), "2026-12-01T12:00:01Z")
    assert deployment_verdict(fresh, 4).state == "failed"
    # Without our manager's entry (another tool applied it) the condition is taken as it is.
    assert deployment_verdict(dep(4, 4, available=0, Progressing=TIMED_OUT), 4).state == "failed"


def test_inference_service_ready_only_for_its_current_generation() -> None:
    ready = [{"type": "Ready", "status": "True"}]
    assert (
        inference_service_verdict(
            {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": ready}}, 2
        ).state
        == "ready"
    )
    stale = inference_service_verdict(
        {"metadata": {"generation": 3}, "status": {"observedGeneration": 2, "conditions": ready}}, 3
    )
    assert stale.state == "waiting"


class CachedEvents:
    """A fake client's answer to the Events LIST the waiter makes from the API server's cache
    (``cluster.list_cached``, an HTTP GET beside lightkube): its own LIST of Events, as JSON."""

    @property
    def _client(self) -> Any:
        from types import SimpleNamespace

        from lightkube.resources.core_v1 import Event

        listed = self.list  # type: ignore[attr-defined]

        def get(path: str, params: Any = None) -> Any:
            assert path.endswith("/events") and params == {"resourceVersion": "0"}
            items = [o.to_dict() if hasattr(o, "to_dict") else o for o in listed(Event, namespace="infercrane-system")]
            return SimpleNamespace(raise_for_status=lambda: None, json=lambda: {"items": items})

        return SimpleNamespace(_client=SimpleNamespace(get=get))


class FakeList(CachedEvents):
    """A client whose LIST returns a scripted sequence of namespace snapshots; counts the calls."""

    def __init__(self, snapshots: list[list[dict[str, Any]]]) -> None:
        self.snapshots, self.calls = snapshots, 0

    def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
        if res.__name__ == "Event":
            return []
        snap = self.snapshots[min(self.calls, len(self.snapshots) - 1)]
        self.calls += 1
        return [Wrapped(o) for o in snap]


class Wrapped:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def to_dict(self) -> dict[str, Any]:
        return self.raw


def named(name: str, obj: dict[str, Any]) -> dict[str, Any]:
    return obj | {"metadata": obj["metadata"] | {"name": name}}


def target() -> KubernetesTarget:
    return KubernetesTarget.model_validate({"context": "c", "imageDigest": DIGEST})


def test_one_list_per_tick_serves_every_replica() -> None:
    names = [f"infercrane-{i}" for i in range(50)]
    waiting = [named(n, dep(1, 1, updated=1, available=0)) for n in names]
    ready = [named(n, dep(1, 1)) for n in names]
    client = FakeList([waiting, waiting, ready])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]

    async def all_of_them() -> list[Verdict]:
        return list(await asyncio.gather(*[waiter.wait(n, 1, 60) for n in names]))

    verdicts = run(all_of_them())
    assert {v.state for v in verdicts} == {"ready"}
    assert client.calls == 3  # three ticks for fifty replicas, not fifty informers


class SelectingList(FakeList):
    """A client that answers a LIST as the API server does: only the objects its labels select."""

    def __init__(self, snapshot: list[dict[str, Any]]) -> None:
        super().__init__([snapshot])
        self.asked: list[Any] = []

    def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
        if res.__name__ == "Event":
            return []
        self.asked.append(labels)
        named = (labels or {}).get(naming.LABEL_INSTANCE)
        return [o for o in super().list(res, namespace, labels) if named is None or o.raw["metadata"]["name"] in named.value]


@pytest.mark.parametrize(("waited", "by_name"), [(1, True), (NAMED_LIST_LIMIT, True), (NAMED_LIST_LIMIT + 1, False)])
def test_a_few_waited_objects_are_listed_by_name_and_a_fleet_as_every_object_of_ours(waited: int, by_name: bool) -> None:
    fleet = [named(f"infercrane-{i}", dep(1, 1)) for i in range(NAMED_LIST_LIMIT + 50)]
    client = SelectingList(fleet)
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]
    names = [f"infercrane-{i}" for i in range(waited)]

    async def all_of_them() -> list[Verdict]:
        return list(await asyncio.gather(*[waiter.wait(n, 1, 60) for n in names]))

    assert {v.state for v in run(all_of_them())} == {"ready"}
    (labels,) = client.asked
    assert labels[naming.LABEL_MANAGED_BY] == naming.MANAGED_BY
    if by_name:
        assert sorted(labels[naming.LABEL_INSTANCE].value) == sorted(names)
    else:
        assert naming.LABEL_INSTANCE not in labels


def test_a_tick_rests_as_long_as_its_list_took_when_that_is_longer_than_the_poll() -> None:
    import time

    took = 0.05
    began: list[float] = []

    class Slow(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ != "Event":
                began.append(time.monotonic())
                time.sleep(took)
            return super().list(res, namespace, labels, fields)

    waiting = [named("infercrane-a", dep(1, 1, updated=1, available=0))]
    client = Slow([waiting, waiting, waiting, [named("infercrane-a", dep(1, 1))]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]
    assert run(waiter.wait("infercrane-a", 1, 60)).state == "ready"
    gaps = [b - a for a, b in zip(began, began[1:], strict=False)]
    assert len(gaps) == 3 and min(gaps) >= 2 * took * 0.9, gaps  # the LIST, then as long again


def test_budget_spent_fails_with_the_last_reason() -> None:
    clock = iter([0.0, 0.0] + [100.0] * 1000)
    client = FakeList([[named("infercrane-a", dep(1, 1, updated=1, available=0))]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001, clock=lambda: next(clock))  # type: ignore[arg-type]
    verdict = run(waiter.wait("infercrane-a", 1, 10))
    assert verdict == Verdict(
        "failed", "not ready within its startup budget + margin; last seen: 0 of 1 updated replica(s) available"
    )


def test_unreachable_api_fails_after_the_grace_period_not_the_budget() -> None:
    import httpx2

    class Down:
        def list(self, *a: Any, **k: Any) -> list[Any]:
            raise httpx2.ConnectError("connection refused")

    ticks = iter(range(1000))
    waiter = FleetWaiter(Live(Down(), target()), "Deployment", poll_seconds=0.001, clock=lambda: 10.0 * next(ticks))  # type: ignore[arg-type]
    verdict = run(waiter.wait("infercrane-a", 1, 3600))
    assert verdict.state == "failed"
    assert "cannot reach the Kubernetes API of context 'c'" in verdict.reason
    assert "(for 30 s while waiting for readiness)" in verdict.reason
    assert verdict.api_lost


def test_a_lost_api_is_reported_once_with_how_to_resume() -> None:
    from infercrane.core.errors import NotReady

    reason = "cannot reach the Kubernetes API of context 'c': ConnectError: refused (for 30 s while waiting for readiness)"
    text = str(NotReady([("k0", "n0", reason), ("k1", "n1", reason)], 3, api_lost=True))
    assert text.startswith("the Kubernetes API stopped answering while 2 of 3 replica(s) were not yet ready: cannot reach")
    assert text.count("cannot reach") == 1
    assert "rerun the same command with the same --idempotency-key" in text


def test_the_progress_summary_names_the_commonest_warnings_else_the_status_reason() -> None:
    from infercrane.live.status.progress import Progress

    p = Progress(
        3,
        7,
        {"a": "0 of 1 updated replica(s) available", "b": "0 of 1 updated replica(s) available", "c": "x", "d": "y"},
        20.0,
        warnings={"a": ["FailedScheduling: 0/3 nodes"], "b": ["FailedScheduling: 0/3 nodes", "BackOff: x"], "c": ["BackOff: y"]},
    )
    assert p.summary() == "FailedScheduling on 2, BackOff on 1"
    assert Progress(0, 2, {"a": "r", "b": "r"}, 1.0).summary() == "r"
    no_rights = {"a": ["(Events not readable by this identity: Forbidden; grant …)"]}
    assert Progress(0, 1, {"a": "r"}, 1.0, warnings=no_rights).summary() == "r"


class Listed:
    """A listed object: attribute access for the name, ``to_dict`` for the rest."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.metadata = type("Meta", (), {"name": raw["metadata"]["name"], "uid": raw["metadata"]["uid"]})()

    def to_dict(self) -> dict[str, Any]:
        return self.raw


class ByKind:
    """LIST answers per kind, a snapshot per tick (the last one repeats)."""

    def __init__(self, ticks: list[dict[str, list[dict[str, Any]]]]) -> None:
        self.ticks, self.calls = ticks, 0

    def list(self, res: Any, namespace: str | None = None, labels: Any = None) -> list[Listed]:
        tick = self.ticks[min(self.calls // 2, len(self.ticks) - 1)]
        self.calls += 1
        return [Listed(o) for o in tick.get(res.__name__, [])]


def obj(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "labels": {"app.kubernetes.io/managed-by": "infercrane"}}}


def test_wait_gone_returns_the_last_listing_of_every_kind_as_the_proof() -> None:
    from infercrane.live.status.gone import wait_gone

    leftover = obj("infercrane-other", "u-9")  # not deleted by this run: the proof must show it
    client = ByKind(
        [
            {"Deployment": [obj("infercrane-a", "u-1")], "Service": [obj("infercrane-a", "u-2"), leftover]},
            {"Deployment": [], "Service": [leftover]},
        ]
    )
    seen: list[int] = []
    left, listing = wait_gone(
        Live(client, target()),  # type: ignore[arg-type]
        {("Deployment", "infercrane-a"): "u-1", ("Service", "infercrane-a"): "u-2"},
        kinds=("Deployment", "Service"),
        timeout=60,
        poll_seconds=0.001,
        report=seen.append,
    )
    assert left == [] and seen == [2, 0]
    assert listing == {("Service", "infercrane-other"): leftover}
    assert client.calls == 4  # one LIST per kind per tick, no extra round for the proof


def test_an_object_replaced_under_the_same_name_counts_as_gone() -> None:
    from infercrane.live.status.gone import wait_gone

    client = ByKind([{"Deployment": [obj("infercrane-a", "new-uid")]}])
    left, _ = wait_gone(Live(client, target()), {("Deployment", "infercrane-a"): "old-uid"}, timeout=60)  # type: ignore[arg-type]
    assert left == []


class EventList:
    """Answers the one Events LIST ``pod_warnings`` makes."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def list(self, res: Any, namespace: str | None = None, fields: Any = None) -> list[Any]:
        assert res.__name__ == "Event" and fields == {"type": "Warning"}
        return [type("E", (), {"to_dict": lambda self, e=e: e})() for e in self.events]


WAIT_BEGAN = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)  # the events below are stamped in the minute after


def event(kind: str, name: str, reason: str, message: str, at: int) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": name},
        "type": "Warning",
        "reason": reason,
        "message": message,
        "lastTimestamp": f"2026-11-30T10:00:{at:02d}Z",
    }


def test_a_pods_scheduling_warning_outlives_a_stream_of_autoscaler_warnings() -> None:
    """KServe's HPA warns every 15 s when no metrics API serves it; those newer lines must not push
    the pod's FailedScheduling out of the few shown (CI saw exactly that)."""
    from infercrane.live.status.warnings import pod_warnings

    isvc = "infercrane-it-kserve-b200-r0"
    events = [event("Pod", f"{isvc}-predictor-7d9f-abcde", "FailedScheduling", "0/3 nodes are available: old", 1)]
    events += [event("Pod", f"{isvc}-predictor-7d9f-abcde", "FailedScheduling", "0/3 nodes are   available: new", 2)]
    events += [event("ReplicaSet", f"{isvc}-predictor-7d9f", "FailedCreate", "quota", 3)]
    events += [
        event("HorizontalPodAutoscaler", f"{isvc}-predictor", reason, f"unable to get metrics {i}", 10 + i)
        for i in range(20)
        for reason in ("FailedGetResourceMetric", "FailedComputeMetricsReplicas")
    ]
    events += [event("Pod", "infercrane-other-r0-1-2", "BackOff", "not ours", 42)]
    got = pod_warnings(Live(EventList(events), target()), [isvc])  # type: ignore[arg-type]
    assert got == {
        isvc: [
            "FailedScheduling: 0/3 nodes are available: new",
            "FailedCreate: quota",
            "FailedComputeMetricsReplicas: unable to get metrics 19",  # the newest of the rest
        ]
    }
    assert pod_warnings(Live(EventList(events), target()), [isvc], limit=1) == {
        isvc: ["FailedScheduling: 0/3 nodes are available: new"]
    }


def test_the_api_servers_cluster_ip_repair_warning_on_a_replicas_service_is_not_why_the_replica_waits() -> None:
    """A first deploy of 300 on the local plane: the API server's repair loop saw a few Services
    before their IP address objects and warned ``ClusterIPNotAllocated … repairing``; the progress
    line said the fleet waited on it for a minute while the deployment controller was the pace."""
    from infercrane.live.status.progress import Progress
    from infercrane.live.status.warnings import pod_warnings

    dep, other = "infercrane-0123456789abcdef01234567", "infercrane-89abcdef0123456701234567"
    repair = "Cluster IP [IPv4]: 10.96.3.7 is not allocated; repairing"
    events = [event("Service", dep, "ClusterIPNotAllocated", repair, 1)]
    events += [event("Pod", f"{other}-5d8f9c7b6-x2x4q", "FailedScheduling", "0/3 nodes are available", 2)]
    warnings = pod_warnings(Live(EventList(events), target()), [dep, other])  # type: ignore[arg-type]
    assert warnings == {other: ["FailedScheduling: 0/3 nodes are available"]}
    waiting = dict.fromkeys([dep, other], "controller has not observed generation 1 yet")
    assert Progress(0, 2, waiting, 12.5, warnings).summary() == "FailedScheduling on 1"
    assert Progress(0, 2, waiting, 12.5, {}).summary() == "controller has not observed generation 1 yet"


def test_an_events_object_is_matched_to_every_replica_whose_name_it_is_or_begins_with_at_a_dash() -> None:
    """One set lookup per ``-`` of the Event's object name finds exactly the replicas a scan of
    the fleet would (``name == n`` or ``name.startswith(n + "-")``), for every pair below."""
    from itertools import combinations

    from infercrane.live.status.warnings import _named

    names = ["infercrane-a", "infercrane-a-b", "infercrane-ab", "infercrane-0123", "x", "x-"]
    objects = [*names, "infercrane-a-5d8f-x2x4q", "infercrane-a-b-5d8f", "infercrane-abc", "infercrane", "x--y", "-"]
    for wanted in (set(c) for k in range(len(names) + 1) for c in combinations(names, k)):
        for obj in objects:
            scan = {n for n in wanted if obj == n or obj.startswith(n + "-")}
            assert sorted(_named(obj, wanted)) == sorted(scan), (obj, wanted)


def test_an_object_applied_while_a_list_is_under_way_is_judged_by_the_next_list_not_as_deleted() -> None:
    # 300 replicas applied as fast as the engine can: a replica's wait can begin while the tick's
    # LIST, started before its object existed, is still in flight.
    first, second = named("infercrane-a", dep(1, 1)), named("infercrane-b", dep(1, 1))
    waiter: FleetWaiter

    class Racing(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            snapshot = super().list(res, namespace, labels, fields)
            if res.__name__ != "Event" and self.calls == 1:  # b is applied and waited for during the first LIST
                asyncio.run_coroutine_threadsafe(register_b(), loop).result()
            return snapshot

    async def register_b() -> None:
        futures.append(asyncio.ensure_future(waiter.wait("infercrane-b", 1, 60)))

    futures: list[asyncio.Future[Verdict]] = []
    client = Racing([[first], [first, second]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]

    async def both() -> list[Verdict]:
        a = await waiter.wait("infercrane-a", 1, 60)
        while not futures:
            await asyncio.sleep(0.001)
        return [a, await futures[0]]

    loop = asyncio.new_event_loop()
    try:
        verdicts = loop.run_until_complete(both())
    finally:
        loop.close()
    assert verdicts == [Verdict("ready"), Verdict("ready")]


def test_pods_the_namespaces_pod_security_level_rejects_fail_the_replica_at_once_with_the_admissions_words() -> None:
    rejected = dep(
        2,
        2,
        replicas=0,
        updated=0,
        available=0,
        ReplicaFailure={
            "status": "True",
            "reason": "FailedCreate",
            "message": 'pods "infercrane-x-5d9c" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true',
        },
    )
    verdict = deployment_verdict(rejected, 2)
    assert verdict.state == "failed"
    # The same condition kept from the template before ours (the fix just applied) is waited through.
    rejected["status"]["conditions"][0]["lastUpdateTime"] = "2026-12-01T12:00:05Z"
    assert deployment_verdict(applied_at(rejected, "2026-12-01T12:00:05Z"), 2).state == "failed"  # within the second
    assert deployment_verdict(applied_at(rejected, "2026-12-01T12:00:07Z"), 2).state == "waiting"
    del rejected["metadata"]["managedFields"]
    assert verdict.reason.startswith(
        'ReplicaFailure: pods "infercrane-x-5d9c" is forbidden: violates PodSecurity "restricted:latest"'
    )
    assert "set infercrane:kubernetes.securityContext {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}" in verdict.reason


def test_a_missing_token_secret_is_named_by_the_kubelets_warning_on_the_replicas_pod() -> None:
    """The kubelet's words when a secretKeyRef names no Secret (CreateContainerConfigError): the
    replica's reason names the Secret without InferCrane reading Secrets or Pods (a real kubelet
    says it on the local plane's real node: test_real_node.py)."""
    from infercrane.live.status.warnings import pod_warnings

    dep = "infercrane-0123456789abcdef01234567"
    events = [event("Pod", f"{dep}-5d8f9c7b6-x2x4q", "Failed", 'Error: secret "hf-token" not found', 5)]
    assert pod_warnings(Live(EventList(events), target()), [dep]) == {dep: ['Failed: Error: secret "hf-token" not found']}


def test_an_api_server_that_stops_answering_while_destroy_waits_is_one_clear_error_not_a_traceback() -> None:
    import httpx2

    from infercrane.core.errors import ClusterError
    from infercrane.live.status.gone import wait_gone

    class Down:
        def list(self, *a: Any, **k: Any) -> Any:
            raise httpx2.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(ClusterError) as exc:
        wait_gone(Live(Down(), target()), {("Deployment", "infercrane-a"): "uid"}, timeout=60, poll_seconds=0.01, api_grace=0.05)  # type: ignore[arg-type]
    assert str(exc.value).startswith(
        "the Kubernetes API stopped answering while waiting for 1 object(s) to be gone; the deletes were sent:"
    )


def test_a_destroy_wait_rides_out_a_short_outage_and_still_proves_the_objects_gone() -> None:
    import httpx2

    from infercrane.live.status.gone import wait_gone

    class Flaky(ByKind):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None) -> list[Listed]:
            self.failures = getattr(self, "failures", 0) + 1
            if self.failures <= 2:
                raise httpx2.ConnectError("[Errno 111] Connection refused")
            return super().list(res, namespace, labels)

    client = Flaky([{"Deployment": []}])
    left, _ = wait_gone(
        Live(client, target()), {("Deployment", "infercrane-a"): "uid"}, timeout=60, poll_seconds=0.01, api_grace=30
    )  # type: ignore[arg-type]
    assert left == []


def test_a_destroy_wait_rides_out_the_servers_transient_answers_but_not_a_refusal() -> None:
    from lightkube import ApiError
    from lightkube.models.meta_v1 import Status

    from infercrane.core.errors import ClusterError
    from infercrane.live.status.gone import wait_gone

    class Answers(ByKind):
        def __init__(self, codes: list[int], listings: list[dict[str, list[Listed]]]) -> None:
            super().__init__(listings)
            self.codes = codes

        def list(self, res: Any, namespace: str | None = None, labels: Any = None) -> list[Listed]:
            if self.codes:
                code = self.codes.pop(0)
                raise ApiError(status=Status(code=code, message=f"answer {code}"))
            return super().list(res, namespace, labels)

    ridden = Answers([500, 503, 429], [{"Deployment": []}])
    left, _ = wait_gone(
        Live(ridden, target()), {("Deployment", "infercrane-a"): "uid"}, timeout=60, poll_seconds=0.01, api_grace=30
    )  # type: ignore[arg-type]
    assert left == [] and ridden.codes == []
    refused = Answers([403], [{"Deployment": []}])
    with pytest.raises(ClusterError) as exc:
        wait_gone(Live(refused, target()), {("Deployment", "infercrane-a"): "uid"}, timeout=60, poll_seconds=0.01, api_grace=30)  # type: ignore[arg-type]
    assert str(exc.value).startswith("list Deployments in namespace infercrane-system: forbidden for the identity of context")


class Overloaded:
    """A client whose every LIST the API server answers ``code`` (429: API Priority and Fairness;
    503: etcd gone): the Unavailable path alone. ``plain``: the answer has no Kubernetes
    ``Status`` body -- what API Priority and Fairness sends ("Too many requests, please try again
    later."), which lightkube raises as httpx's HTTPStatusError, not ApiError."""

    def __init__(self, code: int, plain: bool = False) -> None:
        self.code, self.plain, self.calls = code, plain, 0

    def list(self, *a: Any, **k: Any) -> list[Any]:
        from lightkube import ApiError

        self.calls += 1
        if self.plain:
            _response(self.code, plain=True).raise_for_status()
        raise ApiError(response=_response(self.code))


def _response(code: int, plain: bool = False) -> Any:
    import httpx2

    request = httpx2.Request("GET", "https://x/apis/apps/v1/deployments")
    if plain:
        return httpx2.Response(code, text="Too many requests, please try again later.\n", request=request)
    body = {"kind": "Status", "apiVersion": "v1", "code": code, "message": "too many requests" if code == 429 else "etcd down"}
    return httpx2.Response(code, json=body, request=request)


REFUSALS = pytest.mark.parametrize(
    ("code", "plain"), [(429, True), (429, False), (503, False)], ids=["priority-and-fairness", "status-429", "etcd-gone"]
)


@REFUSALS
def test_a_wait_whose_every_list_is_refused_for_now_ends_at_the_grace(code: int, plain: bool) -> None:
    ticks = iter(range(10_000))
    client = Overloaded(code, plain)
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.0001, clock=lambda: 1.0 * next(ticks))  # type: ignore[arg-type]
    verdict = run(asyncio.wait_for(waiter.wait("infercrane-a", 1, 3600), 10))  # real seconds: a wait that never ends fails
    assert verdict.state == "failed" and verdict.api_lost, verdict
    assert "(for 30 s while waiting for readiness)" in verdict.reason
    assert f"(HTTP {code})" in verdict.reason
    if plain:
        assert "list Deployments: Too many requests, please try again later. (HTTP 429)" in verdict.reason
    assert client.calls <= 40, client.calls  # one LIST a tick, ~30 ticks of a second: bounded by the grace


@REFUSALS
def test_a_wait_whose_budget_ends_while_lists_are_refused_fails_at_its_budget_with_the_last_reason(
    code: int, plain: bool
) -> None:
    ticks = iter(range(10_000))
    waiter = FleetWaiter(
        Live(Overloaded(code, plain), target()), "Deployment", poll_seconds=0.0001, clock=lambda: 1.0 * next(ticks)
    )  # type: ignore[arg-type]
    verdict = run(asyncio.wait_for(waiter.wait("infercrane-a", 1, 5), 10))
    assert verdict == Verdict("failed", "not ready within its startup budget + margin; last seen: not observed yet")


def test_a_wait_whose_watcher_meets_an_error_nobody_expected_fails_with_its_words_instead_of_hanging() -> None:
    class Broken:
        def list(self, *a: Any, **k: Any) -> list[Any]:
            raise RuntimeError("a new kind of answer")

    waiter = FleetWaiter(Live(Broken(), target()), "Deployment", poll_seconds=0.0001)  # type: ignore[arg-type]
    verdict = run(asyncio.wait_for(waiter.wait("infercrane-a", 1, 3600), 10))
    assert verdict == Verdict("failed", "the wait stopped: RuntimeError: a new kind of answer")


def test_a_plain_text_429_is_retried_like_one_with_a_status_body() -> None:
    from infercrane.live.client import cluster

    answers = iter([True, True, False])

    def call() -> str:
        if next(answers):
            _response(429, plain=True).raise_for_status()
        return "listed"

    assert cluster.retrying(call, delay=0.001) == "listed"


def isvc(generation: int, observed: int, intent: str, ready: str = "True") -> dict[str, Any]:
    return {
        "kind": "InferenceService",
        "metadata": {"name": "infercrane-x", "generation": generation, "annotations": {"infercrane.dev/intent-hash": intent}},
        "status": {"observedGeneration": observed, "conditions": [{"type": "Ready", "status": ready}]},
    }


def predictor(intent: str, **status: int) -> dict[str, Any]:
    d = dep(4, 4, **status)
    d["metadata"]["name"] = "infercrane-x-predictor"
    d["spec"]["template"] = {"metadata": {"annotations": {"infercrane.dev/intent-hash": intent}}}
    return d


@pytest.mark.parametrize(
    ("obj", "pred", "state", "reason"),
    [
        # A predictor restarted out of band: KServe's copied counter (3) runs ahead of the new generation (2).
        (isvc(2, 3, "sha256:new"), predictor("sha256:old"), "waiting", "KServe has not applied this intent to Deployment"),
        (
            isvc(2, 3, "sha256:new"),
            predictor("sha256:new", updated=0),
            "waiting",
            "infercrane-x-predictor: 0 of 1 replica(s) updated",
        ),
        (isvc(2, 3, "sha256:new"), predictor("sha256:new", available=0), "waiting", "0 of 1 updated replica(s) available"),
        # The counter behind (metadata-only applies do not move the Deployment's): still ready on evidence.
        (isvc(5, 2, "sha256:new"), predictor("sha256:new"), "ready", ""),
        (isvc(2, 2, "sha256:new", ready="False"), predictor("sha256:new"), "waiting", "Ready=False"),
        (isvc(2, 2, "sha256:new"), None, "waiting", "KServe has not created Deployment infercrane-x-predictor yet"),
    ],
    ids=["counter-ahead-old-template", "not-rolled", "not-available", "counter-behind", "not-ready", "no-predictor"],
)
def test_kserve_readiness_is_judged_by_the_predictor_deployment_not_the_copied_counter(
    obj: dict[str, Any], pred: dict[str, Any] | None, state: str, reason: str
) -> None:
    from infercrane.live.status.verdicts import inference_service_by_predictor

    verdict = inference_service_by_predictor(obj, 2, pred)
    assert verdict.state == state and reason in verdict.reason, verdict


class KServeList(CachedEvents):
    """ISVCs and their predictor Deployments; ``deployments=None``: this identity may not list them."""

    def __init__(self, isvcs: list[dict[str, Any]], deployments: list[dict[str, Any]] | None) -> None:
        self.isvcs, self.deployments = isvcs, deployments

    def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
        if res.__name__ == "Event":
            return []
        if res.__name__ == "Deployment":
            if self.deployments is None:
                from lightkube import ApiError

                raise ApiError(response=_response(403))
            return [Wrapped(d) for d in self.deployments]
        return [Wrapped(o) for o in self.isvcs]


@pytest.mark.parametrize(
    ("deployments", "state"),
    [([predictor("sha256:old")], "failed"), (None, "ready")],
    ids=["with-the-deployment-read-a-stale-ready-waits", "without-it-the-status-rule"],
)
def test_the_fleet_wait_reads_kserves_predictors_when_it_may(deployments: list[dict[str, Any]] | None, state: str) -> None:
    ticks = iter(range(10_000))
    client = KServeList([isvc(2, 3, "sha256:new")], deployments)
    waiter = FleetWaiter(Live(client, target()), "InferenceService", poll_seconds=0.0001, clock=lambda: 1.0 * next(ticks))  # type: ignore[arg-type]
    verdict = run(asyncio.wait_for(waiter.wait("infercrane-x", 2, 5), 10))
    assert verdict.state == state, verdict


def test_a_replica_whose_pods_the_kubelet_cannot_make_fails_at_once_not_at_the_end_of_its_budget() -> None:
    """A Secret the pod spec names is not there: no wait cures CreateContainerConfigError, so the
    wait fails on the first look at the Warning Events, in the kubelet's words, long before the
    budget -- and a replica with only passing warnings goes on waiting."""
    from infercrane.core.errors import NotReady

    a, b = "infercrane-a", "infercrane-b"

    class Unmakeable(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ == "Event":
                events = [
                    event("Pod", f"{a}-5d8f9c7b6-x2x4q", "Failed", 'Error: secret "hf-token" not found', 5),
                    event("Pod", f"{b}-6c9d8e7f5-y3y5r", "BackOff", "Back-off pulling image", 6),
                ]
                return [type("E", (), {"to_dict": lambda self, e=e: e})() for e in events]
            return super().list(res, namespace, labels, fields)

    waiting = [named(n, dep(1, 1, updated=1, available=0)) for n in (a, b)]
    ticks = iter(range(10_000))
    seen: list[Any] = []
    client = Unmakeable([waiting])
    waiter = FleetWaiter(
        Live(client, target()),  # type: ignore[arg-type]
        "Deployment",
        poll_seconds=0.0001,
        report=seen.append,
        report_every=1.0,
        clock=lambda: 1.0 * next(ticks),
        wall=lambda: WAIT_BEGAN,
    )

    async def both() -> tuple[Verdict, Verdict]:
        return await waiter.wait(a, 1, 600), await waiter.wait(b, 1, 30)

    first, second = run(both())
    assert first.state == "failed" and first.reason.startswith("CreateContainerConfigError: the kubelet cannot create")
    assert 'Failed: Error: secret "hf-token" not found' in first.reason
    assert first.reason.endswith("\n      stalled creating its container"), first.reason  # its stage (issue #67)
    assert second.state == "failed" and second.reason.startswith("not ready within its startup budget + margin")
    assert "BackOff: Back-off pulling image" in second.reason  # a passing warning: it waited out its budget
    fix = NotReady([("k", a, first.reason)], 1).fix or ""
    assert fix.startswith("create the Secret or ConfigMap the kubelet names")


def test_a_replica_whose_startup_probe_kept_failing_is_said_to_be_killed_by_it_with_the_budget_as_the_fix() -> None:
    """The progress deadline (the startup budget) ends the wait; the kubelet's probe warnings on
    the replica's pod say why: the engine never answered in time and was restarted."""
    from infercrane.core.errors import NotReady

    a = "infercrane-a"
    deadline = {"status": "False", "reason": "ProgressDeadlineExceeded", "message": "has timed out progressing"}

    class SlowToLoad(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ == "Event":
                said = event("Pod", f"{a}-5d8f9c7b6-x2x4q", "Unhealthy", "Startup probe failed: connection refused", 5)
                return [type("E", (), {"to_dict": lambda self: said})()]
            return super().list(res, namespace, labels, fields)

    client = SlowToLoad([[named(a, dep(1, 1, available=0, Progressing=deadline))]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001, wall=lambda: WAIT_BEGAN)  # type: ignore[arg-type]
    verdict = run(waiter.wait(a, 1, 600))
    assert verdict.state == "failed"
    assert verdict.reason.startswith(
        "its startup probe kept failing (its engine did not answer within its startup budget; the kubelet restarts it): "
    )
    assert (
        "ProgressDeadlineExceeded" in verdict.reason and "Unhealthy: Startup probe failed: connection refused" in verdict.reason
    )
    fix = NotReady([("k", a, verdict.reason)], 1).fix or ""
    assert fix.startswith("raise startupBudgetSeconds of each replica whose startup probe kept failing")


def test_a_replica_that_fails_names_the_stage_its_start_stalled_in_from_the_same_events() -> None:
    """Issue #67: the failure says where the time went -- the stage the newest pod's start is in
    (from the scheduler's and kubelet's Events, Normal ones too) and for how long -- beside the
    kubelet's warnings, from one LIST of the namespace's Events."""
    a = "infercrane-a"
    pod = f"{a}-5d8f9c7b6-x2x4q"
    deadline = {"status": "False", "reason": "ProgressDeadlineExceeded", "message": "has timed out progressing"}
    said = [
        event("Pod", pod, "Scheduled", "Successfully assigned ns/x to node-0", 1) | {"type": "Normal"},
        event("Pod", pod, "Pulling", 'Pulling image "vllm/vllm-openai@sha256:aa"', 2) | {"type": "Normal"},
        event("Pod", pod, "BackOff", 'Back-off pulling image "vllm/vllm-openai@sha256:aa"', 30),
    ]
    asked: list[Any] = []

    class Pulling(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ == "Event":
                asked.append(fields)
                return [type("E", (), {"to_dict": lambda self, e=e: e})() for e in said]
            return super().list(res, namespace, labels, fields)

    client = Pulling([[named(a, dep(1, 1, available=0, Progressing=deadline))]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001, wall=lambda: WAIT_BEGAN)  # type: ignore[arg-type]
    verdict = run(waiter.wait(a, 1, 600))
    assert verdict.state == "failed" and asked == [None], asked
    lines = verdict.reason.splitlines()
    assert lines[0] == "ProgressDeadlineExceeded: has timed out progressing"
    assert lines[1].strip().startswith("stalled pulling its image for "), lines
    assert lines[1].strip().endswith("-- fix: " + startup_fixes()["pulling its image"]), lines
    assert lines[2].strip() == 'BackOff: Back-off pulling image "vllm/vllm-openai@sha256:aa"', lines


def test_a_progress_line_says_which_stage_the_waiting_starts_are_in_from_its_one_events_list() -> None:
    """Issue #67: while replicas wait, the progress says where their starts are -- from the one
    LIST of Events each report makes (every type, from the API server's cache), not one more."""
    from infercrane.live.status.progress import Progress

    a, b = "infercrane-a", "infercrane-b"
    said = [
        event("Pod", f"{a}-5d8f9c7b6-x2x4q", "Scheduled", "assigned", 1) | {"type": "Normal"},
        event("Pod", f"{a}-5d8f9c7b6-x2x4q", "Pulling", "Pulling image", 2) | {"type": "Normal"},
        event("Pod", f"{b}-6c7d8e9f0-y3y5r", "Scheduled", "assigned", 1) | {"type": "Normal"},
        event("Pod", f"{b}-6c7d8e9f0-y3y5r", "Pulled", "already present on machine", 2) | {"type": "Normal"},
        event("Pod", f"{b}-6c7d8e9f0-y3y5r", "Started", "Started container engine", 3) | {"type": "Normal"},
    ]
    lists: list[Any] = []

    class Starting(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ == "Event":
                lists.append(fields)
                return [type("E", (), {"to_dict": lambda self, e=e: e})() for e in said]
            return super().list(res, namespace, labels, fields)

    waiting = [named(n, dep(1, 1, updated=1, available=0)) for n in (a, b)]
    client = Starting([waiting, waiting, [named(n, dep(1, 1)) for n in (a, b)]])
    reported: list[Progress] = []
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001, report=reported.append, report_every=0.0)  # type: ignore[arg-type]

    async def both() -> list[Verdict]:
        return list(await asyncio.gather(waiter.wait(a, 1, 600), waiter.wait(b, 1, 600)))

    assert {v.state for v in run(both())} == {"ready"}
    assert reported and lists == [None] * len(reported)  # one LIST of every type per report
    first = reported[0]
    assert {n: stage for n, (stage, _) in first.stages.items()} == {
        a: "pulling its image",
        b: "loading (its engine's /health not 200 yet)",
    }
    summary = first.summary()
    assert summary.startswith(("pulling its image on 1 (", "loading on 1 (")) and ", " in summary, summary


def test_the_stages_summary_counts_the_commonest_first_with_the_longest_wait() -> None:
    from infercrane.live.status import progress, startup

    stages = {
        "a": (startup.LOADING, 41.0),
        "b": (startup.LOADING, 12.0),
        "c": (startup.PULLING, 7.0),
        "d": (startup.SCHEDULING, None),
    }
    assert progress.summary(stages) == "loading on 2 (longest 41 s), pulling its image on 1 (7 s)"


def startup_fixes() -> dict[str, str]:
    from infercrane.live.status import startup

    return dict(startup.FIXES)


def _fixed_and_rerun(events: list[dict[str, Any]], **progressing: Any) -> Verdict:
    """The rerun of a deploy whose replica ``infercrane-a`` failed a minute before on ``events``."""
    a = "infercrane-a"

    class Fixed(FakeList):
        def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
            if res.__name__ == "Event":
                return [type("E", (), {"to_dict": lambda self, e=e: e})() for e in events]
            return super().list(res, namespace, labels, fields)

    ticks = iter(range(10_000))
    client = Fixed([[named(a, dep(1, 1, updated=1, available=0, **progressing))]])
    waiter = FleetWaiter(
        Live(client, target()),  # type: ignore[arg-type]
        "Deployment",
        poll_seconds=0.0001,
        report=lambda p: None,
        report_every=1.0,
        clock=lambda: 1.0 * next(ticks),
        wall=lambda: WAIT_BEGAN.replace(minute=1),  # the rerun began a minute after those Events
    )
    return run(waiter.wait(a, 1, 30))


def test_a_missing_secret_said_before_the_rerun_began_does_not_fail_it_at_once() -> None:
    """A deploy failed on a missing Secret; the user created it and deploys again. The kubelet's
    CreateContainerConfigError of before (an Event lives an hour) may be a failure fixed since:
    the rerun waits -- the kubelet's next try makes the container, or says it again."""
    stale = event("Pod", "infercrane-a-5d8f9c7b6-x2x4q", "Failed", 'Error: secret "hf-token" not found', 5)
    verdict = _fixed_and_rerun([stale])
    assert verdict.state == "failed" and verdict.reason.startswith("not ready within its startup budget + margin"), verdict


def test_an_earlier_templates_pods_warnings_are_not_quoted_as_the_current_ones_reasons() -> None:
    # The Deployment's own Progressing condition names its current ReplicaSet: the earlier one's
    # pod failed to schedule (an earlier GPU value); the current one's pod is what the wait is about.
    progressing = {
        "status": "True",
        "reason": "ReplicaSetUpdated",
        "message": 'ReplicaSet "infercrane-a-7c6b5a4d3" is progressing.',
    }
    earlier = event("Pod", "infercrane-a-5d8f9c7b6-x2x4q", "FailedScheduling", "0/3 nodes are available", 5)
    current = event("Pod", "infercrane-a-7c6b5a4d3-k9k8j", "BackOff", "Back-off pulling image", 6)
    verdict = _fixed_and_rerun([earlier, current], Progressing=progressing)
    assert "BackOff: Back-off pulling image" in verdict.reason and "FailedScheduling" not in verdict.reason, verdict


def test_every_reader_judges_an_inference_service_by_its_predictor_when_it_can_read_them() -> None:
    """One rule everywhere (the wait, membership, inspect, the promotion gate): KServe's copied
    counter says settled and Ready=True, while the predictor restarted out of band has no pod
    available. With the predictors read, the replica is starting; only where they cannot be read
    (None) does its own status speak -- the weaker rule."""
    from infercrane.core.plan.states import ReplicaState
    from infercrane.live.inspect import object_state
    from infercrane.live.status.verdicts import judged, replica_state

    obj = isvc(2, 2, "sha256:new")
    restarted = {"infercrane-x-predictor": predictor("sha256:new", available=0)}
    assert replica_state("InferenceService", obj, restarted) == ReplicaState.STARTING
    assert object_state("InferenceService", obj, restarted) == "provisioning"
    assert judged("InferenceService", obj, 0, restarted).state == "waiting"
    assert replica_state("InferenceService", obj, None) == ReplicaState.SETTLED  # unreadable: its own status
    assert replica_state("InferenceService", obj, {}) == ReplicaState.STARTING  # readable, none made yet
    serving = {"infercrane-x-predictor": predictor("sha256:new")}
    assert replica_state("InferenceService", obj, serving) == ReplicaState.SETTLED


def test_a_replica_is_given_its_new_template_only_once_its_old_pods_have_stopped_terminating() -> None:
    draining = named("infercrane-a", dep(2, 2) | {"status": dep(2, 2)["status"] | {"terminatingReplicas": 1}})
    gone = named("infercrane-a", dep(2, 2))
    client = FakeList([[draining], [draining], [gone]])
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]
    assert run(waiter.drained(["infercrane-a", "infercrane-new"], 60)) == "" and client.calls == 3
    clock = iter([0.0, 0.0] + [100.0] * 10)
    stuck = FleetWaiter(Live(FakeList([[draining]]), target()), "Deployment", poll_seconds=0.001, clock=lambda: next(clock))  # type: ignore[arg-type]
    assert run(stuck.drained(["infercrane-a"], 40)) == "still terminating after 40 s: infercrane-a (1 pod(s))"
    kserve = FleetWaiter(Live(FakeList([[draining]]), target()), "InferenceService", poll_seconds=0.001)  # type: ignore[arg-type]
    assert run(kserve.drained(["infercrane-a"], 40)) == "", "an InferenceService's pods are its predictor's: not seen"


def test_a_progressing_condition_older_than_our_apply_names_no_current_replica_set() -> None:
    """An in-place roll applied right after a rollout ended: the controller keeps `ReplicaSet "old"
    has successfully progressed` (same status, same reason) while the new pod cannot even be
    scheduled. Taken as current, it would hide the new pod's FailedScheduling as an earlier
    template's (CI once failed on it); a condition updated after our apply is believed."""
    from infercrane.live.status.warnings import current_replica_set

    def deployment(updated: str) -> dict[str, Any]:
        applied = {"manager": naming.FIELD_MANAGER, "operation": "Apply", "time": "2026-12-07T08:37:49Z"}
        progressing = {
            "type": "Progressing",
            "status": "True",
            "reason": "NewReplicaSetAvailable",
            "message": 'ReplicaSet "infercrane-a-6795794cdb" has successfully progressed.',
            "lastUpdateTime": updated,
        }
        return {"metadata": {"managedFields": [applied]}, "status": {"conditions": [progressing]}}

    assert current_replica_set(deployment("2026-12-07T08:37:47Z")) is None
    assert current_replica_set(deployment("2026-12-07T08:37:49Z")) == "infercrane-a-6795794cdb"
    assert current_replica_set(deployment("2026-12-07T08:38:10Z")) == "infercrane-a-6795794cdb"
