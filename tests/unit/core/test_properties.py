"""Properties of the pure core, for any input (hypothesis), not just the examples we thought of."""

from __future__ import annotations

import re
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infercrane.core import naming
from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.model import gpu, image
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.promotion import diff
from infercrane.core.render.intent import intent
from infercrane.core.render.manifests import render_checked, to_yaml
from infercrane.project import stackfile

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "registry.example/vllm/vllm-openai@sha256:" + "a" * 64
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Kubernetes' own rules, written here independently of the code under test.
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# --- strategies -------------------------------------------------------------------------------
dns_labels = st.from_regex(r"\A[a-z]([a-z0-9-]{0,20}[a-z0-9])?\Z")
printable_keys = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=253
).filter(lambda k: k == k.strip() and k.isprintable())
hex64 = st.text("0123456789abcdef", min_size=64, max_size=64)
repo_part = st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,15}\Z")
digests = st.builds(
    lambda host, port, parts, tag, h: f"{host}{port}/{'/'.join(parts)}{tag}@sha256:{h}",
    repo_part,
    st.sampled_from(["", ":5000", ":443"]),
    st.lists(repo_part, min_size=1, max_size=3),
    st.sampled_from(["", ":v1", ":latest"]),
    hex64,
)


@st.composite
def replicas(draw: st.DrawFn, key: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": key if key is not None else draw(printable_keys),
        "model": draw(st.sampled_from(["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B-Instruct", "x"])),
        "name": draw(dns_labels),
        "gpu": draw(st.sampled_from(gpu.KNOWN_PRODUCTS)),
    }
    if draw(st.booleans()):
        out["gpuCount"] = draw(st.integers(1, 16))
    if draw(st.booleans()):
        out["modelRevision"] = draw(st.text("0123456789abcdef", min_size=7, max_size=40))
    if draw(st.booleans()):
        out["engine"] = draw(st.sampled_from(["vllm", "sglang"]))
    if draw(st.booleans()):
        out["args"] = draw(st.lists(st.sampled_from(["--max-model-len=4096", "--enforce-eager", "--dtype=bfloat16"]), max_size=3))
    if draw(st.booleans()):
        out["image"] = draw(digests)
    if draw(st.booleans()):
        out["port"] = draw(st.integers(1024, 65535))
    if draw(st.booleans()):
        out["startupBudgetSeconds"] = draw(st.integers(60, 86400))
    return out


@st.composite
def stack_values(draw: st.DrawFn) -> dict[str, Any]:
    reps = draw(st.lists(replicas(), min_size=1, max_size=4, unique_by=lambda r: r["key"]))
    target: dict[str, Any] = {
        "context": draw(dns_labels),
        "namespace": draw(dns_labels),
        "imageDigest": draw(digests),
        "workloadApi": draw(st.sampled_from(["deployment", "kserve"])),
    }
    return {"infercrane:kubernetes": target, "infercrane:replicas": reps}


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
config_keys = st.sampled_from(
    ["infercrane:kubernetes", "infercrane:replicas", "infercrane:other", "kubernetes:enablePatchForce", "x"]
)


def load(values: dict[str, Any]) -> InferCraneConfig:
    return loading.load(values, source="stacks/Pulumi.prop.yaml", env={})


def without_intent(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != naming.ANNOTATION_INTENT}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return [strip(m) for m in manifests]


# --- names and labels -------------------------------------------------------------------------
@PROPERTY
@given(printable_keys)
def test_every_printable_key_gives_a_dns_name_and_valid_label_values(key: str) -> None:
    name = naming.object_name(key)
    assert DNS_1035_LABEL.match(name) and len(name) <= 63
    for value in naming.labels(key).values():
        assert LABEL_VALUE.match(value) and len(value) <= 63
    config = load(
        {
            "infercrane:kubernetes": {"context": "c", "imageDigest": DIGEST},
            "infercrane:replicas": [{"key": key, "model": "m", "name": "r", "gpu": "NVIDIA-L40S"}],
        }
    )
    (rendered,) = render_checked(config, "prop")
    assert {m["metadata"]["name"] for m in rendered.manifests} == {name}


# --- loading ------------------------------------------------------------------------------------
@PROPERTY
@given(st.dictionaries(config_keys, json_like, max_size=4))
def test_load_returns_a_config_or_raises_config_error_for_any_json_like_input(values: dict[str, Any]) -> None:
    try:
        assert isinstance(load(values), InferCraneConfig)
    except ConfigError as exc:
        assert exc.problems and str(exc).startswith("invalid InferCrane configuration")


@PROPERTY
@given(stack_values(), json_like, st.sampled_from(["context", "namespace", "imageDigest", "gpu", "key", "gpuCount", "port"]))
def test_a_field_replaced_by_anything_still_loads_or_raises_config_error(values: dict[str, Any], junk: Any, field: str) -> None:
    target, reps = values["infercrane:kubernetes"], values["infercrane:replicas"]
    (target if field in target else reps[0])[field] = junk
    try:
        load(values)
    except ConfigError as exc:
        assert exc.problems


