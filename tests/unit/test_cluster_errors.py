from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from infercrane.core import loading
from infercrane.live.cluster import describe_api_error

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64
TARGET = loading.load({"infercrane:kubernetes": {"context": "gpu-dev", "imageDigest": DIGEST}}, source="s", env={}).kubernetes


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


def test_a_connection_that_cannot_be_set_up_is_retried_but_a_wrong_certificate_is_not() -> None:
    import ssl

    import httpx2

    from infercrane.live import cluster

    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise httpx2.ConnectError("[SSL: TLSV1_ALERT_DECODE_ERROR] tlsv1 alert decode error")
        return "listed"

    assert cluster.retrying(flaky, delay=0.001) == "listed" and len(calls) == 3

    def wrong_ca() -> str:
        calls.append(1)
        try:
            raise ssl.SSLCertVerificationError("certificate verify failed")
        except ssl.SSLCertVerificationError as cause:
            raise httpx2.ConnectError("certificate verify failed") from cause

    calls.clear()
    with pytest.raises(httpx2.ConnectError):
        cluster.retrying(wrong_ca, delay=0.001)
    assert len(calls) == 1


def test_a_refused_connection_fails_at_once_without_retrying() -> None:
    import httpx2

    from infercrane.live import cluster

    calls = []

    def refused() -> str:
        calls.append(1)
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise httpx2.ConnectError("[Errno 111] Connection refused") from cause

    with pytest.raises(httpx2.ConnectError):
        cluster.retrying(refused, delay=0.001)
    assert len(calls) == 1


def test_the_api_servers_warning_headers_are_read_as_their_text() -> None:
    from infercrane.live.cluster import warning_texts

    headers = ['299 - "would violate PodSecurity \\"restricted:latest\\": runAsNonRoot != true"', "not a warning header"]
    assert list(warning_texts(headers)) == [
        'would violate PodSecurity "restricted:latest": runAsNonRoot != true',
        "not a warning header",
    ]


def test_a_pod_security_refusal_names_the_object_the_admissions_words_and_both_ways_out() -> None:
    from infercrane.core.errors import PreflightRefused

    text = str(PreflightRefused([], [], [], ['Deployment ns/r-1: would violate PodSecurity "restricted:latest": x']))
    assert text.startswith("preflight refused the change; nothing was applied.")
    assert '- Deployment ns/r-1: would violate PodSecurity "restricted:latest": x' in text
    assert "set infercrane:kubernetes.securityContext {runAsUser: 1000" in text
    assert "podSecurityWarnings: report" in text
