from __future__ import annotations

from typing import Any

import pytest

from infercrane.live.inspect import object_state, render_text, replica_state

AVAILABLE = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}


@pytest.mark.parametrize(
    ("kind", "obj", "state"),
    [
        ("Deployment", {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, **AVAILABLE}}, "ready"),
        (
            "Deployment",
            {"metadata": {"generation": 3}, "status": {"observedGeneration": 2, **AVAILABLE}},
            "provisioning",
        ),
        ("Deployment", {"metadata": {"generation": 2}, "status": {"observedGeneration": 2}}, "provisioning"),
        (
            "InferenceService",
            {
                "metadata": {"generation": 1},
                "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]},
            },
            "ready",
        ),
        (
            "InferenceService",
            {
                "metadata": {"generation": 2},
                "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]},
            },
            "provisioning",
        ),
        ("Service", {}, "ready"),
    ],
    ids=["available", "stale-observed-generation", "none-available", "isvc-ready", "isvc-stale", "service"],
)
def test_object_state_never_ready_from_a_stale_generation(kind: str, obj: dict[str, Any], state: str) -> None:
    assert object_state(kind, obj) == state


def test_missing_object_makes_the_replica_degraded() -> None:
    ready = {"metadata": {"generation": 1}, "status": {"observedGeneration": 1, **AVAILABLE}}
    assert replica_state(["Deployment", "Service"], {"Deployment": ready}) == "degraded"
    assert replica_state(["Deployment", "Service"], {"Deployment": ready, "Service": {}}) == "ready"


def test_text_shows_missing_objects_placement_and_pending_reasons() -> None:
    rec = {
        "key": "k",
        "name": "infercrane-x",
        "state": "degraded",
        "endpoint": None,
        "gpuLabel": "nvidia.com/gpu.product",
        "objects": [
            {
                "kind": "Deployment",
                "name": "infercrane-x",
                "present": True,
                "generation": 1,
                "observedGeneration": 1,
                "availableReplicas": None,
                "managers": [{"manager": "infercrane-provider-v1", "operation": "Apply", "subresource": ""}],
            },
            {"kind": "Service", "name": "infercrane-x", "present": False},
        ],
        "pods": [
            {
                "name": "p",
                "phase": "Pending",
                "node": None,
                "nodeGpu": None,
                "reasons": ["FailedScheduling: 0/3 nodes are available"],
            }
        ],
    }
    text = render_text([rec])
    assert "replica k -> infercrane-x: degraded" in text
    assert "Service           infercrane-x  MISSING" in text
    assert "field managers: infercrane-provider-v1 (Apply)" in text
    assert "Pod               p Pending on None (nvidia.com/gpu.product=None)" in text
    assert text.endswith("FailedScheduling: 0/3 nodes are available")


def test_an_endpoints_line_counts_replicas_in_routing_and_leaves_serving_to_each_replicas_evidence() -> None:
    """One word for one thing: routing membership is "in routing"; "serving" is what the evidence says."""
    members = {"qwen": [{"key": "r0", "intentHash": "sha256:" + "a" * 64, "modelRevision": None, "evidence": None}]}
    text = render_text([], members)
    assert text.startswith("endpoint qwen: 1 in routing: r0 (sha256:aaaaaaaaaaaa…)"), text
    assert "serving" not in text


def test_inspects_routing_member_is_the_stack_outputs_member_with_its_object_name() -> None:
    """One builder for both (core.plan.workload.routing_member): inspect's member from the live
    Deployment carries the release its pods run, as the stack output's does, and the object's name."""
    import copy

    from infercrane.core import naming
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.plan.workload import release_of
    from infercrane.core.render.manifests import render_checked
    from infercrane.live.inspect import members

    config = InferCraneConfig.model_validate(
        {
            "kubernetes": {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64},
            "replicas": [{"key": "r0", "model": "Qwen/Qwen3-8B", "name": "qwen", "gpu": "NVIDIA-L40S"}],
        }
    )
    stack_id = naming.stack_id("dev")
    (rendered,) = render_checked(config, "dev")
    deployment = copy.deepcopy(next(m for m in rendered.manifests if m["kind"] == "Deployment"))
    deployment["metadata"]["generation"] = 1
    deployment["status"] = {"observedGeneration": 1, **AVAILABLE}
    name = deployment["metadata"]["name"]

    ((member,),) = members(config, {name: deployment}, stack_id).values()

    assert member["release"] == release_of(deployment) and member["release"].startswith("sha256:")
    assert list(member) == ["key", "name", "modelRevision", "intentHash", "release", "evidence"]
    assert (member["key"], member["name"], member["evidence"]) == ("r0", name, None)
