"""A replica's volumes, their mounts and the variables that point its engine at them: the in-memory
``/dev/shm``; the model cache (a verified claim, read-only, as the Hugging Face cache with offline
mode on) or the model image (weights by digest, an image volume, read-only, given to the engine as
its model); the compile cache (the key's own directory of a claim, read-write). Pure core.
"""

from __future__ import annotations

from typing import Any

from infercrane.core import naming
from infercrane.core.model import image
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.engines import ENGINES
from infercrane.core.model.replica import Replica
from infercrane.core.render.command import MODEL_IMAGE_PATH

SHM_VOLUME = "dshm"
CACHE_VOLUME = "model-cache"
MODEL_IMAGE_VOLUME = "model-image"
COMPILE_VOLUME = "compile-cache"
COMPILE_PATH = "/var/cache/infercrane/compile"  # the key's own directory of the compile-cache claim
CACHE_PATH = "/var/cache/infercrane/huggingface"  # HF_HUB_CACHE: the claim's root is a `huggingface-cli download --cache-dir`


def cache_env(config: InferCraneConfig, replica: Replica) -> list[dict[str, Any]]:
    """The variables that point the engine at its model cache, its model image and its compile cache."""
    env: list[dict[str, Any]] = []
    if config.cache_for(replica) is not None:
        env += [{"name": naming.HF_HUB_CACHE_ENV, "value": CACHE_PATH}, {"name": naming.HF_HUB_OFFLINE_ENV, "value": "1"}]
    elif config.model_image_for(replica) is not None:  # the weights are mounted: nothing to fetch
        env.append({"name": naming.HF_HUB_OFFLINE_ENV, "value": "1"})
    if config.compile_key(replica) is not None:
        env += [{"name": n, "value": COMPILE_PATH} for n in ENGINES[replica.engine].cache_env]
    return env


def mounts(config: InferCraneConfig, replica: Replica) -> list[dict[str, Any]]:
    """The container's volume mounts."""
    out: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if config.cache_for(replica) is not None:
        out.append({"name": CACHE_VOLUME, "mountPath": CACHE_PATH, "readOnly": True})
    if config.model_image_for(replica) is not None:
        out.append({"name": MODEL_IMAGE_VOLUME, "mountPath": MODEL_IMAGE_PATH, "readOnly": True})
    key = config.compile_key(replica)
    if key is not None:  # the key's own directory: another key's engine never reads these artifacts
        out.append({"name": COMPILE_VOLUME, "mountPath": COMPILE_PATH, "subPath": key})
    return out


def volumes(config: InferCraneConfig, replica: Replica) -> list[dict[str, Any]]:
    """The pod's volumes."""
    out: list[dict[str, Any]] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": replica.shm_size}}]
    claim = config.cache_for(replica)
    if claim is not None:  # verified by the preflight (exists, Bound, several readers) before this is applied
        out.append({"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
    model_image = config.model_image_for(replica)
    if model_image is not None:  # by digest: the node mounts exactly the pinned weights (read-only)
        out.append(
            {"name": MODEL_IMAGE_VOLUME, "image": {"reference": image.model_reference(model_image), "pullPolicy": "IfNotPresent"}}
        )
    cache = config.kubernetes.compile_cache
    if cache is not None and config.compile_key(replica) is not None:  # a key: its model is pinned
        out.append({"name": COMPILE_VOLUME, "persistentVolumeClaim": {"claimName": cache.claim_name}})
    return out
