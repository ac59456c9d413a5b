"""Every YAML example in README.md and docs/ validates as written: each block is read as the stack
file it shows (a fragment of one is placed under ``config:`` and completed only with what it leaves
out -- a target's context and image, a replica of the endpoint it names) and loaded by the real
loader, offline. A setting a page spells differently from the loader (``maxE2eP95Ratio``, which
the loader once knew only as ``maxE2EP95Ratio``) fails here, naming the page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from infercrane.core.load import loading

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.S)
PLACEHOLDERS = {"<64 lowercase hex>": "a" * 64, "<64 hex>": "b" * 64, "<40-hex commit>": "c" * 40}
DIGEST = "vllm/vllm-openai@sha256:" + "d" * 64


def examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for i, m in enumerate(BLOCK.finditer(page.read_text()), 1):
            found.append((f"{page.relative_to(ROOT)} example {i}", m.group(1)))
    return found


def as_stack(text: str) -> dict[str, Any]:
    """The block as a stack file's config map, completed only where it leaves a required part out."""
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    lines = [line for line in text.splitlines() if line.strip()]
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    text = "\n".join(line[indent:] for line in text.splitlines())
    doc = YAML(typ="safe").load(text)
    values: dict[str, Any] = dict(doc.get("config", doc))
    target = values.setdefault("infercrane:kubernetes", {})
    target.setdefault("context", "docs")
    target.setdefault("imageDigest", DIGEST)
    endpoint = next(iter(values.get("infercrane:endpoints") or {}), "qwen")
    values.setdefault(
        "infercrane:replicas",
        [{"key": f"{endpoint}-r{i}", "model": "Qwen/Qwen3-8B", "name": endpoint, "gpu": "NVIDIA-L40S"} for i in range(3)],
    )
    return values


def test_the_pages_have_examples_to_check() -> None:
    assert len(examples()) >= 6


@pytest.mark.parametrize(("where", "text"), examples(), ids=[w for w, _ in examples()])
def test_every_yaml_example_in_the_readme_and_docs_loads_as_written(where: str, text: str) -> None:
    loading.load(as_stack(text), source=where, env={})


def test_a_misspelt_setting_in_an_example_is_refused_naming_it() -> None:
    from infercrane.core.errors import ConfigError

    bad = "config:\n  infercrane:kubernetes:\n    rollout: {canary: {maxE2EP95Ratio: 1.5}}\n"
    with pytest.raises(ConfigError, match="maxE2EP95Ratio"):
        loading.load(as_stack(bad), source="a page", env={})