# --- render -------------------------------------------------------------------------------------
@PROPERTY
@given(stack_values())
def test_any_valid_config_renders_guard_clean_and_survives_a_yaml_round_trip(values: dict[str, Any]) -> None:
    config = load(values)
    rendered = render_checked(config, "prop")  # GuardError would fail the test
    manifests = [m for r in rendered for m in r.manifests]
    assert list(yaml.safe_load_all(to_yaml(manifests))) == manifests
    assert len(manifests) == len(config.replicas) * len(config.kubernetes.object_kinds)


TARGET_CHANGES: dict[str, list[Any]] = {
    "context": ["other-context"],
    "kubeconfig": ["/elsewhere/kubeconfig"],
    "namespace": ["other-ns"],
    "workloadApi": ["deployment", "kserve"],
    "serviceAccount": ["other-runtime"],
    "workerSecret": [{"name": "other-secret"}, {"key": "other-key"}],
    "imageDigest": ["vllm/vllm-openai@sha256:" + "b" * 64],
    "gpuResource": ["amd.com/gpu"],
    "gpuProductLabel": ["example.com/gpu.product"],
    "gpuProducts": [["Custom-GPU"]],
    "gpuTolerationKey": ["example.com/gpu"],
    "kserveDeploymentMode": ["RawDeployment", "Standard"],
    "rollout": [{"maxSurge": 1}, {"maxUnavailable": 2}, {"maxUnavailable": 0, "maxSurge": 2}],
}


@PROPERTY
@given(stack_values(), st.sampled_from(sorted(TARGET_CHANGES)), st.data())
def test_a_target_field_changes_the_intent_hash_if_and_only_if_it_changes_the_rendered_objects(
    values: dict[str, Any], field: str, data: st.DataObject
) -> None:
    before = load(values)
    changed = {
        **values,
        "infercrane:kubernetes": {**values["infercrane:kubernetes"], field: data.draw(st.sampled_from(TARGET_CHANGES[field]))},
    }
    after = load(changed)
    intents_differ = [intent(before, r) for r in before.replicas] != [intent(after, r) for r in after.replicas]
    objects_differ = without_intent([m for r in render_checked(before, "prop") for m in r.manifests]) != without_intent(
        [m for r in render_checked(after, "prop") for m in r.manifests]
    )
    if field == "kserveDeploymentMode" and values["infercrane:kubernetes"]["workloadApi"] == "deployment":
        # Known: the mode is hashed in Deployment mode too, where it renders nothing. Dropping it
        # from the hash would change every deployed replica's intent annotation (a metadata-only
        # update per replica), so it waits for a release that changes the hash on purpose.
        assert not objects_differ
        return
    if field == "rollout":
        # How a replica rolls is not what it serves: a new policy may change the Deployment's
        # strategy (never its pods), so the intent -- on the pod template -- stays.
        assert not intents_differ

        def rolls(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
            out = []
            for m in manifests:
                spec = {k: v for k, v in m.get("spec", {}).items() if k != "strategy"}
                if "predictor" in spec:
                    spec["predictor"] = {k: v for k, v in spec["predictor"].items() if k != "deploymentStrategy"}
                out.append({**m, "spec": spec})
            return out

        before_objects = [m for r in render_checked(before, "prop") for m in r.manifests]
        after_objects = [m for r in render_checked(after, "prop") for m in r.manifests]
        assert rolls(before_objects) == rolls(after_objects)
        return
    assert intents_differ == objects_differ, field


# --- promotion ----------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(replicas(), min_size=1, max_size=3, unique_by=lambda r: r["key"]))
def test_promote_then_diff_is_empty(source_replicas: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "Pulumi.staging.yaml"
        shutil.copy(ROOT / "stacks" / "Pulumi.staging.yaml", staging)
        target = load(stackfile.read_stack_values(staging))
        source = load(
            {"infercrane:kubernetes": {"context": "dev", "imageDigest": DIGEST}, "infercrane:replicas": source_replicas}
        )
        stackfile.write_bundles(staging, source, target, None)
        promoted = load(stackfile.read_stack_values(staging))
        assert diff(source, promoted, None) == []


# --- the digest rule ----------------------------------------------------------------------------
@PROPERTY
@given(digests)
def test_the_digest_rule_accepts_every_reference_of_the_documented_shape(ref: str) -> None:
    assert image.digest_problem(ref) is None


@PROPERTY
@given(
    digests,
    st.sampled_from(["upper", "short", "long", "tag-only", "space", "placeholder", "empty-repo"]),
)
def test_the_digest_rule_refuses_every_near_miss(ref: str, how: str) -> None:
    repo, digest = ref.split("@sha256:")
    bad = {
        "upper": f"{repo}@sha256:{digest[:-1]}A",
        "short": f"{repo}@sha256:{digest[:-1]}",
        "long": f"{repo}@sha256:{digest}0",
        "tag-only": repo if ":" in repo.rsplit("/", 1)[-1] else f"{repo}:latest",
        "space": f" {ref}",
        "placeholder": f"{repo}@sha256:REPLACE_WITH_DIGEST",
        "empty-repo": f"@sha256:{digest}",
    }[how]
    assert image.digest_problem(bad) is not None


@PROPERTY
@given(st.text(string.printable, max_size=120))
def test_anything_the_digest_rule_accepts_is_pinned_by_a_lowercase_sha256(text: str) -> None:
    if image.digest_problem(text) is None:
        assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", text)
