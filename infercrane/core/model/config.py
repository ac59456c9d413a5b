"""The typed, frozen configuration schema of one stack: ``infercrane:kubernetes`` (the target,
:mod:`infercrane.core.model.target`), ``infercrane:replicas`` (:mod:`infercrane.core.model.replica`)
and ``infercrane:endpoints``.

Models only -- every field with its rule and description; reading and merging values is
:mod:`infercrane.core.load.loading`, the intent hash :mod:`infercrane.core.render.intent`. Pure core.
"""

from __future__ import annotations

import hashlib
from typing import Final

from pydantic import Field

from infercrane.core.model import image, quantity
from infercrane.core.model.endpoints import EndpointSettings, RolloutPolicy
from infercrane.core.model.pod import (
    Drain,
    PodSettings,
    Resources,
    ResourcesOverride,
    SecretKeyRef,
)
from infercrane.core.model.replica import Replica
from infercrane.core.model.schema import Frozen
from infercrane.core.model.target import KubernetesTarget

KEY_TARGET: Final = "infercrane:kubernetes"
KEY_REPLICAS: Final = "infercrane:replicas"
KEY_ENDPOINTS: Final = "infercrane:endpoints"


class InferCraneConfig(Frozen):
    """The whole validated configuration of one stack."""

    kubernetes: KubernetesTarget
    replicas: tuple[Replica, ...] = ()
    endpoints: dict[str, EndpointSettings] = Field(default_factory=dict)

    def image_for(self, replica: Replica) -> str:
        return replica.image or self.kubernetes.image_digest

    def token_for(self, replica: Replica) -> SecretKeyRef | None:
        """The Hugging Face token Secret of ``replica``: its own, else the target's, else none."""
        return replica.hugging_face_token or self.kubernetes.hugging_face_token

    def pod_for(self, replica: Replica) -> PodSettings:
        """The pod settings of ``replica``: its own over the target's."""
        return replica.pod.over(self.kubernetes.pod)

    def drain_for(self, replica: Replica) -> Drain:
        """How ``replica``'s pod drains: its own settings over the target's."""
        return replica.drain.over(self.kubernetes.drain)

    def cache_for(self, replica: Replica) -> str | None:
        """The model-cache claim ``replica`` mounts (None: it downloads its weights, or mounts a model image)."""
        if self.model_image_for(replica) is not None:
            return None
        return self.kubernetes.artifact_cache.claim_for(replica.model, replica.model_revision)

    def model_image_for(self, replica: Replica) -> str | None:
        """The model image ``replica`` mounts (``oci://…@sha256:…``): its own, else the target's for its model."""
        if replica.model_image is not None:
            return replica.model_image
        found = self.kubernetes.model_images.get(replica.model)
        return None if found is None or replica.model_revision else found

    def compile_key(self, replica: Replica) -> str | None:
        """The compile-cache key of ``replica`` -- sha256 of (engine image digest, model digest, GPU
        product), 16 hex -- or None when it mounts no cache (none set, or its model is not pinned)."""
        if self.kubernetes.compile_cache is None:
            return None
        model_image = self.model_image_for(replica)
        if model_image is not None:
            model = image.digest_of(model_image)
        elif replica.model_revision:
            model = f"{replica.model}@{replica.model_revision}"
        else:
            return None
        key = "\n".join((image.digest_of(self.image_for(replica)), model, replica.gpu))
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def resources_for(self, replica: Replica) -> dict[str, dict[str, str]] | None:
        """The container's CPU and memory ``requests`` and ``limits`` (GPUs are added by the
        renderer), or None when neither the target nor the replica sets ``resources`` -- so that
        upgrading InferCrane restarts no replica; ``resources: {}`` takes the defaults.

        Requests: the replica's own values, else the target's per-GPU values times its GPU count.
        Limits: memory = request + shmSize (the tmpfs counts against it); CPU none (no throttling)
        but under KServe, which would impose its default; guaranteed: CPU = request and the memory
        request raised to the limit (Guaranteed QoS needs requests = limits)."""
        own = replica.resources
        if self.kubernetes.resources is None and own == ResourcesOverride.model_validate({}):
            return None
        t = self.kubernetes.resources or Resources.model_validate({})
        cpu = quantity.cpu_millis(own.cpu) if own.cpu else quantity.cpu_millis(t.cpu_per_gpu) * replica.gpu_count
        memory = quantity.memory_bytes(own.memory) if own.memory else quantity.memory_bytes(t.memory_per_gpu) * replica.gpu_count
        limit = memory + quantity.memory_bytes(replica.shm_size)
        guaranteed = t.guaranteed if own.guaranteed is None else own.guaranteed
        if guaranteed:
            both = {"cpu": quantity.cpu_text(cpu), "memory": quantity.memory_text(limit)}
            return {"requests": dict(both), "limits": dict(both)}
        limits = {"memory": quantity.memory_text(limit)}
        if self.kubernetes.api.explicit_cpu_limit:
            # KServe fills a missing CPU limit with its own default (1 CPU, inferenceservice-config),
            # below the request: the predictor's Deployment would be invalid. The limit is explicit.
            limits = {"cpu": quantity.cpu_text(cpu), **limits}
        return {"requests": {"cpu": quantity.cpu_text(cpu), "memory": quantity.memory_text(memory)}, "limits": limits}

    def rollout_for(self, endpoint: str) -> RolloutPolicy:
        """The rollout policy of ``endpoint``: its own settings over the target's default."""
        base = self.kubernetes.rollout
        own = self.endpoints.get(endpoint)
        if own is None:
            return base
        return RolloutPolicy(
            max_unavailable=base.max_unavailable if own.rollout.max_unavailable is None else own.rollout.max_unavailable,
            max_surge=base.max_surge if own.rollout.max_surge is None else own.rollout.max_surge,
            max_extra_gpus=base.max_extra_gpus,  # the stack's: never an endpoint's own
            canary=base.canary if own.rollout.canary is None else own.rollout.canary,
            warm_first=base.warm_first if own.rollout.warm_first is None else own.rollout.warm_first,
        )
