"""Where a replica answers: the ready pod addresses of its Service's EndpointSlices (what a gateway
routes by), read as serving evidence and the canary ask them. Listing EndpointSlices is an
*optional* read (:data:`READER`), never the seed's Role. Only the EndpointSlice controller's own
slices count, and in them only the replica's own pods: a slice anyone else made with the same
labels never gets the worker key. Live-cluster layer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from infercrane.core import naming
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status.readiness import API_GRACE_SECONDS

READER: Final = "deploy/kubernetes/optional/endpointslice-reader.yaml"
SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"  # set by the EndpointSlice controller
SLICE_MANAGER_LABEL: Final = "endpointslice.kubernetes.io/managed-by"
SLICE_MANAGER: Final = "endpointslice-controller.k8s.io"  # the EndpointSlice controller: the only slices asked
SNAPSHOT_SECONDS: Final = 0.5  # how long one LIST of the EndpointSlices serves every replica checked


def _of_replica(endpoint: Mapping[str, Any], service: str, namespace: str) -> bool:
    """Whether a slice's endpoint is one of the replica's own pods: a Pod of its namespace named
    ``<workload>-<hash>-<suffix>`` (the workload is named as its Service: ours, or KServe's
    ``<name>-predictor``)."""
    ref = endpoint.get("targetRef") or {}
    return (
        ref.get("kind") == "Pod"
        and str(ref.get("name") or "").startswith(service + "-")
        and ref.get("namespace", namespace) == namespace
    )


class Slices:
    """The EndpointSlices of a namespace's Services, read for a whole command; safe to use from
    several threads."""

    def __init__(
        self, live: Live, namespace: str, wait: float, sleep: Callable[[float], None], clock: Callable[[], float]
    ) -> None:
        self._live, self._namespace, self._wait, self._sleep, self._clock = live, namespace, wait, sleep, clock
        self._unreadable: failures.Forbidden | None = None  # the first 403: no replica asks again
        self._snapshot: tuple[float, dict[str, list[dict[str, Any]]]] | None = None  # (taken at, by Service)
        self._lock = threading.Lock()

    def endpoints(self, service: str) -> tuple[list[tuple[str, int, str]], str]:
        """The ready (address, port, pod name) triples of ``service``'s EndpointSlices, waited for a moment:
        the endpoint controller follows a pod's Ready condition within about a second. Only the
        controller's own slices count, and in them only endpoints whose ``targetRef`` is one of
        this replica's pods (``<workload>-…``, the Service's own name): a slice anyone else made
        with the same labels never gets the worker key. A throttled or lost API server (429/5xx,
        no answer) is asked again for :data:`API_GRACE_SECONDS`, as every other read of a deploy."""
        deadline = self._clock() + self._wait
        lost_since: float | None = None
        while True:
            try:
                slices = self._slices(service)
                lost_since = None
            except failures.Forbidden:
                return [], f"this identity may not list endpointslices (optional: apply {READER})"
            except (failures.Unavailable, failures.Unreachable) as exc:
                lost_since = lost_since if lost_since is not None else self._clock()
                if self._clock() - lost_since >= API_GRACE_SECONDS:
                    return [], f"the EndpointSlices of Service {service} could not be read: {str(exc).splitlines()[0]}"
                self._sleep(0.5)
                continue
            except failures.LiveError as exc:
                return [], f"the EndpointSlices of Service {service} could not be read: {str(exc).splitlines()[0]}"
            found = [
                (str(address), int(port.get("port")), str((e.get("targetRef") or {}).get("name")))
                for s in slices
                if (s.get("metadata", {}).get("labels") or {}).get(SLICE_MANAGER_LABEL) == SLICE_MANAGER
                for port in (s.get("ports") or [])[:1]
                if port.get("port")
                for e in s.get("endpoints") or []
                if _of_replica(e, service, self._namespace)
                and (e.get("conditions") or {}).get("ready") is not False
                and not (e.get("conditions") or {}).get("terminating")
                for address in (e.get("addresses") or [])[:1]
            ]
            if found or self._clock() >= deadline:
                return sorted(found), f"Service {service} has no ready address in its EndpointSlices"
            self._sleep(0.5)

    def _slices(self, service: str) -> list[dict[str, Any]]:
        """``service``'s EndpointSlices: from one LIST of every slice of our Services (they carry
        the Service's labels) shared by all the replicas checked within half a second -- a fleet
        asks about once per tick, not once per replica -- else, for a Service not in it (KServe's
        predictor, or a slice not made yet), one LIST of its own. A 403 is remembered: no replica
        asks again."""
        from lightkube.resources.discovery_v1 import EndpointSlice

        with self._lock:
            if self._unreadable is not None:
                raise self._unreadable
            try:
                if self._snapshot is None or self._clock() - self._snapshot[0] >= SNAPSHOT_SECONDS:
                    listed = self._live.list(EndpointSlice, labels=naming.managed_selector(), action="list endpointslices")
                    by_service: dict[str, list[dict[str, Any]]] = {}
                    for s in listed:
                        by_service.setdefault(str((s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)), []).append(s)
                    self._snapshot = (self._clock(), by_service)
                if service in self._snapshot[1]:
                    return self._snapshot[1][service]
                return self._live.list(
                    EndpointSlice, labels={SERVICE_NAME_LABEL: service}, action=f"list the EndpointSlices of {service}"
                )
            except failures.Forbidden as exc:
                self._unreadable = exc
                raise
