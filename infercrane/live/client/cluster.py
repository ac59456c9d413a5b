"""The one Kubernetes client factory: explicit kubeconfig context and namespace, always.

Live-cluster layer. Never uses or changes the kubeconfig's current-context; never reads a Secret.
Every failure becomes a :class:`~infercrane.core.errors.ClusterError` that says what to do next:
a failed request, one of the types of :mod:`infercrane.live.client.failures`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx2
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource

from infercrane.core import naming
from infercrane.core.errors import ClusterError
from infercrane.core.model.kinds import INFERENCE_SERVICE
from infercrane.core.model.target import KubernetesTarget
from infercrane.live.client import kubeconfigs
from infercrane.live.client.failures import RETRYABLE_CODES, Forbidden, NotFound, request, status_code

T = TypeVar("T")
REQUEST_TIMEOUT_SECONDS: Final = 10.0  # an unreachable cluster fails fast instead of hanging

InferenceService = create_namespaced_resource(
    INFERENCE_SERVICE.group, INFERENCE_SERVICE.version, INFERENCE_SERVICE.name, INFERENCE_SERVICE.plural
)


def client(target: KubernetesTarget, *, env: Mapping[str, str] | None = None) -> Client:
    """A lightkube client bound to ``target.context`` and ``target.namespace`` (field manager ours)."""
    paths = kubeconfigs.paths(target, env)
    shown = os.pathsep.join(str(p) for p in paths)
    if not any(p.is_file() for p in paths):
        raise ClusterError(
            f"kubeconfig {shown} does not exist (context {target.context!r}).",
            fix="set KUBECONFIG or infercrane:kubernetes.kubeconfig; for the local plane run "
            '`infercrane local start` and `eval "$(infercrane local env)"`',
        )
    try:
        kc = KubeConfig.from_dict(kubeconfigs.merged(paths))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the user's file
        raise ClusterError(f"kubeconfig {shown} cannot be read: {exc}") from exc
    if target.context not in kc.contexts:
        known = ", ".join(sorted(kc.contexts)) or "none"
        raise ClusterError(
            f"context {target.context!r} is not in kubeconfig {shown} (contexts: {known}).",
            fix="set infercrane:kubernetes.context to one of them; InferCrane never uses the current-context",
        )
    single = kc.get(context_name=target.context)
    return Client(
        config=single,
        namespace=target.namespace,
        field_manager=naming.FIELD_MANAGER,
        timeout=httpx2.Timeout(REQUEST_TIMEOUT_SECONDS),
        trust_env=False,
    )


def resource_for(manifest: Mapping[str, Any]) -> Any:
    """The lightkube resource class of a rendered manifest's kind."""
    from lightkube.resources.apps_v1 import Deployment
    from lightkube.resources.core_v1 import Pod, Service
    from lightkube.resources.resource_v1 import ResourceClaimTemplate

    return {
        "Deployment": Deployment,
        "Pod": Pod,  # a prefetch pod (live.status.prefetch): the only pod InferCrane creates or deletes
        "Service": Service,
        "InferenceService": InferenceService,
        "ResourceClaimTemplate": ResourceClaimTemplate,
    }[manifest["kind"]]


def raw_get(client: Client, path: str) -> dict[str, Any]:
    """GET a non-resource path (``/version``). lightkube has no public call for these; this uses
    its configured HTTP client (same TLS, credentials and timeout)."""
    resp = client._client._client.get(path)
    if resp.status_code >= 400:
        raise ClusterError(f"GET {path}: HTTP {resp.status_code}")
    return dict(resp.json())


