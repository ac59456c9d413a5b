"""A replica's pods as ``inspect`` shows them: where each runs (its node's GPU product, or the
devices its claims were allocated), why one waits, and its start (:mod:`infercrane.live.status.startup`).
Read only when the identity may read pods (the optional pod reader). Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lightkube import operators
from lightkube.resources.core_v1 import Node, Pod

from infercrane.core import naming
from infercrane.core.model import gpu
from infercrane.core.model.config import InferCraneConfig
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status import startup

POD_READER: Final = "deploy/kubernetes/optional/pod-reader.yaml"


def pod_owner_label(config: InferCraneConfig) -> str:
    """The pod label naming the replica: ours on our Deployments' pods, KServe's on the pods it makes."""
    return config.kubernetes.api.pod_label


def list_pods(live: Live, config: InferCraneConfig) -> list[dict[str, Any]] | None:
    """Every pod of our replicas (one LIST), or None when this identity may not read pods (403)."""
    t = config.kubernetes
    selector: dict[str, Any] = {t.api.pod_label: operators.exists()} if t.api.controller_pods else naming.managed_selector()
    try:
        return live.list(Pod, labels=selector, action="list pods")
    except failures.Forbidden:
        return None


def node_gpus(live: Live, label: str) -> dict[str, str]:
    """Node name -> GPU product label, or {} without the optional node reader."""
    try:
        nodes = live.list(Node, action="list nodes")
        return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(label, "") for n in nodes}
    except failures.LiveError:
        return {}


def claim_devices(live: Live, config: InferCraneConfig) -> dict[str, list[str]] | None:
    """Claim name -> the devices its allocation names (``<pool>/<device>``: NVIDIA's driver names a
    pool after its node), one LIST of the namespace's ResourceClaims; None outside
    ``gpuAllocation: dra`` or without the optional DRA reader."""
    if not config.kubernetes.allocation.claims:
        return None
    from lightkube.resources.resource_v1 import ResourceClaim

    try:
        claims = live.list(ResourceClaim, action="list resourceclaims")
    except failures.LiveError:
        return None
    return {c["metadata"]["name"]: [f"{x.get('pool')}/{x.get('device')}" for x in gpu.allocated(c)] for c in claims}


def devices(pod: dict[str, Any], allocations: dict[str, list[str]] | None) -> list[str] | None:
    """The devices allocated to ``pod``'s claims (its status names each claim the controller made)."""
    if allocations is None:
        return None
    names = [s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
    return [d for n in names if n for d in allocations.get(n, [])]


def pod_condition_reasons(pod: dict[str, Any]) -> list[str]:
    """Why a pod is not running, from its own PodScheduled condition."""
    out = []
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            reason = "FailedScheduling" if c.get("reason") == "Unschedulable" else c.get("reason")
            out.append(f"{reason}: {c.get('message')}")
    return out


def owned(config: InferCraneConfig, pods: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The pods of replica ``name``."""
    label = pod_owner_label(config)
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(label) == name]


def placed(
    pod: dict[str, Any],
    node_gpu: Mapping[str, str],
    allocations: dict[str, list[str]] | None,
    all_starts: Mapping[str, startup.Start],
) -> dict[str, Any]:
    """One pod's record: name, phase, node, its node's GPU product or its claims' devices, why it
    waits, and its start."""
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    started = all_starts.get(pod["metadata"]["name"])
    return {
        "name": pod["metadata"]["name"],
        "phase": phase,
        "node": node,
        "nodeGpu": node_gpu.get(node or "") if node_gpu else None,
        "devices": devices(pod, allocations),
        "reasons": pod_condition_reasons(pod) if phase == "Pending" else [],
        "start": started.as_output() if started is not None else None,
    }
