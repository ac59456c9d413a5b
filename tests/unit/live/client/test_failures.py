from __future__ import annotations

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from infercrane.core.load import loading
from infercrane.live.client import failures
from infercrane.live.client.failures import describe_api_error
from tests.unit.conftest import DIGEST

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


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (403, 'deployments.apps "x" is forbidden: User "u" cannot patch resource', failures.Forbidden),
        (401, "Unauthorized", failures.Forbidden),
        (404, 'deployments.apps "x" not found', failures.NotFound),
        (409, 'Apply failed with 1 conflict: conflict with "kubectl"', failures.Conflict),
        (422, 'Deployment.apps "x" is invalid', failures.Invalid),
        (500, "failed to create typed patch object: .spec.bogus: field not declared in schema", failures.Invalid),
        (429, "too many requests", failures.Unavailable),
        (503, "the server is currently unable to handle the request", failures.Unavailable),
        (500, "etcdserver: request timed out", failures.Unavailable),
        (400, "the namespace of the provided object does not match", failures.LiveError),
    ],
    ids=[
        "forbidden",
        "unauthorized",
        "not-found",
        "conflict",
        "invalid",
        "undeclared-field",
        "throttled",
        "unavailable",
        "etcd",
        "bad-request",
    ],
)
def test_a_failed_request_leaves_the_clients_edge_as_the_type_callers_branch_on(
    code: int, message: str, kind: type[failures.LiveError]
) -> None:
    exc = ApiError(status=Status(code=code, message=message))
    with pytest.raises(failures.LiveError) as raised, failures.request("list deployments", TARGET):
        raise exc
    assert type(raised.value) is kind
    assert raised.value.code == code and raised.value.api is exc
    assert str(raised.value).startswith("list deployments: ")


def test_no_answer_at_all_is_unreachable_with_the_next_step() -> None:
    import httpx2

    with pytest.raises(failures.Unreachable) as raised, failures.request("list deployments", TARGET):
        raise httpx2.ConnectError("[Errno 111] Connection refused")
    text = str(raised.value)
    assert text.startswith("cannot reach the Kubernetes API of context 'gpu-dev': ConnectError:")
    assert "fix: check the cluster is up" in text and raised.value.code is None


def test_a_connection_that_cannot_be_set_up_is_retried_but_a_wrong_certificate_is_not() -> None:
    import ssl

    import httpx2

    from infercrane.live.client import cluster

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

    from infercrane.live.client import cluster

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
    from infercrane.live.client.cluster import warning_texts

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


def test_a_cluster_without_dra_is_named_as_such_for_a_claim_template() -> None:
    exc = ApiError(status=Status(code=404, message="the server could not find the requested resource"))
    text = describe_api_error(exc, action="server-side dry-run of ResourceClaimTemplate ns/x", target=TARGET)
    assert "does not serve resource.k8s.io/v1 (DRA, Kubernetes 1.34+): set gpuAllocation: label" in text
    assert "KServe" not in text
