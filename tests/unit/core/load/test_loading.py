from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.render.intent import intent
from infercrane.project import stackfile

SRC = "stacks/Pulumi.dev.yaml"


def problems(values: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        loading.load(values, source=SRC, env=env or {})
    return [p.render() for p in exc.value.problems]


def test_minimal_config_gets_seed_defaults(values: dict[str, Any]) -> None:
    c = loading.load(values, source=SRC, env={})
    t = c.kubernetes
    assert (t.namespace, t.workload_api, t.service_account) == ("infercrane-system", "deployment", "infercrane-runtime")
    assert (t.worker_secret.name, t.worker_secret.key) == ("infercrane-worker", "api-key")
    assert (t.gpu_resource, t.gpu_product_label) == ("nvidia.com/gpu", "nvidia.com/gpu.product")
    assert (t.rollout.max_unavailable, t.rollout.max_surge) == (1, 0)
    r = c.replicas[0]
    assert (r.gpu_count, r.engine, r.port, r.startup_budget_seconds) == (1, "vllm", 8000, 1800)


def test_config_is_frozen(values: dict[str, Any]) -> None:
    c = loading.load(values, source=SRC, env={})
    with pytest.raises(ValidationError, match="frozen"):
        c.kubernetes.namespace = "other"  # type: ignore[misc]


def test_missing_context_names_file_key_and_variable(values: dict[str, Any]) -> None:
    del values["infercrane:kubernetes"]["context"]
    assert problems(values) == [
        "stacks/Pulumi.dev.yaml: infercrane:kubernetes.context: is required\n"
        "    fix: set infercrane:kubernetes.context in stacks/Pulumi.dev.yaml or INFERCRANE_KUBERNETES_CONTEXT; "
        "name a context of your kubeconfig explicitly (InferCrane never uses the current-context)"
    ]


def test_missing_target_reports_context_and_digest_together() -> None:
    out = problems({"infercrane:replicas": []})
    assert [p.split(":")[1].strip() for p in out] == ["infercrane", "infercrane"]
    assert "infercrane:kubernetes.context: is required" in out[0]
    assert "infercrane:kubernetes.imageDigest: is required" in out[1]


def test_environment_overrides_field_by_field(values: dict[str, Any]) -> None:
    env = {"INFERCRANE_KUBERNETES_NAMESPACE": "team-b", "INFERCRANE_KUBERNETES_WORKER_SECRET_KEY": "token"}
    c = loading.load(values, source=SRC, env=env)
    assert c.kubernetes.namespace == "team-b"
    assert c.kubernetes.worker_secret.key == "token"
    assert c.kubernetes.worker_secret.name == "infercrane-worker"
    assert c.kubernetes.context == "infercrane-local"


def test_environment_alone_can_supply_the_target(values: dict[str, Any]) -> None:
    del values["infercrane:kubernetes"]
    env = {"INFERCRANE_KUBERNETES_CONTEXT": "prod", "INFERCRANE_KUBERNETES_IMAGE_DIGEST": "x/y@sha256:" + "b" * 64}
    assert loading.load(values, source=SRC, env=env).kubernetes.context == "prod"


def test_bad_environment_value_names_the_variable(values: dict[str, Any]) -> None:
    assert problems(values, {"INFERCRANE_KUBERNETES_IMAGE_DIGEST": "vllm/vllm-openai:latest"}) == [
        "INFERCRANE_KUBERNETES_IMAGE_DIGEST (environment): image 'vllm/vllm-openai:latest' is not pinned by digest "
        "(a tag can change under you)\n    fix: pin the image by digest: vllm/vllm-openai@sha256:<64 lowercase hex> "
        "(e.g. from `crane digest` or your registry)"
    ]


def test_the_providers_client_rate_is_500_per_second_unless_the_stack_or_the_providers_variables_say_another(
    values: dict[str, Any],
) -> None:
    rate = loading.load(values, source=SRC, env={}).kubernetes.provider_client
    assert (rate.qps, rate.burst) == (500, 1000)
    values["infercrane:kubernetes"]["providerClient"] = {"qps": 40, "burst": 80}
    rate = loading.load(values, source=SRC, env={}).kubernetes.provider_client
    assert (rate.qps, rate.burst) == (40, 80)
    env = {"PULUMI_K8S_CLIENT_QPS": "25.5", "PULUMI_K8S_CLIENT_BURST": "60"}
    rate = loading.load(values, source=SRC, env=env).kubernetes.provider_client
    assert (rate.qps, rate.burst) == (25.5, 60)


def test_a_providers_client_rate_that_is_no_positive_number_is_refused_where_it_was_set(values: dict[str, Any]) -> None:
    assert problems(values, {"PULUMI_K8S_CLIENT_QPS": "fast"}) == [
        "PULUMI_K8S_CLIENT_QPS (environment): 'fast': Input should be a valid number, unable to parse string as a number\n"
        "    fix: use requests per second above 0, e.g. 500 (the default) or 50 (pulumi-kubernetes' own)"
    ]
    values["infercrane:kubernetes"]["providerClient"] = {"qps": 0, "burst": 0}
    assert problems(values) == [
        f"{SRC}: infercrane:kubernetes.providerClient.qps: 0: Input should be greater than 0\n"
        "    fix: use requests per second above 0, e.g. 500 (the default) or 50 (pulumi-kubernetes' own)",
        f"{SRC}: infercrane:kubernetes.providerClient.burst: 0: Input should be greater than or equal to 1\n"
        "    fix: use a whole number of requests of at least 1, e.g. 1000 (the default) or 120 (pulumi-kubernetes' own)",
    ]


def test_placeholder_digest_is_refused(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["imageDigest"] = "vllm/vllm-openai@sha256:REPLACE_WITH_QUALIFIED_DIGEST"
    out = problems(values)
    assert len(out) == 1 and "infercrane:kubernetes.imageDigest: image" in out[0] and "is a placeholder" in out[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("namespace", "Team_A", "infercrane:kubernetes.namespace: 'Team_A' is not a DNS label"),
        ("serviceAccount", "-x", "infercrane:kubernetes.serviceAccount: '-x' is not a DNS label"),
        ("workloadApi", "knative", "infercrane:kubernetes.workloadApi: 'knative' is not allowed: 'deployment' or 'kserve'"),
        ("context", "", "infercrane:kubernetes.context: context '' is empty or contains whitespace"),
        ("gpuResource", "nvidia gpu", "infercrane:kubernetes.gpuResource: 'nvidia gpu' is not a qualified Kubernetes name"),
    ],
    ids=["namespace", "service-account", "workload-api", "empty-context", "gpu-resource"],
)
def test_bad_target_fields_name_the_key_path(values: dict[str, Any], field: str, value: str, message: str) -> None:
    values["infercrane:kubernetes"][field] = value
    out = problems(values)
    assert len(out) == 1 and out[0].startswith(f"{SRC}: {message}"), out


def test_secret_rules(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["workerSecret"] = {"name": "Worker", "key": "api key"}
    out = problems(values)
    assert out[0].startswith(f"{SRC}: infercrane:kubernetes.workerSecret.name: 'Worker' is not a DNS label")
    assert out[1].startswith(f"{SRC}: infercrane:kubernetes.workerSecret.key: 'api key' is not a valid Secret data key")


def test_unknown_keys_are_refused(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["namesapce"] = "x"
    values["infercrane:replicas"][0]["gpus"] = 2
    values["infercrane:extra"] = 1
    out = problems(values)
    assert (
        f"{SRC}: infercrane:extra: is not an InferCrane setting\n    fix: use infercrane:kubernetes, infercrane:replicas or infercrane:endpoints"
        in out
    )
    assert any(p.startswith(f"{SRC}: infercrane:kubernetes.namesapce: is not a known setting") for p in out)
    assert any(
        p.startswith(f"{SRC}: infercrane:replicas[0].gpus (replica 'qwen-kubernetes-rev-1-r0'): is not a known setting")
        for p in out
    )


def test_patch_force_from_stack_config_is_refused(values: dict[str, Any]) -> None:
    values["kubernetes:enablePatchForce"] = "true"
    assert problems(values) == [
        f"{SRC}: kubernetes:enablePatchForce: is set\n    fix: InferCrane never forces a field-manager conflict; remove this key"
    ]


def test_patch_force_from_environment_is_refused(values: dict[str, Any]) -> None:
    assert problems(values, {"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}) == [
        "PULUMI_K8S_ENABLE_PATCH_FORCE (environment): asks pulumi-kubernetes to force field-manager conflicts\n"
        "    fix: unset PULUMI_K8S_ENABLE_PATCH_FORCE; InferCrane never forces a conflict"
    ]


def test_unknown_gpu_lists_known_values(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["gpu"] = "A100"
    (out,) = problems(values)
    assert out.startswith(f"{SRC}: infercrane:replicas[0].gpu (replica 'qwen-kubernetes-rev-1-r0'): GPU 'A100' is not a known")
    assert "known: NVIDIA-L4, NVIDIA-L40S," in out


def test_gpu_table_extends_from_config(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["gpuProducts"] = ["NVIDIA-RTX-PRO-6000"]
    values["infercrane:replicas"][0]["gpu"] = "NVIDIA-RTX-PRO-6000"
    assert loading.load(values, source=SRC, env={}).replicas[0].gpu == "NVIDIA-RTX-PRO-6000"


def test_every_problem_is_reported_at_once(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["imageDigest"] = "vllm:latest"
    r = values["infercrane:replicas"][0]
    r.update(gpu="nvidia-l40s", gpuCount=0, args=["--api-key=abc", "--port", "9"])
    values["infercrane:replicas"].append(
        copy.deepcopy(values["infercrane:replicas"][0]) | {"gpu": "NVIDIA-L4", "gpuCount": 1, "args": []}
    )
    out = problems(values)
    assert len(out) == 5, out
    assert "duplicate replica key 'qwen-kubernetes-rev-1-r0' (also at [0])" in out[-1]
    assert "--api-key would put a secret in the process arguments" in out[3]
    assert "--port is set by InferCrane from the replica fields" in out[3]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("key", "", "infercrane:replicas[0].key (replica ''): '': String should have at least 1 character\n    fix: use 1-253"),
        ("key", "x" * 254, "infercrane:replicas[0].key"),
        ("key", " padded", "key ' padded' has surrounding whitespace"),
        ("model", "", "infercrane:replicas[0].model"),
        ("name", "Qwen", "'Qwen' is not a DNS label"),
        (
            "port",
            80,
            "infercrane:replicas[0].port (replica 'qwen-kubernetes-rev-1-r0'): 80: Input should be greater than or equal to 1024",
        ),
        ("engine", "tgi", "'tgi' is not allowed: 'vllm' or 'sglang'"),
        ("cloud", "aws", "'aws' is not allowed: 'kubernetes'"),
        ("shmSize", "lots", "'lots' is not a memory quantity such as 32Gi"),
        ("startupBudgetSeconds", 5, "5: Input should be greater than or equal to 60"),
        ("startupProbePeriodSeconds", 0, "0: Input should be greater than or equal to 1"),
        ("startupProbePeriodSeconds", 61, "61: Input should be less than or equal to 60"),
        ("image", "vllm/vllm-openai:v0.11", "is not pinned by digest"),
        ("modelRevision", 1234567, '1234567 was read as a number by YAML; quote it: modelRevision: "1234567"'),
        (
            "resources",
            {"cpu": "lots"},
            "resources.cpu (replica 'qwen-kubernetes-rev-1-r0'): 'lots' is not a CPU quantity such as 4 or 500m\n    fix: use a CPU",
        ),
        ("resources", {"memory": "0.5"}, "'0.5' is not a whole number of bytes"),
    ],
    ids=[
        "empty-key",
        "long-key",
        "padded-key",
        "empty-model",
        "name",
        "port",
        "engine",
        "cloud",
        "shm",
        "budget",
        "probe-period-zero",
        "probe-period-over-a-minute",
        "image-tag",
        "numeric-revision",
        "cpu",
        "memory",
    ],
)
def test_bad_replica_fields(values: dict[str, Any], field: str, value: Any, message: str) -> None:
    values["infercrane:replicas"][0][field] = value
    (out,) = problems(values)
    assert message in out


def test_missing_replica_fields_are_all_named(values: dict[str, Any]) -> None:
    values["infercrane:replicas"] = [{"key": "k"}]
    out = problems(values)
    assert [o.split("\n")[0] for o in out] == [
        f"{SRC}: infercrane:replicas[0].model (replica 'k'): is required",
        f"{SRC}: infercrane:replicas[0].name (replica 'k'): is required",
        f"{SRC}: infercrane:replicas[0].gpu (replica 'k'): is required",
    ]


def test_replicas_must_be_a_list(values: dict[str, Any]) -> None:
    values["infercrane:replicas"] = {"key": "k"}
    assert problems(values)[0].startswith(f"{SRC}: infercrane:replicas: must be a list of replica intents")


def test_intent_hash_changes_with_replica_and_target_not_context(values: dict[str, Any]) -> None:
    base = loading.load(values, source=SRC, env={})
    h = intent(base, base.replicas[0])
    assert h.startswith("sha256:") and len(h) == 71
    other_ctx = loading.load(values, source=SRC, env={"INFERCRANE_KUBERNETES_CONTEXT": "elsewhere"})
    assert intent(other_ctx, other_ctx.replicas[0]) == h
    other_ns = loading.load(values, source=SRC, env={"INFERCRANE_KUBERNETES_NAMESPACE": "other"})
    assert intent(other_ns, other_ns.replicas[0]) != h
    values["infercrane:replicas"][0]["modelRevision"] = "abc"
    rev = loading.load(values, source=SRC, env={})
    assert intent(rev, rev.replicas[0]) != h


def test_broken_yaml_names_file_and_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "Pulumi.bad.yaml"
    p.write_text("config:\n  infercrane:kubernetes: {context: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        stackfile.read_stack_values(p)
    assert "is not valid YAML" in str(exc.value) and "Pulumi.bad.yaml:" in str(exc.value)


def test_missing_stack_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as exc:
        stackfile.read_stack_values(tmp_path / "Pulumi.nope.yaml")
    assert "stack file not found" in str(exc.value)


@pytest.mark.parametrize(
    ("rollout", "message"),
    [
        (
            {"maxUnavailable": 0, "maxSurge": 0},
            f"{SRC}: infercrane:kubernetes.rollout: maxUnavailable 0 with maxSurge 0 can never replace a replica\n"
            "    fix: write rollout: {maxUnavailable: 1, maxSurge: 0} (the defaults); at least one of them must be above 0",
        ),
        (
            {"maxUnavailable": -1},
            f"{SRC}: infercrane:kubernetes.rollout.maxUnavailable: -1: Input should be greater than or equal to 0\n"
            "    fix: use a whole number >= 0 (default 1: one replica of the endpoint down at a time)",
        ),
        (
            {"maxSurge": 1.5},
            f"{SRC}: infercrane:kubernetes.rollout.maxSurge: 1.5: Input should be a valid integer\n"
            "    fix: use a whole number >= 0 (default 0: never more GPUs than the endpoint holds)",
        ),
        (
            {"maxSurge": "1"},
            f"{SRC}: infercrane:kubernetes.rollout.maxSurge: '1': Input should be a valid integer\n"
            "    fix: use a whole number >= 0 (default 0: never more GPUs than the endpoint holds)",
        ),
        (
            "surge",
            f"{SRC}: infercrane:kubernetes.rollout: rollout 'surge' is now a policy: write rollout: "
            "{maxUnavailable: 0, maxSurge: 1}\n"
            "    fix: write rollout: {maxUnavailable: 1, maxSurge: 0} (the defaults); at least one of them must be above 0",
        ),
    ],
    ids=["never-progresses", "negative", "fraction", "string", "legacy-word"],
)
def test_bad_rollout_policies_are_refused_with_the_key_path_and_the_fix(
    values: dict[str, Any], rollout: Any, message: str
) -> None:
    values["infercrane:kubernetes"]["rollout"] = rollout
    assert problems(values) == [message]


def test_an_endpoint_override_merges_field_by_field_over_the_target_default(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["rollout"] = {"maxUnavailable": 2}
    values["infercrane:endpoints"] = {"qwen-kubernetes": {"rollout": {"maxSurge": 1}}}
    c = loading.load(values, source=SRC, env={})
    p = c.rollout_for("qwen-kubernetes")
    assert (p.max_unavailable, p.max_surge) == (2, 1)
    assert (c.rollout_for("other").max_unavailable, c.rollout_for("other").max_surge) == (2, 0)


def test_an_endpoint_override_that_can_never_progress_or_names_no_endpoint_is_refused(values: dict[str, Any]) -> None:
    values["infercrane:endpoints"] = {"qwen-kubernetes": {"rollout": {"maxUnavailable": 0}}, "qwen-typo": {}}
    assert problems(values) == [
        f"{SRC}: infercrane:endpoints.qwen-kubernetes.rollout: maxUnavailable 0 with maxSurge 0 (with the target's defaults) "
        "can never replace a replica\n    fix: allow one replica down (maxUnavailable: 1) or one extra (maxSurge: 1)",
        f"{SRC}: infercrane:endpoints.qwen-typo: no replica is named 'qwen-typo'\n"
        "    fix: use an endpoint name of infercrane:replicas (qwen-kubernetes)",
    ]


def test_one_key_under_two_endpoint_names_is_refused(values: dict[str, Any]) -> None:
    first = values["infercrane:replicas"][0]
    values["infercrane:replicas"].append({**first, "name": "other"})
    assert problems(values) == [
        f"{SRC}: infercrane:replicas[1].key: replica key {first['key']!r} is listed under endpoint 'qwen-kubernetes' (at [0]) "
        "and under endpoint 'other'\n    fix: a key is one replica of one endpoint: keep one entry (to move it, change its name)"
    ]


def test_a_hugging_face_token_is_a_secret_reference_checked_like_the_worker_secrets(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["huggingFaceToken"] = {"name": "HF", "key": "token"}
    values["infercrane:replicas"][0]["huggingFaceToken"] = {"name": "hf-token"}
    out = problems(values)
    assert out[0].startswith(f"{SRC}: infercrane:kubernetes.huggingFaceToken.name: 'HF' is not a DNS label")
    assert out[1].startswith(
        f"{SRC}: infercrane:replicas[0].huggingFaceToken.key (replica 'qwen-kubernetes-rev-1-r0'): is required"
    )
    assert "fix: name the Secret's data key holding the token" in out[1]
    assert "fix: name a Secret in the target namespace (a DNS label), e.g. hf-token" in out[0]


def test_the_token_a_replica_gets_is_its_own_over_the_targets_and_enters_the_intent_only_when_set(
    values: dict[str, Any],
) -> None:
    none = loading.load(values, source=SRC, env={})
    unset = intent(none, none.replicas[0])
    values["infercrane:kubernetes"]["huggingFaceToken"] = {"name": "hf-team", "key": "token"}
    values["infercrane:replicas"].append(
        values["infercrane:replicas"][0] | {"key": "own", "huggingFaceToken": {"name": "hf-own", "key": "t"}}
    )
    c = loading.load(values, source=SRC, env={})
    assert [c.token_for(r).name for r in c.replicas] == ["hf-team", "hf-own"]  # type: ignore[union-attr]
    assert intent(c, c.replicas[0]) != unset  # the pod template changes (HF_TOKEN): so does the intent
    assert none.token_for(none.replicas[0]) is None


def test_external_scaling_is_refused_under_kserve_with_the_fix(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["workloadApi"] = "kserve"
    values["infercrane:replicas"][0]["scaling"] = "external"
    (out,) = problems(values)
    assert out.startswith(f"{SRC}: infercrane:replicas[0].scaling (replica 'qwen-kubernetes-rev-1-r0'): external scaling leaves")
    assert "fix: leave scaling out (fixed) under workloadApi kserve, or use workloadApi deployment" in out


def test_fields_added_later_change_no_intent_at_their_defaults(values: dict[str, Any]) -> None:
    plain = loading.load(values, source=SRC, env={})
    values["infercrane:replicas"][0]["scaling"] = "fixed"
    explicit = loading.load(values, source=SRC, env={})
    assert intent(explicit, explicit.replicas[0]) == intent(plain, plain.replicas[0])
    values["infercrane:replicas"][0]["scaling"] = "external"
    external = loading.load(values, source=SRC, env={})
    assert intent(external, external.replicas[0]) != intent(plain, plain.replicas[0])
    values["infercrane:replicas"][0] |= {"scaling": "fixed", "startupProbePeriodSeconds": 10}
    period = loading.load(values, source=SRC, env={})
    assert intent(period, period.replicas[0]) == intent(plain, plain.replicas[0])
    values["infercrane:replicas"][0]["startupProbePeriodSeconds"] = 2
    finer = loading.load(values, source=SRC, env={})
    assert intent(finer, finer.replicas[0]) != intent(plain, plain.replicas[0])


def test_a_pod_identity_must_be_non_root_and_complete(values: dict[str, Any]) -> None:
    values["infercrane:kubernetes"]["securityContext"] = {"runAsUser": 0, "runAsGroup": 1000}
    out = problems(values)
    assert out[0].startswith(
        f"{SRC}: infercrane:kubernetes.securityContext.runAsUser: 0: Input should be greater than or equal to 1"
    )
    assert out[1].startswith(f"{SRC}: infercrane:kubernetes.securityContext.fsGroup: is required")
    assert "fix: write securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}" in out[1]
