"""KServe mode on the real KServe controller (the pinned release's manager, official CRDs and
webhooks, Standard mode) on the local plane, deploying as the restricted identity bound to exactly
the shipped Roles: InferenceService to Ready on the right GPU node, waited for by ``pulumi up``
(plain and via the CLI), inspected, refused with KServe's and the scheduler's reasons when no node
carries the GPU, and destroyed with KServe's children."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod, Service

from infercrane.core import naming
from infercrane.live.client.cluster import InferenceService
from infercrane.live.status.verdicts import inference_service_verdict
from tests.integration.conftest import Project, get_or_none, plain_pulumi, replica, wait_for
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def _isvc(admin: Client, name: str) -> dict[str, object]:
    obj = admin.get(InferenceService, name, namespace=NS)
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def test_an_inference_service_is_reconciled_by_kserve_to_ready_on_the_requested_gpu_and_destroyed_with_its_children(
    project: Project, admin: Client
) -> None:
    key = "it-kserve-r0"
    name = naming.object_name(key)
    project.stack("itkserve", [replica(key)], workloadApi="kserve")

    r = cli(project, "deploy", "--stack", "itkserve")
    assert r.returncode == 0, r.stderr[-3000:]
    # `deploy` returned: KServe has already reported Ready for the applied generation.
    isvc = _isvc(admin, name)
    assert inference_service_verdict(isvc, 1).state == "ready", isvc.get("status")
    assert isvc["status"]["deploymentMode"] == "Standard"  # type: ignore[index]
    # KServe made the predictor's Deployment and Service; its pod runs on an L40S node.
    predictor = admin.get(Deployment, f"{name}-predictor", namespace=NS)
    assert any(ref.kind == "InferenceService" and ref.name == name for ref in predictor.metadata.ownerReferences or [])
    assert get_or_none(admin, Service, f"{name}-predictor") is not None
    (pod,) = admin.list(Pod, namespace=NS, labels={"serving.kserve.io/inferenceservice": name})
    node = admin.get(Node, pod.spec.nodeName)
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"

    r = cli(project, "inspect", "--stack", "itkserve", "--json")
    assert r.returncode == 0, r.stderr
    (rec,) = json.loads(r.stdout)["replicas"]
    assert rec["state"] == "ready"
    (obj,) = rec["objects"]
    assert {"type": "Ready", "status": "True"} in [{"type": c["type"], "status": c["status"]} for c in obj["conditions"]]
    assert obj["conditions"] == _isvc(admin, name)["status"]["conditions"], "KServe's raw condition metadata"  # type: ignore[index]
    assert all("lastTransitionTime" in c for c in obj["conditions"])
    assert rec["endpoint"] == isvc["status"]["address"]["url"] == f"http://{name}-predictor.{NS}.svc.cluster.local"  # type: ignore[index]

    r = cli(project, "plan", "--stack", "itkserve", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["basis"] == "state+live", r.stdout + r.stderr[-2000:]

    r = cli(project, "destroy", "--stack", "itkserve")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "zero objects owned by stack itkserve remain" in r.stdout
    assert get_or_none(admin, InferenceService, name) is None
    # Only the parent was deleted by us; KServe's children go with it (owner references).
    wait_for(lambda: get_or_none(admin, Deployment, f"{name}-predictor") is None, "KServe's Deployment to go", timeout=60)
    wait_for(lambda: get_or_none(admin, Service, f"{name}-predictor") is None, "KServe's Service to go", timeout=60)


def test_plain_pulumi_up_waits_for_kserve_ready(project: Project, admin: Client) -> None:
    key = "it-kserve-plain-r0"
    name = naming.object_name(key)
    project.stack("itkplain", [replica(key)], workloadApi="kserve")
    pulumi = plain_pulumi(project, "itkplain")

    assert pulumi("stack", "init").returncode == 0
    r = pulumi("up", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "readiness: 1/1 ready" in r.stdout
    assert inference_service_verdict(_isvc(admin, name), 1).state == "ready"
    assert pulumi("destroy", "--yes").returncode == 0


def test_an_inference_service_for_a_gpu_no_node_carries_fails_within_budget_with_the_reasons(
    project: Project, admin: Client
) -> None:
    key = "it-kserve-b200-r0"
    project.stack("itkb200", [replica(key, gpu="NVIDIA-B200", startupBudgetSeconds=60)], workloadApi="kserve")
    r = cli(project, "deploy", "--stack", "itkb200")
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    assert "1 of 1 replica(s) not ready" in r.stderr
    # Judged by KServe's predictor Deployment (its pod cannot be placed), not the copied status.
    assert "not ready within its startup budget + margin; last seen: Deployment " in r.stderr, r.stderr[-3000:]
    assert "FailedScheduling" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "stalled scheduling for " in r.stderr, r.stderr[-3000:]  # its predictor's pod, by its Events (issue #67)
    assert cli(project, "destroy", "--stack", "itkb200").returncode == 0


def test_the_httproute_placeholder_is_valid_against_the_official_gateway_api_crds(project: Project, admin: Client) -> None:
    """deploy/kubernetes/gateway-api/httproute.yaml, placeholders substituted, passes a strict
    server-side dry run against the Gateway API CRDs of the pinned module; left unsubstituted it
    is refused (the check can fail)."""
    import time

    import yaml
    from lightkube import codecs
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    from infercrane.project.tools import tool_dirs
    from tests.integration.conftest import ROOT, kubectl

    crds = next(d.parent / "share" / "crds" for d in tool_dirs() if d.parent.name.startswith("gateway-api-"))
    assert crds.is_dir(), "run tools/build.sh gateway-api"
    for name in ("gatewayclasses", "gateways", "httproutes"):
        doc = yaml.safe_load((crds / f"gateway.networking.k8s.io_{name}.yaml").read_text())
        admin.apply(codecs.from_dict(doc), field_manager="infercrane-bootstrap")
    deadline = time.monotonic() + 30
    while not any(
        c.type == "Established" and c.status == "True"
        for c in (admin.get(CustomResourceDefinition, "httproutes.gateway.networking.k8s.io").status.conditions or [])
    ):
        assert time.monotonic() < deadline, "the HTTPRoute CRD never became established"
        time.sleep(0.2)

    placeholder = (ROOT / "deploy" / "kubernetes" / "gateway-api" / "httproute.yaml").read_text()
    route = (
        placeholder.replace("REPLACE_WITH_GATEWAY_NAMESPACE", "infercrane-system")  # before its prefix _NAME
        .replace("REPLACE_WITH_GATEWAY_NAME", "infercrane-gateway-public")
        .replace("REPLACE_WITH_HOSTNAME", "llm.example.com")
    )
    assert not __import__("re").search(r"REPLACE_WITH_[A-Z]", route)
    dry_run = ("apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=infercrane-check", "-f", "-")
    r = kubectl(project.plane, *dry_run, stdin=route)
    assert r.returncode == 0, r.stderr
    assert "httproute.gateway.networking.k8s.io/infercrane serverside-applied (server dry run)" in r.stdout
    r = kubectl(project.plane, *dry_run, stdin=placeholder)
    assert r.returncode != 0 and "REPLACE_WITH_HOSTNAME" in r.stderr, r.stdout + r.stderr


def _rules(path: str) -> list[dict[str, object]]:
    import yaml

    from tests.integration.conftest import ROOT

    (role,) = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d and d["kind"] == "Role"]
    return list(role["rules"])


def test_an_identity_bound_to_exactly_the_kserve_role_deploys_and_says_how_its_replicas_are_judged(
    project: Project, admin: Client, identity: Any
) -> None:
    """The shipped KServe Role alone (no Deployment, no Event right): the deploy, `inspect` and `plan`
    work, judging each InferenceService by its own status, and say so with the file that lets them
    judge it by its predictor; with that optional reader bound, no such note, and the same verdicts."""
    key = "it-kserve-only-r0"
    only = identity("it-kserve-only", _rules("deploy/kubernetes/kserve/provider-rbac.yaml"))
    project.stack("itkserveonly", [replica(key)], workloadApi="kserve", context=only)
    r = cli(project, "deploy", "--stack", "itkserveonly")
    assert r.returncode == 0, r.stderr[-3000:]
    note = "note: this identity may not list Deployments, so each InferenceService is judged by its own status"
    assert note in r.stderr and "deploy/kubernetes/optional/kserve-predictor-reader.yaml" in r.stderr, r.stderr[-3000:]
    r = cli(project, "inspect", "--stack", "itkserveonly", "--json")
    assert r.returncode == 0, r.stderr
    assert [x["state"] for x in json.loads(r.stdout)["replicas"]] == ["ready"]

    reader = identity(
        "it-kserve-reader",
        _rules("deploy/kubernetes/kserve/provider-rbac.yaml") + _rules("deploy/kubernetes/optional/kserve-predictor-reader.yaml"),
    )
    project.stack("itkserveonly", [replica(key)], workloadApi="kserve", context=reader)
    r = cli(project, "plan", "--stack", "itkserveonly")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert note not in r.stderr, r.stderr[-2000:]
    r = cli(project, "inspect", "--stack", "itkserveonly", "--json")
    assert r.returncode == 0 and [x["state"] for x in json.loads(r.stdout)["replicas"]] == ["ready"], r.stderr
    assert cli(project, "destroy", "--stack", "itkserveonly").returncode == 0


def test_a_model_image_reaches_kserves_predictor_as_a_read_only_image_volume_by_digest(project: Project, admin: Client) -> None:
    """KServe's webhooks and controller take the InferenceService's image volume as it is: the
    predictor's pods mount the pinned model image read-only, the engine pointed at it (kwok runs
    nothing: the pull and the mount are the real node's, tests/integration/test_model_images.py)."""
    key, model = "it-kserve-model-r0", "oci://registry.example/models/qwen3-8b@sha256:" + "b" * 64
    name = naming.object_name(key)
    project.stack("itkservemodel", [replica(key, modelImage=model)], workloadApi="kserve")
    r = cli(project, "deploy", "--stack", "itkservemodel")
    assert r.returncode == 0, r.stderr[-3000:]
    template = admin.get(Deployment, f"{name}-predictor", namespace=NS).to_dict()["spec"]["template"]["spec"]
    volume = next(v for v in template["volumes"] if v["name"] == "model-image")
    assert volume["image"] == {"reference": model.removeprefix("oci://"), "pullPolicy": "IfNotPresent"}
    (container,) = [c for c in template["containers"] if c["name"] == "kserve-container"]
    assert {"name": "model-image", "mountPath": "/mnt/model", "readOnly": True} in container["volumeMounts"]
    assert "/mnt/model/models" in container["args"]
    assert cli(project, "destroy", "--stack", "itkservemodel").returncode == 0
