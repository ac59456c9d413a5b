"""The verified model cache: what is refused at load (by text), the verdict from live claims,
and what a mounted cache looks like in the rendered pod."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane.core.errors import CacheRefused, ConfigError
from infercrane.core.load import loading
from infercrane.core.plan import cache
from infercrane.core.render import render_replica
from infercrane.core.render.intent import intent
from infercrane.live.client.api import Live
from infercrane.live.stack import preflight

SRC = "stacks/Pulumi.dev.yaml"
REV = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"
ENTRY = f"Qwen/Qwen3-8B@{REV}"


def with_cache(values: dict[str, Any], policy: str, pvcs: dict[str, str] | None = None, **replica: Any) -> dict[str, Any]:
    values["infercrane:kubernetes"]["artifactCache"] = {
        "policy": policy,
        "pvcs": {ENTRY: "qwen-weights"} if pvcs is None else pvcs,
    }
    values["infercrane:replicas"][0] |= {"modelRevision": REV} | replica
    return values


def problems(values: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        loading.load(values, source=SRC, env=env or {})
    return [p.render() for p in exc.value.problems]


def pvc(phase: str = "Bound", modes: tuple[str, ...] = ("ReadOnlyMany",)) -> dict[str, Any]:
    return {
        "metadata": {"name": "qwen-weights"},
        "spec": {"accessModes": list(modes)},
        "status": {"phase": phase, "accessModes": list(modes)},
    }


def test_a_mapping_under_the_disabled_policy_is_refused_as_never_used(values: dict[str, Any]) -> None:
    (line,) = problems(with_cache(values, "disabled"))
    assert "infercrane:kubernetes.artifactCache: maps model caches while the policy is disabled" in line
    assert "fix: set artifactCache.policy to prefer or required" in line


def test_a_mutable_entry_and_a_bad_claim_name_are_refused_together(values: dict[str, Any]) -> None:
    (line,) = problems(with_cache(values, "prefer", {"Qwen/Qwen3-8B@main": "Weights_1"}))
    assert "key 'Qwen/Qwen3-8B@main' is not <model>@<40-hex commit>" in line
    assert "claim 'Weights_1' (for Qwen/Qwen3-8B@main) is not a PVC name" in line


def test_required_refuses_a_replica_without_a_pinned_commit_or_without_a_mapping(values: dict[str, Any]) -> None:
    values = with_cache(values, "required")
    values["infercrane:replicas"] += [
        {"key": "r-unpinned", "model": "Qwen/Qwen3-8B", "name": "qwen-kubernetes", "gpu": "NVIDIA-L40S"},
        {"key": "r-branch", "model": "Qwen/Qwen3-8B", "name": "qwen-kubernetes", "gpu": "NVIDIA-L40S", "modelRevision": "main"},
        {"key": "r-other", "model": "Qwen/Qwen3-8B", "name": "qwen-kubernetes", "gpu": "NVIDIA-L40S", "modelRevision": "1" * 40},
    ]
    unpinned, branch, other = problems(values)
    assert "infercrane:replicas[1].modelRevision (replica 'r-unpinned'): has no pinned revision" in unpinned
    assert "infercrane:replicas[2].modelRevision (replica 'r-branch'): 'main' is not a commit" in branch
    assert f"no model cache is mapped for Qwen/Qwen3-8B@{'1' * 40}" in other


def test_the_cache_comes_from_the_seed_variables_too_and_bad_json_names_the_variable(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["modelRevision"] = REV
    env = {
        "INFERCRANE_KUBERNETES_ARTIFACT_CACHE_POLICY": "required",
        "INFERCRANE_KUBERNETES_ARTIFACT_PVCS_JSON": f'{{"{ENTRY}": "w"}}',
    }
    c = loading.load(values, source=SRC, env=env)
    assert c.cache_for(c.replicas[0]) == "w"
    lines = problems(values, env | {"INFERCRANE_KUBERNETES_ARTIFACT_PVCS_JSON": "{nope"})
    assert lines[0].startswith("INFERCRANE_KUBERNETES_ARTIFACT_PVCS_JSON (environment): is not JSON")


@pytest.mark.parametrize(
    ("live", "why"),
    [
        ({}, "does not exist"),
        ({"qwen-weights": pvc("Pending")}, "is Pending, not Bound"),
        ({"qwen-weights": pvc(modes=("ReadWriteOnce",))}, "allows ReadWriteOnce only"),
    ],
)
def test_an_unusable_claim_refuses_under_required_and_downloads_with_a_warning_under_prefer(
    values: dict[str, Any], live: dict[str, Any] | None, why: str
) -> None:
    required = loading.load(with_cache(values, "required"), source=SRC, env={})
    verdict = cache.judge(required, live)
    assert (
        verdict.refusals
        and why in verdict.refusals[0]
        and "PersistentVolumeClaim infercrane-system/qwen-weights" in verdict.refusals[0]
    )
    prefer = loading.load(with_cache(values, "prefer"), source=SRC, env={})
    verdict = cache.judge(prefer, live)
    assert not verdict.refusals
    assert why in verdict.warnings[0] and verdict.warnings[0].endswith("they download the weights instead")
    assert verdict.config.cache_for(verdict.config.replicas[0]) is None
    values["infercrane:kubernetes"].pop("artifactCache")
    uncached = loading.load(values, source=SRC, env={})
    assert render_replica(verdict.config, verdict.config.replicas[0], "infercrane/dev") == render_replica(
        uncached, uncached.replicas[0], "infercrane/dev"
    ), "a dropped claim renders exactly as a stack without a cache"


@pytest.mark.parametrize("modes", [("ReadOnlyMany",), ("ReadWriteMany",), ("ReadWriteOnce", "ReadOnlyMany")])
def test_a_bound_claim_with_several_readers_is_kept(values: dict[str, Any], modes: tuple[str, ...]) -> None:
    config = loading.load(with_cache(values, "required"), source=SRC, env={})
    verdict = cache.judge(config, {"qwen-weights": pvc(modes=modes)})
    assert (verdict.refusals, verdict.warnings, verdict.config) == ([], [], config)


def test_a_mounted_cache_is_read_only_offline_and_changes_the_intent(values: dict[str, Any]) -> None:
    plain = loading.load(values, source=SRC, env={})
    config = loading.load(with_cache(values, "prefer"), source=SRC, env={})
    (dep, _svc) = render_replica(config, config.replicas[0], "infercrane/dev").manifests
    pod = dep["spec"]["template"]["spec"]
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "qwen-weights", "readOnly": True}} in pod["volumes"]
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "model-cache")
    assert mount == {"name": "model-cache", "mountPath": "/var/cache/infercrane/huggingface", "readOnly": True}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HF_HUB_CACHE"] == "/var/cache/infercrane/huggingface" and env["HF_HUB_OFFLINE"] == "1"
    assert intent(config, config.replicas[0]) != intent(plain, config.replicas[0])


def test_a_stack_without_a_cache_lists_no_claims(values: dict[str, Any]) -> None:
    config = loading.load(values, source=SRC, env={})

    class NoClient:
        def list(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("no LIST when nothing is mapped")

    assert preflight.verify_cache(config, Live(NoClient(), config.kubernetes)).config is config


def test_a_required_cache_the_identity_may_not_read_refuses_with_the_optional_role(values: dict[str, Any]) -> None:
    from lightkube import ApiError
    from lightkube.models.meta_v1 import Status

    class Forbidden:
        def list(self, *a: Any, **k: Any) -> Any:
            raise ApiError(status=Status(code=403, message="forbidden"))

    config = loading.load(with_cache(values, "required"), source=SRC, env={})
    with pytest.raises(CacheRefused) as exc:
        preflight.verify_cache(config, Live(Forbidden(), config.kubernetes))
    text = str(exc.value)
    assert text.startswith("the model cache is required and could not be verified; nothing was applied:")
    assert "claim(s) qwen-weights cannot be verified: this identity may not list persistentvolumeclaims" in text
    assert "fix: grant this identity the optional read (kubectl apply -f deploy/kubernetes/optional/pvc-reader.yaml" in text
    prefer = loading.load(with_cache(values, "prefer"), source=SRC, env={})
    verdict = preflight.verify_cache(prefer, Live(Forbidden(), prefer.kubernetes))
    assert verdict.config.cache_for(verdict.config.replicas[0]) is None
    assert verdict.warnings[0].endswith("every replica downloads the weights instead")
