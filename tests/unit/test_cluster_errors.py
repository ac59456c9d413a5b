from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from infercrane import config
from infercrane.cluster import describe_api_error

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64
TARGET = config.load({"infercrane:kubernetes": {"context": "gpu-dev", "imageDigest": DIGEST}}, source="s", env={}).kubernetes


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        (
            403,
            'deployments.apps "x" is forbidden: User "u" cannot patch resource',
            "forbidden for the identity of context 'gpu-dev'",
        ),
        (404, 'namespaces "infercrane-system" not found', "namespace 'infercrane-system' does not exist"),
        (
            404,
            "the server could not find the requested resource",
            "install KServe (Standard mode) first, or set workloadApi: deployment",
        ),
        (401, "Unauthorized", "the credentials of context 'gpu-dev' were rejected"),
        (500, "etcdserver: request timed out", "etcdserver: request timed out (HTTP 500)"),
    ],
    ids=["forbidden", "no-namespace", "no-crd", "unauthorized", "other"],
)
def test_api_errors_say_what_to_do(code: int, message: str, expected: str) -> None:
    exc = ApiError(status=Status(code=code, message=message))
    assert expected in describe_api_error(exc, action="server-side dry-run of Deployment x", target=TARGET)
