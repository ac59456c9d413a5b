"""GPUs by Dynamic Resource Allocation on the local plane as a DRA cluster (kwok nodes with the
ResourceSlices NVIDIA's driver would publish, the DeviceClass its chart installs, the real
scheduler and resource claim controller), deploying as the restricted identity bound to the
shipped Role and the DRA Role: a replica's claim template selects its product by productName,
the scheduler allocates a device of that product, a product no slice offers stays Pending with the
scheduler's reason, a foreign template of our name is refused, destroy leaves no template, and a
switch from label to dra rolls in waves under the endpoint's policy."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
import yaml
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimTemplate

from infercrane.core import naming
from infercrane.live.client.api import Live
from infercrane.live.inspect import inspect, render_text
from infercrane.project import stackfile
from tests.integration.conftest import (
    ROOT,
    Project,
    get_or_none,
    kill_as_ci,
    pending_record,
    plain_pulumi,
    replica,
    start_cli,
    wait_for,
)
from tests.integration.test_cli_ops import cli

pytestmark = [pytest.mark.integration, pytest.mark.qualification]  # make test-matrix: every pinned Kubernetes
NS = "infercrane-system"
DRA = {"gpuAllocation": "dra"}


def _claim_of(admin: Client, name: str) -> tuple[Pod, ResourceClaim]:
    (pod,) = admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name})
    (status,) = pod.status.resourceClaimStatuses or []
    return pod, admin.get(ResourceClaim, status.resourceClaimName, namespace=NS)


def test_a_dra_replica_is_allocated_a_device_of_its_product_by_the_scheduler_and_destroy_leaves_no_template(
    project: Project, admin: Client
) -> None:
    keys = ("it-dra-l40s-r0", "it-dra-a100-r0")
    project.stack("itdra", [replica(keys[0], gpuCount=2), replica(keys[1], gpu="NVIDIA-A100-80GB-PCIe", name="big")], **DRA)

    r = cli(project, "deploy", "--stack", "itdra")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    for key, node, product, count in (
        (keys[0], "kwok-dra-l40s-0", "NVIDIA L40S", 2),
        (keys[1], "kwok-dra-a100-0", "NVIDIA A100 80GB PCIe", 1),
    ):
        name = naming.object_name(key)
        template = admin.get(ResourceClaimTemplate, name, namespace=NS)
        assert template.metadata.annotations[naming.ANNOTATION_KEY] == key
        pod, claim = _claim_of(admin, name)
        assert pod.spec.nodeName == node, "the scheduler placed the pod where its claim's devices are"
        assert not (pod.spec.nodeSelector or {}).get("nvidia.com/gpu.product")
        assert "nvidia.com/gpu" not in (pod.spec.containers[0].resources.limits or {})
        results = claim.status.allocation.devices.results
        assert len(results) == count and {x.pool for x in results} == {node}, results
        assert all(x.driver == "gpu.nvidia.com" for x in results)
        (request,) = template.spec.spec.devices.requests
        assert product in request.exactly.selectors[0].cel.expression

    r = cli(project, "inspect", "--stack", "itdra", "--json")
    assert r.returncode == 0, r.stderr
    recs = {x["key"]: x for x in json.loads(r.stdout)["replicas"]}
    assert recs[keys[0]]["state"] == "ready" and recs[keys[1]]["state"] == "ready"
    # The restricted identity reads no pod and no claim; a reader that may shows each pod's devices.
    config = stackfile.load_stack("itdra", project_dir=project.root)
    by_key = {rec["key"]: rec for rec in inspect(config, Live(admin, config.kubernetes), stack="itdra")}
    (pod,) = by_key[keys[0]]["pods"]
    assert pod["node"] == "kwok-dra-l40s-0" and len(pod["devices"]) == 2
    assert all(d.startswith("kwok-dra-l40s-0/gpu-") for d in pod["devices"]), pod
    text = render_text(list(by_key.values()))
    assert "(claimed: kwok-dra-l40s-0/gpu-" in text
    assert f"  ResourceClaimTemplate {naming.object_name(keys[0])}\n" in text, text

    r = cli(project, "destroy", "--stack", "itdra")
    assert r.returncode == 0, r.stdout + r.stderr
    for key in keys:
        assert get_or_none(admin, ResourceClaimTemplate, naming.object_name(key)) is None
        assert get_or_none(admin, Deployment, naming.object_name(key)) is None


def _devices(admin: Client, key: str) -> list[str]:
    _, claim = _claim_of(admin, naming.object_name(key))
    return [f"{x.pool}/{x.device}" for x in claim.status.allocation.devices.results]


def test_a_gpu_change_of_a_kept_dra_key_rolls_in_waves_with_a_new_claim_template_and_plain_pulumi_does_it_too(
    project: Project, admin: Client
) -> None:
    """A claim template is immutable (Kubernetes validates every update so): a GPU count or product
    change is a new template -- the old one deleted and made again in the key's wave, the pod
    restarted onto it -- planned by `plan`, rolled by `deploy` and by plain `pulumi up`."""
    keys = ["it-dragpu-r0", "it-dragpu-r1"]
    project.stack("itdragpu", [replica(k, gpuCount=2) for k in keys], **DRA)  # the L40S DRA node's 4 devices
    r = cli(project, "deploy", "--stack", "itdragpu")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert [len(_devices(admin, k)) for k in keys] == [2, 2]
    uids = {k: admin.get(ResourceClaimTemplate, naming.object_name(k), namespace=NS).metadata.uid for k in keys}

    project.stack("itdragpu", [replica(k, gpuCount=1) for k in keys], **DRA)
    r = cli(project, "plan", "--stack", "itdragpu")
    assert r.returncode == 3, r.stdout + r.stderr[-3000:]  # changes pending
    assert "immutable" not in r.stdout + r.stderr and "wave 2" in r.stdout, r.stdout
    r = cli(project, "deploy", "--stack", "itdragpu")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    for k in keys:
        template = admin.get(ResourceClaimTemplate, naming.object_name(k), namespace=NS)
        assert template.metadata.uid != uids[k], "a new template, not an update of the old one"
        assert template.spec.spec.devices.requests[0].exactly.count == 1
        assert len(_devices(admin, k)) == 1
    r = cli(project, "plan", "--stack", "itdragpu", "--json")
    assert r.returncode == 0 and '"basis": "state+live"' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]

    # A product change of one replica, by plain `pulumi up` (one replica restarts: within the policy).
    project.stack("itdragpu", [replica(keys[0], gpuCount=1), replica(keys[1], gpu="NVIDIA-A100-80GB-PCIe")], **DRA)
    pulumi = plain_pulumi(project, "itdragpu")
    r = pulumi("up", "--yes", "--skip-preview")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert [d.split("/")[0] for d in _devices(admin, keys[1])] == ["kwok-dra-a100-0"]
    assert cli(project, "destroy", "--stack", "itdragpu").returncode == 0


def test_a_product_no_slice_offers_stays_pending_with_the_schedulers_claim_reason(project: Project, admin: Client) -> None:
    """NVIDIA-H200 is in the table (valid) but no DRA node publishes one: the claim cannot be
    allocated, the pod stays Pending, and the scheduler's own words reach inspect. The deploy is
    stopped once that is visible (the budget's failure is test_contract's)."""
    key = "it-dra-h200-r0"
    name = naming.object_name(key)
    project.stack("itdranone", [replica(key, gpu="NVIDIA-H200")], **DRA)
    proc = start_cli(project, "deploy", "--stack", "itdranone")
    config = stackfile.load_stack("itdranone", project_dir=project.root)
    try:
        rec = wait_for(pending_record(admin, config, name, bool), "the pod to be reported unschedulable", timeout=120)
        assert proc.poll() is None, "deploy must still be waiting within the startup budget"

        def quoted() -> list[str] | None:  # as the restricted identity: the Warning Events a failed deploy quotes
            r = cli(project, "inspect", "--stack", "itdranone", "--json")
            (rec,) = json.loads(r.stdout)["replicas"]
            return rec["reasons"] if any("cannot allocate all claims" in x for x in rec["reasons"]) else None

        events = wait_for(quoted, "the scheduler's Warning Event", timeout=60)
    finally:
        kill_as_ci(proc)
    (pod,) = rec["pods"]
    assert pod["phase"] == "Pending" and pod["node"] is None and pod["devices"] == []
    assert any("cannot allocate all claims" in r for r in pod["reasons"]), pod["reasons"]
    assert any(x.startswith("FailedScheduling") for x in events), events
    assert cli(project, "destroy", "--stack", "itdranone").returncode == 0
    assert get_or_none(admin, ResourceClaimTemplate, name) is None


def test_a_claim_template_of_a_foreign_owner_with_our_name_is_refused_and_left_alone(project: Project, admin: Client) -> None:
    key = "it-dra-foreign-r0"
    name = naming.object_name(key)
    foreign = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
    }
    admin.apply(codecs.from_dict(foreign), field_manager="foreign-owner")
    try:
        project.stack("itdraforeign", [replica(key)], **DRA)
        r = cli(project, "deploy", "--stack", "itdraforeign")
        assert r.returncode != 0
        assert f"ResourceClaimTemplate {NS}/{name} exists but is not owned by this stack" in r.stderr, r.stderr[-2000:]
        assert "nothing was applied" in r.stderr
        assert get_or_none(admin, Deployment, name) is None
        kept = admin.get(ResourceClaimTemplate, name, namespace=NS)
        assert not (kept.metadata.annotations or {}).get(naming.ANNOTATION_KEY), "never adopted"
    finally:
        admin.delete(ResourceClaimTemplate, name, namespace=NS)


def test_a_kserve_replica_claims_its_gpus_through_the_predictor_and_is_allocated_its_product(
    project: Project, admin: Client
) -> None:
    """KServe 0.16's predictor carries resourceClaims and the container's resources.claims; its
    controller copies them into the predictor's pods."""
    key = "it-dra-kserve-r0"
    name = naming.object_name(key)
    project.stack("itdrakserve", [replica(key)], workloadApi="kserve", **DRA)
    r = cli(project, "deploy", "--stack", "itdrakserve")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    (pod,) = admin.list(Pod, namespace=NS, labels={"serving.kserve.io/inferenceservice": name})
    assert pod.spec.nodeName == "kwok-dra-l40s-0"
    (status,) = pod.status.resourceClaimStatuses
    claim = admin.get(ResourceClaim, status.resourceClaimName, namespace=NS)
    assert [x.pool for x in claim.status.allocation.devices.results] == ["kwok-dra-l40s-0"]
    r = cli(project, "destroy", "--stack", "itdrakserve")
    assert r.returncode == 0, r.stdout + r.stderr
    assert get_or_none(admin, ResourceClaimTemplate, name) is None


