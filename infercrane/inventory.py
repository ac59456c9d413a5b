"""Inventory: the objects a stack owns in its namespace, by our exact ownership metadata.

Lists the namespace's objects of the stack's kinds and keeps only those carrying this stack's
exact ownership (:func:`naming.not_owned`: managed-by, a key annotation that hashes to the
key-hash label, our contract and stack), so a decoy with partial labels is never counted,
adopted or deleted. Live-cluster layer.
"""

from __future__ import annotations

from lightkube import Client

from infercrane import cluster, naming
from infercrane.config import PROJECT, InferCraneConfig


def owned_objects(client: Client, config: InferCraneConfig, stack: str) -> list[str]:
    """``Kind/name`` of every object this stack owns in the target namespace (one LIST per kind;
    a kind the server does not serve has none; API errors are ClusterError)."""
    t = config.kubernetes
    stack_id = naming.stack_identity(PROJECT, stack)
    live = cluster.live_by_name(client, t, t.object_kinds)
    return sorted(
        f"{kind}/{name}" for (kind, name), obj in live.items() if not naming.not_owned(obj, namespace=t.namespace, stack=stack_id)
    )
