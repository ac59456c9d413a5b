"""The command's one connection to its cluster: :class:`Live`, the lightkube client bound to the
target it acts on. Each method is one request (or one per kind) and leaves only as the typed
errors of :mod:`infercrane.live.client.failures`, naming what it did -- the client's edge is here, so no
caller wraps a request and none can forget to (as fluxcd's ``ResourceManager`` and kopf's
``check_response`` keep it in one place). Live-cluster layer.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from lightkube import Client
from lightkube.core.resource import NamespacedResource
from lightkube.types import PatchType

from infercrane.core.model.target import KubernetesTarget
from infercrane.live.client import cluster
from infercrane.live.client.failures import request


class Live:
    """The lightkube ``client`` and the ``target`` (context, namespace) it acts on."""

    def __init__(self, client: Client, target: KubernetesTarget) -> None:
        self.client = client
        self.target = target

    @classmethod
    def connect(cls, target: KubernetesTarget, *, env: Mapping[str, str] | None = None) -> Live:
        """The one connection of a command to ``target`` (:func:`cluster.client`: a kubeconfig or
        context that is not there fails here, as ClusterError)."""
        return cls(cluster.client(target, env=env), target)

    @property
    def namespace(self) -> str:
        return self.target.namespace

    def at(self, namespace: str) -> Live:
        """The same connection acting on another namespace (a ``namespace`` switch's old one)."""
        return Live(self.client, self.target.model_copy(update={"namespace": namespace}))

    def list(
        self,
        res: Any,
        *,
        labels: Mapping[str, Any] | None = None,
        fields: Mapping[str, Any] | None = None,
        action: str | None = None,
        retry: bool = False,
        everywhere: bool = False,
    ) -> list[dict[str, Any]]:
        """Every object of ``res`` in the target namespace (cluster-wide for a cluster-scoped kind,
        or with ``everywhere``), as plain dicts; ``retry``: while the server answers 429/503
        (:func:`cluster.retrying`)."""
        namespaced = isinstance(res, type) and issubclass(res, NamespacedResource)
        scope: dict[str, Any] = {"namespace": "*" if everywhere else self.namespace} if namespaced else {}
        scope |= {"labels": labels} if labels is not None else {}
        scope |= {"fields": fields} if fields is not None else {}

        def listed() -> list[dict[str, Any]]:
            return [cluster.as_dict(o) for o in self.client.list(res, **scope)]

        with request(action or f"list {res.__name__.lower()}s", self.target):
            return cluster.retrying(listed) if retry else listed()

    def get(self, res: Any, name: str, *, action: str | None = None) -> dict[str, Any]:
        """One object of the target namespace (or a cluster-scoped one) by name."""
        namespaced = isinstance(res, type) and issubclass(res, NamespacedResource)
        scope = {"namespace": self.namespace} if namespaced else {}
        with request(action or f"read {res.__name__}/{name}", self.target):
            return cluster.as_dict(self.client.get(res, name, **scope))

    def merge_patch(self, res: Any, name: str, body: Mapping[str, Any], *, field_manager: str, action: str) -> dict[str, Any]:
        """A JSON merge patch of one object of the target namespace."""
        with request(action, self.target):
            obj = self.client.patch(
                res, name, dict(body), namespace=self.namespace, patch_type=PatchType.MERGE, field_manager=field_manager
            )
            return cluster.as_dict(obj)

    def apply(self, res: Any, name: str, body: Mapping[str, Any], *, field_manager: str, action: str) -> dict[str, Any]:
        """A server-side apply of ``body`` to one object of the target namespace as ``field_manager``,
        force off: a field another manager owns is a Conflict, never taken."""
        with request(action, self.target):
            obj = self.client.patch(
                res,
                name,
                dict(body),
                namespace=self.namespace,
                patch_type=PatchType.APPLY,
                field_manager=field_manager,
                force=False,
            )
            return cluster.as_dict(obj)

    def create(self, obj: Any, *, action: str) -> Any:
        """Create ``obj`` (a typed lightkube object; its answer as lightkube returns it)."""
        with request(action, self.target):
            return self.client.create(obj)

    def delete_exact(self, kind: str, name: str, uid: str, *, propagation: str = "Background") -> bool:
        """:func:`cluster.delete_exact` in the target namespace, retried while the server answers
        429/503: False when already gone; a :class:`~infercrane.live.client.failures.Conflict` when the
        uid no longer matches."""
        with request(f"delete {kind}/{name}", self.target):
            return cluster.retrying(
                lambda: cluster.delete_exact(self.client, kind, name, self.namespace, uid, propagation=propagation)
            )

    def dry_run(self, manifest: Mapping[str, Any], *, action: str) -> cluster.DryRun:
        """:func:`cluster.apply_strict_dry_run`, retried while the server answers 429/503."""
        with request(action, self.target):
            return cluster.retrying(lambda: cluster.apply_strict_dry_run(self.client, manifest))

    def by_name(
        self, kinds: Iterable[str], *, optional: Iterable[str] = (), refused: set[str] | None = None
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """:func:`cluster.live_by_name` in the target namespace."""
        return cluster.live_by_name(self.client, self.target, kinds, optional=optional, refused=refused)

    def list_cached(self, plural: str, *, action: str, fields: Mapping[str, str] | None = None) -> builtins.list[dict[str, Any]]:
        """Every object of core ``plural`` in the target namespace (or those ``fields`` select), from
        the API server's cache, as the JSON came (:func:`cluster.list_cached`): for a LIST of
        thousands made again and again."""
        with request(action, self.target):
            return cluster.list_cached(self.client, f"/api/v1/namespaces/{self.namespace}/{plural}", fields)

    def raw_get(self, path: str) -> dict[str, Any]:
        """GET a non-resource path (``/version``)."""
        with request(f"GET {path}", self.target):
            return cluster.raw_get(self.client, path)

    def prime_openapi_soon(self) -> None:
        """:func:`cluster.prime_openapi_soon`."""
        cluster.prime_openapi_soon(self.client)