def test_doctor_checks_the_dra_api_and_role_and_shows_free_devices_per_product_with_the_dra_reader(
    project: Project, identity: Callable[..., str]
) -> None:
    project.stack("itdradoctor", [replica("it-dradoctor-r0")], **DRA)
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdradoctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["DRA API"]["status"] == "pass"
    for verb in ("get", "list", "create", "patch", "delete"):
        assert checks[f"can {verb} resourceclaimtemplates.resource.k8s.io"]["status"] == "pass"
    capacity = checks["GPU capacity"]
    assert capacity["status"] == "not verifiable" and "deploy/kubernetes/optional/dra-reader.yaml" in capacity["hint"]

    project.stack("itdradoctorv", [replica("it-dradoctorv-r0")], context="infercrane-local-viewer", **DRA)
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdradoctorv", "--json")
    capacity = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["GPU capacity"]
    assert capacity["status"] == "pass", capacity
    assert re.fullmatch(r"NVIDIA-L40S: 1 requested / [0-4] free of 4 published", capacity["detail"]), capacity
    project.stack(
        "itdradoctorv", [replica("it-dradoctorv-r0")], context="infercrane-local-viewer", gpuDeviceClass="gpu.example.com", **DRA
    )
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdradoctorv", "--json")
    capacity = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["GPU capacity"]
    assert r.returncode == 1 and capacity["status"] == "fail", capacity
    assert capacity["detail"].startswith("DeviceClass gpu.example.com does not exist"), capacity
    assert capacity["hint"].endswith("or set gpuDeviceClass to one of: gpu.nvidia.com"), capacity

    # Without the DRA Role (the deployment Role alone): the claim templates' rights fail, naming the file.
    (role, _) = yaml.safe_load_all((ROOT / "deploy/kubernetes/base/provider-rbac.yaml").read_text())
    rules = role["rules"]
    context = identity("it-no-dra", rules)
    project.stack("itdradoctor2", [replica("it-dradoctor2-r0")], context=context, **DRA)
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdradoctor2")
    assert r.returncode == 1
    assert "[fail] can create resourceclaimtemplates.resource.k8s.io: in namespace infercrane-system" in r.stdout
    assert "hint: bind deploy/kubernetes/dra/provider-rbac.yaml (gpuAllocation dra) to this identity" in r.stdout
    # A deploy as that identity is refused by the preflight's dry run, naming the Role to bind.
    r = cli(project, "deploy", "--stack", "itdradoctor2")
    assert r.returncode != 0
    assert "resourceclaimtemplates" in r.stderr and "forbidden" in r.stderr, r.stderr[-2000:]
    assert "fix: bind deploy/kubernetes/dra/provider-rbac.yaml (gpuAllocation dra) to this identity" in r.stderr, r.stderr[-2000:]
    assert "nothing was applied" in r.stderr


def test_a_switch_back_from_dra_to_label_leaves_no_claim_template(project: Project, admin: Client) -> None:
    key = "it-dra-back-r0"
    name = naming.object_name(key)
    project.stack("itdraback", [replica(key)], **DRA)
    assert cli(project, "deploy", "--stack", "itdraback").returncode == 0
    assert get_or_none(admin, ResourceClaimTemplate, name) is not None
    project.stack("itdraback", [replica(key)])
    r = cli(project, "deploy", "--stack", "itdraback")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert get_or_none(admin, ResourceClaimTemplate, name) is None
    (pod,) = [p for p in admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name}) if not p.metadata.deletionTimestamp]
    assert pod.spec.nodeSelector["nvidia.com/gpu.product"] == "NVIDIA-L40S" and not pod.spec.resourceClaims
    assert cli(project, "destroy", "--stack", "itdraback").returncode == 0
