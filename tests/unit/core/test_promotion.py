from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from infercrane.cli import output
from infercrane.core import promotion as promote
from infercrane.core.load import loading
from infercrane.core.model import config as cfg
from infercrane.project import stackfile

ROOT = Path(__file__).resolve().parents[3]


def load(path: Path) -> cfg.InferCraneConfig:
    return loading.load(stackfile.read_stack_values(path), source=path.name, env={})


@pytest.fixture
def stacks(tmp_path: Path) -> tuple[Path, Path]:
    for name in ("dev", "staging"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{name}.yaml", tmp_path / f"Pulumi.{name}.yaml")
    dev = tmp_path / "Pulumi.dev.yaml"
    text = dev.read_text().replace(
        "modelRevision: 9c925d64d72725edaf899c6cb9c377fd0709d9c5", "modelRevision: abcdef1111111111111111111111111111111111"
    )
    dev.write_text(
        text.replace(
            "startupBudgetSeconds: 1200",
            "startupBudgetSeconds: 1200\n      gpuCount: 2\n      image: vllm/vllm-openai@sha256:" + "e" * 64,
        )
    )
    return dev, tmp_path / "Pulumi.staging.yaml"


def test_diff_lists_only_bundle_fields(stacks: tuple[Path, Path]) -> None:
    dev, staging = stacks
    changes = promote.diff(load(dev), load(staging), None)
    assert [(c.key, c.field) for c in changes] == [
        ("qwen-kubernetes-rev-1-r0", "modelRevision"),
        ("qwen-kubernetes-rev-1-r0", "gpuCount"),
        ("qwen-kubernetes-rev-1-r0", "image"),
    ]
    text = output.promotion_diff(changes, "dev", "staging")
    assert (
        "qwen-kubernetes-rev-1-r0: modelRevision: '9c925d64d72725edaf899c6cb9c377fd0709d9c5' -> 'abcdef1111111111111111111111111111111111'"
        in text
    )


def test_apply_copies_bundle_keeps_target_fields_and_comments(stacks: tuple[Path, Path]) -> None:
    dev, staging = stacks
    before = load(staging)
    stackfile.write_bundles(staging, load(dev), before, None)
    after = load(staging)
    text = staging.read_text()
    assert text.startswith('# Environment stack "staging"')
    assert after.kubernetes == before.kubernetes  # context, namespace, … untouched
    r0 = next(r for r in after.replicas if r.key == "qwen-kubernetes-rev-1-r0")
    assert (r0.model_revision, r0.gpu_count, r0.image) == ("abcdef" + "1" * 34, 2, "vllm/vllm-openai@sha256:" + "e" * 64)
    assert len(after.replicas) == 2  # staging's second replica stays
    assert promote.diff(load(dev), after, None) == []


def test_unknown_replica_key_is_refused(stacks: tuple[Path, Path]) -> None:
    dev, staging = stacks
    with pytest.raises(promote.PromotionRefused, match="replica key\\(s\\) nope are not in the source stack"):
        promote.diff(load(dev), load(staging), ["nope"])


def test_new_replica_is_added_with_its_name(stacks: tuple[Path, Path], tmp_path: Path) -> None:
    dev, staging = stacks
    dev.write_text(dev.read_text() + "    - key: extra-r0\n      model: m/x\n      name: extra\n      gpu: NVIDIA-L4\n")
    changes = promote.diff(load(dev), load(staging), ["extra-r0"])
    assert changes[0].field == "(replica)"
    stackfile.write_bundles(staging, load(dev), load(staging), ["extra-r0"])
    extra = next(r for r in load(staging).replicas if r.key == "extra-r0")
    assert (extra.name, extra.gpu, extra.model) == ("extra", "NVIDIA-L4", "m/x")


def test_bundle_the_target_would_reject_is_not_written(stacks: tuple[Path, Path]) -> None:
    from infercrane.core.errors import ConfigError

    dev, staging = stacks
    text = dev.read_text().replace(
        "    workloadApi: deployment\n", "    workloadApi: deployment\n    gpuProducts: [NVIDIA-RTX-PRO-6000]\n", 1
    )
    dev.write_text(text.replace("gpu: NVIDIA-L40S", "gpu: NVIDIA-RTX-PRO-6000", 1))
    before = staging.read_text()
    with pytest.raises(ConfigError, match="GPU 'NVIDIA-RTX-PRO-6000' is not a known product-label value"):
        stackfile.write_bundles(staging, load(dev), load(staging), None)
    assert staging.read_text() == before
    assert not list(staging.parent.glob("*.tmp"))


def test_a_source_runs_its_bundle_only_when_the_live_workload_has_its_image_model_revision_and_gpu() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.promotion import unlike_live
    from infercrane.core.render.manifests import render_checked

    d1, d2 = "vllm/vllm-openai@sha256:" + "1" * 64, "vllm/vllm-openai@sha256:" + "2" * 64
    replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S", "modelRevision": "a" * 40}]

    def config(digest: str) -> InferCraneConfig:
        return InferCraneConfig.model_validate({"kubernetes": {"context": "c", "imageDigest": digest}, "replicas": replicas})

    live = render_checked(config(d1), "dev")[0].manifests[0]
    assert unlike_live(config(d1), config(d1).replicas[0], live) == []
    assert unlike_live(config(d2), config(d2).replicas[0], live) == [f"image '{d1}' (the file: '{d2}')"]
    assert unlike_live(config(d1), config(d1).replicas[0], None) == ["no live workload"]


def test_a_promoted_name_or_key_that_yaml_1_1_reads_as_another_type_is_written_quoted_and_reads_back(
    stacks: tuple[Path, Path],
) -> None:
    """Found by the promotion property: an endpoint named ``on`` (or a key ``00``) written plain
    read back as ``True`` (or ``0``); strings that a YAML 1.1 reader resolves otherwise are quoted."""
    _, staging = stacks
    source = loading.load(
        {
            "infercrane:kubernetes": {"context": "dev", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64},
            "infercrane:replicas": [
                {"key": "00", "model": "Qwen/Qwen3-8B", "name": "on", "gpu": "NVIDIA-L4"},
                {"key": "no", "model": "Qwen/Qwen3-8B", "name": "off", "gpu": "NVIDIA-L4"},
            ],
        },
        source="source",
        env={},
    )
    stackfile.write_bundles(staging, source, load(staging), None)
    text = staging.read_text()
    assert 'key: "00"' in text and 'name: "on"' in text and 'key: "no"' in text and 'name: "off"' in text
    assert promote.diff(source, load(staging), None) == []
    assert "model: Qwen/Qwen3-8B" in text  # a plain string stays plain


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"args": ["--max-model-len", "4096"]}, "engine and args 'python3 -m vllm.entrypoints.openai.api_server --model m/m"),
        ({"engine": "sglang"}, "engine and args 'python3 -m vllm.entrypoints.openai.api_server --model m/m"),
        ({"gpuCount": 2}, "gpuCount 1 (the file: 2)"),
    ],
    ids=["args", "engine", "gpuCount"],
)
def test_an_edit_of_the_engine_its_args_or_the_gpu_count_that_was_never_deployed_does_not_promote(
    edit: dict[str, Any], said: str
) -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.promotion import unlike_live
    from infercrane.core.render.manifests import render_checked

    digest = "vllm/vllm-openai@sha256:" + "1" * 64
    deployed = {"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S", "modelRevision": "a" * 40}

    def config(replica: dict[str, Any]) -> InferCraneConfig:
        return InferCraneConfig.model_validate({"kubernetes": {"context": "c", "imageDigest": digest}, "replicas": [replica]})

    live = render_checked(config(deployed), "dev")[0].manifests[0]
    edited = config(deployed | edit)
    why = unlike_live(edited, edited.replicas[0], live)
    assert any(line.startswith(said) for line in why), why
