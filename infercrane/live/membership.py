"""Who serves each endpoint now, and the rollout from there to the config.

The members of a stack are its live workload objects (Deployments, or InferenceServices in KServe
mode) that carry the stack's exact ownership: their key annotation, their endpoint label (objects
rendered before the label existed: the first ``--served-model-name``, which InferCrane always
renders as the endpoint name), whether they are ready by the readiness rule, and the GPUs their
pods request. Read from the preflight's one LIST per kind -- no extra request. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infercrane.core import naming, rollout
from infercrane.core.config import InferCraneConfig
from infercrane.core.kinds import WORKLOAD_KINDS
from infercrane.core.render import RenderedReplica
from infercrane.core.waves import Rollout
from infercrane.core.workload import endpoint_of, gpus_of, pod_of
from infercrane.live.preflight import Report
from infercrane.live.verdicts import VERDICTS, serving


def _workloads(
    config: InferCraneConfig, live: Mapping[tuple[str, str], Mapping[str, Any]], stack_id: str
) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """key -> (kind, object) of the stack's live workload objects of every workload API: the
    current one's, and the other one's after a ``workloadApi`` switch (listed when the identity
    may). An object with an owner is a controller's child -- KServe copies our labels and
    annotations onto its predictor Deployment -- never one of ours; a key with objects of both
    kinds is the current kind's."""
    t = config.kubernetes
    current = t.object_kinds[0]
    workload_kinds = {kinds[0] for kinds in WORKLOAD_KINDS.values()}
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for (kind, _name), obj in sorted(live.items()):
        meta = obj.get("metadata") or {}
        if kind not in workload_kinds or meta.get("ownerReferences"):
            continue
        if naming.not_owned(dict(obj), namespace=t.namespace, stack=stack_id):
            continue
        key = str((meta.get("annotations") or {})[naming.ANNOTATION_KEY])
        if key not in out or kind == current:
            out[key] = (kind, obj)
    return out


def members(config: InferCraneConfig, live: Mapping[tuple[str, str], Mapping[str, Any]], stack_id: str) -> list[rollout.Member]:
    """The stack's live replicas, in name order: owned workload objects only."""
    t = config.kubernetes
    out = []
    for key, (kind, obj) in sorted(_workloads(config, live, stack_id).items(), key=lambda kv: str(kv[1][1]["metadata"]["name"])):
        out.append(
            rollout.Member(
                key=key,
                endpoint=endpoint_of(obj) or "",
                ready=VERDICTS[kind](obj, 0).state == "ready",
                gpus=gpus_of(obj, t.gpu_resource),
                serving=serving({"kind": kind, **obj}),
                product=str((pod_of(obj).get("nodeSelector") or {}).get(t.gpu_product_label) or ""),
            )
        )
    return out


def moved(config: InferCraneConfig, live: Mapping[tuple[str, str], Mapping[str, Any]], stack_id: str) -> set[str]:
    """Keys whose live workload is of another kind than the config renders (a ``workloadApi`` switch)."""
    current = config.kubernetes.object_kinds[0]
    return {key for key, (kind, _) in _workloads(config, live, stack_id).items() if kind != current}


def plan_rollout(config: InferCraneConfig, rendered: Sequence[RenderedReplica], report: Report, stack_id: str) -> Rollout:
    """The rollout from what runs (the preflight's view) to ``rendered``."""
    moving = moved(config, report.live, stack_id)
    targets = [
        rollout.Target(
            key=r.replica.key,
            endpoint=r.replica.name,
            gpus=r.replica.gpu_count,
            restarts=r.name in report.restarts,
            moves=r.replica.key in moving,
            product=r.replica.gpu,
        )
        for r in rendered
    ]
    return rollout.plan(members(config, report.live, stack_id), targets, config.rollout_for)
