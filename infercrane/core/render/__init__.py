"""Pure rendering: a replica intent becomes plain manifest dicts, exactly what the program applies.

Kubernetes wire names (camelCase), deterministic output (same config -> same dicts, key order
included), no pulumi and no Kubernetes client. The Pulumi shell passes these dicts through
unchanged, the CLI's ``render`` prints them, and the golden tests freeze them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.replica import Replica
from infercrane.core.render.intent import intent as replica_intent
from infercrane.core.render.workloads import deployment, inference_service, resource_claim_template, service

Manifest = dict[str, Any]

#: Each kind's renderer: a replica's objects are its workload API's kinds, rendered in order.
RENDERERS: Final[dict[str, Callable[[InferCraneConfig, Replica, str, str], Manifest]]] = {
    "Deployment": deployment,
    "Service": service,
    "InferenceService": inference_service,
    "ResourceClaimTemplate": resource_claim_template,
}


@dataclass(frozen=True)
class RenderedReplica:
    """The manifests of one replica, with the facts the outputs need."""

    replica: Replica
    name: str
    intent: str
    manifests: tuple[Manifest, ...]
    endpoint: str


def render_replica(config: InferCraneConfig, replica: Replica, stack: str) -> RenderedReplica:
    """Render one replica's objects for the stack identity ``stack`` (``project/stack``)."""
    intent = replica_intent(config, replica)
    t = config.kubernetes
    name = naming.object_name(replica.key)
    manifests = tuple(RENDERERS[kind](config, replica, intent, stack) for kind in t.object_kinds)
    endpoint = t.api.endpoint.format(name=name, namespace=t.namespace, port=replica.port)
    return RenderedReplica(replica=replica, name=name, intent=intent, manifests=manifests, endpoint=endpoint)


def render_all(config: InferCraneConfig, stack: str) -> list[RenderedReplica]:
    """Render every replica of the stack, in config order."""
    return [render_replica(config, r, stack) for r in config.replicas]
