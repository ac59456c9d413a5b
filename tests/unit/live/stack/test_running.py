"""Who serves an endpoint now, read from live objects (no cluster: the preflight's LIST, as dicts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.plan.workload import endpoint_of, restarts_pods
from infercrane.core.render.manifests import render_checked
from infercrane.live.stack.running import live_replicas

STACK = "infercrane/dev"


def live_deployment(manifest: dict[str, Any], *, ready: bool) -> dict[str, Any]:
    obj = copy.deepcopy(manifest)
    obj["metadata"]["generation"] = 1
    obj["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1 if ready else 0}
    return obj


def test_members_are_this_stacks_owned_workloads_with_endpoint_readiness_and_gpus(values: dict[str, Any]) -> None:
    config = loading.load(values, source="s", env={})
    (r,) = render_checked(config, "dev")
    dep, svc = r.manifests
    foreign = copy.deepcopy(dep)
    foreign["metadata"]["name"] = "infercrane-someone-else"
    foreign["metadata"]["annotations"][naming.ANNOTATION_STACK] = "infercrane/other"
    live = {
        ("Deployment", dep["metadata"]["name"]): live_deployment(dep, ready=False),
        ("Service", svc["metadata"]["name"]): svc,
        ("Deployment", "infercrane-someone-else"): live_deployment(foreign, ready=True),
    }
    (m,) = live_replicas(config, live, STACK)
    assert (m.key, m.endpoint, m.state, m.gpus) == (r.replica.key, "qwen-kubernetes", "starting", 1)


@pytest.mark.parametrize(
    ("status", "surplus"),
    [
        (
            {"replicas": 2, "updatedReplicas": 1, "availableReplicas": 0},
            True,
        ),  # a rolling update's loading old pod beside the new
        ({"replicas": 1, "terminatingReplicas": 1, "availableReplicas": 1}, True),  # a pod still terminating
        ({"replicas": 1, "updatedReplicas": 1, "availableReplicas": 0}, False),
    ],
    ids=["two-pods", "terminating", "one-pod"],
)
def test_a_replica_whose_deployment_counts_more_pods_than_it_asks_for_holds_a_surplus(
    values: dict[str, Any], status: dict[str, int], surplus: bool
) -> None:
    """What a rerun's GPU ledger counts as lent already (core.plan.rollout: LiveReplica.surplus)."""
    config = loading.load(values, source="s", env={})
    dep = copy.deepcopy(render_checked(config, "dev")[0].manifests[0])
    dep["metadata"]["generation"] = 1
    dep["status"] = {"observedGeneration": 1} | status
    (m,) = live_replicas(config, {("Deployment", dep["metadata"]["name"]): dep}, STACK)
    assert m.surplus is surplus


def test_an_object_rendered_before_the_endpoint_label_serves_its_first_served_model_name(values: dict[str, Any]) -> None:
    config = loading.load(values, source="s", env={})
    dep = copy.deepcopy(render_checked(config, "dev")[0].manifests[0])
    del dep["metadata"]["labels"][naming.LABEL_ENDPOINT]
    assert endpoint_of(dep) == "qwen-kubernetes"


@pytest.mark.parametrize(
    ("change", "restarts"),
    [
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="x@sha256:" + "e" * 64), True),
        (lambda d: d["metadata"]["labels"].update({naming.LABEL_ENDPOINT: "moved"}), False),
        (lambda d: d["spec"].update(strategy={"type": "RollingUpdate"}), False),
        (lambda d: None, False),
    ],
    ids=["image", "object-label", "strategy", "nothing"],
)
def test_only_a_pod_template_change_restarts_a_deployments_pods(values: dict[str, Any], change: Any, restarts: bool) -> None:
    config = loading.load(values, source="s", env={})
    before = render_checked(config, "dev")[0].manifests[0]
    after = copy.deepcopy(before)
    change(after)
    assert restarts_pods(before, after) is restarts


def test_an_inference_services_rollout_strategy_is_not_a_pod_change() -> None:
    before = {
        "kind": "InferenceService",
        "spec": {"predictor": {"containers": [{"image": "a"}], "deploymentStrategy": {"type": "Recreate"}}},
    }
    after = copy.deepcopy(before)
    after["spec"]["predictor"]["deploymentStrategy"] = {"type": "RollingUpdate"}
    assert restarts_pods(before, after) is False
    after["spec"]["predictor"]["containers"][0]["image"] = "b"
    assert restarts_pods(before, after) is True


