"""``scaling: external``: a Deployment's spec.replicas left to another manager (an HPA writes it
through /scale), so a deploy never conflicts with it nor resets it; with fixed scaling the same
write is a conflict the deploy refuses, naming the manager."""

from __future__ import annotations

import json

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType

from infercrane.core import naming
from tests.integration.conftest import Project, cli, replica, wait_for

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def scale_as_an_autoscaler(admin: Client, name: str, count: int) -> None:
    """What an HPA does: a write of the /scale subresource under its own field manager."""
    admin.patch(
        Deployment.Scale,
        name,
        {"spec": {"replicas": count}},
        namespace=NS,
        patch_type=PatchType.MERGE,
        field_manager="horizontal-pod-autoscaler",
    )


def test_external_scaling_leaves_the_replica_count_to_the_autoscaler_and_deploys_without_conflict(
    project: Project, admin: Client
) -> None:
    key = "it-hpa-r0"
    name = naming.object_name(key)
    project.stack("ithpa", [replica(key, scaling="external")])
    r = cli(project, "deploy", "--stack", "ithpa")
    assert r.returncode == 0, r.stderr[-2000:]
    scale_as_an_autoscaler(admin, name, 2)
    wait_for(lambda: (admin.get(Deployment, name, namespace=NS).status.availableReplicas or 0) == 2, "two pods available")

    project.stack("ithpa", [replica(key, scaling="external", modelRevision="b" * 40)])  # a new revision rolls
    r = cli(project, "deploy", "--stack", "ithpa")
    assert r.returncode == 0, r.stderr[-2000:]
    dep = admin.get(Deployment, name, namespace=NS)
    assert dep.spec.replicas == 2  # the autoscaler's count stands
    assert "b" * 40 in dep.spec.template.spec.containers[0].args
    ours = [m for m in dep.to_dict()["metadata"]["managedFields"] if m["manager"] == naming.FIELD_MANAGER]
    assert ours and not any('"f:replicas"' in json.dumps(m.get("fieldsV1")) for m in ours), ours  # not a field of ours
    assert cli(project, "destroy", "--stack", "ithpa").returncode == 0


def test_with_fixed_scaling_an_autoscalers_write_is_a_conflict_the_deploy_refuses(project: Project, admin: Client) -> None:
    key = "it-hpa-fixed-r0"
    name = naming.object_name(key)
    project.stack("ithpafixed", [replica(key)])
    assert cli(project, "deploy", "--stack", "ithpafixed").returncode == 0
    scale_as_an_autoscaler(admin, name, 2)
    r = cli(project, "deploy", "--stack", "ithpafixed")
    assert r.returncode == 1
    assert "horizontal-pod-autoscaler" in r.stderr and ".spec.replicas" in r.stderr, r.stderr[-2000:]
    assert cli(project, "destroy", "--stack", "ithpafixed").returncode == 0
