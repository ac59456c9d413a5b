"""takeover: bring objects the original InferCrane adapter created under a stack, with no restart.

The original adapter's objects carry the seed's ownership -- ``managed-by=infercrane``, the
key-hash label, the key and provider-contract annotations, in the namespace -- but no stack
annotation, so the preflight refuses them (it never adopts) and the only other way in would be
delete-and-recreate: downtime on scarce GPUs. ``takeover`` checks, for every replica of the
stack, that each live object carries exactly the seed's ownership for that replica's key and no
other stack's, and only then adds this stack's annotation with a merge patch as field manager
``infercrane-takeover``, guarded by the object's ``resourceVersion`` (an object changed since the
check is refused). Metadata only: the pod template is untouched, nothing restarts. The next
``deploy`` finds objects this stack owns and applies to them with the field manager the original
adapter used (no conflict); it rolls pods only where the rendered template differs.

Anything else -- a foreign object, another stack's, a partial match -- is refused with the reason,
and then nothing at all is patched. Live-cluster layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.errors import TakeoverRefused, bullets
from infercrane.core.model.config import InferCraneConfig
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live

TAKEOVER_MANAGER: Final = "infercrane-takeover"
MISSING_STACK: Final = f"annotation {naming.ANNOTATION_STACK} is missing"


@dataclass
class TakeoverResult:
    taken: list[str] = field(default_factory=list)  # Kind/name now carrying this stack's annotation
    already: list[str] = field(default_factory=list)  # already this stack's
    missing: list[str] = field(default_factory=list)  # not in the cluster (deploy creates them)


def takeover(config: InferCraneConfig, live: Live, stack: str, *, dry_run: bool = False) -> TakeoverResult:
    t = config.kubernetes
    stack_id = naming.stack_id(stack)
    kinds = t.object_kinds
    result = TakeoverResult()
    refused: list[str] = []
    candidates: list[tuple[str, str, dict[str, Any]]] = []
    for r in config.replicas:
        name = naming.object_name(r.key)
        for kind in kinds:
            ref = f"{kind}/{name}"
            try:
                obj = live.get(cluster.resource_for({"kind": kind}), name, action=f"read {ref}")
            except failures.NotFound:
                result.missing.append(ref)
                continue
            except failures.Unreachable:
                raise
            except failures.LiveError as exc:
                raise TakeoverRefused(str(exc)) from exc
            reasons = naming.ownership_mismatches(obj, key=r.key, namespace=t.namespace, stack=stack_id)
            if not reasons:
                result.already.append(ref)
            elif reasons == [MISSING_STACK]:
                candidates.append((kind, name, obj))
            else:
                refused.append(f"{ref} (replica {r.key}): {'; '.join(reasons)}")
    if refused:
        raise TakeoverRefused(
            "takeover refused; nothing was changed. These objects are not exactly the original adapter's "
            "for their replica key:\n" + bullets(refused),
            fix="InferCrane never adopts an object it does not own; rename or delete these yourself, or change the replica keys",
        )
    for kind, name, obj in candidates:
        ref = f"{kind}/{name}"
        if dry_run:
            result.taken.append(ref)
            continue
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "annotations": {naming.ANNOTATION_STACK: stack_id},
            }
        }
        try:
            live.merge_patch(
                cluster.resource_for({"kind": kind}), name, patch, field_manager=TAKEOVER_MANAGER, action=f"annotate {ref}"
            )
        except failures.Conflict as exc:
            raise TakeoverRefused(
                f"{ref} changed while it was being taken over; objects taken so far: {', '.join(result.taken) or 'none'}.",
                fix="run takeover again (it re-checks every object)",
            ) from exc
        except failures.Unreachable:
            raise
        except failures.LiveError as exc:
            raise TakeoverRefused(str(exc)) from exc
        result.taken.append(ref)
    return result