def test_replicas_the_state_records_in_another_namespace_move_in_waves_not_all_at_once() -> None:
    from infercrane.core import naming
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.render.manifests import render_checked
    from infercrane.live.stack.preflight import Report
    from infercrane.live.stack.running import plan_rollout

    digest = "vllm/vllm-openai@sha256:" + "a" * 64
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"} for i in range(2)]

    def config(ns: str) -> InferCraneConfig:
        return InferCraneConfig.model_validate(
            {"kubernetes": {"context": "c", "imageDigest": digest, "namespace": ns}, "replicas": replicas}
        )

    old = render_checked(config("old-ns"), "s")
    ready = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
    elsewhere = {
        ("old-ns", "Deployment", r.name): {
            **r.manifests[0],
            "metadata": {**r.manifests[0]["metadata"], "generation": 1},
            "status": ready,
        }
        for r in old
    }
    new = config("new-ns")
    rollout = plan_rollout(new, render_checked(new, "s"), Report(), naming.stack_id("s"), elsewhere)
    (e,) = rollout.endpoints
    assert (e.moves, len(e.waves), e.lowest_ready, e.peak_gpus) == (2, 2, 1, 2)
    alone = plan_rollout(new, render_checked(new, "s"), Report(), naming.stack_id("s"))
    assert alone.endpoints[0].waves == ()  # without the old namespace's view: all at once, 2x the GPUs


def test_a_surge_wider_than_max_extra_gpus_is_refused_before_anything_is_applied_naming_the_setting() -> None:
    from infercrane.core import naming
    from infercrane.core.errors import ConfigError
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.render.manifests import render_checked
    from infercrane.live.stack.preflight import Report
    from infercrane.live.stack.running import plan_rollout

    digest = "vllm/vllm-openai@sha256:" + "a" * 64
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S", "gpuCount": 2} for i in range(2)]
    kubernetes = {"context": "c", "imageDigest": digest, "namespace": "ns"}
    old = InferCraneConfig.model_validate({"kubernetes": kubernetes, "replicas": replicas})
    ready = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
    live = {
        ("Deployment", r.name): {**r.manifests[0], "metadata": {**r.manifests[0]["metadata"], "generation": 1}, "status": ready}
        for r in render_checked(old, "s")
    }
    rollout = {"maxUnavailable": 0, "maxSurge": 1, "maxExtraGpus": 1}
    new = InferCraneConfig.model_validate({"kubernetes": {**kubernetes, "rollout": rollout}, "replicas": replicas})
    rendered = render_checked(new, "s")
    report = Report(live=live, restarts={"k0", "k1"} | {r.name for r in rendered})
    with pytest.raises(ConfigError) as refused:
        plan_rollout(new, rendered, report, naming.stack_id("s"))
    assert str(refused.value) == (
        "invalid InferCrane configuration (1 problem(s)); nothing was applied:\n"
        "- infercrane:kubernetes.rollout.maxExtraGpus: is 1, and endpoint e wave 1/2 borrows 2 GPU(s) of NVIDIA-L40S "
        "at once; endpoint e wave 2/2 borrows 2 GPU(s) of NVIDIA-L40S at once: that stage could never start\n"
        "    fix: raise maxExtraGpus to what the widest stage borrows, or lower that endpoint's maxSurge (each surge "
        "borrows maxSurge replicas' GPUs)"
    )


def test_a_required_canary_with_no_baseline_is_refused_before_anything_is_applied_naming_the_setting() -> None:
    from infercrane.core import naming
    from infercrane.core.errors import ConfigError
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.render.manifests import render_checked
    from infercrane.live.stack.preflight import Report
    from infercrane.live.stack.running import plan_rollout

    replicas = [{"key": "k0", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
    kubernetes = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    old = InferCraneConfig.model_validate({"kubernetes": kubernetes, "replicas": replicas})
    ready = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
    live = {
        ("Deployment", r.name): {**r.manifests[0], "metadata": {**r.manifests[0]["metadata"], "generation": 1}, "status": ready}
        for r in render_checked(old, "s")
    }

    def config(required: bool) -> InferCraneConfig:
        rollout = {"canary": {"required": required}}
        target = {**kubernetes, "imageDigest": "vllm/vllm-openai@sha256:" + "b" * 64, "rollout": rollout}
        return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})

    rendered = render_checked(config(True), "s")
    report = Report(live=live, restarts={r.name for r in rendered})
    with pytest.raises(ConfigError) as refused:
        plan_rollout(config(True), rendered, report, naming.stack_id("s"))
    assert str(refused.value) == (
        "invalid InferCrane configuration (1 problem(s)); nothing was applied:\n"
        "- infercrane:kubernetes.rollout.canary.required: is true, and endpoint e's release has no canary: no replica "
        "would stay on the old release to compare the canary with (its 1 wave(s) change every replica serving now)\n"
        "    fix: give the endpoint more replicas than canary.replicas (the others stay on the old release as the baseline "
        "while the canary bakes), or set required: false for this change"
    )
    (e,) = plan_rollout(config(False), rendered, report, naming.stack_id("s")).endpoints
    assert e.canary == () and e.no_canary, "not required: the release rolls without a verdict, and the plan says why"
