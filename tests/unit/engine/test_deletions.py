"""What fails after the last step of a deploy: the deletion of replicas that left the config but
that the state did not know (lost state, a killed run) -- typed at the client's edge, and said to
come after the rollout applied everything."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from lightkube import ApiError

from infercrane.core import naming
from infercrane.core.errors import ClusterError, InferCraneError
from infercrane.core.model.config import InferCraneConfig
from infercrane.engine import deletions
from infercrane.live.client import cluster
from infercrane.live.client.api import Live
from infercrane.live.stack.context import StackContext
from tests.unit.conftest import DIGEST


def config() -> InferCraneConfig:
    return InferCraneConfig.model_validate(
        {
            "kubernetes": {"context": "c", "imageDigest": DIGEST},
            "replicas": [{"key": "kept", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}],
        }
    )


#: The ctx of stack "s" for that config; its client a stand-in (every request below is one of cluster's, replaced).
CTX: Any = StackContext.of("s", config(), Live(object(), config().kubernetes))  # type: ignore[arg-type]


def orphan(name: str, key: str) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "infercrane-system",
        "uid": "u-" + name,
        "labels": naming.labels(key),
        "annotations": naming.ownership_annotations(key, "sha256:" + "0" * 64, naming.stack_id("s")),
    }
    return {"kind": "Deployment", "metadata": meta}


def api_error(code: int) -> ApiError:
    body = {"kind": "Status", "apiVersion": "v1", "code": code, "message": "etcd leader changed" if code == 500 else "uid"}
    return ApiError(response=httpx2.Response(code, json=body, request=httpx2.Request("DELETE", "https://x/apis")))


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    gone = naming.object_name("gone")
    objects = {("Deployment", gone): orphan(gone, "gone")}
    monkeypatch.setattr(cluster, "live_by_name", lambda client, target, kinds, **kw: objects)
    return [gone]


def test_a_failed_orphan_delete_is_a_typed_cluster_error_not_a_raw_api_error(
    monkeypatch: pytest.MonkeyPatch, listed: list[str]
) -> None:
    def refuse(*a: Any, **kw: Any) -> bool:
        raise api_error(500)

    monkeypatch.setattr(cluster, "delete_exact", refuse)
    with pytest.raises(ClusterError) as exc:
        deletions.delete_orphans(CTX, {})
    assert f"delete Deployment/{listed[0]}" in str(exc.value) and "etcd leader changed" in str(exc.value)


def test_an_orphan_replaced_since_it_was_listed_is_left_untouched(monkeypatch: pytest.MonkeyPatch, listed: list[str]) -> None:
    def conflict(*a: Any, **kw: Any) -> bool:
        raise api_error(409)

    monkeypatch.setattr(cluster, "delete_exact", conflict)
    assert deletions.delete_orphans(CTX, {}) == {}


def test_a_failure_after_the_rollout_says_everything_was_applied_and_keeps_the_stack_files_intent(
    monkeypatch: pytest.MonkeyPatch, listed: list[str]
) -> None:
    def refuse(*a: Any, **kw: Any) -> bool:
        raise api_error(500)

    monkeypatch.setattr(cluster, "delete_exact", refuse)
    with pytest.raises(InferCraneError) as exc:
        deletions.delete_orphans_after_rollout(CTX, {})
    assert exc.value.applied_nothing is False
    text = str(exc.value)
    assert text.startswith("every replica of the config is applied and ready, but deleting the replicas of keys that left")
    assert "fix: deploy again with the same --idempotency-key: it finds them still running and deletes them" in text


def test_an_object_pulumi_would_delete_by_name_but_that_is_no_longer_ours_is_named_and_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = naming.object_name("gone")
    recorded = {
        "kept": [{"kind": "Deployment", "metadata": {"name": naming.object_name("kept"), "namespace": "infercrane-system"}}],
        "gone": [{"kind": "Service", "metadata": {"name": gone, "namespace": "infercrane-system"}}],
    }
    foreign = {"kind": "Service", "metadata": {"name": gone, "namespace": "infercrane-system", "labels": {"app": "x"}}}
    monkeypatch.setattr(cluster, "live_by_name", lambda client, target, kinds, **kw: {("Service", gone): foreign})
    (line,) = deletions.foreign_deletions(CTX, recorded, held=(), applied={"kept"})
    assert line.startswith(
        f"Service infercrane-system/{gone} (recorded for key 'gone', which leaves) is no longer this stack's: "
    )
    assert "label app.kubernetes.io/managed-by is missing" in line
    ours = orphan(gone, "gone") | {"kind": "Service"}
    monkeypatch.setattr(cluster, "live_by_name", lambda client, target, kinds, **kw: {("Service", gone): ours})
    assert deletions.foreign_deletions(CTX, recorded, held=(), applied={"kept"}) == []

    def no_list(*args: Any, **kw: Any) -> Any:
        raise AssertionError("nothing is deleted: no LIST")

    monkeypatch.setattr(cluster, "live_by_name", no_list)
    assert deletions.foreign_deletions(CTX, recorded, held={"gone"}, applied={"kept"}) == []


def test_a_moving_keys_old_objects_are_checked_in_their_own_namespace_before_pulumi_deletes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A namespace switch: the applied key is registered in the new namespace, so Pulumi deletes
    its recorded objects in the old one -- checked there (a held key's are not deleted)."""
    name = naming.object_name("kept")
    recorded = {"kept": [{"kind": "Deployment", "metadata": {"name": name, "namespace": "old-ns"}}]}
    foreign = {"kind": "Deployment", "metadata": {"name": name, "namespace": "old-ns", "labels": {"app": "x"}}}
    asked: list[tuple[str, frozenset[str], frozenset[str]]] = []

    def listed(client: Any, target: Any, kinds: Any, *, optional: Any = (), refused: Any = None) -> dict[tuple[str, str], Any]:
        asked.append((target.namespace, frozenset(kinds), frozenset(optional)))
        return {("Deployment", name): foreign}

    monkeypatch.setattr(cluster, "live_by_name", listed)
    (line,) = deletions.foreign_deletions(CTX, recorded, held=(), applied={"kept"})
    assert line.startswith(f"Deployment old-ns/{name} (recorded for key 'kept', which moves) is no longer this stack's: ")
    assert asked == [("old-ns", frozenset(), frozenset({"Deployment"}))]  # another namespace: listed if allowed
    assert deletions.foreign_deletions(CTX, recorded, held={"kept"}, applied=()) == []


