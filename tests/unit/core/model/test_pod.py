"""Pod-level settings (pull secrets, priority, tolerations, node labels, env, labels): what they
render, how a replica's add to the target's, and every refusal that guards a guarantee, by text."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.render import render_all
from infercrane.core.render.intent import intent

SRC = "stacks/Pulumi.dev.yaml"


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        loading.load(values, source=SRC, env={})
    return [p.render() for p in exc.value.problems]


def rendered(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for r in render_all(loading.load(values, source=SRC, env={}), "infercrane/dev") for m in r.manifests]


def test_pod_settings_add_to_what_infercrane_renders_and_a_replica_adds_to_the_targets(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["pod"] = {
        "imagePullSecrets": ["registry-mirror"],
        "priorityClassName": "gpu-inference",
        "tolerations": [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}],
        "nodeSelector": {"topology.kubernetes.io/zone": "zone-a"},
        "env": [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}],
        "labels": {"team": "ml"},
    }
    values["infercrane:replicas"][0]["pod"] = {
        "env": [
            {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
            {"name": "WANDB_API_KEY", "secretKeyRef": {"name": "wandb", "key": "key"}},
        ],
        "annotations": {"prometheus.io/scrape": "true"},
    }
    dep, _svc = rendered(values)
    template = dep["spec"]["template"]
    pod = template["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry-mirror"}] and pod["priorityClassName"] == "gpu-inference"
    assert pod["nodeSelector"] == {"topology.kubernetes.io/zone": "zone-a", "nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
    ]
    env = pod["containers"][0]["env"]
    assert env[:2] == [
        {"name": "INFERCRANE_WORKER_API_KEY", "valueFrom": {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}},
        {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}},
    ], "the managed variables come first and stay"
    assert env[2:] == [
        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
        {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "key"}}},
    ]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["labels"]["app.kubernetes.io/instance"] == dep["metadata"]["name"]


def test_kserve_gets_the_same_pod_settings_on_its_predictor(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"] |= {
        "workloadApi": "kserve",
        "pod": {"priorityClassName": "gpu-inference", "labels": {"team": "ml"}},
    }
    (isvc,) = rendered(values)
    predictor = isvc["spec"]["predictor"]
    assert (predictor["priorityClassName"], predictor["labels"]) == ("gpu-inference", {"team": "ml"})


def test_a_stack_without_pod_settings_keeps_its_intent_and_one_with_them_changes_it(values: dict[str, Any]) -> None:
    config = loading.load(values, source=SRC, env={})
    before = intent(config, config.replicas[0])
    values["infercrane:kubernetes"]["pod"] = {}
    values["infercrane:replicas"][0]["pod"] = {}
    config = loading.load(values, source=SRC, env={})
    assert intent(config, config.replicas[0]) == before
    values["infercrane:kubernetes"]["pod"] = {"priorityClassName": "gpu-inference"}
    config = loading.load(values, source=SRC, env={})
    assert intent(config, config.replicas[0]) != before


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
            "sets the GPU product label nvidia.com/gpu.product, which comes from each replica's gpu",
        ),
        (
            {"env": [{"name": "VLLM_API_KEY", "value": "x"}]},
            "VLLM_API_KEY is set by InferCrane (the worker key, the token or the model cache)",
        ),
        ({"env": [{"name": "HF_HUB_OFFLINE", "value": "0"}]}, "HF_HUB_OFFLINE is set by InferCrane"),
        ({"env": [{"name": "X"}]}, "X needs exactly one of value or secretKeyRef"),
        (
            {"env": [{"name": "WANDB_API_KEY", "value": "k"}]},
            "WANDB_API_KEY looks like a secret: a plain value is in the pod spec",
        ),
        ({"env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}, "X listed more than once"),
        ({"labels": {"app.kubernetes.io/instance": "other"}}, "app.kubernetes.io/instance is InferCrane's own"),
        ({"annotations": {"infercrane.dev/stack": "other"}}, "infercrane.dev/stack is InferCrane's own"),
        ({"annotations": {"pulumi.com/patchForce": "true"}}, "pulumi.com/patchForce is InferCrane's own"),
        ({"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]}, "operator Exists takes no value"),
        ({"tolerations": [{"effect": "NoSchedule"}]}, "operator Equal needs a key"),
        ({"imagePullSecrets": ["Registry_Mirror"]}, "['Registry_Mirror'] are not Secret names"),
        ({"priorityClassName": "High Priority"}, "'High Priority' is not a PriorityClass name"),
    ],
    ids=[
        "gpu-label",
        "managed-key",
        "managed-cache",
        "no-source",
        "secret-literal",
        "dup-env",
        "own-label",
        "own-annotation",
        "force",
        "exists-value",
        "equal-no-key",
        "pull-secret",
        "priority",
    ],
)
def test_a_pod_setting_that_would_break_a_guarantee_is_refused_with_where_and_why(
    values: dict[str, Any], pod: dict[str, Any], message: str
) -> None:
    values["infercrane:replicas"][0]["pod"] = pod
    (line,) = problems(values)
    assert line.startswith(f"{SRC}: infercrane:replicas[0].pod"), line
    assert message in line, line
    assert "\n    fix: " in line


def test_the_targets_gpu_label_in_its_pod_settings_is_refused_too(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["pod"] = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}}
    (line,) = problems(values)
    assert line.startswith(f"{SRC}: infercrane:kubernetes.pod.nodeSelector: sets the GPU product label")
    assert "fix: set the GPU with infercrane:replicas[].gpu" in line
