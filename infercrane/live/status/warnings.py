"""Why a replica is not ready, in the cluster's words: the namespace's Warning Events about its
objects and pods (FailedScheduling names the missing GPU), read with one LIST and never a Pod
read. Live-cluster layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from lightkube.resources.core_v1 import Event

from infercrane.core.model.kinds import DEPLOYMENT_API
from infercrane.core.state import times
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status.verdicts import applied_at

EVENTS_GRANT: Final = f"get/list on events ({DEPLOYMENT_API.role_file} grants it)"


#: The kinds whose warnings can say why a replica is not ready, the most telling first: its pods,
#: then what creates them, then what scales them. An autoscaler's metric warnings (KServe's HPA
#: without a metrics API) come every 15 s and must not push a pod's FailedScheduling out of the
#: few lines shown. Other kinds' are not why a replica waits: its Service's, for one -- the API
#: server's ClusterIP repair loop warns ``ClusterIPNotAllocated … repairing`` of Services it sees
#: before their IP address objects, under a burst of creations (a first deploy of hundreds).
_WARNING_RANK: Final = {"Pod": 0, "ReplicaSet": 1, "Deployment": 2, "InferenceService": 2, "HorizontalPodAutoscaler": 3}


def pod_warnings(
    live: Live,
    names: Iterable[str],
    *,
    limit: int = 3,
    since: Mapping[str, datetime] | None = None,
    current: Mapping[str, str] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> dict[str, list[str]]:
    """Warning Events in the namespace about each replica's workload, pods and autoscaler, by
    replica name: one line per kind and reason (its newest message), at most ``limit``, the most
    telling first -- pods', then their creators', then the autoscaler's; newest first within
    each. History is left out: with ``current`` (name -> its current ReplicaSet), another
    ReplicaSet's pods' Events are an earlier template's; with ``since`` (name -> a moment), an
    Event last seen before it is too -- an earlier pod's, or this one's before a fix (a Secret
    created since).

    Pods are never read: an Event names its object, and a replica's pods are named
    ``<replica name>-<hash>-<suffix>``. Without the right to list Events, says which right is missing.
    ``events``: the namespace's Events as :func:`list_events` listed them (any type), instead of a LIST.
    """
    wanted = set(names)
    if not wanted:
        return {}
    if events is None:
        listed = list_events(live, warnings_only=True)
        if isinstance(listed, str):
            return {} if not listed else {n: [listed] for n in sorted(wanted)}
        events = listed
    else:
        events = [e for e in events if e.get("type") == "Warning"]
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    newest: dict[str, dict[tuple[str, str], tuple[int, int, str]]] = {}
    for order, e in enumerate(events):
        involved = e.get("involvedObject") or {}
        name, kind = str(involved.get("name") or ""), str(involved.get("kind") or "")
        rank = _WARNING_RANK.get(kind)
        if rank is None:
            continue
        seen = times.parse(e.get("lastTimestamp") or (e.get("series") or {}).get("lastObservedTime") or e.get("eventTime"))
        for n in _named(name, wanted):
            if since is not None and n in since and seen is not None and seen < since[n]:
                continue
            rs = (current or {}).get(n)
            if rs and kind in ("Pod", "ReplicaSet") and not (name == rs or name.startswith(rs + "-")):
                continue  # an earlier template's pods
            line = f"{e.get('reason')}: {' '.join(str(e.get('message') or '').split())}"
            newest.setdefault(n, {})[(kind, str(e.get("reason")))] = (rank, -order, line)
    return {n: [line for _, _, line in sorted(by_reason.values())[:limit]] for n, by_reason in newest.items()}


def list_events(live: Live, *, warnings_only: bool = False, about: str = "") -> list[dict[str, Any]] | str:
    """The namespace's Events (only Warnings: a smaller LIST; every type: from the API server's
    cache, as plain JSON; ``about`` an object's uid: only its own, from the cache too), or why not:
    "" when the API server did not answer (the caller goes on without them), else a note naming
    the missing right."""
    try:
        if about:
            return live.list_cached("events", action="list events", fields={"involvedObject.uid": about})
        if not warnings_only:
            return live.list_cached("events", action="list events")
        return live.list(Event, fields={"type": "Warning"}, action="list events")
    except failures.Unreachable:
        return ""
    except failures.LiveError as exc:
        why = (exc.api.status.reason or exc.code) if exc.api is not None else exc.code
        return f"(Events not readable by this identity: {why}; grant {EVENTS_GRANT})"


def _named(name: str, wanted: set[str]) -> Iterator[str]:
    """The wanted replica names ``name`` is, or begins with before a ``-`` (its ReplicaSet's and
    pods' names): a set lookup per ``-``, not a scan of the fleet per Event."""
    if name in wanted:
        yield name
    for i, c in enumerate(name):
        if c == "-" and name[:i] in wanted:
            yield name[:i]


_REPLICA_SET: Final = re.compile(r'ReplicaSet "([^"]+)"')


def current_replica_set(deployment: Mapping[str, Any]) -> str | None:
    """The Deployment's current ReplicaSet, as its own ``Progressing`` condition names it
    (``ReplicaSet "<name>" is progressing`` / ``has successfully progressed`` / ``has timed out
    progressing``): the Deployment controller writes it for the template it rolls out. None when
    it names none (not observed yet), or when the condition was last updated before our last
    apply: then it speaks of the template before (the controller keeps a condition of the same
    status and reason as it is -- an in-place roll right after a rollout ended keeps
    ``ReplicaSet "<old>" has successfully progressed`` while its new pod cannot even be
    scheduled), and taking it would hide the new pods' Events as history."""
    for c in (deployment.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Progressing":
            found = _REPLICA_SET.search(str(c.get("message") or ""))
            applied = applied_at(deployment.get("metadata") or {})
            updated = times.parse(c.get("lastUpdateTime"))
            if applied is not None and updated is not None and updated < applied:
                return None
            return found[1] if found else None
    return None
