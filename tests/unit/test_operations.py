from __future__ import annotations

from typing import Any

import pytest

from infercrane.core import loading, naming
from infercrane.core.manifests import render_checked
from infercrane.core.urns import component_of
from infercrane.engine.operations import EventCollector, _op_class, summarize

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


@pytest.mark.parametrize(
    ("op", "cls"),
    [
        ("create", "create"),
        ("update", "update"),
        ("same", "same"),
        ("delete", "delete"),
        ("create-replacement", "replace"),
        ("delete-replaced", "replace"),
        ("replace", "replace"),
        ("refresh", "same"),
    ],
)
def test_engine_ops_fold_into_action_classes(op: str, cls: str) -> None:
    assert _op_class(op) == cls


def test_summary_per_replica_by_key_identity_with_a_removed_replica(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    name = naming.object_name("qwen-kubernetes-rev-1-r0")
    gone = naming.object_name("old-key")
    col = EventCollector()
    col.ops = {name: {"same", "update"}, gone: {"delete"}}
    (kept, removed) = summarize(c, col, render_checked(c, "dev"), {gone: "old-key"})
    assert (kept.name, kept.action, kept.key, kept.gpu) == (name, "update", "qwen-kubernetes-rev-1-r0", "NVIDIA-L40S")
    assert kept.objects[0] == f"Deployment/{name}"
    assert (removed.name, removed.action, removed.key) == (gone, "delete", "old-key")


def test_replace_wins_over_other_ops(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    col = EventCollector()
    col.ops = {naming.object_name("qwen-kubernetes-rev-1-r0"): {"same", "replace", "create"}}
    assert summarize(c, col, render_checked(c, "dev"))[0].action == "replace"


@pytest.mark.parametrize(
    ("counts", "done", "text"),
    [
        ({"create": 8}, False, "8 to create"),
        ({"same": 6, "create": 2}, False, "2 to create, 6 unchanged"),
        ({"create": 8}, True, "8 created"),
        ({"update": 1, "delete": 2, "same": 5}, True, "1 updated, 2 deleted, 5 unchanged"),
        ({}, False, "nothing"),
        ({"refresh": 3}, True, "3 refresh"),
    ],
    ids=["create", "mixed", "done", "done-mixed", "empty", "unknown-op"],
)
def test_change_summaries_read_as_words_not_reprs(counts: dict[str, int], done: bool, text: str) -> None:
    from infercrane.engine.operations import describe_changes

    assert describe_changes(counts, done=done) == text


def test_change_summaries_accept_the_automation_apis_op_types() -> None:
    from pulumi.automation import OpType

    from infercrane.engine.operations import describe_changes

    assert describe_changes({OpType.CREATE: 8, OpType.SAME: 1}) == "8 to create, 1 unchanged"
