"""Faults on a plane of their own: the API server or etcd killed in the middle of a ``deploy``,
and a ``destroy`` killed like a CI runner kills it. Each fails within a bounded time with one
message and no traceback, and the same command (same key) converges once the plane is back.

These tests kill and restart control-plane processes, so they run on their own plane (the
session's shared plane must keep its ports for the other tests' clients).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.live.status.readiness import API_GRACE_SECONDS
from infercrane.live.status.verdicts import deployment_verdict
from infercrane.local.applying import admin_client
from infercrane.local.plane import Plane
from tests.integration.conftest import Project, kill_as_ci, start_cli, wait_for
from tests.integration.conftest import replica as make_replica

pytestmark = pytest.mark.integration
NS = "infercrane-system"


@pytest.fixture(scope="module")
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    p = Plane(tmp_path_factory.mktemp("outage-plane"))
    p.start(progress=lambda m: None, real_node=False)  # the real node is its own group's
    yield p
    p.stop(quiet=True)


@pytest.fixture
def outage(tmp_path: Path, own_plane: Plane, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return Project(tmp_path, own_plane, pulumi_home, monkeypatch)


def _kill(plane: Plane, component: str) -> None:
    pid = plane._read_record()["processes"][component]["pid"]
    os.kill(pid, signal.SIGKILL)


def _run(project: Project, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = start_cli(project, *args, capture=True)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ours(admin: Client, stack: str) -> list[str]:
    names = []
    for res in (Deployment, Service):
        for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) == f"infercrane/{stack}":
                names.append(f"{res.__name__}/{obj.metadata.name}")
    return names


def _converges(project: Project, stack: str, key: str, keys: list[str]) -> None:
    r = _run(project, "deploy", "--stack", stack, "--idempotency-key", key)
    assert r.returncode == 0, r.stderr[-3000:]
    admin = admin_client(project.plane.kubeconfig)

    def ready(k: str) -> bool:
        dep = admin.get(Deployment, naming.object_name(k), namespace=NS)
        return deployment_verdict(dep.to_dict(), int(dep.metadata.generation or 0)).state == "ready"

    # Ready when the deploy returned; the restarted plane's controllers may still resync pods
    # for a moment afterwards, so readiness is checked until it holds.
    for k in keys:
        wait_for(lambda k=k: ready(k), f"replica {k} ready", timeout=90)
    r = _run(project, "deploy", "--stack", stack, "--idempotency-key", key)
    assert r.returncode == 0 and "already applied at" in r.stdout, r.stderr[-2000:]


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_control_plane_lost_mid_deploy_fails_bounded_without_traceback_and_the_retry_converges(
    outage: Project, component: str
) -> None:
    stack = f"itlost-{component.split('-')[-1]}"
    keys = [f"it-lost-{component[:4]}-r{i}" for i in range(3)]
    outage.stack(stack, [make_replica(k) for k in keys])
    admin = admin_client(outage.plane.kubeconfig)
    proc = start_cli(outage, "deploy", "--stack", stack, "--idempotency-key", "ci-run-7", capture=True)
    wait_for(lambda: _ours(admin, stack), "the first object applied", timeout=180, interval=0.1)
    _kill(outage.plane, component)
    lost = time.monotonic()
    try:
        out, err = proc.communicate(timeout=API_GRACE_SECONDS + 150)
        took = time.monotonic() - lost
        assert proc.returncode == 1, (out, err[-3000:])
        assert "Traceback" not in err and "Traceback" not in out
        # One message: what happened and the next step (same command, same key).
        assert "stopped answering" in err and "--idempotency-key" in err, err[-3000:]
        assert took < API_GRACE_SECONDS + 120, f"took {took:.0f}s after the {component} was killed"
    finally:  # the plane back (new ports, same etcd data) -- also for the next test when this one fails
        outage.plane.start(progress=lambda m: None, real_node=False)
    _converges(outage, stack, "ci-run-7", keys)
    r = _run(outage, "destroy", "--stack", stack)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _ours(admin_client(outage.plane.kubeconfig), stack) == []


def test_a_destroy_killed_midway_is_rerun_and_leaves_zero_objects_and_an_empty_state(outage: Project) -> None:
    stack = "itkilldestroy"
    keys = [f"it-kd-r{i}" for i in range(3)]
    engine = outage.stack(stack, [make_replica(k) for k in keys])
    r = _run(outage, "deploy", "--stack", stack)
    assert r.returncode == 0, r.stderr[-3000:]
    admin = admin_client(outage.plane.kubeconfig)
    before = len(_ours(admin, stack))
    assert before == 6
    proc = start_cli(outage, "destroy", "--stack", stack, capture=True)
    wait_for(lambda: len(_ours(admin, stack)) < before, "the first object deleted", timeout=60, interval=0.01)
    kill_as_ci(proc)
    r = _run(outage, "destroy", "--stack", stack, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["remaining"] == [] and _ours(admin, stack) == []
    assert "Traceback" not in r.stderr
    assert not [res for res in engine.state().get("resources") or []], "the state should be empty"
