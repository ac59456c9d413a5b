from __future__ import annotations

from typing import Any

import pytest

from infercrane.core import loading
from infercrane.core.urns import slot_of
from infercrane.engine.operations import EventCollector, _op_class, summarize

STACK = "urn:pulumi:dev::infercrane::"


@pytest.mark.parametrize(
    ("urn", "slot"),
    [
        (STACK + "infercrane:index:Replica::qwen-0", "qwen-0"),
        (STACK + "infercrane:index:Replica$kubernetes:apps/v1:Deployment::qwen-0-deployment", "qwen-0"),
        (STACK + "infercrane:index:Replica$kubernetes:core/v1:Service::qwen-1-service", "qwen-1"),
        (STACK + "pulumi:providers:kubernetes::infercrane", None),
        (STACK + "pulumi:pulumi:Stack::infercrane-dev", None),
    ],
    ids=["component", "deployment", "service", "provider", "stack"],
)
def test_slot_of_urn(urn: str, slot: str | None) -> None:
    assert slot_of(urn) == slot


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


def test_summary_per_replica_with_removed_slot(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    col = EventCollector()
    col.ops = {"qwen-kubernetes-0": {"same", "update"}, "old-0": {"delete"}}
    (kept, removed) = summarize(c, col, "dev")
    assert (kept.slot, kept.action, kept.key, kept.gpu) == (
        "qwen-kubernetes-0",
        "update",
        "qwen-kubernetes-rev-1-r0",
        "NVIDIA-L40S",
    )
    assert kept.objects[0].startswith("Deployment/infercrane-")
    assert (removed.slot, removed.action, removed.key) == ("old-0", "delete", None)


def test_replace_wins_over_other_ops(values: dict[str, Any]) -> None:
    c = loading.load(values, source="s", env={})
    col = EventCollector()
    col.ops = {"qwen-kubernetes-0": {"same", "replace", "create"}}
    assert summarize(c, col, "dev")[0].action == "replace"


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
