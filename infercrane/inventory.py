"""Inventory: the objects a stack owns in its namespace, by our exact ownership metadata.

Lists by ``app.kubernetes.io/managed-by=infercrane`` and keeps only objects whose stack
annotation is this stack's and whose key annotation hashes to the key-hash label (so a decoy with
partial labels is never counted, adopted or deleted). Live-cluster layer.
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane import naming
from infercrane.cluster import TRANSPORT_ERRORS, InferenceService, describe_api_error, unreachable
from infercrane.config import PROJECT, InferCraneConfig
from infercrane.errors import ClusterError


def owned_objects(client: Client, config: InferCraneConfig, stack: str) -> list[str]:
    """``Kind/name`` of every object this stack owns in the target namespace."""
    ns = config.kubernetes.namespace
    stack_id = naming.stack_identity(PROJECT, stack)
    kinds: list[Any] = [InferenceService] if config.kubernetes.workload_api == "kserve" else [Deployment, Service]
    out = []
    for res in kinds:
        try:
            items = list(client.list(res, namespace=ns, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}))
        except ApiError as exc:
            if exc.status.code == 404:  # the kind is not served (no KServe): nothing of it exists
                continue
            raise ClusterError(
                describe_api_error(exc, action=f"list {res.__name__}s in namespace {ns}", target=config.kubernetes)
            ) from None
        except TRANSPORT_ERRORS as exc:
            raise unreachable(exc, config.kubernetes) from None
        for obj in items:
            raw: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
            key = (raw.get("metadata", {}).get("annotations") or {}).get(naming.ANNOTATION_KEY)
            if key is not None and not naming.ownership_mismatches(raw, key=key, namespace=ns, stack=stack_id):
                out.append(f"{res.__name__}/{raw['metadata']['name']}")
    return sorted(out)
