"""The one edge to the pods and to a Prometheus: an HTTP GET or POST asked directly -- no redirect
followed (a 30x is the answer: following would send the worker key wherever it names), no proxy
from the environment -- whose failures are typed and keep their cause.

The serving evidence (``/health``, ``/v1/models``), the canary (``/metrics``, ``/v1/completions``)
and the canary's Prometheus source ask through :func:`get` and :func:`post`; the cluster's own edge
is :mod:`infercrane.live.client`. Live-cluster layer.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


class Unanswered(ValueError):
    """What was asked got no usable answer: :class:`NoAnswer` or :class:`Refused`, or an answer
    that is not what was asked for (raised by the caller that reads it, its cause kept)."""


class NoAnswer(Unanswered):
    """Nothing answered: the connection was refused, reset or timed out (the cause: the OSError)."""


class Refused(Unanswered):
    """An HTTP answer other than 2xx (30x included: never followed)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class _Unfollowed(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER: Final = urllib.request.build_opener(_Unfollowed(), urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; :class:`Unanswered` (its cause kept) when it is none."""
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise Unanswered(f"{exc.__class__.__name__}: {exc}") from exc


def url(address: str, port: int, path: str) -> str:
    """``http://<address>:<port><path>``, an IPv6 address in brackets: a pod asked directly."""
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{path}"


def bearer(key: str | None) -> dict[str, str]:
    """The worker key's header (none without a key): the only place the key is sent."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def get(target: str, *, timeout: float, headers: Mapping[str, str] | None = None) -> Answer:
    """``GET target``: its 2xx answer, else :class:`Refused` or :class:`NoAnswer`."""
    return _ask(urllib.request.Request(target, headers=dict(headers or {})), timeout)


def post(target: str, doc: Any, *, timeout: float, headers: Mapping[str, str] | None = None) -> Answer:
    """``POST target`` with ``doc`` as its JSON body: as :func:`get`."""
    head = {"Content-Type": "application/json"} | dict(headers or {})
    return _ask(urllib.request.Request(target, json.dumps(doc).encode(), head), timeout)


def _ask(request: urllib.request.Request, timeout: float) -> Answer:
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            return Answer(answer.status, answer.read())
    except urllib.error.HTTPError as exc:
        raise Refused(exc.code) from exc
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out; or no HTTP answer
        raise NoAnswer(f"{exc.__class__.__name__}: {exc}") from exc
