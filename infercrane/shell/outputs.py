"""What a run of the program records as the stack's outputs: each replica's facts, per endpoint
its members (routing membership) with the serving evidence the run took, the canaries' verdicts
and the deploy history. Pulumi shell.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Final

import pulumi

from infercrane.core.model import config as cfg
from infercrane.core.model.kinds import WORKLOADS
from infercrane.core.plan.workload import release_of, routing_member
from infercrane.core.render import RenderedReplica
from infercrane.shell.awaiting import Taken
from infercrane.shell.components import ReplicaComponent


def summary_of(r: RenderedReplica, config: cfg.InferCraneConfig) -> dict[str, Any]:
    """The facts one replica's component records as outputs (and the stack output ``replicas``)."""
    rep = r.replica
    return {
        "key": rep.key,
        "endpointName": rep.name,
        "model": rep.model,
        "modelRevision": rep.model_revision,
        "namespace": config.kubernetes.namespace,
        "objects": [{"kind": m["kind"], "name": m["metadata"]["name"]} for m in r.manifests],
        "endpoint": r.endpoint,
        "intentHash": r.intent,
        "gpu": rep.gpu,
        "gpuCount": rep.gpu_count,
        "image": config.image_for(rep),
        # What its pods run (core.plan.workload.release_of): a gateway weighing a canary against
        # its baseline tells them apart by it.
        "release": release_of(next(m for m in r.manifests if m["kind"] in WORKLOADS)),
    }


DEPLOY_HISTORY: Final = 20


def export(
    components: list[ReplicaComponent],
    config: cfg.InferCraneConfig,
    deploy_record: dict[str, Any] | None,
    taken: pulumi.Output[Taken] | Taken | None = None,
    canaries: Mapping[str, Any] | None = None,
) -> None:
    """Stack outputs: the replicas, and per endpoint its members (routing membership: key,
    model revision, intent hash, and the serving evidence this run took -- None for a replica
    it did not wait for) -- every replica this run leaves registered; ``starts``: the last start
    of each replica (this run's, else the one the stack's outputs carried -- what ``plan``
    estimates a rollout's time from); ``canaries``: each canary verdict this run reached, with its
    record and its canaries' starts (exported with the time of the deploy, beside the last verdict
    of each other endpoint the deploy record carries)."""
    record = deploy_record or {}
    keys = {c.summary["key"] for c in components}
    earlier = {k: v for k, v in (record.get("starts") or {}).items() if k in keys}

    def members(taken: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        endpoints: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for c in components:
            s = c.summary
            endpoints[str(s["endpointName"])].append(
                routing_member(
                    s["key"],
                    revision=s.get("modelRevision"),
                    intent=s.get("intentHash"),
                    release=s.get("release"),
                    evidence=taken.get(s["key"]),
                )
            )
        return dict(endpoints)

    pulumi.export("namespace", config.kubernetes.namespace)
    pulumi.export("workloadApi", config.kubernetes.workload_api)
    pulumi.export("replicas", {c.summary["key"]: c.summary for c in components})
    if isinstance(taken, pulumi.Output):
        pulumi.export("endpoints", taken.apply(lambda t: members(t.evidence)))
        pulumi.export("starts", taken.apply(lambda t: last_starts(earlier, t.starts)))
    else:
        pulumi.export("endpoints", members(taken.evidence if taken else {}))
        if earlier or (taken and taken.starts):
            pulumi.export("starts", last_starts(earlier, taken.starts if taken else {}))
    # endpoint -> its canary's last verdict (core.plan.canary.CanaryVerdict.as_json) and when: this run's,
    # else the one the stack's outputs carried, for the endpoints still configured.
    at = (record.get("entry") or {}).get("at")
    kept = {e: v for e, v in (record.get("canaries") or {}).items() if e in {r.name for r in config.replicas}}
    started = taken.starts if isinstance(taken, Taken) else {}
    kept |= {e: {**v, "at": at, **canary_starts(v, started)} for e, v in (canaries or {}).items()}
    if kept:
        pulumi.export("canaries", kept)
    if deploy_record is not None and not pulumi.runtime.is_dry_run():
        entries = [*deploy_record["history"], *([deploy_record["entry"]] if deploy_record.get("entry") else [])]
        pulumi.export("deploys", entries[-DEPLOY_HISTORY:])


def last_starts(earlier: Mapping[str, dict[str, Any]], taken: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each replica's last start: this run's, else the one the stack's outputs carried (``earlier``,
    already only of the replicas still registered)."""
    return {**earlier, **taken}


def canary_starts(verdict: Mapping[str, Any], starts: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The starts of a verdict's canary replicas (its record's ``canary`` side), beside the record
    -- never in it: the record's digest is what a rerun judges again."""
    measured = (verdict.get("record") or {}).get("measured") or []
    keys = sorted({m.get("replica") for m in measured if m.get("side") == "canary"} & set(starts))
    return {"starts": {k: starts[k] for k in keys}} if keys else {}
