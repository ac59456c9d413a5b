"""GPUs by Dynamic Resource Allocation on the local plane as a DRA cluster (kwok nodes with the
ResourceSlices NVIDIA's driver would publish, the DeviceClass its chart installs, the real
scheduler and resource claim controller), deploying as the restricted identity bound to the
shipped Role and the DRA Role: a replica's claim template selects its product by productName,
the scheduler allocates a device of that product, a product no slice offers stays Pending with the
scheduler's reason, a foreign template of our name is refused, destroy leaves no template, and a
switch from label to dra rolls in waves under the endpoint's policy."""

from __future__ import annotations

import json

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimTemplate

from infercrane.core import naming
from tests.integration.conftest import Project, get_or_none, replica
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
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
    project.stack(
        "itdra", [replica(keys[0], gpuCount=2), replica(keys[1], gpu="NVIDIA-A100-80GB-PCIe", name="big")], **DRA
    )

    r = cli(project, "deploy", "--stack", "itdra")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    for key, node, product, count in ((keys[0], "kwok-dra-l40s-0", "NVIDIA L40S", 2), (keys[1], "kwok-dra-a100-0", "NVIDIA A100 80GB PCIe", 1)):
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
    assert recs[keys[0]]["state"] == "ready"

    r = cli(project, "destroy", "--stack", "itdra")
    assert r.returncode == 0, r.stdout + r.stderr
    for key in keys:
        assert get_or_none(admin, ResourceClaimTemplate, naming.object_name(key)) is None
        assert get_or_none(admin, Deployment, naming.object_name(key)) is None
