"""A shared state backend, as teams run one from many CI runners: Pulumi's PostgreSQL backend on a
throwaway PostgreSQL server (initdb + pg_ctl on loopback, as a non-root user; the ``postgres``
fixture of conftest.py). The same faults as on the file backend: a deploy killed mid-update
leaves its lock in the database and the retry clears it; two deploys racing for one stack never
both hold it."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment

from infercrane.core import naming
from infercrane.engine import backend, stores
from infercrane.live.status.verdicts import deployment_verdict
from tests.integration.conftest import Project, kill_deploy_while_waiting, replica
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"


@pytest.fixture
def shared(project: Project, postgres: str, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("PULUMI_BACKEND_URL", postgres)
    return project


def test_a_deploy_killed_on_a_postgresql_backend_leaves_a_lock_the_retry_clears(
    shared: Project, admin: Client, postgres: str
) -> None:
    key = "it-pg-killed-r0"
    name = naming.object_name(key)
    engine = shared.stack("itpgkilled", [replica(key)])
    store = stores.store_for(postgres)
    assert store is not None
    kill_deploy_while_waiting(shared, admin, "itpgkilled", key, "ci-run-9")
    left = store.locks("infercrane", "itpgkilled")
    assert len(left) == 1 and left[0].host == socket.gethostname(), left
    assert not (shared.root / ".infercrane" / "pulumi-state").exists(), "the state must live in PostgreSQL only"

    r = cli(shared, "deploy", "--stack", "itpgkilled", "--idempotency-key", "ci-run-9")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "removed the lock of stack 'itpgkilled' left by pulumi process" in r.stderr + r.stdout
    assert store.locks("infercrane", "itpgkilled") == []
    dep = admin.get(Deployment, name, namespace=NS)
    assert deployment_verdict(dep.to_dict(), int(dep.metadata.generation or 0)).state == "ready"
    r = cli(shared, "deploy", "--stack", "itpgkilled", "--idempotency-key", "ci-run-9")
    assert r.returncode == 0 and "already applied at" in r.stdout
    # The state read from PostgreSQL directly is what `pulumi stack export` prints.
    exported = engine.export()
    assert backend.checkpoint(store, "infercrane", "itpgkilled") == exported
    r = cli(shared, "plan", "--stack", "itpgkilled", "--json")
    assert r.returncode == 0 and '"basis": "state+live"' in r.stdout, r.stderr[-2000:]
    assert cli(shared, "destroy", "--stack", "itpgkilled").returncode == 0
    assert not [res for res in engine.state().get("resources") or []]


def test_two_deploys_racing_for_one_stack_on_postgresql_never_both_hold_it(shared: Project) -> None:
    rounds = 6
    engine = shared.stack("itpgrace", [replica("it-pg-race-r0")])
    assert cli(shared, "deploy", "--stack", "itpgrace").returncode == 0
    outcomes: list[tuple[int, str]] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for i in range(rounds):
            runs = [
                pool.submit(cli, shared, "deploy", "--stack", "itpgrace", "--idempotency-key", f"race-{i}-{side}")
                for side in "ab"
            ]
            outcomes += [(r.returncode, r.stderr) for r in (f.result() for f in runs)]
    locked = [err for rc, err in outcomes if rc != 0]
    for err in locked:  # a refusal is the lock, said once, with what to do
        assert "is locked by another update" in err and "Traceback" not in err, err[-2000:] + _engine_log(shared, err)
    assert locked, "the two deploys never overlapped: the race was not exercised"
    # Never two through at once: the updates that ran (history) never overlap in time.
    updates = sorted((u["startTime"], u.get("endTime", "")) for u in engine.history() if u["kind"] == "update")
    assert len(updates) == 1 + sum(rc == 0 for rc, _ in outcomes)
    for (_, end), (start, _) in zip(updates, updates[1:], strict=False):
        assert end <= start, f"two updates of one stack overlapped: one ended {end}, the next started {start}"
    assert cli(shared, "destroy", "--stack", "itpgrace").returncode == 0


def _engine_log(project: Project, stderr: str) -> str:
    """The tail of the engine log a failed command named ('pulumi log: …'), for the failure's message."""
    named = [line.split(":", 1)[1].strip() for line in stderr.splitlines() if line.startswith("pulumi log:")]
    log = project.root / named[0] if named else None
    return f"\n--- {named[0]} ---\n" + log.read_text()[-3000:] if log and log.is_file() else ""
