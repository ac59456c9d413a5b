"""Killed at any instant: ``deploy`` and ``destroy`` SIGKILLed as a process group (as a CI runner
kills a timed-out job) at instants spread over a whole run -- every ``INFERCRANE_KILL_SWEEP_STEP``
seconds (default 1.0 for deploy, a quarter of that for destroy; ``make test-kill-sweep`` runs
0.25) and at each phase boundary the progress events report -- each followed by the same
command again, on the file backend and on Pulumi's PostgreSQL backend. Every rerun must converge
with no manual step: all replicas ready, no duplicates, the objects created before the kill keep
their uid, no pending operation or lock left, and a third run replays; a destroy rerun leaves zero
owned objects and an empty state. Each sweep prints how many kill points it tried.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.engine import backend
from infercrane.engine.workspace import Engine
from infercrane.live.readiness import deployment_verdict
from tests.integration.conftest import Project, cli, replica, start_cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"
STEP = float(os.environ.get("INFERCRANE_KILL_SWEEP_STEP", "1.0"))
REPLICAS = 3


@pytest.fixture(params=["file", "postgres"])
def swept(request: pytest.FixtureRequest, project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    if request.param == "postgres":
        monkeypatch.setenv("PULUMI_BACKEND_URL", request.getfixturevalue("postgres"))
    return project


def owned(admin: Client, stack: str) -> dict[str, str]:
    """``Kind/name`` -> uid of every live object carrying this stack's annotation."""
    out = {}
    for res in (Deployment, Service):
        for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) == f"infercrane/{stack}":
                out[f"{res.__name__}/{obj.metadata.name}"] = str(obj.metadata.uid)
    return out


def kill_at(
    project: Project, args: list[str], *, after: float | None = None, when: Callable[[dict[str, Any]], bool] | None = None
) -> bool:
    """Run the CLI and SIGKILL its process group ``after`` seconds, or at the first progress event
    (``--json`` on stderr) that ``when`` accepts. Returns whether the kill landed (the run had not
    finished)."""
    proc = start_cli(project, *args, "--json", capture=when is not None)
    hit = threading.Event()
    if when is not None:

        def watch() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and when(event):
                    break
            hit.set()  # the event, or the run ended without it

        threading.Thread(target=watch, daemon=True).start()
        hit.wait(timeout=120)
    else:
        time.sleep(after or 0)
    landed = proc.poll() is None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        landed = False
    proc.wait()
    return landed


def assert_clean_state(project: Project, stack: str) -> dict[str, Any]:
    engine = Engine(stack, project_dir=project.root)
    url = engine.backend_url()
    store = backend.store_for(url)
    assert store is not None
    assert store.locks("infercrane", stack) == [], "a lock was left"
    state = engine.state()
    assert not state.get("pending_operations"), state["pending_operations"]
    return state


def run_ok(project: Project, *args: str) -> Any:
    r = cli(project, *args)
    assert r.returncode == 0, f"{' '.join(args)}:\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr
    return r


def test_a_deploy_killed_at_any_instant_converges_when_rerun_with_the_same_key(swept: Project, admin: Client) -> None:
    stack = "itsweepdeploy"
    keys = [f"it-sweep-d{i}" for i in range(REPLICAS)]
    swept.stack(stack, [replica(k) for k in keys])
    began = time.monotonic()
    run_ok(swept, "deploy", "--stack", stack)
    span = time.monotonic() - began  # one whole run, to spread the kill points over
    run_ok(swept, "destroy", "--stack", stack)
    points: list[tuple[str, Any]] = [(f"{t:.2f}s", t) for t in (STEP * (i + 0.5) for i in range(int(span / STEP) + 1))]
    points += [
        ("first object applied", lambda e: e.get("event") == "applied" and e.get("applied") == 0),
        ("first replica applied", lambda e: (e.get("applied") or 0) >= 1),
        ("waiting for readiness", lambda e: e.get("event") == "readiness"),
    ]
    tried = []
    for i, (label, at) in enumerate(points):
        key = f"sweep-{i}"
        args = ["deploy", "--stack", stack, "--idempotency-key", key]
        landed = kill_at(swept, args, after=at) if isinstance(at, float) else kill_at(swept, args, when=at)
        before = owned(admin, stack)
        run_ok(swept, *args)
        after = owned(admin, stack)
        assert len(after) == 2 * REPLICAS, (label, after)  # no duplicates, nothing missing
        assert {k: v for k, v in after.items() if k in before} == before, f"kill at {label}: an object was recreated"
        for k in keys:
            dep = admin.get(Deployment, naming.object_name(k), namespace=NS)
            assert deployment_verdict(dep.to_dict(), 1).state == "ready", label
        assert_clean_state(swept, stack)
        third = run_ok(swept, *args)
        assert "already applied at" in third.stdout, (label, third.stdout)
        tried.append(f"{label}{'' if landed else ' (finished first)'}: {len(before)} live")
        run_ok(swept, "destroy", "--stack", stack)
    print(f"deploy kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged: {tried}")


def test_a_destroy_killed_at_any_instant_leaves_zero_objects_and_an_empty_state_when_rerun(swept: Project, admin: Client) -> None:
    stack = "itsweepdestroy"
    keys = [f"it-sweep-x{i}" for i in range(REPLICAS)]
    swept.stack(stack, [replica(k) for k in keys])
    run_ok(swept, "deploy", "--stack", stack)
    began = time.monotonic()
    run_ok(swept, "destroy", "--stack", stack)
    span = time.monotonic() - began
    step = STEP / 4
    points = [step * (i + 0.5) for i in range(int(span / step) + 1)]
    for at in points:
        run_ok(swept, "deploy", "--stack", stack)
        kill_at(swept, ["destroy", "--stack", stack], after=at)
        run_ok(swept, "destroy", "--stack", stack)
        assert owned(admin, stack) == {}, at
        state = assert_clean_state(swept, stack)
        assert [r["type"] for r in state.get("resources") or [] if r["type"] != "pulumi:pulumi:Stack"] == [], at
    print(f"destroy kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged")
