"""A replica's container ``command`` and ``args``: its engine's command, the model and the flags
InferCrane manages (:class:`~infercrane.core.model.engines.EngineSpec`), then the replica's own args.
Pure core.
"""

from __future__ import annotations

from infercrane.core.model.engines import ENGINES, WORKER_KEY_REFERENCE
from infercrane.core.model.replica import Replica

MODEL_IMAGE_PATH = "/mnt/model"  # where a model image is mounted (read-only)
MODEL_IMAGE_WEIGHTS = MODEL_IMAGE_PATH + "/models"  # KServe's modelcar layout: the files under /models


def served_names(replica: Replica) -> tuple[str, ...]:
    """The model names the replica's engine serves (``/v1/models``), the endpoint name first.

    Clients of the original adapter send the model id ("model": "Qwen/Qwen3-8B"); it is served
    under both names where the engine allows several."""
    r, e = replica, ENGINES[replica.engine]
    return (r.name, r.model) if e.several_served_names and r.model != r.name else (r.name,)


def command_and_args(replica: Replica, shutdown_seconds: int, model_image: bool = False) -> tuple[list[str], list[str]]:
    """The container ``command`` and ``args`` for the replica's engine; ``shutdown_seconds``: how
    long it may finish in-flight requests after SIGTERM (its drain); ``model_image``: its weights are
    a mounted model image (the engine loads them from the mount, still served under its names)."""
    r, e = replica, ENGINES[replica.engine]
    model = MODEL_IMAGE_WEIGHTS if model_image else r.model
    args = [e.model_flag, model, "--host", "0.0.0.0", "--port", str(r.port), "--served-model-name", *served_names(r)]
    if r.model_revision:
        args += ["--revision", r.model_revision]
    if r.gpu_count > 1:
        args += [e.tensor_parallel_flag, str(r.gpu_count)]
    if e.key_flag:
        args += [e.key_flag, WORKER_KEY_REFERENCE]
    if e.shutdown_flag and shutdown_seconds:  # 0 is the engine's own default: no flag, which older releases lack
        args += [e.shutdown_flag, str(shutdown_seconds)]
    return list(e.command), args + list(r.args)
