"""How `make test` shares the tests among pytest-xdist workers (``pytest -n N``).

Each worker is a pytest session of its own: its own local plane, PostgreSQL and Pulumi home, so
the integration tests of two workers share nothing but the machine. Three rules make that safe:

- an integration module runs whole on one worker (its module-scoped plane starts once);
- the modules of :data:`REAL_NODE_MODULES` need the plane's real node, of which a machine has one
  (its bridge, its GPUs): they run together on :data:`REAL_NODE_WORKER`, the only worker whose
  plane asks for it (``tests/integration/conftest.py``); a test that puts a replica on the node
  from another module fails at once and says so (:func:`require_the_real_node`);
- the longest work goes out first: the real node's modules and the exhaustive check's, then the
  other integration modules by their number of tests, then the fast tiers, which fill the gaps.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

REAL_NODE_MODULES = frozenset(
    f"tests/integration/{m}.py"
    for m in (
        "bench_estimate",
        "bench_warm",
        "test_canary",
        "test_model_images",
        "test_plane_doors",
        "test_real_node",
        "test_serving",
        "test_two_real_nodes",
    )
)
REAL_NODE_GROUP = "the real node's modules"
#: Modules of the fast tiers that run for minutes (the exhaustive check's larger worlds): given out
#: first, beside the real node's, never left for the end where one worker would run them alone.
LONG_MODULES = frozenset(f"tests/unit/core/plan/{m}.py" for m in ("test_rollout_exhaustive", "test_rollout_found"))
REAL_NODE_WORKER = "gw0"


def runs_the_real_node() -> bool:
    """Whether this pytest process runs the real node's tests (a lone session always does)."""
    return os.environ.get("PYTEST_XDIST_WORKER", REAL_NODE_WORKER) == REAL_NODE_WORKER


def require_the_real_node() -> None:
    """Fail the running test unless its module is one of :data:`REAL_NODE_MODULES`: on another
    worker's plane a replica for the node would wait for a node that is not there."""
    running = os.environ.get("PYTEST_CURRENT_TEST", "")
    module = running.split("::", 1)[0]
    if module and module not in REAL_NODE_MODULES:
        pytest.fail(f"{module} puts a replica on the real node: add it to REAL_NODE_MODULES in tests/workers.py")


def fail_without_the_real_node(nodeid: str, has_node: bool, why_not: Callable[[], str | None]) -> None:
    """Fail a test of :data:`REAL_NODE_MODULES` at once when its plane started without the real
    node, with the machine's reason (``why_not``): its replicas would wait for a node that is not
    there until the command's timeout, ten minutes each, and the tier would never end in CI's time."""
    if nodeid.split("::", 1)[0] in REAL_NODE_MODULES and not has_node:
        why = why_not() or "it did not start; see the plane's logs"
        pytest.fail(f"the real node's tests need the plane's real node, which this machine cannot run: {why}", pytrace=False)


class PlaneScheduling(LoadScopeScheduling):
    """Load scheduling by module, the real node's modules as one unit on their worker."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return REAL_NODE_GROUP if module in REAL_NODE_MODULES else module

    def _order(self, scope: str) -> tuple[int, int]:
        rank = 0 if scope in LONG_MODULES else 1 if scope.startswith("tests/integration/") else 2
        return (rank, -len(self.workqueue[scope]))

    def _assign_work_unit(self, node: WorkerController) -> None:
        if node.gateway.id == REAL_NODE_WORKER and REAL_NODE_GROUP in self.workqueue:
            scope = REAL_NODE_GROUP
        else:
            others = [s for s in self.workqueue if s != REAL_NODE_GROUP]
            if not others:  # only the real node's modules are left, and they are not this worker's
                node.shutdown()
                return
            scope = min(others, key=self._order)
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])
