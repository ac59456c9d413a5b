"""Who serves an endpoint now, read from live objects (no cluster: the preflight's LIST, as dicts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane.core import loading, naming
from infercrane.core.manifests import render_checked
from infercrane.core.workload import endpoint_of
from infercrane.live.membership import members
from infercrane.live.preflight import restarts_pods

STACK = "infercrane/dev"


def live_deployment(manifest: dict[str, Any], *, ready: bool) -> dict[str, Any]:
    obj = copy.deepcopy(manifest)
    obj["metadata"]["generation"] = 1
    obj["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1 if ready else 0}
    return obj


def test_members_are_this_stacks_owned_workloads_with_endpoint_readiness_and_gpus(values: dict[str, Any]) -> None:
    config = loading.load(values, source="s", env={})
    (r,) = render_checked(config, "dev")
    dep, svc = r.manifests
    foreign = copy.deepcopy(dep)
    foreign["metadata"]["name"] = "infercrane-someone-else"
    foreign["metadata"]["annotations"][naming.ANNOTATION_STACK] = "infercrane/other"
    live = {
        ("Deployment", dep["metadata"]["name"]): live_deployment(dep, ready=False),
        ("Service", svc["metadata"]["name"]): svc,
        ("Deployment", "infercrane-someone-else"): live_deployment(foreign, ready=True),
    }
    (m,) = members(config, live, STACK)
    assert (m.key, m.endpoint, m.ready, m.gpus) == (r.replica.key, "qwen-kubernetes", False, 1)


def test_an_object_rendered_before_the_endpoint_label_serves_its_first_served_model_name(values: dict[str, Any]) -> None:
    config = loading.load(values, source="s", env={})
    dep = copy.deepcopy(render_checked(config, "dev")[0].manifests[0])
    del dep["metadata"]["labels"][naming.LABEL_ENDPOINT]
    assert endpoint_of(dep) == "qwen-kubernetes"


@pytest.mark.parametrize(
    ("change", "restarts"),
    [
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="x@sha256:" + "e" * 64), True),
        (lambda d: d["metadata"]["labels"].update({naming.LABEL_ENDPOINT: "moved"}), False),
        (lambda d: d["spec"].update(strategy={"type": "RollingUpdate"}), False),
        (lambda d: None, False),
    ],
    ids=["image", "object-label", "strategy", "nothing"],
)
def test_only_a_pod_template_change_restarts_a_deployments_pods(values: dict[str, Any], change: Any, restarts: bool) -> None:
    config = loading.load(values, source="s", env={})
    before = render_checked(config, "dev")[0].manifests[0]
    after = copy.deepcopy(before)
    change(after)
    assert restarts_pods(before, after) is restarts


def test_an_inference_services_rollout_strategy_is_not_a_pod_change() -> None:
    before = {
        "kind": "InferenceService",
        "spec": {"predictor": {"containers": [{"image": "a"}], "deploymentStrategy": {"type": "Recreate"}}},
    }
    after = copy.deepcopy(before)
    after["spec"]["predictor"]["deploymentStrategy"] = {"type": "RollingUpdate"}
    assert restarts_pods(before, after) is False
    after["spec"]["predictor"]["containers"][0]["image"] = "b"
    assert restarts_pods(before, after) is True
