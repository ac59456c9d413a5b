"""Faults: a deploy killed like a CI runner kills it (SIGKILL to the whole process group) while it
waits for readiness; the retry -- same command, same key -- converges without a manual step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment

from infercrane import naming
from infercrane.readiness import deployment_verdict
from tests.integration.conftest import ROOT, Project, get_or_none, kubectl, replica, wait_for
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"
L40S_NODES = ("kwok-l40s-0", "kwok-l40s-1")


def test_deploy_killed_while_waiting_is_retried_with_the_same_key_and_converges(project: Project, admin: Client) -> None:
    key = "it-killed-r0"
    name = naming.object_name(key)
    project.stack("itkilled", [replica(key)])
    for node in L40S_NODES:  # no L40S may take the pod yet: the deploy is still waiting when killed
        assert kubectl(project.plane, "cordon", node).returncode == 0
    try:
        env = dict(os.environ) | {"INFERCRANE_PROJECT_DIR": str(project.root), "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "infercrane", "deploy", "--stack", "itkilled", "--idempotency-key", "ci-run-41"],
            cwd=project.root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(lambda: get_or_none(admin, Deployment, name), "the Deployment to be applied", timeout=120)
        time.sleep(2)  # inside the readiness wait
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        locks = list((project.root / ".infercrane" / "pulumi-state" / ".pulumi" / "locks").rglob("*.json"))
        assert locks, "the killed update should have left its lock behind"
    finally:
        for node in L40S_NODES:
            kubectl(project.plane, "uncordon", node)
    r = cli(project, "deploy", "--stack", "itkilled", "--idempotency-key", "ci-run-41")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "removed the lock of stack 'itkilled' left by pulumi process" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr
    dep = admin.get(Deployment, name, namespace=NS)
    assert deployment_verdict(dep.to_dict(), 1).state == "ready"
    r = cli(project, "deploy", "--stack", "itkilled", "--idempotency-key", "ci-run-41")
    assert r.returncode == 0 and "already applied at" in r.stdout
    assert cli(project, "destroy", "--stack", "itkilled").returncode == 0
