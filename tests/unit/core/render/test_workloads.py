from __future__ import annotations

from typing import Any

import pytest

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.render import render_all
from infercrane.core.render.command import command_and_args

STACK = "infercrane/dev"


def render(values: dict[str, Any], **replica: Any) -> list[dict[str, Any]]:
    values["infercrane:replicas"][0].update(replica)
    c = loading.load(values, source="s", env={})
    return list(render_all(c, STACK)[0].manifests)


def test_deployment_contract(values: dict[str, Any]) -> None:
    dep, svc = render(values)
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    assert (spec["replicas"], spec["strategy"], spec["progressDeadlineSeconds"]) == (1, {"type": "Recreate"}, 1800)
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/instance": dep["metadata"]["name"]}}
    assert c["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert c["resources"]["limits"] == c["resources"]["requests"] == {"nvidia.com/gpu": "1"}, "no resources setting: GPUs only"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "infercrane-runtime"
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == "http"


def test_secret_only_by_reference_and_never_in_argv(values: dict[str, Any]) -> None:
    dep, _ = render(values)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert {e["name"] for e in c["env"]} == {"INFERCRANE_WORKER_API_KEY", "VLLM_API_KEY"}
    for e in c["env"]:
        assert e["valueFrom"] == {"secretKeyRef": {"name": "infercrane-worker", "key": "api-key"}}
        assert "value" not in e
    assert not any("api-key" in a for a in c["args"])


def test_startup_budget_sizes_probe_and_progress_deadline(values: dict[str, Any]) -> None:
    dep, _ = render(values, startupBudgetSeconds=601)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert dep["spec"]["progressDeadlineSeconds"] == 601
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 601
    assert c["startupProbe"]["failureThreshold"] == 61


def test_a_finer_startup_probe_period_keeps_the_budget_in_its_steps(values: dict[str, Any]) -> None:
    dep, _ = render(values, startupBudgetSeconds=601, startupProbePeriodSeconds=2)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["startupProbe"]["periodSeconds"] == 2
    assert c["startupProbe"]["failureThreshold"] == 301
    assert dep["spec"]["progressDeadlineSeconds"] == 601
    dep, _ = render(values, startupProbePeriodSeconds=1)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert (c["startupProbe"]["periodSeconds"], c["startupProbe"]["timeoutSeconds"]) == (1, 1)


def test_every_object_carries_ownership_metadata_and_field_manager(values: dict[str, Any]) -> None:
    for m in render(values):
        meta = m["metadata"]
        assert meta["labels"] == {**naming.labels("qwen-kubernetes-rev-1-r0"), naming.LABEL_ENDPOINT: "qwen-kubernetes"}
        ann = meta["annotations"]
        assert ann["infercrane.dev/external-key"] == "qwen-kubernetes-rev-1-r0"
        assert ann["infercrane.dev/stack"] == STACK
        assert ann["infercrane.dev/provider-contract"] == "infercrane.provider/v1"
        assert ann["pulumi.com/patchFieldManager"] == "infercrane-provider-v1"
        assert "pulumi.com/patchForce" not in ann


@pytest.mark.parametrize(
    ("engine", "count", "revision", "expected_tail"),
    [
        # vLLM serves the model under the endpoint name and the model id (clients of the original
        # adapter send the model id); SGLang's flag takes one name.
        ("vllm", 1, None, ["Qwen/Qwen3-8B", "--shutdown-timeout", "30"]),
        ("vllm", 4, "abc", ["Qwen/Qwen3-8B", "--revision", "abc", "--tensor-parallel-size", "4", "--shutdown-timeout", "30"]),
        ("sglang", 2, "abc", ["--revision", "abc", "--tp-size", "2", "--api-key", "$(INFERCRANE_WORKER_API_KEY)"]),
    ],
    ids=["vllm-single", "vllm-tp-revision", "sglang-tp-revision"],
)
def test_engine_flags(values: dict[str, Any], engine: str, count: int, revision: str | None, expected_tail: list[str]) -> None:
    r = values["infercrane:replicas"][0] | {"engine": engine, "gpuCount": count, "modelRevision": revision}
    values["infercrane:replicas"][0] = r
    replica = loading.load(values, source="s", env={}).replicas[0]
    command, args = command_and_args(replica, 30)
    model_flag = "--model-path" if engine == "sglang" else "--model"
    assert args[:2] == [model_flag, "Qwen/Qwen3-8B"]
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert args[args.index("--served-model-name") + 1] == "qwen-kubernetes"
    assert args[8:] == expected_tail
    assert command[-1] == ("sglang.launch_server" if engine == "sglang" else "vllm.entrypoints.openai.api_server")


def test_kserve_renders_one_inference_service(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["workloadApi"] = "kserve"
    (isvc,) = render(values)
    assert (isvc["apiVersion"], isvc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    pred = isvc["spec"]["predictor"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (1, 1)
    assert pred["containers"][0]["name"] == "kserve-container"
    assert pred["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}


def test_replica_image_overrides_default(values: dict[str, Any]) -> None:
    img = "lmsysorg/sglang@sha256:" + "c" * 64
    dep, _ = render(values, image=img)
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == img


def test_pulumi_waits_for_nothing_and_deletes_deployments_in_the_background(values: dict[str, Any]) -> None:
    """The program waits (infercrane.live.status.readiness), not pulumi-kubernetes' per-object informers that need
    Pod reads; a plain `pulumi destroy` returns with the Deployment gone, not still terminating."""
    dep, svc = render(values)
    assert dep["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert dep["metadata"]["annotations"]["pulumi.com/deletionPropagationPolicy"] == "background"
    assert "pulumi.com/timeoutSeconds" not in dep["metadata"]["annotations"]
    assert svc["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_a_hugging_face_token_reaches_the_engine_only_by_reference(values: dict[str, Any]) -> None:
    dep, _ = render(values)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert "HF_TOKEN" not in {e["name"] for e in c["env"]}  # none configured: none rendered
    values["infercrane:kubernetes"]["huggingFaceToken"] = {"name": "hf-token", "key": "token"}
    dep, _ = render(values, engine="sglang")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    (hf,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
    assert hf == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}


def test_external_scaling_leaves_spec_replicas_out_of_what_is_applied(values: dict[str, Any]) -> None:
    fixed, _ = render(values)
    assert fixed["spec"]["replicas"] == 1
    external, _ = render(values, scaling="external")
    assert "replicas" not in external["spec"]
    assert {k: v for k, v in external["spec"].items() if k != "template"} == {
        k: v for k, v in fixed["spec"].items() if k not in ("template", "replicas")
    }


def test_a_pod_identity_makes_the_pods_meet_pod_security_restricted_and_none_keeps_baseline(values: dict[str, Any]) -> None:
    dep, _ = render(values)
    pod = dep["spec"]["template"]["spec"]
    # Without an identity: hardened all the same -- the runtime's seccomp profile, no capabilities.
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    values["infercrane:kubernetes"]["securityContext"] = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000}
    dep, _ = render(values)
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 2000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert [v for v in pod["volumes"] if set(v) - {"name", "emptyDir"}] == []  # restricted allows emptyDir


def test_resources_take_the_defaults_scaled_by_the_gpu_count_and_a_replica_may_set_its_own(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["resources"] = {}
    (dep, _svc) = render(values, shmSize="8Gi")
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"}
    assert res["limits"] == {"nvidia.com/gpu": "1", "memory": "40Gi"}, "memory limit = request + /dev/shm"
    (dep, _svc) = render(values, gpuCount=4, shmSize="32Gi")
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"nvidia.com/gpu": "4", "cpu": "16", "memory": "128Gi"}
    assert res["limits"] == {"nvidia.com/gpu": "4", "memory": "160Gi"}
    (dep, _svc) = render(values, gpuCount=2, shmSize="8Gi", resources={"cpu": "7500m", "memory": "96Gi"})
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert (res["requests"]["cpu"], res["requests"]["memory"], res["limits"]["memory"]) == ("7500m", "96Gi", "104Gi")


def test_guaranteed_qos_sets_limits_equal_to_requests_with_dev_shm_inside(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["resources"] = {"guaranteed": True, "cpuPerGpu": "6", "memoryPerGpu": "48Gi"}
    (dep, _svc) = render(values)
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"nvidia.com/gpu": "1", "cpu": "6", "memory": "56Gi"}
    (dep, _svc) = render(values, resources={"guaranteed": False})
    assert "cpu" not in dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"], "a replica may opt out"


def test_under_kserve_the_cpu_limit_is_explicit_so_kserves_one_cpu_default_never_undercuts_the_request(
    values: dict[str, Any],
) -> None:
    values["infercrane:kubernetes"] |= {"workloadApi": "kserve", "resources": {}}
    (isvc,) = render(values, gpuCount=2)
    res = isvc["spec"]["predictor"]["containers"][0]["resources"]
    assert res["requests"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"}
    assert res["limits"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "72Gi"}


def test_a_replicas_own_resources_apply_without_a_target_setting_and_a_stack_without_either_keeps_its_intent(
    values: dict[str, Any],
) -> None:
    from infercrane.core.render.intent import intent

    before = loading.load(values, source="s", env={})
    (dep, _svc) = render(values, resources={"cpu": "12"})
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert (res["requests"]["cpu"], res["requests"]["memory"]) == ("12", "32Gi")
    values["infercrane:replicas"][0].pop("resources")
    after = loading.load(values, source="s", env={})
    assert intent(after, after.replicas[0]) == intent(before, before.replicas[0])


def test_switching_scaling_changes_the_deployment_but_not_its_pod_template(values: dict[str, Any]) -> None:
    fixed, _ = render(values)
    external, _ = render(values, scaling="external")
    assert fixed["spec"]["template"] == external["spec"]["template"]  # no pod restarts
    key = "infercrane.dev/intent-hash"
    assert fixed["metadata"]["annotations"][key] != external["metadata"]["annotations"][key]  # still a new intent
    assert fixed["metadata"]["annotations"][key] == fixed["spec"]["template"]["metadata"]["annotations"][key]


def test_every_pod_leaves_routing_then_drains_within_a_grace_period_derived_from_both(values: dict[str, Any]) -> None:
    """Defaults: a 10 s preStop sleep (routers follow the EndpointSlices late), vLLM's
    --shutdown-timeout 30 (it aborts in-flight requests without it), a grace period of both + 5."""
    dep, _ = render(values)
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert c["args"][c["args"].index("--shutdown-timeout") + 1] == "30"
    assert pod["terminationGracePeriodSeconds"] == 10 + 30 + 5


def test_a_replicas_drain_overrides_the_targets_field_by_field_and_zero_renders_no_prestop(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["drain"] = {"preStopSeconds": 20, "shutdownSeconds": 60}
    dep, _ = render(values, drain={"preStopSeconds": 0})
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "lifecycle" not in c
    assert c["args"][c["args"].index("--shutdown-timeout") + 1] == "60"
    assert pod["terminationGracePeriodSeconds"] == 0 + 60 + 5


def test_a_vllm_replica_with_shutdown_seconds_zero_gets_no_shutdown_flag_which_releases_before_0_18_refuse(
    values: dict[str, Any],
) -> None:
    """vLLM has --shutdown-timeout since 0.18.0; 0 is its own default (abort in-flight requests), so
    shutdownSeconds: 0 renders no flag at all and a replica pinned to an older vLLM starts."""
    dep, _ = render(values, drain={"shutdownSeconds": 0})
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert not [a for a in c["args"] if a.startswith("--shutdown-timeout")], c["args"]
    assert pod["terminationGracePeriodSeconds"] == 10 + 0 + 5


def test_sglang_drains_on_sigterm_by_itself_and_kserve_pods_drain_too(values: dict[str, Any]) -> None:
    dep, _ = render(values, engine="sglang")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert "--shutdown-timeout" not in c["args"] and c["lifecycle"]["preStop"]["sleep"]["seconds"] == 10
    values["infercrane:kubernetes"]["workloadApi"] = "kserve"
    (isvc,) = render(values, engine="vllm")
    pred = isvc["spec"]["predictor"]
    assert pred["terminationGracePeriodSeconds"] == 45 and pred["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] == 10


def test_a_shutdown_timeout_in_the_replicas_args_is_refused_for_the_drain_setting(values: dict[str, Any]) -> None:
    from infercrane.core.errors import ConfigError

    values["infercrane:replicas"][0]["args"] = ["--shutdown-timeout=120"]
    with pytest.raises(ConfigError) as err:
        loading.load(values, source="Pulumi.dev.yaml", env={})
    assert "--shutdown-timeout is set by InferCrane from drain.shutdownSeconds" in str(err.value)
    assert "Pulumi.dev.yaml" in str(err.value)
