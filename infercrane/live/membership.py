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
from infercrane.core.render import RenderedReplica
from infercrane.core.waves import Rollout
from infercrane.core.workload import endpoint_of, gpus_of
from infercrane.live.preflight import Report
from infercrane.live.verdicts import VERDICTS, serving


def members(config: InferCraneConfig, live: Mapping[tuple[str, str], Mapping[str, Any]], stack_id: str) -> list[rollout.Member]:
    """The stack's live replicas, in name order: owned workload objects only."""
    t = config.kubernetes
    kind = t.object_kinds[0]
    verdict = VERDICTS[kind]
    out = []
    for (k, _name), obj in sorted(live.items()):
        if k != kind or naming.not_owned(dict(obj), namespace=t.namespace, stack=stack_id):
            continue
        key = str(((obj.get("metadata") or {}).get("annotations") or {})[naming.ANNOTATION_KEY])
        out.append(
            rollout.Member(
                key=key,
                endpoint=endpoint_of(obj) or "",
                ready=verdict(obj, 0).state == "ready",
                gpus=gpus_of(obj, t.gpu_resource),
                serving=serving({"kind": kind, **obj}),
            )
        )
    return out


def plan_rollout(config: InferCraneConfig, rendered: Sequence[RenderedReplica], report: Report, stack_id: str) -> Rollout:
    """The rollout from what runs (the preflight's view) to ``rendered``."""
    targets = [
        rollout.Target(key=r.replica.key, endpoint=r.replica.name, gpus=r.replica.gpu_count, restarts=r.name in report.restarts)
        for r in rendered
    ]
    return rollout.plan(members(config, report.live, stack_id), targets, config.rollout_for)
