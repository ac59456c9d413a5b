"""destroy: delete exactly this stack's objects -- all of them -- then clear the Pulumi state.

pulumi-kubernetes deletes what its state lists, checks no ownership, and waits for each Service
deletion with its own informer (without ``watch`` on services, with relists: minutes at 100
replicas). Here, before ``pulumi destroy`` runs:

1. the state's objects are listed (one ``pulumi stack export``) and the namespace's live objects
   of our kinds (one LIST per kind);
2. a state object whose live namesake lacks this stack's exact ownership (replaced by a foreign
   object) is refused, named, left untouched and dropped from the state; an owned live object
   missing from the state (lost state, a killed update, a half-done key change) is deleted too;
   decoys (our label without our exact annotations, another stack's) are never touched;
3. every owned object is deleted in parallel, each with a ``uid`` precondition (only the object
   that was checked) and background propagation, then awaited with one LIST per kind per tick;
4. ``pulumi destroy`` then finds every object gone (404 is success in the provider) and only
   clears the state -- written once at the end (PULUMI_SKIP_CHECKPOINTS): an interrupted run
   leaves the old state, and repeating it is safe.

Operations layer.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from lightkube import ApiError, Client

from infercrane import cluster, naming, readiness
from infercrane import config as cfg
from infercrane.errors import ClusterError
from infercrane.stack import Engine

WORKERS: Final = 16
GONE_TIMEOUT_SECONDS: Final = 300.0
STATE_KINDS: Final = {
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:core/v1:Service": "Service",
    "kubernetes:serving.kserve.io/v1beta1:InferenceService": "InferenceService",
}


@dataclass
class DestroyResult:
    deleted: list[str] = field(default_factory=list)  # Kind/name, state objects
    orphans: list[str] = field(default_factory=list)  # Kind/name, owned but missing from state
    refused: list[str] = field(default_factory=list)  # Kind/name: why (foreign namesake)
    remaining: list[str] = field(default_factory=list)  # owned objects still present at the end


def state_objects(state: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(kind, name) -> urn`` of every Kubernetes object in a stack's state (``Engine.state``)."""
    out = {}
    for res in state.get("resources") or []:
        kind = STATE_KINDS.get(res.get("type", ""))
        if kind and res.get("id"):
            out[(kind, str(res["id"]).split("/")[-1])] = str(res["urn"])
    return out


def destroy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    client: Client,
    on_output: Callable[[str], None] | None = None,
) -> DestroyResult:
    t = config.kubernetes
    stack_id = naming.stack_identity(cfg.PROJECT, engine.stack_name)
    kinds = t.object_kinds
    state = state_objects(engine.state())
    live = cluster.live_by_name(client, t, set(kinds) | {k for k, _ in state})
    result = DestroyResult()
    targets: dict[tuple[str, str], str] = {}  # (kind, name) -> uid
    foreign_urns: list[str] = []
    for (kind, name), urn in sorted(state.items()):
        obj = live.get((kind, name))
        if obj is None:
            continue
        reasons = naming.not_owned(obj, namespace=t.namespace, stack=stack_id)
        if reasons:
            result.refused.append(f"{kind}/{name}: not owned by this stack ({'; '.join(reasons)})")
            foreign_urns.append(urn)
        else:
            targets[(kind, name)] = obj["metadata"]["uid"]
    for (kind, name), obj in sorted(live.items()):
        if (kind, name) not in state and kind in kinds and not naming.not_owned(obj, namespace=t.namespace, stack=stack_id):
            targets[(kind, name)] = obj["metadata"]["uid"]
            result.orphans.append(f"{kind}/{name}")

    def delete(item: tuple[tuple[str, str], str]) -> tuple[tuple[str, str], str | None]:
        (kind, name), uid = item
        try:
            cluster.delete_exact(client, kind, name, t.namespace, uid)
            return (kind, name), None
        except ApiError as exc:
            if exc.status.code == 409:  # the uid precondition failed: replaced since it was checked
                return (kind, name), "replaced by another object since it was checked; left untouched"
            return (kind, name), cluster.describe_api_error(exc, action=f"delete {kind}/{name}", target=t)
        except cluster.TRANSPORT_ERRORS as exc:
            return (kind, name), str(cluster.unreachable(exc, t))

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(delete, sorted(targets.items())))
    errors = [f"{k}/{n}: {why}" for (k, n), why in outcomes if why]
    if errors:
        raise ClusterError("destroy could not delete every owned object:\n" + "\n".join(f"- {e}" for e in errors))
    result.deleted = sorted(f"{k}/{n}" for (k, n) in targets if f"{k}/{n}" not in result.orphans)
    if on_output:
        on_output(f"deleted {len(targets)} owned object(s); waiting until they are gone")
    left = readiness.wait_gone(client, t, targets, timeout=GONE_TIMEOUT_SECONDS)
    if left:
        raise ClusterError(
            f"{len(left)} owned object(s) still present {GONE_TIMEOUT_SECONDS:.0f} s after deletion: {', '.join(left)}\n"
            "    fix: look for finalizers on them (`kubectl get -o yaml`), then run destroy again"
        )
    for urn in foreign_urns:
        engine.state_delete(urn)
    engine.destroy(on_output=on_output, skip_checkpoints=True)
    from infercrane.inventory import owned_objects

    result.remaining = owned_objects(client, config, engine.stack_name)
    return result
