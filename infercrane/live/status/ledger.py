"""The startup ledger a deploy records when its waits are done: each replica's newest start, stage
by stage (:mod:`infercrane.live.status.startup`), with its GPU product and image -- what ``plan``
estimates the next rollout from (:mod:`infercrane.core.plan.duration`). One LIST of the
namespace's Events and, with the optional pod reader, one of the pods: once per deploy, not per
tick. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from infercrane.core.model.config import InferCraneConfig
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status import pods, startup, warnings


def take(
    live: Live,
    config: InferCraneConfig,
    names: Mapping[str, str],
    ready: Mapping[str, datetime],
    served: Mapping[str, datetime],
) -> dict[str, dict[str, Any]]:
    """Key -> the newest start of that replica (``names``: key -> its object's name), ended by what
    the deploy's own waits saw (``ready``, ``served``: key -> when); {} when this identity may not
    read Events or the API server does not answer (nothing to record from; the deploy stands)."""
    events = warnings.list_events(live)
    if isinstance(events, str):
        return {}
    try:
        listed = pods.list_pods(live, config) or []
    except failures.LiveError:  # a record, not a verdict: the API gone now costs its precision, not the deploy
        listed = []
    records = records_of(startup.starts(events, listed), names, ready, served)
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    replicas = {r.key: r for r in config.replicas}
    for key, record in records.items():
        rep = replicas.get(key)
        if rep is not None:
            record |= {"gpu": rep.gpu, "gpuCount": rep.gpu_count, "image": config.image_for(rep), "at": at}
    return records


def records_of(
    all_starts: Mapping[str, startup.Start],
    names: Mapping[str, str],
    ready: Mapping[str, datetime],
    served: Mapping[str, datetime],
) -> dict[str, dict[str, Any]]:
    """Each replica's newest start (``names``: key -> its object's name) as a record
    (:meth:`Start.as_output`), ended by what the deploy's own wait saw: *healthy* when its wait saw
    it ready (``ready``; the pod's Ready condition is exacter, when the pods were read) and *served*
    when its serving evidence was taken (``served``). A replica none of whose pods left a trace has
    none."""
    out = {}
    for key, name in names.items():
        mine = startup.of_replica(all_starts, name)
        if not mine:
            continue
        s = mine[-1]
        healthy = s.healthy or ready.get(key)
        s = startup.Start(**{**s.__dict__, "healthy": healthy, "served": served.get(key) if healthy is not None else None})
        out[key] = startup.in_order(s).as_output()
    return out
