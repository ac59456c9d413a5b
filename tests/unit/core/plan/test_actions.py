"""One vocabulary for actions: the engine's steps fold into it, and plan and deploy read it in
their two forms."""

from __future__ import annotations

import pytest

from infercrane.core.plan.actions import Action, count_words


@pytest.mark.parametrize(
    ("op", "action"),
    [
        ("create", Action.CREATE),
        ("update", Action.UPDATE),
        ("same", Action.SAME),
        ("delete", Action.DELETE),
        ("create-replacement", Action.REPLACE),
        ("delete-replaced", Action.REPLACE),
        ("replace", Action.REPLACE),
        ("refresh", Action.SAME),
        ("read", Action.SAME),
    ],
)
def test_engine_steps_fold_into_one_action_per_replica(op: str, action: Action) -> None:
    assert Action.of_step(op) is action


def test_the_automation_apis_op_types_fold_the_same_way() -> None:
    from pulumi.automation import OpType

    assert Action.of_step(OpType.CREATE_REPLACEMENT) is Action.REPLACE
    assert count_words({OpType.CREATE: 8, OpType.SAME: 1}) == "8 to create, 1 unchanged"


@pytest.mark.parametrize(
    ("action", "planned", "done"),
    [
        (Action.CREATE, "create", "created"),
        (Action.UPDATE, "configure", "configured"),
        (Action.REPLACE, "replace", "replaced"),
        (Action.DELETE, "delete", "deleted"),
        (Action.SAME, "unchanged", "unchanged"),
    ],
)
def test_plan_and_deploy_read_an_action_in_its_two_forms(action: Action, planned: str, done: str) -> None:
    assert (action.planned, action.done) == (planned, done)


def test_the_machine_word_is_the_engines_operation_name() -> None:
    import json

    assert json.dumps({"action": Action.UPDATE}) == '{"action": "update"}'


def test_a_replica_with_several_steps_takes_the_strongest() -> None:
    assert Action.strongest({Action.SAME, Action.UPDATE, Action.CREATE}) is Action.CREATE
    assert Action.strongest({Action.CREATE, Action.REPLACE}) is Action.REPLACE
    assert Action.strongest(set()) is Action.SAME


@pytest.mark.parametrize(
    ("counts", "done", "text"),
    [
        ({"create": 8}, False, "8 to create"),
        ({"same": 6, "create": 2}, False, "2 to create, 6 unchanged"),
        ({"update": 3}, False, "3 to configure"),
        ({"create": 8}, True, "8 created"),
        ({"update": 1, "delete": 2, "same": 5}, True, "1 configured, 2 deleted, 5 unchanged"),
        ({}, False, "nothing"),
        ({"refresh": 3}, True, "3 refresh"),
    ],
    ids=["create", "mixed", "configure", "done", "done-mixed", "empty", "unknown-op"],
)
def test_change_summaries_read_in_the_same_words_as_plan_and_deploy(counts: dict[str, int], done: bool, text: str) -> None:
    assert count_words(counts, done=done) == text


def test_a_replica_has_one_action_by_one_rule_for_both_plans() -> None:
    """Issue #65, 4: a Service deleted out of band was the replica's update in the read-only plan
    and its create in the full plan; both now take the one rule."""
    from infercrane.core.plan.actions import replica_action

    assert replica_action({"Deployment": {Action.SAME}, "Service": {Action.CREATE}}) is Action.CREATE
    assert replica_action({"Deployment": {Action.UPDATE}, "ResourceClaimTemplate": {Action.CREATE}}) is Action.UPDATE
    assert replica_action({"Deployment": {Action.REPLACE}, "Service": {Action.CREATE}}) is Action.REPLACE
    assert replica_action({"Deployment": {Action.SAME}, "Service": {Action.SAME}}) is Action.SAME
