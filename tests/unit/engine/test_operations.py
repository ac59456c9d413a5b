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
