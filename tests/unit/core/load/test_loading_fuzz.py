"""Fuzz the stack-file reader and the config loader: random YAML/JSON-like documents (seeded, so a
failure is reproducible) never produce anything but a config or a ConfigError."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.model import config as cfg
from infercrane.project import stackfile

KEYS = [
    "config",
    "infercrane:kubernetes",
    "infercrane:replicas",
    "kubernetes:enablePatchForce",
    "context",
    "namespace",
    "workloadApi",
    "imageDigest",
    "workerSecret",
    "name",
    "key",
    "model",
    "gpu",
    "gpuCount",
    "port",
    "args",
    "startupBudgetSeconds",
    "startupProbePeriodSeconds",
    "shmSize",
    "gpuProducts",
    "rollout",
    "kubeconfig",
    "engine",
    "modelRevision",
    "x",
]
SCALARS: list[Any] = [
    None,
    True,
    0,
    -1,
    1,
    17,
    2**70,
    1.5,
    float("inf"),
    "",
    "a",
    "NVIDIA-L40S",
    "infercrane-local",
    "vllm/vllm-openai@sha256:" + "a" * 64,
    "kserve",
    "deployment",
    "8Gi",
    "--api-key",
    "é",
    "\x00",
]


def value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice(SCALARS)
    if roll < 0.7:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYS + [1, None, True]): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def document(rng: random.Random) -> str:
    doc: Any = value(rng, 0)
    if rng.random() < 0.6:
        target = {k: value(rng, 2) for k in rng.sample(KEYS, rng.randint(0, 6))}
        replicas = [value(rng, 2) for _ in range(rng.randint(0, 3))]
        doc = {"config": {"infercrane:kubernetes": target, "infercrane:replicas": replicas}}
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        text = str(doc)
    if rng.random() < 0.3:  # byte-level damage: truncation, a stray character
        cut = rng.randint(0, len(text))
        text = text[:cut] + rng.choice(["", ":", "- ", "{", "'", "\t", "&a", "*a", "!!python/object:os.system"]) + text[cut:]
    return text


@pytest.mark.parametrize("seed", range(20))
def test_random_documents_give_a_config_or_a_config_error(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "stacks" / "Pulumi.fuzz.yaml"
    path.parent.mkdir()
    for case in range(100):
        path.write_text(document(rng), encoding="utf-8")
        try:
            values = stackfile.read_stack_values(path)
            result = loading.load(values, source="stacks/Pulumi.fuzz.yaml", env={})
        except ConfigError:
            continue
        except Exception as exc:  # noqa: BLE001 - the finding
            pytest.fail(f"seed {seed} case {case}: {exc.__class__.__name__}: {exc}\n--- document ---\n{path.read_text()}")
        assert isinstance(result, cfg.InferCraneConfig)
