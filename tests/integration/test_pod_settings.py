"""Pod settings and resources on a real API server: the strict dry run accepts every rendered
field, the scheduler places the pods with the extra node label and toleration, the Priority
admission resolves the class, and the API server classes the pods as Guaranteed QoS."""

from __future__ import annotations

import pytest
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.resources.scheduling_v1 import PriorityClass

from infercrane.core import naming
from tests.integration.conftest import Project, cli, replica

pytestmark = pytest.mark.integration
PRIORITY = "it-gpu-inference"


def test_pod_settings_and_guaranteed_resources_are_applied_scheduled_and_classed_by_the_api_server(
    project: Project, admin: Client
) -> None:
    admin.apply(
        codecs.from_dict(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": PRIORITY}, "value": 1000}
        ),
        field_manager="it-bootstrap",
    )
    key = "it-pods-r0"
    pod = {
        "imagePullSecrets": ["registry-mirror"],
        "priorityClassName": PRIORITY,
        "tolerations": [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}],
        "nodeSelector": {"type": "kwok"},
        "env": [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}],
        "labels": {"team": "ml-platform"},
        "annotations": {"prometheus.io/scrape": "true"},
    }
    resources = {"cpuPerGpu": "6", "memoryPerGpu": "48Gi", "guaranteed": True}
    project.stack("itpods", [replica(key, gpuCount=2)], pod=pod, resources=resources)
    try:
        r = cli(project, "deploy", "--stack", "itpods")
        assert r.returncode == 0, r.stderr[-2000:]
        name = naming.object_name(key)
        dep = admin.get(Deployment, name, namespace="infercrane-system")
        assert dep.status.availableReplicas == 1
        (p,) = admin.list(Pod, namespace="infercrane-system", labels={naming.LABEL_INSTANCE: name})
        assert (p.spec.priorityClassName, p.spec.priority) == (PRIORITY, 1000), "the Priority admission resolved the class"
        assert p.status.qosClass == "Guaranteed"
        assert p.metadata.labels["team"] == "ml-platform" and p.metadata.annotations["prometheus.io/scrape"] == "true"
        (c,) = p.spec.containers
        assert (c.resources.requests["cpu"], c.resources.limits["memory"]) == ("12", "104Gi")
        assert [s.name for s in p.spec.imagePullSecrets] == ["registry-mirror"]

        r = cli(project, "plan", "--stack", "itpods")
        assert r.returncode == 0, "nothing left to do: the live objects hold exactly what was rendered\n" + r.stderr[-2000:]
        assert cli(project, "destroy", "--stack", "itpods").returncode == 0
    finally:
        admin.delete(PriorityClass, PRIORITY)
