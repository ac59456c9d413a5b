"""The program on the real engine against the local plane, deploying as the restricted identity."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod, Service

from infercrane.core import naming
from infercrane.core.errors import PreflightRefused
from tests.integration.conftest import Project, foreign_apply, get_or_none, kubectl, plain_pulumi, replica, wait_for

pytestmark = pytest.mark.integration


def managers_of(obj: Any) -> dict[str, dict[str, Any]]:
    return {m.manager: m for m in obj.metadata.managedFields or []}


def running_pods(admin: Client, name: str) -> list[Any]:
    pods = list(admin.list(Pod, namespace="infercrane-system", labels={naming.LABEL_INSTANCE: name}))
    return [p for p in pods if p.status and p.status.phase == "Running"] or []


@pytest.mark.qualification
def test_preview_creates_nothing_up_applies_as_our_manager_on_l40s_nodes(project: Project, admin: Client) -> None:
    key = "it-lifecycle-r0"
    name = naming.object_name(key)
    engine = project.stack("itlife", [replica(key)])

    preview = engine.preview()
    assert preview.change_summary.get("create", 0) >= 4  # component, provider, deployment, service (+ stack)
    assert get_or_none(admin, Deployment, name) is None
    assert get_or_none(admin, Service, name) is None

    up = engine.up()
    assert up.summary.result == "succeeded"
    dep = admin.get(Deployment, name, namespace="infercrane-system")
    ours = managers_of(dep)[naming.FIELD_MANAGER]
    assert ours.operation == "Apply"
    assert "f:spec" in ours.fieldsV1 and "f:replicas" in ours.fieldsV1["f:spec"]
    assert naming.FIELD_MANAGER in managers_of(admin.get(Service, name, namespace="infercrane-system"))

    pods = wait_for(lambda: running_pods(admin, name), "a Running pod")
    for pod in pods:
        node = admin.get(Node, pod.spec.nodeName)
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"

    again = engine.up()
    assert set(again.summary.resource_changes or {}) == {"same"}
    engine.destroy()


@pytest.mark.qualification
def test_foreign_manager_with_force_conflicts_is_refused_and_object_untouched(project: Project, admin: Client) -> None:
    key = "it-conflict-r0"
    name = naming.object_name(key)
    engine = project.stack("itconflict", [replica(key)])
    engine.up()
    foreign_apply(project.plane, name, 2)
    before = admin.get(Deployment, name, namespace="infercrane-system")
    assert before.spec.replicas == 2

    for op in (engine.preview, engine.up):
        with pytest.raises(PreflightRefused) as exc:
            op()
        text = str(exc.value)
        assert 'conflict with "foreign-owner"' in text and ".spec.replicas" in text
        assert f"Deployment infercrane-system/{name}" in text
        assert "InferCrane never forces a conflict" in text

    after = admin.get(Deployment, name, namespace="infercrane-system")
    assert after.metadata.generation == before.metadata.generation
    assert after.spec.replicas == 2


@pytest.mark.qualification
def test_plain_kubectl_server_side_edit_is_refused_not_silently_taken_over(project: Project, admin: Client) -> None:
    key = "it-kubectl-r0"
    name = naming.object_name(key)
    engine = project.stack("itkubectl", [replica(key)])
    engine.up()
    foreign_apply(project.plane, name, 3, manager=None)  # plain kubectl: manager "kubectl"
    before = admin.get(Deployment, name, namespace="infercrane-system")
    with pytest.raises(PreflightRefused) as exc:
        engine.up()
    assert 'conflict with "kubectl"' in str(exc.value) and ".spec.replicas" in str(exc.value)
    after = admin.get(Deployment, name, namespace="infercrane-system")
    assert (after.spec.replicas, after.metadata.generation) == (3, before.metadata.generation)


@pytest.mark.qualification
def test_existing_object_without_our_metadata_is_not_adopted(project: Project, admin: Client) -> None:
    key = "it-foreign-r0"
    name = naming.object_name(key)
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: infercrane-system
spec:
  replicas: 0
  selector: {{matchLabels: {{app: squatter}}}}
  template:
    metadata: {{labels: {{app: squatter}}}}
    spec:
      containers: [{{name: c, image: "busybox@sha256:{"d" * 64}"}}]
"""
    assert (
        kubectl(project.plane, "apply", "--server-side", "--field-manager=someone-else", "-f", "-", stdin=manifest).returncode
        == 0
    )
    before = admin.get(Deployment, name, namespace="infercrane-system")
    engine = project.stack("itforeign", [replica(key)])
    with pytest.raises(PreflightRefused) as exc:
        engine.preview()
    text = str(exc.value)
    assert f"Deployment infercrane-system/{name} exists but is not owned by this stack" in text
    assert "label app.kubernetes.io/managed-by is missing" in text
    with pytest.raises(PreflightRefused):
        engine.up()
    after = admin.get(Deployment, name, namespace="infercrane-system")
    assert after.metadata.generation == before.metadata.generation
    assert naming.FIELD_MANAGER not in managers_of(after)
    assert not (after.metadata.labels or {})
    assert get_or_none(admin, Service, name) is None
    admin.delete(Deployment, name, namespace="infercrane-system")


def test_plain_pulumi_cli_runs_the_program_and_its_preflight(project: Project, admin: Client) -> None:
    """`pulumi up` / `pulumi preview` from a shell (stand-in language host), not the Automation API."""
    key = "it-plain-r0"
    name = naming.object_name(key)
    project.stack("itplain", [replica(key)])
    pulumi = plain_pulumi(project, "itplain")

    assert pulumi("stack", "init").returncode == 0
    r = pulumi("up", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert naming.FIELD_MANAGER in managers_of(admin.get(Deployment, name, namespace="infercrane-system"))
    foreign_apply(project.plane, name, 2)
    r = pulumi("preview")
    assert r.returncode != 0
    assert "preflight refused the change; nothing was applied." in r.stdout
    assert 'conflict with "foreign-owner": .spec.replicas' in r.stdout
    kubectl(project.plane, "delete", "deployment", name, "-n", "infercrane-system")
    assert pulumi("destroy", "--yes", "--refresh").returncode == 0