def test_a_stage_deletes_in_the_foreground_and_waits_past_the_pods_grace_also_for_a_deletion_already_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a stage deletes is gone only once its pods are: the object stays until then
    # (Foreground), so the wait covers their drain. One left going by a killed run is waited for too.
    from infercrane.live.status import gone

    going, draining = naming.object_name("going"), naming.object_name("draining")
    objects = {("Deployment", going): orphan(going, "going"), ("Deployment", draining): orphan(draining, "draining")}
    objects[("Deployment", going)]["spec"] = {"template": {"spec": {"terminationGracePeriodSeconds": 605}}}
    objects[("Deployment", draining)]["metadata"]["deletionTimestamp"] = "2026-12-04T10:00:00Z"
    monkeypatch.setattr(cluster, "live_by_name", lambda client, target, kinds, **kw: objects)
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(
        cluster, "delete_exact", lambda client, kind, name, ns, uid, *, propagation: sent.append((name, propagation)) or True
    )
    waited: dict[str, Any] = {}

    def wait_gone(live: Any, objs: dict[tuple[str, str], str], *, timeout: float, **kw: Any) -> tuple[list[str], dict[Any, Any]]:
        waited.update(objects=sorted(name for _, name in objs), timeout=timeout)
        return [], {}

    monkeypatch.setattr(gone, "wait_gone", wait_gone)
    assert deletions.delete_going(CTX, {}, {"going", "draining"}) == {going: "going"}
    assert sent == [(going, "Foreground")]
    assert waited == {"objects": sorted([going, draining]), "timeout": 605 + deletions.GONE_TIMEOUT_SECONDS}


def test_a_deletion_the_api_server_asks_to_retry_is_retried(monkeypatch: pytest.MonkeyPatch, listed: list[str]) -> None:
    calls: list[str] = []

    def busy_once(*a: Any, **kw: Any) -> bool:
        calls.append("delete")
        if len(calls) == 1:
            raise api_error(429)
        return True

    monkeypatch.setattr(cluster, "delete_exact", busy_once)
    monkeypatch.setattr("time.sleep", lambda s: None)
    assert deletions.delete_orphans(CTX, {}) == {listed[0]: "gone"}
    assert calls == ["delete", "delete"]


def test_a_recreated_keys_workload_alone_is_deleted_in_the_foreground_its_service_and_others_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A key of the config that a stage recreates: its Deployment goes (until gone, its pods with
    # it), its Service stays; another key's objects and an object not this stack's are never touched.
    from infercrane.live.status import gone

    kept, other = naming.object_name("kept"), naming.object_name("other")
    service = {**orphan(kept, "kept"), "kind": "Service"}
    foreign = orphan(kept, "kept")
    foreign["metadata"] = {
        **foreign["metadata"],
        "annotations": {**foreign["metadata"]["annotations"], naming.ANNOTATION_STACK: "x/y"},
    }
    objects = {
        ("Deployment", kept): orphan(kept, "kept"),
        ("Service", kept): service,
        ("Deployment", other): orphan(other, "other"),
    }
    monkeypatch.setattr(cluster, "live_by_name", lambda client, target, kinds, **kw: objects)
    sent: list[tuple[str, str, str]] = []
    monkeypatch.setattr(
        cluster,
        "delete_exact",
        lambda client, kind, name, ns, uid, *, propagation: sent.append((kind, name, propagation)) or True,
    )
    monkeypatch.setattr(gone, "wait_gone", lambda live, objs, *, timeout, **kw: ([], {}))
    assert deletions.delete_workloads(CTX, {"kept"}) == {kept: "kept"}
    assert sent == [("Deployment", kept, "Foreground")]
    objects[("Deployment", kept)] = foreign  # another stack's object of that name: left alone
    sent.clear()
    assert deletions.delete_workloads(CTX, {"kept"}) == {}
    assert sent == []
