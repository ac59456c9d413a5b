"""Inference engines: how each is started -- explicit ``command`` (never the image ENTRYPOINT),
its model and tensor-parallel flags, the flags InferCrane manages itself.

The rendered argv never carries the API key's value: vLLM reads ``VLLM_API_KEY`` from the
environment, which comes from a Secret reference; SGLang reads its key from ``--api-key`` only, so
it is started with ``--api-key $(INFERCRANE_WORKER_API_KEY)`` -- a reference the kubelet expands
from that same Secret-backed variable when it starts the container (the object, the state and the
logs hold only the reference; the running process's command line holds the value, readable by the
node's users: ``doctor`` says so). The argv itself is rendered by
:mod:`infercrane.core.render.command`. Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from infercrane.core import naming

#: The engines a replica may name (``replicas[].engine``): the keys of :data:`ENGINES`.
EngineName = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class Metrics:
    """The metric names of one engine's /metrics page a canary's evidence is read from."""

    ttft: str  # its time to first token histogram
    e2e: str  # its request latency histogram
    requests: str  # the counter of the requests it answered
    errors: str | None = None  # a counter of its failed requests; None: the 5xx of ``requests`` (vLLM's)

    @property
    def series(self) -> tuple[str, ...]:
        """The series one read takes (a Prometheus selector names them)."""
        counters = (self.requests, self.errors) if self.errors else (self.requests,)
        return (self.ttft + "_bucket", self.e2e + "_bucket", *counters)


@dataclass(frozen=True)
class EngineSpec:
    """How one inference engine is started: the command and the flags that differ per engine."""

    command: tuple[str, ...]
    model_flag: str
    tensor_parallel_flag: str
    metrics: Metrics  # what a canary reads of its /metrics page
    # vLLM's --served-model-name takes several names (the first is reported and used in metrics);
    # SGLang's takes one string, so there the model is served under the endpoint name only.
    several_served_names: bool = False
    # How the engine gets the worker key when it reads no variable of its own: the flag, given
    # the kubelet's reference to the Secret-backed variable (never a value).
    key_flag: str | None = None
    # How long the engine finishes in-flight requests after SIGTERM (the drain's shutdownSeconds),
    # when it takes a flag for it (rendered only when shutdownSeconds > 0); None: it drains by itself.
    shutdown_flag: str | None = None
    # Where the engine keeps what it compiles, when a compile cache is mounted (kubernetes.compileCache):
    # each variable points at the cache's directory (PyTorch Inductor's and Triton's kernels for both).
    cache_env: tuple[str, ...] = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

    @property
    def managed_flags(self) -> tuple[str, ...]:
        """Flags InferCrane renders itself; user args may not repeat them."""
        own = (self.model_flag, "--host", "--port", "--served-model-name", "--revision", self.tensor_parallel_flag)
        return own + ((self.shutdown_flag,) if self.shutdown_flag else ())


ENGINES: Final = {
    "vllm": EngineSpec(
        ("python3", "-m", "vllm.entrypoints.openai.api_server"),
        "--model",
        "--tensor-parallel-size",
        Metrics("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "http_requests_total"),
        several_served_names=True,
        # Since vLLM 0.18.0 (vllm-project/vllm#34730, re-added by #36666); default 0: in-flight requests aborted
        # on SIGTERM. Rendered only for shutdownSeconds > 0: an older release refuses it (unrecognized arguments).
        shutdown_flag="--shutdown-timeout",
        # vLLM keeps its torch.compile artifacts (and the Inductor and Triton kernels under them) in VLLM_CACHE_ROOT.
        cache_env=("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"),
    ),
    "sglang": EngineSpec(
        ("python3", "-m", "sglang.launch_server"),
        "--model-path",
        "--tp-size",
        Metrics(
            "sglang:time_to_first_token_seconds",
            "sglang:e2e_request_latency_seconds",
            "sglang:num_requests_total",
            errors="sglang:num_aborted_requests_total",
        ),
        key_flag="--api-key",  # SGLang reads no variable: the key is on its command line (doctor warns)
    ),
}
assert set(ENGINES) == set(get_args(EngineName)), "one engine, one entry: EngineName names the keys of ENGINES"
SECRET_FLAGS: Final = ("--api-key",)
WORKER_KEY_REFERENCE: Final = f"$({naming.WORKER_KEY_ENV})"  # as the kubelet expands it
