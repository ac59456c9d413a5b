"""The read-only plan's action per replica: the full plan's rule, a recreated workload included."""

from __future__ import annotations

from infercrane.core.plan.actions import Action
from infercrane.engine.planning import _replica_action

MANIFESTS = [
    {"kind": "Deployment", "metadata": {"name": "r0"}},
    {"kind": "Service", "metadata": {"name": "r0"}},
]


def test_a_recreated_replica_whose_service_a_killed_run_left_unmade_is_replaced_not_created() -> None:
    """CI of stop 76: a surge killed between n0's Deployment and its Service, the release moved on;
    the deploy recreates n0 (its Deployment deleted, made again), the read-only plan said create."""
    live = {"Deployment/r0": Action.UPDATE, "Service/r0": Action.CREATE}
    assert _replica_action(MANIFESTS, live, recreate=True) is Action.REPLACE
    assert _replica_action(MANIFESTS, live) is Action.CREATE  # not recreated: its Service is made, its Deployment updated


def test_a_recreated_replica_replaces_only_a_workload_that_changes() -> None:
    assert _replica_action(MANIFESTS, {"Deployment/r0": Action.UPDATE}, recreate=True) is Action.REPLACE
    assert _replica_action(MANIFESTS, {"Service/r0": Action.UPDATE}, recreate=True) is Action.UPDATE
    assert _replica_action(MANIFESTS, {}, recreate=True) is Action.SAME
