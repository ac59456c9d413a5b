"""A replica's container ``command`` and ``args``: its engine's command, the model and the flags
InferCrane manages (:class:`~infercrane.core.model.engines.EngineSpec`), then the replica's own args.
Pure core.
"""

from __future__ import annotations

from infercrane.core.model.config import Replica
from infercrane.core.model.engines import ENGINES, WORKER_KEY_REFERENCE


def command_and_args(replica: Replica) -> tuple[list[str], list[str]]:
    """The container ``command`` and ``args`` for the replica's engine."""
    r, e = replica, ENGINES[replica.engine]
    # Clients of the original adapter send the model id ("model": "Qwen/Qwen3-8B"); serve it under
    # both names where the engine allows several, the endpoint name first.
    served = [r.name, r.model] if e.several_served_names and r.model != r.name else [r.name]
    args = [e.model_flag, r.model, "--host", "0.0.0.0", "--port", str(r.port), "--served-model-name", *served]
    if r.model_revision:
        args += ["--revision", r.model_revision]
    if r.gpu_count > 1:
        args += [e.tensor_parallel_flag, str(r.gpu_count)]
    if e.key_flag:
        args += [e.key_flag, WORKER_KEY_REFERENCE]
    return list(e.command), args + list(r.args)
