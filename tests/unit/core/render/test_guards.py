from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from infercrane.core.load import loading
from infercrane.core.render import guards, render_all

Mutator = Callable[[dict[str, Any]], None]


def _dep(values: dict[str, Any]) -> dict[str, Any]:
    c = loading.load(values, source="s", env={})
    return copy.deepcopy(render_all(c, "infercrane/dev")[0].manifests[0])


def _container(m: dict[str, Any]) -> dict[str, Any]:
    return m["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def check(m: dict[str, Any]) -> list[str]:
    return guards.check(m, guards.Gpus())


def test_rendered_manifests_pass(values: dict[str, Any]) -> None:
    assert check(_dep(values)) == []


CASES: list[tuple[str, Mutator, str]] = [
    ("tag-image", lambda m: _container(m).update(image="vllm/vllm-openai:latest"), "is not pinned by digest"),
    (
        "no-gpu-selector",
        lambda m: m["spec"]["template"]["spec"].update(nodeSelector={}),
        "nodeSelector nvidia.com/gpu.product is missing",
    ),
    (
        "limits-not-requests",
        lambda m: _container(m)["resources"].update(requests={"nvidia.com/gpu": "2"}),
        "limits must equal requests",
    ),
    ("no-gpu-limit", lambda m: _container(m).update(resources={}), "limits must equal requests and be set"),
    (
        "patch-force",
        lambda m: m["metadata"]["annotations"].update({"pulumi.com/patchForce": "true"}),
        "pulumi.com/patchForce is set",
    ),
    (
        "foreign-manager",
        lambda m: m["metadata"]["annotations"].update({"pulumi.com/patchFieldManager": "me"}),
        "field manager must be infercrane-provider-v1",
    ),
    (
        "wide-selector",
        lambda m: m["spec"]["selector"]["matchLabels"].update({"app.kubernetes.io/name": "infercrane-runtime"}),
        "selector must be the instance label only",
    ),
    (
        "missing-label",
        lambda m: m["metadata"]["labels"].pop("app.kubernetes.io/managed-by"),
        "label app.kubernetes.io/managed-by is None",
    ),
    (
        "missing-key",
        lambda m: m["metadata"]["annotations"].pop("infercrane.dev/external-key"),
        "annotation infercrane.dev/external-key is missing",
    ),
    ("literal-secret", lambda m: _container(m)["env"][0].update(value="s3cr3t"), "must come from a secretKeyRef"),
    (
        "literal-token",
        lambda m: _container(m)["env"].append({"name": "HF_TOKEN", "value": "hf_x"}),
        "HF_TOKEN must come from a secretKeyRef",
    ),
    ("api-key-arg", lambda m: _container(m)["args"].append("--api-key=x"), "--api-key in args"),
    (
        "api-key-reference-without-its-secret",  # the reference is allowed only to a Secret-backed variable
        lambda m: (
            _container(m)["args"].extend(["--api-key", "$(INFERCRANE_WORKER_API_KEY)"]),
            _container(m).update(env=[e for e in _container(m)["env"] if e["name"] != "INFERCRANE_WORKER_API_KEY"]),
        ),
        "--api-key in args",
    ),
    (
        "api-key-other-reference",
        lambda m: _container(m)["args"].extend(["--api-key", "$(OTHER_KEY)"]),
        "--api-key in args",
    ),
    (
        "unlimited-memory",
        lambda m: _container(m)["resources"]["requests"].update(memory="32Gi"),
        "a memory request needs a memory limit (request + /dev/shm, which is charged to it)",
    ),
    (
        "writable-claim",
        lambda m: m["spec"]["template"]["spec"]["volumes"].append({"name": "w", "persistentVolumeClaim": {"claimName": "c"}}),
        "volume w mounts claim c writable; a model cache is read-only",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in CASES], ids=[i for i, _, _ in CASES])
def test_guard_catches(values: dict[str, Any], mutate: Mutator, expected: str) -> None:
    m = _dep(values)
    mutate(m)
    out = check(m)
    assert any(expected in v for v in out), out


def test_sglang_gets_the_worker_key_as_the_kubelets_reference_and_the_guard_allows_exactly_that(
    values: dict[str, Any],
) -> None:
    values["infercrane:replicas"][0]["engine"] = "sglang"
    m = _dep(values)
    args = _container(m)["args"]
    assert args[-2:] == ["--api-key", "$(INFERCRANE_WORKER_API_KEY)"]
    (env,) = [e for e in _container(m)["env"] if e["name"] == "INFERCRANE_WORKER_API_KEY"]
    assert "secretKeyRef" in env["valueFrom"]
    assert check(m) == []
    _container(m)["args"] = [*args[:-1], "$(INFERCRANE_WORKER_API_KEY)x"]
    assert any("--api-key in args" in v for v in check(m))


def test_vllm_gets_no_key_argument_it_reads_its_variable(values: dict[str, Any]) -> None:
    assert "--api-key" not in _container(_dep(values))["args"]
