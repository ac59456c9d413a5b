"""The startup ledger a deploy records: each replica's newest start with its GPU product and
image, from one Events LIST -- and a record, never a verdict: what it cannot read costs its
precision, never the deploy."""

from __future__ import annotations

from typing import Any

from infercrane.core.model.config import InferCraneConfig
from infercrane.live.client import failures
from infercrane.live.status import ledger
from tests.unit.conftest import DIGEST

POD = "infercrane-a-5d8f9c7b6-x2x4q"
EVENTS = [
    {
        "involvedObject": {"kind": "Pod", "name": POD},
        "reason": "Scheduled",
        "type": "Normal",
        "firstTimestamp": "2026-12-07T10:00:00Z",
    },
    {
        "involvedObject": {"kind": "Pod", "name": POD},
        "reason": "Started",
        "type": "Normal",
        "firstTimestamp": "2026-12-07T10:00:20Z",
    },
]
CONFIG = InferCraneConfig.model_validate(
    {
        "kubernetes": {"context": "c", "imageDigest": DIGEST},
        "replicas": [{"key": "a", "model": "Qwen/Qwen3-8B", "name": "qwen", "gpu": "NVIDIA-L40S"}],
    }
)


class Cluster:
    """Answers the ledger's two LISTs: the Events (or refuses them) and the pods (or fails)."""

    def __init__(self, events: list[dict[str, Any]] | Exception, pods: Exception | None = None) -> None:
        self.events, self.pods = events, pods

    def list_cached(self, plural: str, *, action: str) -> list[dict[str, Any]]:
        if isinstance(self.events, Exception):
            raise self.events
        return self.events

    def list(self, res: Any, **_: Any) -> list[dict[str, Any]]:
        if self.pods is not None:
            raise self.pods
        return []


def test_each_replica_is_recorded_with_its_gpu_product_and_image() -> None:
    (record,) = ledger.take(Cluster(EVENTS), CONFIG, {"a": "infercrane-a"}, {}, {}).values()  # type: ignore[arg-type]
    assert record["pod"] == POD and record["started"] == 20.0 and record["healthy"] is None
    assert (record["gpu"], record["gpuCount"], record["image"]) == ("NVIDIA-L40S", 1, DIGEST)


def test_events_it_may_not_read_or_a_pod_list_that_fails_cost_the_record_not_the_deploy() -> None:
    forbidden = failures.Forbidden("list events: forbidden", code=403)
    assert ledger.take(Cluster(forbidden), CONFIG, {"a": "infercrane-a"}, {}, {}) == {}  # type: ignore[arg-type]
    lost = failures.Unreachable("cannot reach the Kubernetes API", code=0)
    records = ledger.take(Cluster(EVENTS, pods=lost), CONFIG, {"a": "infercrane-a"}, {}, {})  # type: ignore[arg-type]
    assert records["a"]["started"] == 20.0  # from the Events alone
