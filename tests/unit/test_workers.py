"""`make test`'s scheduling among xdist workers (tests/workers.py): modules whole, the real node's on gw0."""

from __future__ import annotations

from typing import Any

import pytest

from tests import workers
from tests.workers import REAL_NODE_GROUP, PlaneScheduling


class Node:
    """A worker as the scheduler sees it: its id, the tests sent to it, whether it was told to stop."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.stopped = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.stopped = True


COLLECTION = [
    "tests/unit/test_a.py::test_1",
    "tests/integration/test_kserve.py::test_1",
    "tests/integration/test_rollout.py::test_1",
    "tests/integration/test_rollout.py::test_2[surge]",
    "tests/integration/test_serving.py::test_1",
    "tests/integration/test_canary.py::test_1",
]


def scheduler(nodes: list[Node]) -> Any:
    sched = PlaneScheduling.__new__(PlaneScheduling)  # no xdist session: the parts the assignment reads
    sched.workqueue, sched.assigned_work = {}, {}
    sched.registered_collections = {n: COLLECTION for n in nodes}
    for nodeid in COLLECTION:
        sched.workqueue.setdefault(sched._split_scope(nodeid), {})[nodeid] = False
    return sched


def names(node: Node) -> list[str]:
    return [COLLECTION[i] for i in node.sent]


def test_the_real_nodes_modules_are_one_unit_and_every_other_module_stays_whole() -> None:
    sched = scheduler([])
    assert list(sched.workqueue) == [
        "tests/unit/test_a.py",
        "tests/integration/test_kserve.py",
        "tests/integration/test_rollout.py",
        REAL_NODE_GROUP,
    ]
    assert sorted(sched.workqueue[REAL_NODE_GROUP]) == sorted(
        ["tests/integration/test_serving.py::test_1", "tests/integration/test_canary.py::test_1"]
    )


def test_gw0_takes_the_real_nodes_unit_and_the_others_the_longest_integration_modules_first() -> None:
    gw1, gw0, gw2 = Node("gw1"), Node("gw0"), Node("gw2")
    sched = scheduler([gw1, gw0, gw2])
    for node in (gw1, gw0, gw2):
        sched._assign_work_unit(node)
    assert sorted(names(gw0)) == sorted(["tests/integration/test_serving.py::test_1", "tests/integration/test_canary.py::test_1"])
    assert names(gw1) == ["tests/integration/test_rollout.py::test_1", "tests/integration/test_rollout.py::test_2[surge]"]
    assert names(gw2) == ["tests/integration/test_kserve.py::test_1"]
    sched._assign_work_unit(gw2)
    assert names(gw2)[-1] == "tests/unit/test_a.py::test_1"  # the fast tiers last


def test_a_worker_other_than_gw0_never_takes_the_real_nodes_unit_and_stops_when_only_it_is_left() -> None:
    gw1 = Node("gw1")
    sched = scheduler([gw1])
    for _ in range(3):
        sched._assign_work_unit(gw1)
    assert not any("serving" in n or "canary" in n for n in names(gw1))
    sched._assign_work_unit(gw1)
    assert gw1.stopped and list(sched.workqueue) == [REAL_NODE_GROUP]


def test_a_replica_for_the_real_node_from_an_unlisted_module_fails_and_names_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/integration/test_canary.py::test_1 (call)")
    workers.require_the_real_node()  # listed: passes
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/integration/test_dra.py::test_1 (call)")
    with pytest.raises(pytest.fail.Exception, match="add it to REAL_NODE_MODULES in tests/workers.py"):
        workers.require_the_real_node()


def test_a_real_node_test_on_a_plane_without_the_node_fails_at_once_with_the_machines_reason() -> None:
    why = "runc is not installed (/usr/sbin/runc); fix: `apt-get install runc containernetworking-plugins` as root"
    with pytest.raises(pytest.fail.Exception) as failed:
        workers.fail_without_the_real_node("tests/integration/test_canary.py::test_1", False, lambda: why)
    assert str(failed.value) == f"the real node's tests need the plane's real node, which this machine cannot run: {why}"
    with pytest.raises(pytest.fail.Exception, match="it did not start; see the plane's logs"):
        workers.fail_without_the_real_node("tests/integration/test_serving.py::test_1", False, lambda: None)


def test_a_real_node_test_with_the_node_and_any_other_test_without_it_go_on() -> None:
    def never() -> str:
        raise AssertionError("the reason is asked for only when a test fails for it")

    workers.fail_without_the_real_node("tests/integration/test_canary.py::test_1", True, never)
    workers.fail_without_the_real_node("tests/integration/test_dra.py::test_1", False, never)
