from __future__ import annotations

from typing import Any

import pytest

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.plan.actions import Action
from infercrane.core.render.manifests import render_checked
from infercrane.core.state.urns import component_of
from infercrane.engine.changes import EventCollector, summarize

STACK = "urn:pulumi:dev::infercrane::"


@pytest.mark.parametrize(
    ("urn", "component"),
    [
        (STACK + "infercrane:index:Replica::infercrane-0123456789abcdef01234567", "infercrane-0123456789abcdef01234567"),
        (
            STACK + "infercrane:index:Replica$kubernetes:apps/v1:Deployment::infercrane-0123456789abcdef01234567-deployment",
            "infercrane-0123456789abcdef01234567",
        ),
        (STACK + "infercrane:index:Replica$kubernetes:core/v1:Service::qwen-1-service", "qwen-1"),
        (STACK + "infercrane:index:Replica::my-service", "my-service"),  # a component is never cut at a suffix
        (STACK + "pulumi:providers:kubernetes::infercrane", None),
        (STACK + "pulumi:pulumi:Stack::infercrane-dev", None),
    ],
    ids=["component", "deployment", "legacy-service", "component-named-like-a-child", "provider", "stack"],
)
def test_component_of_urn(urn: str, component: str | None) -> None:
    assert component_of(urn) == component


def test_summary_per_replica_by_key_identity_with_a_removed_replica(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    name = naming.object_name("qwen-kubernetes-rev-1-r0")
    gone = naming.object_name("old-key")
    col = EventCollector()
    col.ops = {name: {Action.SAME, Action.UPDATE}, gone: {Action.DELETE}}
    (kept, removed) = summarize(c, col, render_checked(c, "dev"), {gone: "old-key"})
    assert (kept.name, kept.action, kept.key, kept.gpu) == (name, "update", "qwen-kubernetes-rev-1-r0", "NVIDIA-L40S")
    assert kept.objects[0] == f"Deployment/{name}"
    assert (removed.name, removed.action, removed.key) == (gone, "delete", "old-key")


def test_replace_wins_over_other_ops(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    col = EventCollector()
    col.ops = {naming.object_name("qwen-kubernetes-rev-1-r0"): {Action.SAME, Action.REPLACE, Action.CREATE}}
    assert summarize(c, col, render_checked(c, "dev"))[0].action == "replace"


def test_a_created_claim_template_beside_an_existing_workload_configures_the_replica_it_creates_none(
    values: dict[str, Any],
) -> None:
    """A switch to gpuAllocation dra creates each replica's claim template and updates its
    Deployment: the replica is configured. A new replica (its workload created) is created."""
    from types import SimpleNamespace

    c = loading.load(values, source="s", env={})
    name = naming.object_name("qwen-kubernetes-rev-1-r0")
    child = STACK + "infercrane:index:Replica${token}::" + name + "-{suffix}"

    def event(op: str, token: str, suffix: str) -> Any:
        return SimpleNamespace(
            resource_pre_event=SimpleNamespace(metadata=SimpleNamespace(urn=child.format(token=token, suffix=suffix), op=op))
        )

    def action(*ops: tuple[str, str, str]) -> str:
        col = EventCollector()
        for op in ops:
            col(event(*op))
        return summarize(c, col, render_checked(c, "dev"))[0].action

    template = ("create", "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "claimtemplate")
    assert action(("update", "kubernetes:apps/v1:Deployment", "deployment"), template) == "update"
    assert action(("create", "kubernetes:apps/v1:Deployment", "deployment"), template) == "create"
    # A deleted Service that the deploy repairs is still its replica's create.
    assert action(
        ("same", "kubernetes:apps/v1:Deployment", "deployment"), ("create", "kubernetes:core/v1:Service", "service")
    ) == ("create")


def test_a_rollout_policy_change_is_a_new_stack_intent_so_a_recorded_key_is_not_replayed_for_it() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.operations import stack_intent

    def cfg(**rollout: int) -> InferCraneConfig:
        target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64} | (
            {"rollout": rollout} if rollout else {}
        )
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})

    assert stack_intent(cfg()) == stack_intent(cfg(maxUnavailable=1, maxSurge=0))  # the defaults spelled out
    assert stack_intent(cfg()) != stack_intent(cfg(maxUnavailable=0, maxSurge=1))


def test_max_extra_gpus_is_part_of_the_stack_intent_only_when_set_so_earlier_records_still_replay() -> None:
    from infercrane.core import naming
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.operations import replica_intent, stack_intent

    def cfg(**rollout: int) -> InferCraneConfig:
        target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target | {"rollout": rollout}, "replicas": replicas})

    unset = cfg()
    # the intent as it was hashed before the setting existed: each endpoint's two policy fields
    earlier = naming.intent_hash(
        {
            "stack": ["c", "ns", replica_intent(unset, unset.replicas[0])],
            "rollout": {"e": {"max_unavailable": 1, "max_surge": 0}},
            "servingEvidence": unset.kubernetes.serving_evidence,
        }
    )
    assert stack_intent(unset) == earlier
    assert stack_intent(cfg(maxExtraGpus=1)) not in (earlier, stack_intent(cfg(maxExtraGpus=2)))


def test_a_key_recorded_under_serving_evidence_check_is_not_replayed_once_the_stack_requires_evidence() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.operations import stack_intent

    def cfg(**evidence: str) -> InferCraneConfig:
        target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64} | evidence
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})

    assert stack_intent(cfg()) == stack_intent(cfg(servingEvidence="check"))  # the default spelled out
    assert stack_intent(cfg()) != stack_intent(cfg(servingEvidence="require"))


def test_a_canary_policy_is_part_of_the_stack_intent_so_a_key_recorded_without_it_is_not_replayed() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.operations import stack_intent

    def cfg(**rollout: object) -> InferCraneConfig:
        target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target | {"rollout": rollout}, "replicas": replicas})

    without = stack_intent(cfg())
    assert stack_intent(cfg(canary={})) != without
    assert stack_intent(cfg(canary={"required": True})) not in (without, stack_intent(cfg(canary={})))
