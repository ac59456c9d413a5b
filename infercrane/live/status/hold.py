"""A surge canary's hold: its old pod kept serving beside it until the verdict. Live-cluster layer.

A same-key update under a surge is its Deployment's own rolling update, and the Deployment
controller deletes the old pod as soon as the new one is *available* -- ready for the
Deployment's ``spec.minReadySeconds``. The hold is that field, set to :func:`seconds` (the bake
and a margin) by a field manager of its own (:data:`~infercrane.core.naming.HOLD_FIELD_MANAGER`,
server-side apply, force off) before the canary's template is applied: the canary's pod becomes
ready and serves (a Service routes by readiness), while the controller keeps the old pod, which
the bake reads as baseline. The hold ends by the same manager applying nothing (its field is then
removed: 0 again):

- on ACCEPT, with the template as it is: the canary's pod is available at once, the old one drains;
- on REJECT, only once the rollback has put the old template back: the old pod's ReplicaSet is the
  current one again, so the controller deletes the canary's pod and restarts nothing (released
  before, the canary's pod would be available and the old pod deleted -- one more model load);
- by any later wait of the Deployment that did not hold it itself (a rerun, a revert, plain
  ``pulumi up``): :class:`~infercrane.live.status.readiness.FleetWaiter` releases a hold it finds
  once the object is at the generation it waits for.

A hold left by a killed run ends by itself after :func:`seconds`: the controller then completes the
canary's rollout, and the stack's judging mark still says its release was never judged. A
``minReadySeconds`` another manager owns is never taken: the canary then rolls unheld, as it did
before holds were built, and the deploy says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from infercrane.core import naming
from infercrane.live.client import failures
from infercrane.live.client.api import Live

#: Past the bake, how long the hold lasts at most: the serving check, the golden requests (three
#: tries of up to 60 s each) and the verdict fit in it with room to spare.
MARGIN_SECONDS: Final = 600
FIELD: Final = "f:minReadySeconds"


def seconds(bake_seconds: int) -> int:
    """The hold of a canary that bakes ``bake_seconds``: its ``minReadySeconds``."""
    return bake_seconds + MARGIN_SECONDS


def holds(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` (a Deployment as listed) carries a hold of ours: our hold manager owns its
    ``spec.minReadySeconds``."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == naming.HOLD_FIELD_MANAGER and FIELD in ((entry.get("fieldsV1") or {}).get("f:spec") or {}):
            return True
    return False


def _body(name: str, spec: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}} | ({"spec": dict(spec)} if spec else {})


def hold(live: Live, name: str, bake_seconds: int) -> str:
    """Hold Deployment ``name``'s old pods until :func:`release`: "" held, else why not (it is not
    there -- a replica new or moving to a Deployment has no old pod --, or another manager owns
    its minReadySeconds). An API server that fails the request raises, as every write does."""
    from lightkube.resources.apps_v1 import Deployment

    try:
        live.get(Deployment, name, action=f"read Deployment/{name} to hold its old pod")
    except failures.NotFound:
        return "it has no Deployment yet, so no old pod to hold"
    try:
        live.apply(
            Deployment,
            name,
            _body(name, {"minReadySeconds": seconds(bake_seconds)}),
            field_manager=naming.HOLD_FIELD_MANAGER,
            action=f"hold the old pod of Deployment/{name} (spec.minReadySeconds)",
        )
    except failures.Conflict as exc:
        return f"its spec.minReadySeconds is another manager's ({str(exc).splitlines()[0]})"
    return ""


def release(live: Live, name: str) -> int:
    """End the hold on Deployment ``name``: the generation the change made (0: the object is gone)."""
    from lightkube.resources.apps_v1 import Deployment

    try:
        obj = live.apply(
            Deployment,
            name,
            _body(name, None),
            field_manager=naming.HOLD_FIELD_MANAGER,
            action=f"release the hold on Deployment/{name}",
        )
    except (failures.NotFound, failures.Invalid):  # gone meanwhile: an apply would have to create it
        return 0
    return int((obj.get("metadata") or {}).get("generation") or 0)
