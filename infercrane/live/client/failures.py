"""What a failed request to the API server means, decided once, at the client's edge.

Every call to the cluster runs inside :func:`request`, which turns lightkube's ``ApiError`` and
httpx's transport errors into one small hierarchy -- :class:`Forbidden`, :class:`NotFound`,
:class:`Conflict`, :class:`Invalid`, :class:`Unavailable`, :class:`Unreachable` -- each a
:class:`~infercrane.core.errors.ClusterError` whose message names the action, the identity and the
next step. Callers branch on these types, never on status codes or a message's words (as kopf's
``check_response`` does). Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import httpx2
from lightkube import ApiError

from infercrane.core.errors import ClusterError, with_fix
from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE, bind_fix
from infercrane.core.model.target import KubernetesTarget

TRANSPORT_ERRORS: Final = (httpx2.TransportError,)

#: Strict field validation's words: server-side apply reports an undeclared field as HTTP 500
#: ("failed to create typed patch object ...: field not declared in schema"), other paths as 400/422.
VALIDATION_MARKERS: Final = ("field not declared in schema", "unknown field", "duplicate field", "strict decoding error")

RETRYABLE_CODES: Final = (429, 503)  # throttled, or storage (re)initializing after a CRD change
#: What a wait keeps waiting through (one LIST per tick): the retryable answers and the server's
#: own transient failures, since the next tick asks again anyway.
TRANSIENT_CODES: Final = (*RETRYABLE_CODES, 500, 502, 504)


class LiveError(ClusterError):
    """A request the API server refused or could not answer. ``api``: the server's answer (None
    when no answer came); ``code``: its HTTP status; ``fix``: the next step, when one is known."""

    def __init__(self, message: str, *, api: ApiError | None = None, code: int | None = None, fix: str | None = None) -> None:
        self.api = api
        self.code = api.status.code if api is not None else code
        super().__init__(message, fix=fix)


class Forbidden(LiveError):
    """403 or 401: this identity may not do it (or its credentials were rejected)."""


class NotFound(LiveError):
    """404: the object, its namespace, or the kind itself (no CRD served) is not there."""


class Conflict(LiveError):
    """409: another field manager owns a field, or a precondition (uid) no longer holds."""


class Invalid(LiveError):
    """The object was refused as written: strict field validation or a 422."""


class Unavailable(LiveError):
    """The server answered but could not serve it now (429, 5xx): asking again may work."""


class Unreachable(LiveError):
    """No answer at all: connection refused, TLS, timeout."""


def describe_api_error(exc: ApiError, *, action: str, target: KubernetesTarget) -> str:
    """One line for an API error, with the next step for the common codes."""
    return describe(exc.status.code, exc.status.message or str(exc), action=action, target=target)


def describe(code: int | None, msg: str, *, action: str, target: KubernetesTarget) -> str:
    """:func:`explain`, rendered in the one message shape (what, then ``fix:``)."""
    return with_fix(*explain(code, msg, action=action, target=target))


def explain(code: int | None, msg: str, *, action: str, target: KubernetesTarget) -> tuple[str, str | None]:
    """What the API server's answer ``code`` saying ``msg`` means for ``action``, and the next
    step for the common codes (None: none is known)."""
    if code == 403:
        return f"{action}: forbidden for the identity of context {target.context!r}: {msg}", bind_fix(msg)
    if code == 401:
        return f"{action}: the credentials of context {target.context!r} were rejected: {msg}", None
    if code == 404 and "namespaces" in msg:
        return (
            f"{action}: namespace {target.namespace!r} does not exist",
            "kubectl apply -f deploy/kubernetes/base/namespace.yaml (review it first)",
        )
    if code == 404 and "could not find the requested resource" in msg:
        if RESOURCE_CLAIM_TEMPLATE.name in action:
            fix = "this cluster does not serve resource.k8s.io/v1 (DRA, Kubernetes 1.34+): set gpuAllocation: label"
        else:
            fix = "for InferenceService install KServe (Standard mode) first, or set workloadApi: deployment"
        return f"{action}: the API server does not serve this kind ({msg})", fix
    return f"{action}: {msg} (HTTP {code})", None


def unreachable(exc: Exception, target: KubernetesTarget) -> Unreachable:
    return Unreachable(
        f"cannot reach the Kubernetes API of context {target.context!r}: {exc.__class__.__name__}: {exc}",
        fix="check the cluster is up and the context is right (`infercrane doctor --kubernetes`);"
        " for the local plane: `infercrane local status`",
    )


def typed(exc: ApiError, *, action: str, target: KubernetesTarget) -> LiveError:
    """The API server's answer as the type a caller branches on, with its message."""
    code = exc.status.code or 0
    message, fix = explain(exc.status.code, exc.status.message or str(exc), action=action, target=target)
    return _kind(code, exc.status.message or "")(message, api=exc, fix=fix)


def typed_plain(exc: httpx2.HTTPStatusError, *, action: str, target: KubernetesTarget) -> LiveError:
    """An answer without a Kubernetes ``Status`` body -- API Priority and Fairness rejects with a
    plain-text 429, a proxy in front of the server answers 502/503 in its own words -- typed by
    its HTTP status like any other (lightkube raises these as httpx's error, not ``ApiError``)."""
    code = exc.response.status_code
    words = exc.response.text.strip().splitlines()
    msg = words[0] if words else exc.response.reason_phrase
    message, fix = explain(code, msg, action=action, target=target)
    return _kind(code, msg)(message, code=code, fix=fix)


def _kind(code: int, msg: str) -> type[LiveError]:
    if code in (401, 403):
        return Forbidden
    if code == 404:
        return NotFound
    if code == 409:
        return Conflict
    if code == 422 or any(m in msg for m in VALIDATION_MARKERS):
        return Invalid
    if code in TRANSIENT_CODES:
        return Unavailable
    return LiveError


def status_code(exc: ApiError | httpx2.HTTPStatusError) -> int | None:
    """The HTTP status of an answer, with or without a ``Status`` body."""
    return exc.status.code if isinstance(exc, ApiError) else exc.response.status_code


@contextmanager
def request(action: str, target: KubernetesTarget) -> Iterator[None]:
    """The client's edge: whatever fails inside leaves as a :class:`LiveError` naming ``action``."""
    try:
        yield
    except ApiError as exc:
        raise typed(exc, action=action, target=target) from exc
    except httpx2.HTTPStatusError as exc:
        raise typed_plain(exc, action=action, target=target) from exc
    except TRANSPORT_ERRORS as exc:
        raise unreachable(exc, target) from exc
