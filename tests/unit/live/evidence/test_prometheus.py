"""A canary's counts from a Prometheus that scrapes the pods (kubernetes.canaryMetrics.prometheus):
the query, the counts it gives, and its failures in words -- against a double of Prometheus's HTTP
query API (an HTTP server on loopback answering /api/v1/query; the real Prometheus is the local
plane's, tests/integration/test_canary.py)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.plan import canary_record
from infercrane.live.evidence import canary as evidence
from infercrane.live.evidence import prometheus

POD = ("10.88.0.4", 8000)


def series(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, "instance": "10.88.0.4:8000", "job": "pods", **labels}, "value": [1.0, str(value)]}


VECTOR = [
    series("http_requests_total", 40, handler="/v1/completions", status="2xx", method="POST"),
    series("http_requests_total", 2, handler="/v1/completions", status="5xx", method="POST"),
    series("http_requests_total", 9, handler="/metrics", status="2xx", method="GET"),
    series("vllm:time_to_first_token_seconds_bucket", 30, le="0.1", model_name="qwen"),
    series("vllm:time_to_first_token_seconds_bucket", 40, le="+Inf", model_name="qwen"),
    series("vllm:e2e_request_latency_seconds_bucket", 25, le="0.5", model_name="qwen"),
    series("vllm:e2e_request_latency_seconds_bucket", 40, le="+Inf", model_name="qwen"),
]


class PrometheusDouble(BaseHTTPRequestHandler):
    """A double of Prometheus's ``GET /api/v1/query``: answers ``answer`` and keeps each query."""

    answer: dict[str, Any] = {}
    status = 200
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        url = urllib.parse.urlsplit(self.path)
        type(self).asked.append(urllib.parse.parse_qs(url.query)["query"][0])
        body = json.dumps(self.answer).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def double() -> Iterator[type[PrometheusDouble]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PrometheusDouble)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    PrometheusDouble.asked, PrometheusDouble.status = [], 200
    PrometheusDouble.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield PrometheusDouble
    server.shutdown()


def test_a_pods_counts_come_from_its_series_in_prometheus_selected_by_its_address(double: Any) -> None:
    double.answer = {"status": "success", "data": {"resultType": "vector", "result": VECTOR}}
    page = prometheus.reader(double.url)(POD, "vllm")
    assert (page.requests, page.errors, page.ttft) == (42, 2, ((0.1, 30), (canary_record.INF, 40)))
    assert page.e2e == ((0.5, 25), (canary_record.INF, 40))
    names = "vllm:time_to_first_token_seconds_bucket|vllm:e2e_request_latency_seconds_bucket|http_requests_total"
    assert double.asked == [f'{{__name__=~"{names}",instance="10.88.0.4:8000"}}']


def test_an_sglang_pods_counts_are_its_finished_and_aborted_requests_in_prometheus(double: Any) -> None:
    sglang = [
        series("sglang:num_requests_total", 40, model_name="qwen"),
        series("sglang:num_aborted_requests_total", 3, model_name="qwen"),
        series("sglang:time_to_first_token_seconds_bucket", 40, le="+Inf", model_name="qwen"),
    ]
    double.answer = {"status": "success", "data": {"resultType": "vector", "result": sglang}}
    page = prometheus.reader(double.url)(POD, "sglang")
    assert (page.requests, page.errors, page.ttft, page.e2e) == (40, 3, ((canary_record.INF, 40),), ())
    names = (
        "sglang:time_to_first_token_seconds_bucket|sglang:e2e_request_latency_seconds_bucket"
        "|sglang:num_requests_total|sglang:num_aborted_requests_total"
    )
    assert double.asked == [f'{{__name__=~"{names}",instance="10.88.0.4:8000"}}']


def test_a_pod_prometheus_has_not_scraped_has_no_figures_and_says_where(double: Any) -> None:
    double.answer = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with pytest.raises(
        ValueError, match=r"^Prometheus, for instance 10\.88\.0\.4:8000, has no vllm:time_to_first_token_seconds$"
    ):
        prometheus.reader(double.url)(POD, "vllm")
    double.status = 503
    with pytest.raises(ValueError, match="^Prometheus answered HTTP 503 for its series$"):
        prometheus.reader(double.url)(POD, "vllm")


def test_a_replica_unreadable_when_the_bake_began_has_its_window_begin_at_its_first_readable_read() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.model.endpoints import CanaryPolicy

    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "qwen", "gpu": "NVIDIA-L40S"} for i in range(2)]
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})
    pages = iter([None, evidence.Page(5, 0, ((canary_record.INF, 5),)), evidence.Page(9, 0, ((canary_record.INF, 9),))])

    def read(address: evidence.Address, engine: str) -> evidence.Page:
        if address[0] == "10.0.0.2":  # the baseline: always readable, never answering
            return evidence.Page(0, 0, ((canary_record.INF, 0),))
        page = next(pages)
        if page is None:
            raise ValueError("Prometheus, for instance 10.0.0.1:8000, has no vllm:time_to_first_token_seconds")
        return page

    where = {"k0": [("10.0.0.1", 8000)], "k1": [("10.0.0.2", 8000)]}
    baking = evidence.Bake(config, "qwen", CanaryPolicy(), ["k0"], ["k1"], lambda r: where[r.key], None, read=read)
    first = baking.record(final=False).measured[0]
    assert first.unreadable.endswith("has no vllm:time_to_first_token_seconds when the bake began; its window begins now")
    second = baking.record(final=False).measured[0]
    assert (second.requests, second.unreadable) == (4, ""), "counted from its first readable read"


def test_a_prometheus_url_with_credentials_is_refused_naming_its_path_and_how_to_fix_it() -> None:
    target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
    target["canaryMetrics"] = {"prometheus": "ftp://admin:secret@prometheus:9090"}  # type: ignore[assignment]
    values = {
        "infercrane:kubernetes": target,
        "infercrane:replicas": [{"key": "k0", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}],
    }
    with pytest.raises(ConfigError) as refused:
        loading.load(values, source="stacks/Pulumi.dev.yaml", env={})
    text = str(refused.value)
    assert "stacks/Pulumi.dev.yaml: infercrane:kubernetes.canaryMetrics.prometheus:" in text
    assert "credentials, a query or a fragment is refused" in text and "secret" not in text.replace("no credentials", "")
    assert "fix: give the base URL of a Prometheus that scrapes the pods" in text
