"""The intent hash of one replica: its spec plus the target settings that shape its objects.

Recorded on every object (annotation), compared by ``plan`` and the idempotency record; a field
changes the hash if and only if it can change the rendered objects. Pure core.
"""

from __future__ import annotations

from infercrane.core import naming
from infercrane.core.config import InferCraneConfig, Replica


def intent(config: InferCraneConfig, replica: Replica) -> str:
    """The intent hash of one replica: its spec plus the target settings that shape its objects."""
    t = config.kubernetes
    spec = {
        "replica": replica.model_dump(by_alias=True, mode="json"),
        "target": {
            "namespace": t.namespace,
            "workloadApi": t.workload_api,
            "serviceAccount": t.service_account,
            "workerSecret": t.worker_secret.model_dump(by_alias=True),
            "image": config.image_for(replica),
            "gpuResource": t.gpu_resource,
            "gpuProductLabel": t.gpu_product_label,
            "gpuTolerationKey": t.gpu_toleration_key,
            "kserveDeploymentMode": t.kserve_deployment_mode,
        },
    }
    return naming.intent_hash(spec)
