"""A surge canary's hold (live.status.hold): its verdict while held, what marks an object as held,
how it is placed and released (server-side apply as its own manager, force off), and a wait that did
not place a hold releasing the one it finds -- a rollback, a rerun, a revert."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.core.exceptions import ApiError

from infercrane.core import naming
from infercrane.live.client.api import Live
from infercrane.live.status import hold
from infercrane.live.status.readiness import FleetWaiter
from infercrane.live.status.verdicts import deployment_verdict
from tests.unit.live.status.test_readiness import Wrapped, dep, run, target


def held_mid_surge(ready: int, *, updated: int = 1) -> dict[str, Any]:
    """A one-pod Deployment mid-surge under a hold: its old pod and the canary's, neither counted
    available beyond the old one."""
    obj = dep(2, 2, replicas=2, updated=updated, available=1)
    obj["status"]["readyReplicas"] = ready
    return obj


@pytest.mark.parametrize(
    ("obj", "state", "reason"),
    [
        (held_mid_surge(2), "ready", ""),
        (held_mid_surge(1), "waiting", "1 of 2 pod(s) ready (the canary's beside its held old pod)"),
        (held_mid_surge(1, updated=0), "waiting", "no replica updated yet (its old pod held)"),
    ],
)
def test_a_held_canary_is_ready_once_its_pod_is_ready_beside_the_old_one(obj: dict[str, Any], state: str, reason: str) -> None:
    verdict = deployment_verdict(obj, 2, held=True)
    assert (verdict.state, verdict.reason) == (state, reason)


def test_unheld_the_same_deployment_waits_for_its_old_pod_to_go() -> None:
    verdict = deployment_verdict(held_mid_surge(2), 2)
    assert (verdict.state, verdict.reason) == ("waiting", "1 old replica(s) pending termination")


def managed(*entries: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    obj = dep(2, 2)
    obj["metadata"]["managedFields"] = [{"manager": m, "operation": "Apply", "fieldsV1": f} for m, f in entries]
    return obj


def test_only_our_hold_managers_min_ready_seconds_is_a_hold() -> None:
    ours = {"f:spec": {"f:minReadySeconds": {}}}
    assert hold.holds(managed((naming.HOLD_FIELD_MANAGER, ours)))
    assert not hold.holds(managed(("kubectl", ours)))
    assert not hold.holds(managed((naming.HOLD_FIELD_MANAGER, {"f:metadata": {}})))
    assert not hold.holds(dep(2, 2))
    assert hold.seconds(300) == 300 + hold.MARGIN_SECONDS


class Recording:
    """A client that records each patch (type, manager, force, body) and answers as told."""

    def __init__(self, *, get: Exception | None = None, patch: Exception | None = None, generation: int = 7) -> None:
        self.patches: list[tuple[str, str | None, bool, dict[str, Any]]] = []
        self._get, self._patch, self._generation = get, patch, generation

    def get(self, res: Any, name: str, namespace: str | None = None) -> Wrapped:
        if self._get is not None:
            raise self._get
        return Wrapped(dep(1, 1))

    def patch(self, res: Any, name: str, obj: Any, *, namespace: str | None = None, patch_type: Any = None,
              field_manager: str | None = None, force: bool = False) -> Wrapped:  # fmt: skip
        self.patches.append((str(patch_type.value), field_manager, force, obj))
        if self._patch is not None:
            raise self._patch
        return Wrapped(dep(self._generation, self._generation))


def api_error(code: int, message: str) -> ApiError:
    from unittest.mock import Mock

    response = Mock()
    response.json.return_value = {"code": code, "message": message, "reason": "", "status": "Failure"}
    response.status_code = code
    return ApiError(request=Mock(), response=response)


def test_a_hold_is_a_server_side_apply_of_min_ready_seconds_as_its_own_manager_never_forced() -> None:
    client = Recording()
    assert hold.hold(Live(client, target()), "infercrane-a", 15) == ""  # type: ignore[arg-type]
    ((kind, manager, force, body),) = client.patches
    assert (kind, manager, force) == ("application/apply-patch+yaml", naming.HOLD_FIELD_MANAGER, False)
    assert body == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infercrane-a"},
        "spec": {"minReadySeconds": 15 + hold.MARGIN_SECONDS},
    }


def test_a_hold_is_released_by_applying_nothing_and_the_wait_follows_its_generation() -> None:
    client = Recording(generation=9)
    assert hold.release(Live(client, target()), "infercrane-a") == 9  # type: ignore[arg-type]
    ((_, manager, force, body),) = client.patches
    assert manager == naming.HOLD_FIELD_MANAGER and not force and "spec" not in body


def test_no_hold_on_a_deployment_not_there_yet_nor_on_a_field_another_manager_owns() -> None:
    gone = Recording(get=api_error(404, 'deployments.apps "infercrane-a" not found'))
    assert hold.hold(Live(gone, target()), "infercrane-a", 15) == "it has no Deployment yet, so no old pod to hold"  # type: ignore[arg-type]
    assert gone.patches == [], "never an apply that could create it"
    owned = Recording(patch=api_error(409, 'Apply failed with 1 conflict: conflict with "kubectl-edit": .spec.minReadySeconds'))
    why = hold.hold(Live(owned, target()), "infercrane-a", 15)  # type: ignore[arg-type]
    assert why.startswith("its spec.minReadySeconds is another manager's (") and "kubectl-edit" in why


class HeldThenReleased:
    """A LIST that shows the object held at the applied generation until the release's apply, then
    its rollout completed at the generation the release made."""

    def __init__(self) -> None:
        self.released = False
        self.patches: list[str | None] = []

    def list(self, res: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> list[Any]:
        if self.released:
            return [Wrapped(dep(3, 3))]
        obj = held_mid_surge(2)
        obj["metadata"]["managedFields"] = [
            {"manager": naming.HOLD_FIELD_MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {"f:minReadySeconds": {}}}}
        ]
        return [Wrapped(obj)]

    def patch(self, res: Any, name: str, obj: Any, **kw: Any) -> Wrapped:
        self.patches.append(kw.get("field_manager"))
        self.released = True
        return Wrapped(dep(3, 2))


def test_a_wait_that_did_not_hold_releases_the_hold_it_finds_and_waits_for_the_rollout_it_lets_go_on() -> None:
    client = HeldThenReleased()
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]
    assert run(waiter.wait("infercrane-x", 2, 60)).state == "ready"
    assert client.patches == [naming.HOLD_FIELD_MANAGER]


def test_a_held_wait_keeps_the_hold() -> None:
    client = HeldThenReleased()
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001)  # type: ignore[arg-type]
    assert run(waiter.wait("infercrane-x", 2, 60, held=True)).state == "ready"
    assert client.patches == [] and not client.released


def test_a_hold_is_released_only_once_the_object_is_at_the_generation_waited_for() -> None:
    """A rollback's wait: the hold goes only once the old template is back (generation 2 here), never
    on the object as it was before the apply -- released then, the canary's pod would be available
    and the old one deleted."""
    client = HeldThenReleased()
    waiter = FleetWaiter(Live(client, target()), "Deployment", poll_seconds=0.001, clock=iter(range(0, 10**6, 30)).__next__)  # type: ignore[arg-type]
    verdict = run(waiter.wait("infercrane-x", 5, 60))
    assert verdict.state == "failed" and client.patches == []
