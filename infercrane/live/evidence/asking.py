"""How an engine is asked what it serves: ``GET /health``, then ``GET /v1/models`` with the worker
key, through the one HTTP edge (:mod:`~infercrane.live.evidence.edge`); what counts as serving is
:mod:`~infercrane.live.evidence.served`. Live-cluster layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from infercrane.live.evidence import edge

ASK_TIMEOUT_SECONDS: Final = 3.0  # an engine answers /v1/models in milliseconds


@dataclass(frozen=True)
class Served:
    status: int  # the HTTP status (0: no answer)
    names: tuple[str, ...] = ()  # the model ids it serves, when it answered 200 with a model list
    error: str = ""  # why there is no answer, or why the answer is no model list
    health: int = 200  # what its /health answered (0: no answer): an engine warming up answers 503


def engine(address: str, port: int, key: str | None, *, timeout: float = ASK_TIMEOUT_SECONDS) -> Served:
    """``GET /health``, then ``GET /v1/models`` (with the worker key or without): both must answer
    for an engine to serve -- SGLang answers /v1/models 200 while /health says 503 until its
    warm-up ends."""
    try:
        health = edge.get(edge.url(address, port, "/health"), headers=edge.bearer(key), timeout=timeout).status
    except edge.Refused as exc:
        health = exc.status
    except edge.NoAnswer:
        health = 0
    answer = models(address, port, key, timeout=timeout)
    return Served(answer.status, answer.names, answer.error, health)


def models(address: str, port: int, key: str | None, *, timeout: float = ASK_TIMEOUT_SECONDS) -> Served:
    """``GET http://<address>:<port>/v1/models``, with the worker key or without."""
    try:
        answer = edge.get(edge.url(address, port, "/v1/models"), headers=edge.bearer(key), timeout=timeout)
        body = answer.json()
    except edge.Refused as exc:
        return Served(exc.status)
    except edge.Unanswered as exc:
        return Served(0, error=str(exc))
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return Served(answer.status, error="the answer is no model list (an OpenAI-compatible /v1/models)")
    return Served(answer.status, tuple(str(m.get("id")) for m in data if isinstance(m, dict)))
