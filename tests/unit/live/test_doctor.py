"""What doctor says of a stack's own settings, without a cluster: the worker key SGLang exposes."""

from __future__ import annotations

from typing import Any

from infercrane.core.model.config import InferCraneConfig
from infercrane.live.doctor import WARN, sglang_key

SGLANG = "lmsysorg/sglang@sha256:" + "b" * 64


def config(*engines: str) -> InferCraneConfig:
    replicas: list[dict[str, Any]] = [
        {"key": f"r{i}", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S", "engine": engine}
        | ({"image": SGLANG} if engine == "sglang" else {})
        for i, engine in enumerate(engines)
    ]
    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
    return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})


def test_doctor_warns_that_an_sglang_replicas_worker_key_is_in_its_command_line_on_the_node() -> None:
    check = sglang_key(config("vllm", "sglang", "sglang"))
    assert check is not None and check.status == WARN
    assert check.detail.startswith("2 replica(s) run SGLang (r1, r2), which takes the worker key only as --api-key")
    assert "readable by every user of that node (/proc/<pid>/cmdline, ps)" in check.detail
    assert "hidepid=2" in check.hint and "vLLM" in check.hint


def test_doctor_says_nothing_of_the_key_when_every_replica_runs_vllm() -> None:
    assert sglang_key(config("vllm", "vllm")) is None
