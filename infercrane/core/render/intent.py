"""The intent hash of one replica: its spec plus the target settings that shape its objects.

Recorded on every object (annotation), compared by ``plan`` and the idempotency record; a field
changes the hash if and only if it can change the rendered objects. Pure core.
"""

from __future__ import annotations

from typing import Any, Final

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.pod import PodSettings
from infercrane.core.model.replica import Replica


def intent(config: InferCraneConfig, replica: Replica) -> str:
    """The intent hash of one replica: its spec plus the target settings that shape its objects."""
    t = config.kubernetes
    own = replica.model_dump(
        by_alias=True,
        mode="json",
        exclude={
            f for f in LATER_FIELDS if getattr(replica, f) == Replica.model_fields[f].get_default(call_default_factory=True)
        },
    )
    spec: dict[str, Any] = {
        "replica": own,
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
    if t.security_context is not None:
        spec["target"]["securityContext"] = t.security_context.model_dump(by_alias=True)
    token = config.token_for(replica)
    if token is not None:  # a field added later enters only when set: an upgrade changes no intent
        spec["target"]["huggingFaceToken"] = token.model_dump(by_alias=True)
    resources = config.resources_for(replica)
    if resources is not None:  # as rendered: a change of either side moves it; none set: no change
        spec["target"]["resources"] = resources
    pod = config.pod_for(replica)
    if pod != PodSettings.model_validate({}):  # the merged settings, as rendered; none set: no change of intent
        spec["target"]["pod"] = pod.model_dump(by_alias=True, mode="json", exclude_defaults=True)
    claim = config.cache_for(replica)
    if claim is not None:
        spec["target"]["modelCache"] = claim
    model_image = config.model_image_for(replica)
    if model_image is not None:
        spec["target"]["modelImage"] = model_image
    compile_key = config.compile_key(replica)
    if compile_key is not None and t.compile_cache is not None:
        spec["target"]["compileCache"] = {"claimName": t.compile_cache.claim_name, "key": compile_key}
    if t.allocation.claims:  # label mode (the default) adds nothing to the intent
        spec["target"]["gpuAllocation"] = {
            "mode": t.gpu_allocation,
            "deviceClass": t.gpu_device_class,
            "productName": config.kubernetes.product_name(replica.gpu),
        }
    # Always, as rendered: every pod drains (its preStop, the engine's shutdown, the grace period),
    # so the release that brought it restarts each replica once, in waves under its policy.
    spec["target"]["drain"] = config.drain_for(replica).model_dump(by_alias=True)
    return naming.intent_hash(spec)


#: Replica fields added after the first release: in the hash only when not at their default (the
#: target's token enters when set), so that upgrading InferCrane changes the intent -- and so
#: the objects -- of no replica that does not use them.
LATER_FIELDS: Final = (
    "hugging_face_token",
    "scaling",
    "resources",
    "pod",
    "drain",
    "model_image",
    "startup_probe_period_seconds",
)


def pod_intent(config: InferCraneConfig, replica: Replica) -> str:
    """The intent hash the pods carry (the Deployment's pod template annotation): the replica's
    intent without what only shapes the Deployment around its pods -- ``scaling`` decides who owns
    ``spec.replicas``, not what a pod runs -- so switching it restarts no pod. Equal to
    :func:`intent` for a replica at the default (``fixed``): upgrading changes no pod template."""
    return intent(config, replica.model_copy(update={"scaling": Replica.model_fields["scaling"].default}))
