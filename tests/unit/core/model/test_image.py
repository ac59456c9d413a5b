from __future__ import annotations

import pytest

from infercrane.core.model.image import digest_problem

HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "value",
    [
        f"vllm/vllm-openai@sha256:{HEX}",
        f"vllm/vllm-openai:v0.11.0@sha256:{HEX}",
        f"registry.example:5000/team/vllm:v0.11@sha256:{HEX}",
        f"a@sha256:{HEX}",
    ],
    ids=["plain", "tag-and-digest", "registry-port-and-tag", "short-repo"],
)
def test_accepts_digest_references(value: str) -> None:
    assert digest_problem(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("vllm/vllm-openai:latest", "is not pinned by digest"),
        ("vllm/vllm-openai@sha256:REPLACE_WITH_QUALIFIED_DIGEST", "is a placeholder"),
        (f"vllm/vllm-openai@sha256:{HEX.upper()}", "has an uppercase digest"),
        ("vllm/vllm-openai@sha256:abc123", "digest is not 64 lowercase hex characters (got 6)"),
        (f" vllm/vllm-openai@sha256:{HEX}", "has surrounding whitespace"),
        (f"vllm/vllm-openai@sha256:{HEX}\n", "has surrounding whitespace"),
        ("", "image is empty"),
        (f"-bad/repo@sha256:{HEX}", "is not a valid repository reference"),
        ("x" * 500 + f"@sha256:{HEX}", "characters long (at most 512)"),
    ],
    ids=[
        "tag",
        "placeholder",
        "uppercase-hex",
        "short-hex",
        "leading-space",
        "trailing-newline",
        "empty",
        "bad-repo",
        "too-long",
    ],
)
def test_refuses_non_digest_images(value: str, reason: str) -> None:
    problem = digest_problem(value)
    assert problem is not None and reason in problem
