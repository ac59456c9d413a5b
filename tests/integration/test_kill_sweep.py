"""Killed at any instant: ``deploy`` and ``destroy`` SIGKILLed as a process group (as a CI runner
kills a timed-out job) at instants spread over a whole run, each followed by the same command
again. Every rerun must converge with no manual step.

File backend; ``INFERCRANE_KILL_SWEEP_POINTS`` kill points per command (default 6 here; ``make
test-kill-sweep`` runs a larger sweep).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.live.readiness import deployment_verdict
from tests.integration.conftest import Project, cli, replica, start_cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"
POINTS = int(os.environ.get("INFERCRANE_KILL_SWEEP_POINTS", "6"))
REPLICAS = 3


def owned(admin: Client, stack: str) -> dict[str, str]:
    """``Kind/name`` -> uid of every live object carrying this stack's annotation."""
    out = {}
    for res in (Deployment, Service):
        for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) == f"infercrane/{stack}":
                out[f"{res.__name__}/{obj.metadata.name}"] = str(obj.metadata.uid)
    return out


def state_dir(project: Project) -> Path:
    return project.root / ".infercrane" / "pulumi-state" / ".pulumi"


def killed(project: Project, after: float, *args: str) -> None:
    proc = start_cli(project, *args)
    time.sleep(after)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it had finished
    proc.wait()


def timed(project: Project, *args: str) -> float:
    began = time.monotonic()
    r = cli(project, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    return time.monotonic() - began


def assert_clean_state(project: Project, stack: str) -> None:
    locks = list((state_dir(project) / "locks").rglob("*.json"))
    assert not locks, locks
    doc = json.loads((state_dir(project) / "stacks" / "infercrane" / f"{stack}.json").read_text())
    assert not doc["checkpoint"]["latest"].get("pending_operations"), doc["checkpoint"]["latest"]["pending_operations"]


def test_a_deploy_killed_at_any_instant_converges_when_rerun_with_the_same_key(project: Project, admin: Client) -> None:
    stack = "itsweepdeploy"
    keys = [f"it-sweep-d{i}" for i in range(REPLICAS)]
    project.stack(stack, [replica(k) for k in keys])
    span = timed(project, "deploy", "--stack", stack)  # one whole run, to spread the kill points over
    assert cli(project, "destroy", "--stack", stack).returncode == 0
    results = []
    for i in range(POINTS):
        at = span * (i + 0.5) / POINTS
        key = f"sweep-{i}"
        killed(project, at, "deploy", "--stack", stack, "--idempotency-key", key)
        before = owned(admin, stack)
        r = cli(project, "deploy", "--stack", stack, "--idempotency-key", key)
        assert r.returncode == 0, f"rerun after a kill at {at:.2f} s failed:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr
        after = owned(admin, stack)
        assert len(after) == 2 * REPLICAS, after  # no duplicates, nothing missing
        assert {k: v for k, v in after.items() if k in before} == before, f"kill at {at:.2f} s: an object was recreated"
        for k in keys:
            dep = admin.get(Deployment, naming.object_name(k), namespace=NS)
            assert deployment_verdict(dep.to_dict(), 1).state == "ready"
        assert_clean_state(project, stack)
        third = cli(project, "deploy", "--stack", stack, "--idempotency-key", key)
        assert third.returncode == 0 and "already applied at" in third.stdout, third.stdout + third.stderr[-2000:]
        results.append((round(at, 2), len(before)))
        assert cli(project, "destroy", "--stack", stack).returncode == 0
    print(f"deploy kill sweep: {POINTS} kill points over {span:.1f} s, all converged; objects live at each kill: {results}")


def test_a_destroy_killed_at_any_instant_leaves_zero_objects_and_an_empty_state_when_rerun(
    project: Project, admin: Client
) -> None:
    stack = "itsweepdestroy"
    keys = [f"it-sweep-x{i}" for i in range(REPLICAS)]
    project.stack(stack, [replica(k) for k in keys])
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    span = timed(project, "destroy", "--stack", stack)
    for i in range(POINTS):
        at = span * (i + 0.5) / POINTS
        assert cli(project, "deploy", "--stack", stack).returncode == 0
        killed(project, at, "destroy", "--stack", stack)
        r = cli(project, "destroy", "--stack", stack)
        assert r.returncode == 0, f"rerun after a kill at {at:.2f} s failed:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr
        assert owned(admin, stack) == {}
        assert_clean_state(project, stack)
        doc = json.loads((state_dir(project) / "stacks" / "infercrane" / f"{stack}.json").read_text())
        assert [r["type"] for r in doc["checkpoint"]["latest"].get("resources") or []] == [], doc
    print(f"destroy kill sweep: {POINTS} kill points over {span:.1f} s, all converged")
