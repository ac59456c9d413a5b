"""Engine command lines: explicit ``command`` (never the image ENTRYPOINT) and managed flags.

The argv never carries the API key: vLLM reads ``VLLM_API_KEY`` from the environment, which comes
from a Secret reference. Pure.
"""

from __future__ import annotations

from infercrane.config import Replica


def command_and_args(replica: Replica) -> tuple[list[str], list[str]]:
    """The container ``command`` and ``args`` for the replica's engine."""
    r = replica
    if r.engine == "sglang":
        command = ["python3", "-m", "sglang.launch_server"]
        args = ["--model-path", r.model, "--host", "0.0.0.0", "--port", str(r.port), "--served-model-name", r.name]
        if r.model_revision:
            args += ["--revision", r.model_revision]
        if r.gpu_count > 1:
            args += ["--tp-size", str(r.gpu_count)]
    else:
        command = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args = ["--model", r.model, "--host", "0.0.0.0", "--port", str(r.port), "--served-model-name", r.name]
        if r.model_revision:
            args += ["--revision", r.model_revision]
        if r.gpu_count > 1:
            args += ["--tensor-parallel-size", str(r.gpu_count)]
    return command, args + list(r.args)