def list_cached(client: Client, path: str, fields: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """LIST a collection (``/api/v1/namespaces/<ns>/events``) as the API server's watch cache has
    it (``resourceVersion=0``: no read of etcd), its items as the JSON came -- no typed object per
    item, which costs more than the request itself for thousands of them; with ``fields``, only the
    items they select (a field selector, filtered in the cache). A refusal or error status raises
    ``HTTPStatusError`` (typed at the edge, :func:`failures.request`)."""
    params = {"resourceVersion": "0"} | ({"fieldSelector": ",".join(f"{k}={v}" for k, v in fields.items())} if fields else {})
    resp = client._client._client.get(path, params=params)
    resp.raise_for_status()
    return list(resp.json().get("items") or [])


#: The form of the OpenAPI document the Kubernetes provider reads when it is configured.
OPENAPI_V2: Final = ("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")


def prime_openapi(client: Client) -> None:
    """Ask the API server for its OpenAPI document and drop the answer, so that the provider,
    which reads it while the engine configures it (``pulumi up``'s first step), finds it built.
    The server builds the document on the first request after a start or a CRD change -- 0.9 s
    on the local plane with KServe's CRDs -- and keeps it: this moves that build beside the
    deploy's own preparation. Best effort: any failure (a Role without the discovery paths, a
    timeout) is the provider's to report, not this call's."""
    path, accept = OPENAPI_V2
    try:
        with client._client._client.stream("GET", path, headers={"Accept": accept}) as resp:
            for _ in resp.iter_raw():
                pass
    except Exception:  # noqa: BLE001, S110 - an optimization only; the provider reports real failures
        pass


def prime_openapi_soon(client: Client) -> None:
    """:func:`prime_openapi` on one daemon thread, while the command renders and runs its
    preflight; nothing waits for it."""
    import threading

    threading.Thread(target=prime_openapi, args=(client,), name="prime-openapi", daemon=True).start()


def apply_strict_dry_run(client: Client, manifest: Mapping[str, Any]) -> DryRun:
    """Server-side apply as a dry run, as our field manager, force off, ``fieldValidation=Strict``.

    The equivalent of ``kubectl apply --server-side --dry-run=server --validate=strict
    --field-manager=infercrane-provider-v1`` (no --force-conflicts). lightkube's ``apply`` has no
    field-validation parameter, so this goes through its request layer with the same client.
    Raises ApiError: 409 for a conflict (causes name the other manager and field), 400/422 for
    an unknown or duplicate field (the message names it). Returns the object as it would be and
    the server's ``Warning`` headers (Pod Security admission speaks only through them for a
    workload: ``would violate PodSecurity "restricted:latest": …``)."""
    meta = manifest["metadata"]
    gc = client._client
    br = gc.prepare_request(
        "patch",
        res=resource_for(manifest),
        name=meta["name"],
        namespace=meta.get("namespace"),
        obj=dict(manifest),
        headers={"Content-Type": "application/apply-patch+yaml"},
        params={"fieldManager": naming.FIELD_MANAGER, "force": "false", "dryRun": "All", "fieldValidation": "Strict"},
    )
    resp = gc.send(gc.build_adapter_request(br))
    obj = gc.handle_response("patch", resp, br)
    return DryRun(as_dict(obj), tuple(warning_texts(resp.headers.get_list("warning"))))


@dataclass(frozen=True)
class DryRun:
    """What a strict server-side dry run answered: the object as it would be, and the warnings."""

    obj: dict[str, Any]
    warnings: tuple[str, ...] = ()


def warning_texts(headers: Iterable[str]) -> Iterator[str]:
    """The text of each RFC 7234 ``Warning`` header the API server sent (``299 - "text"``)."""
    for h in headers:
        m = re.match(r'^\d{3} \S+ "(.*)"', h)
        yield m.group(1).replace('\\"', '"') if m else h


def as_dict(obj: Any) -> dict[str, Any]:
    """A lightkube object (typed resource or generic) as a plain dict."""
    return dict(obj.to_dict() if hasattr(obj, "to_dict") else obj)


def delete_exact(client: Client, kind: str, name: str, namespace: str, uid: str, *, propagation: str = "Background") -> bool:
    """DELETE one object only if it is still the object we checked (``preconditions.uid``), with
    background propagation by default (the garbage collector removes its ReplicaSets/Pods, as
    kubectl does) or ``Foreground`` (the object stays until they are gone: its pods drained).
    Returns False when it is already gone; raises ApiError 409 when the uid no longer matches."""
    import json

    gc = client._client
    br = gc.prepare_request("delete", res=resource_for({"kind": kind}), name=name, namespace=namespace)
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation, "preconditions": {"uid": uid}}
    req = gc._client.build_request("DELETE", br.url, content=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = gc.send(req)
    if resp.status_code == 404:
        return False
    gc.raise_for_status(resp)  # type: ignore[no-untyped-call]
    return True


def live_by_name(
    client: Client,
    target: KubernetesTarget,
    kinds: Iterable[str],
    *,
    optional: Iterable[str] = (),
    refused: set[str] | None = None,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of ``kinds`` in the target namespace -- ours or not, a foreign one may carry our
    name -- keyed by ``(kind, name)``: one LIST per kind, the kinds at once, each retried while the
    server says 429/503. A kind the server does not serve (no KServe) has no objects, and neither
    has an ``optional`` kind this identity may not list (added to ``refused``, when given). Other
    failures: ClusterError (the first kind's, in name order, when several fail)."""
    maybe = set(optional) - set(kinds)

    def listed(kind: str) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        res = resource_for({"kind": kind})
        try:
            with request(f"list {kind}s in namespace {target.namespace}", target):
                items = retrying(lambda: list(client.list(res, namespace=target.namespace)))
        except NotFound:
            return []
        except Forbidden:
            if kind in maybe:
                if refused is not None:
                    refused.add(kind)
                return []
            raise
        return [((kind, raw["metadata"]["name"]), raw) for raw in map(as_dict, items)]

    every = sorted(set(kinds) | maybe)
    with ThreadPoolExecutor(max_workers=len(every) or 1) as pool:
        return dict(pair for found in pool.map(listed, every) for pair in found)


#: Requests in flight at once (the preflight's dry runs, destroy's DELETEs): enough to hide the
#: latency, few enough not to trip the API server's priority and fairness limits.
CONCURRENT_REQUESTS: Final = 16


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from (httpx2 -> httpcore2 -> the OS or TLS error)."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def retrying(call: Callable[[], T], *, attempts: int = 6, delay: float = 0.25) -> T:
    """``call()``, retried with doubling delays (about 8 s in all) while the API server answers
    429/503 -- it says "come back shortly" (after a CRD update its storage re-initializes) -- or
    while a TLS handshake fails (it sends no request, so repeating it is always safe; seen once
    under load on 2 shared cores). A refused connection -- nothing listens there -- and a
    certificate that does not verify fail at once."""
    import time

    for attempt in range(attempts):
        try:
            return call()
        except (ApiError, httpx2.HTTPStatusError) as exc:  # with a Status body or without (APF's 429)
            if status_code(exc) not in RETRYABLE_CODES or attempt == attempts - 1:
                raise
            time.sleep(delay * 2**attempt)
        except httpx2.ConnectError as exc:
            import ssl

            final = any(isinstance(c, ssl.SSLCertVerificationError | ConnectionRefusedError) for c in _causes(exc))
            if attempt == attempts - 1 or final:
                raise
            time.sleep(delay * 2**attempt)
    raise AssertionError("unreachable")
