"""Weights by digest and the compile cache, as rendered and as refused: a model image is an image
volume by digest, read-only, given to the engine as its model; the compile cache is its key's own
directory of a claim, the key moving with the engine image, the model digest and the GPU."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.render import guards, render_all
from infercrane.core.render.intent import intent

MODEL = "oci://registry.example/models/qwen3-8b@sha256:" + "b" * 64
SRC = "stacks/Pulumi.dev.yaml"


def load(values: dict[str, Any], target: dict[str, Any] | None = None, **replica: Any) -> Any:
    v = copy.deepcopy(values)
    v["infercrane:kubernetes"].update(target or {})
    v["infercrane:replicas"][0].update(replica)
    return loading.load(v, source=SRC, env={})


def pod(values: dict[str, Any], target: dict[str, Any] | None = None, **replica: Any) -> dict[str, Any]:
    c = load(values, target, **replica)
    spec: dict[str, Any] = render_all(c, "infercrane/dev")[0].manifests[0]["spec"]["template"]["spec"]
    return spec


def problems(values: dict[str, Any], target: dict[str, Any] | None = None, **replica: Any) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load(values, target, **replica)
    return [p.render() for p in exc.value.problems]


def test_a_model_image_is_an_image_volume_by_digest_mounted_read_only_and_the_engines_model(values: dict[str, Any]) -> None:
    p = pod(values, modelImage=MODEL)
    (c,) = p["containers"]
    assert {"name": "model-image", "image": {"reference": MODEL.removeprefix("oci://"), "pullPolicy": "IfNotPresent"}} in p[
        "volumes"
    ]
    assert {"name": "model-image", "mountPath": "/mnt/model", "readOnly": True} in c["volumeMounts"]
    assert c["args"][:2] == ["--model", "/mnt/model/models"] and "--revision" not in c["args"]
    assert c["args"][c["args"].index("--served-model-name") + 1 :][:2] == ["qwen-kubernetes", "Qwen/Qwen3-8B"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in c["env"]
    assert guards.check(render_all(load(values, modelImage=MODEL), "infercrane/dev")[0].manifests[0], guards.Gpus()) == []
    # The target's map names it for every replica of that model that names none itself.
    assert pod(values, {"modelImages": {"Qwen/Qwen3-8B": MODEL}})["volumes"] == p["volumes"]
    assert intent(load(values, modelImage=MODEL), load(values, modelImage=MODEL).replicas[0]) != intent(
        load(values), load(values).replicas[0]
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("oci://registry.example/models/qwen3-8b:latest", "is not pinned by digest (a tag can change under you)"),
        ("registry.example/models/qwen3-8b@sha256:" + "b" * 64, "is not an oci:// reference"),
        ("oci://registry.example/models/qwen3-8b@sha256:" + "B" * 64, "has an uppercase digest"),
    ],
)
def test_a_model_image_by_tag_or_without_its_scheme_is_refused_where_it_is_written(
    values: dict[str, Any], value: str, said: str
) -> None:
    (own,) = problems(values, modelImage=value)
    assert own.startswith(f"{SRC}: infercrane:replicas[0].modelImage") and said in own, own
    (target,) = problems(values, {"modelImages": {"Qwen/Qwen3-8B": value}})
    assert "infercrane:kubernetes.modelImages" in target and said in target, target


def test_a_model_image_with_a_revision_is_refused_one_pin_is_enough(values: dict[str, Any]) -> None:
    (said,) = problems(values, modelRevision="a" * 40, modelImage=MODEL)
    assert "a model image is pinned by its digest; modelRevision pins a Hugging Face download -- set one of them" in said


def test_the_compile_cache_is_the_keys_own_directory_and_the_key_moves_with_engine_model_and_gpu(
    values: dict[str, Any],
) -> None:
    cache = {"compileCache": {"claimName": "compile"}}
    p = pod(values, cache, modelImage=MODEL)
    (c,) = p["containers"]
    assert {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "compile"}} in p["volumes"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "compile-cache"]
    key = mount["subPath"]
    assert mount["mountPath"] == "/var/cache/infercrane/compile" and len(key) == 16
    assert {e["name"] for e in c["env"] if e.get("value") == "/var/cache/infercrane/compile"} == {
        "VLLM_CACHE_ROOT",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
    }
    assert guards.check(render_all(load(values, cache, modelImage=MODEL), "infercrane/dev")[0].manifests[0], guards.Gpus()) == []

    def key_of(target: dict[str, Any] | None = None, **replica: Any) -> str:
        c = load(values, cache | (target or {}), **({"modelImage": MODEL} | replica))
        return str(c.compile_key(c.replicas[0]))

    assert key_of() == key
    assert key_of(modelImage=MODEL[:-1] + "c") != key  # another model
    assert key_of({"imageDigest": "vllm/vllm-openai@sha256:" + "d" * 64}) != key  # another engine
    assert key_of(gpu="NVIDIA-H100-80GB-HBM3") != key  # another GPU
    assert key_of(args=["--max-model-len", "4096"]) == key  # the same three: the same artifacts
    # An unpinned model (no image, no revision) mounts no cache: there is no key to keep it under.
    assert "compile-cache" not in [v["name"] for v in pod(values, cache)["volumes"]]


def test_a_writable_claim_is_refused_unless_it_is_the_compile_cache_at_its_keys_directory(values: dict[str, Any]) -> None:
    m = copy.deepcopy(
        render_all(load(values, {"compileCache": {"claimName": "compile"}}, modelImage=MODEL), "infercrane/dev")[0].manifests[0]
    )
    c = m["spec"]["template"]["spec"]["containers"][0]
    next(mt for mt in c["volumeMounts"] if mt["name"] == "compile-cache").pop("subPath")
    assert guards.check(m, guards.Gpus()) == [
        f"Deployment/{m['metadata']['name']}: volume compile-cache is mounted whole; a compile cache is mounted at its "
        "key's own directory (subPath)"
    ]
    m["spec"]["template"]["spec"]["volumes"].append({"name": "other", "persistentVolumeClaim": {"claimName": "x"}})
    assert any("volume other mounts claim x writable; a model cache is read-only" in p for p in guards.check(m, guards.Gpus()))
    volume = next(v for v in m["spec"]["template"]["spec"]["volumes"] if v["name"] == "model-image")
    volume["image"]["reference"] = "registry.example/models/qwen3-8b:latest"
    assert any("volume model-image: model image" in p and "is not pinned by digest" in p for p in guards.check(m, guards.Gpus()))


def test_a_pod_env_that_names_the_caches_variables_is_refused_with_the_compile_cache(values: dict[str, Any]) -> None:
    (said,) = problems(
        values,
        {"compileCache": {"claimName": "compile"}},
        modelImage=MODEL,
        pod={"env": [{"name": "VLLM_CACHE_ROOT", "value": "/x"}]},
    )
    assert said.startswith(f"{SRC}: infercrane:replicas[0].pod.env (replica 'qwen-kubernetes-rev-1-r0'): sets VLLM_CACHE_ROOT")
    assert "remove VLLM_CACHE_ROOT from the env, or leave infercrane:kubernetes.compileCache out" in said
