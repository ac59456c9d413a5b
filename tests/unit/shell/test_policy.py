"""The policy pack's mapping from Pulumi resources to the guards' rules: each rule blocks what it
names, on any program's objects, and InferCrane's own rendering passes every policy."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane.core.load import loading
from infercrane.core.render import guards, render_all
from infercrane.shell.policy import KINDS, PROVIDER, judge

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
GPU = {"nvidia.com/gpu": "1"}


def plain_deployment(container: dict[str, Any], pod: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A teammate's Deployment inputs, not InferCrane's."""
    return {
        "metadata": {"name": "app", "labels": {"app": "app"}, **meta},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": DIGEST, **container}], **(pod or {})}}},
    }


def broken(props: dict[str, Any], resource_type: str = DEPLOYMENT) -> dict[str, list[str]]:
    found = {rule: judge(rule, resource_type, props, {}) for rule in guards.RULES}
    return {rule: lines for rule, lines in found.items() if lines}


def test_a_plain_programs_clean_deployment_passes_every_policy() -> None:
    assert broken(plain_deployment({})) == {}
    gpu = plain_deployment(
        {"resources": {"limits": GPU, "requests": GPU}}, {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}
    )
    assert broken(gpu) == {}


@pytest.mark.parametrize(
    ("props", "rule", "words"),
    [
        (plain_deployment({"image": "vllm/vllm-openai:latest"}), "image-digest", "is not pinned by digest"),
        (
            plain_deployment(
                {"resources": {"limits": GPU, "requests": GPU}}, {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}
            ),
            "gpu-product-selector",
            "GPU 'H100' is not a known product-label value",
        ),
        (
            plain_deployment({"resources": {"limits": GPU, "requests": GPU}}),
            "gpu-product-selector",
            "nodeSelector nvidia.com/gpu.product is missing",
        ),
        (
            plain_deployment(
                {"resources": {"limits": GPU, "requests": {"nvidia.com/gpu": "2"}}},
                {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
            ),
            "gpu-limits",
            "nvidia.com/gpu limits must equal requests",
        ),
        (plain_deployment({}, annotations={"pulumi.com/patchForce": "true"}), "no-patch-force", "pulumi.com/patchForce is set"),
        (
            plain_deployment({"env": [{"name": "OPENAI_API_KEY", "value": "sk-x"}]}),
            "no-secret-literals",
            "OPENAI_API_KEY must come from a secretKeyRef",
        ),
        (plain_deployment({"args": ["--api-key=sk-x"]}), "no-secret-literals", "--api-key in args would expose the worker key"),
        (
            plain_deployment({}, labels={"app.kubernetes.io/managed-by": "infercrane"}),
            "infercrane-ownership",
            "annotation infercrane.dev/external-key is missing",
        ),
    ],
    ids=["tag", "guessed-gpu", "no-gpu-selector", "uneven-gpu", "patch-force", "literal-key", "api-key-arg", "claims-ours"],
)
def test_each_policy_blocks_what_it_names_with_the_fix(props: dict[str, Any], rule: str, words: str) -> None:
    found = broken(props)
    assert rule in found, found
    assert any(words in line and f"\n    fix: {guards.RULES[rule].fix}" in line for line in found[rule]), found[rule]


def test_a_provider_that_forces_conflicts_is_blocked_and_other_resources_are_not_judged() -> None:
    assert broken({"enablePatchForce": "true"}, PROVIDER) == {
        "no-patch-force": [
            f"the Kubernetes provider sets enablePatchForce; InferCrane never forces a conflict\n    fix: {guards.RULES['no-patch-force'].fix}"
        ]
    }
    assert broken({"enablePatchForce": "false"}, PROVIDER) == {}
    assert broken({"data": {"API_KEY": "x"}}, "kubernetes:core/v1:ConfigMap") == {}


def test_infercranes_own_rendering_passes_every_policy_in_both_workload_apis(values: dict[str, Any]) -> None:
    for api in ("deployment", "kserve"):
        values["infercrane:kubernetes"]["workloadApi"] = api
        config = loading.load(values, source="s", env={})
        types = {kind: t for t, kind in KINDS.items()}
        for r in render_all(config, "infercrane/dev"):
            for m in r.manifests:
                assert broken({"metadata": m["metadata"], "spec": m["spec"]}, types[m["kind"]]) == {}, m["kind"]
