from __future__ import annotations

from typing import Any

import pytest

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64


@pytest.fixture
def values() -> dict[str, Any]:
    """A minimal valid stack config map."""
    return {
        "infercrane:kubernetes": {"context": "infercrane-local", "imageDigest": DIGEST},
        "infercrane:replicas": [
            {"key": "qwen-kubernetes-rev-1-r0", "model": "Qwen/Qwen3-8B", "name": "qwen-kubernetes", "gpu": "NVIDIA-L40S"}
        ],
    }
