"""The live preflight, run by the program before any resource is registered (preview and up).

(a) A live object with our target name but without our exact ownership metadata is refused and
left untouched (pulumi-kubernetes would adopt it). (b) Every object is applied server-side as a
dry run, as ``infercrane-provider-v1`` with force off; every conflict is collected with the other
manager and the field path (pulumi-kubernetes would silently take over ``kubectl``'s fields).
All problems are reported together; nothing is mutated. Live-cluster layer.
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, codecs

from infercrane import cluster, naming
from infercrane.config import InferCraneConfig
from infercrane.errors import ClusterError, PreflightRefused


def _where(m: dict[str, Any]) -> str:
    meta = m["metadata"]
    return f"{m['kind']} {meta['namespace']}/{meta['name']}"


def conflict_lines(manifest: dict[str, Any], exc: ApiError) -> list[str]:
    """``Kind ns/name: conflict with "manager" using api: .field`` for each cause of a 409."""
    details = exc.status.details
    causes = (details.causes if details else None) or []
    lines = [
        f"{_where(manifest)}: {c.message}" + (f": {c.field}" if c.field and c.field not in (c.message or "") else "")
        for c in causes
        if c.message
    ]
    return lines or [f"{_where(manifest)}: {exc.status.message}"]


def run(config: InferCraneConfig, manifests: list[dict[str, Any]], stack_id: str, client: Any = None) -> None:
    """Raise PreflightRefused (ownership/conflicts) or ClusterError; return None when all is clear."""
    target = config.kubernetes
    client = client or cluster.client(target)
    ownership: list[str] = []
    conflicts: list[str] = []
    errors: list[str] = []
    for m in manifests:
        res = cluster.resource_for(m)
        name = m["metadata"]["name"]
        key = m["metadata"]["annotations"][naming.ANNOTATION_KEY]
        try:
            live = client.get(res, name, namespace=target.namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                errors.append(cluster.describe_api_error(exc, action=f"read {_where(m)}", target=target))
                continue
            live = None
        except cluster.TRANSPORT_ERRORS as exc:
            raise cluster.unreachable(exc, target) from None
        if live is not None:
            reasons = naming.ownership_mismatches(
                live.to_dict() if hasattr(live, "to_dict") else dict(live),
                key=key,
                namespace=target.namespace,
                stack=stack_id,
            )
            if reasons:
                ownership.append(f"{_where(m)} exists but is not owned by this stack: {'; '.join(reasons)}")
                continue
        try:
            client.apply(codecs.from_dict(m), field_manager=naming.FIELD_MANAGER, force=False, dry_run=True)
        except ApiError as exc:
            if exc.status.code == 409:
                conflicts += conflict_lines(m, exc)
            else:
                errors.append(cluster.describe_api_error(exc, action=f"server-side dry-run of {_where(m)}", target=target))
        except cluster.TRANSPORT_ERRORS as exc:
            raise cluster.unreachable(exc, target) from None
    if errors:
        raise ClusterError("preflight could not check the cluster; nothing was applied:\n" + "\n".join(f"- {e}" for e in errors))
    if ownership or conflicts:
        raise PreflightRefused(ownership, conflicts)
