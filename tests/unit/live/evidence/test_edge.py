"""The one edge to the pods and Prometheus: failures typed, their cause kept, the callers' words
unchanged."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from infercrane.live.evidence import canary, edge, prometheus


class Answering(http.server.BaseHTTPRequestHandler):
    """``/status/<code>`` answers that code; ``/text`` a body that is no JSON; ``/echo`` the JSON it got."""

    def do_GET(self) -> None:
        if self.path.startswith("/status/"):
            self.send_response(int(self.path.split("/")[2]))
            self.end_headers()
            return
        body = b"not json" if self.path == "/text" else b'{"status": "error", "error": "bad query"}'
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(
            json.dumps({"got": doc, "type": self.headers["Content-Type"], "auth": self.headers["Authorization"]}).encode()
        )

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_answer_other_than_2xx_is_refused_with_its_status_and_its_cause() -> None:
    with serving() as base:
        with pytest.raises(edge.Refused) as refused:
            edge.get(f"{base}/status/503", timeout=5)
    assert (refused.value.status, str(refused.value)) == (503, "HTTP 503")
    assert refused.value.__cause__ is not None and "503" in str(refused.value.__cause__)


def test_nothing_listening_is_no_answer_keeping_the_os_error() -> None:
    with pytest.raises(edge.NoAnswer) as none:
        edge.get(edge.url("127.0.0.1", closed_port(), "/health"), timeout=5)
    assert isinstance(none.value.__cause__, OSError)
    assert str(none.value).startswith("URLError: ")


def test_a_body_that_is_no_json_is_unanswered_keeping_the_parse_error() -> None:
    with serving() as base:
        answer = edge.get(f"{base}/text", timeout=5)
    with pytest.raises(edge.Unanswered) as bad:
        answer.json()
    assert isinstance(bad.value.__cause__, json.JSONDecodeError)
    assert str(bad.value).startswith("JSONDecodeError: ")


def test_a_post_sends_json_and_the_key_only_in_its_header() -> None:
    with serving() as base:
        doc = edge.post(f"{base}/echo", {"prompt": "Say hi"}, headers=edge.bearer("k"), timeout=5).json()
    assert doc == {"got": {"prompt": "Say hi"}, "type": "application/json", "auth": "Bearer k"}
    assert edge.bearer(None) == {}


def test_an_ipv6_pod_address_is_bracketed() -> None:
    assert edge.url("fd00::5", 8000, "/v1/models") == "http://[fd00::5]:8000/v1/models"


def test_the_canarys_and_prometheus_words_are_kept_and_the_cause_is_the_edges() -> None:
    port = closed_port()
    with pytest.raises(ValueError, match=r"^its /metrics did not answer \(URLError: ") as metrics:
        canary.read_page(("127.0.0.1", port), "vllm", timeout=5)
    assert isinstance(metrics.value.__cause__, edge.NoAnswer)
    with serving() as base:
        read = prometheus.reader(f"{base}/status/500")
        with pytest.raises(ValueError, match=r"^Prometheus answered HTTP 500 for its series$") as prom:
            read(("10.0.0.1", 8000), "vllm")
    assert isinstance(prom.value.__cause__, edge.Refused)
