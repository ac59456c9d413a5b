"""The test bed shows the drain window on the kwok nodes too: a plane started with ``pod_grace``
(``local start --pod-grace``) keeps a deleted pod, terminating, until its grace period ends -- as an
engine draining to its last second would -- instead of deleting it at once. An in-place cutover on
a pool of exactly its GPUs then starts each successor's pod only once its predecessor's pod is
gone: the lane counts a deleted replica's GPUs as free only when its pods are (foreground deletion)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from infercrane.local.applying import admin_client
from infercrane.local.plane import Plane
from tests.integration.conftest import Project, cli, kwok_plane

pytestmark = pytest.mark.integration
NS = "infercrane-system"
NODES = {"nodes": [{"name": "kwok-grace-0", "gpuProduct": "NVIDIA-L40S", "gpus": 2}]}
DRAIN = {"preStopSeconds": 2, "shutdownSeconds": 3}  # grace: 2 + 3 + 5 = 10 s


@pytest.fixture(scope="module")
def grace_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from kwok_plane(tmp_path_factory, "grace-plane", NODES, pod_grace=True)


@pytest.fixture
def graced(tmp_path: Path, grace_plane: Plane, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    admin = admin_client(grace_plane.kubeconfig)
    p = Project(tmp_path, grace_plane, pulumi_home, monkeypatch)
    yield p
    p.cleanup(admin)


class PodLog:
    """Every pod seen, by name: when it was created and the time its deletion set (deletion + grace)."""

    def __init__(self, admin: Client) -> None:
        self.admin, self.stop = admin, threading.Event()
        self.gone_at: dict[str, float] = {}
        self.seen: dict[str, tuple[datetime, datetime | None, str]] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            now = {p.metadata.name: p for p in self.admin.list(Pod, namespace=NS)}
            for name, p in now.items():
                instance = (p.metadata.labels or {}).get("app.kubernetes.io/instance", "")
                self.seen[name] = (p.metadata.creationTimestamp, p.metadata.deletionTimestamp, instance)
            for name in set(self.seen) - set(now):
                self.gone_at.setdefault(name, time.time())
            time.sleep(0.2)

    def __enter__(self) -> PodLog:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def test_a_cutover_on_a_full_pool_starts_each_successor_only_once_its_predecessors_pod_has_drained_away(
    graced: Project, grace_plane: Plane
) -> None:
    admin = admin_client(grace_plane.kubeconfig)
    old, new = ["grc-o0", "grc-o1"], ["grc-n0", "grc-n1"]

    def rep(key: str) -> dict[str, Any]:
        return {"key": key, "model": "Qwen/Qwen3-8B", "name": "grc", "gpu": "NVIDIA-L40S", "drain": DRAIN}

    graced.stack("itgrace", [rep(k) for k in old])
    r = cli(graced, "deploy", "--stack", "itgrace")
    assert r.returncode == 0, r.stderr[-3000:]
    graced.stack("itgrace", [rep(k) for k in new])
    with PodLog(admin) as log:
        r = cli(graced, "deploy", "--stack", "itgrace")
    assert r.returncode == 0, r.stderr[-3000:]
    olds = [(c, d) for c, d, _ in log.seen.values() if d is not None]
    news = sorted(c for name, (c, d, _) in log.seen.items() if d is None and name not in log.gone_at)
    assert len(olds) == 2 and len(news) == 2, log.seen
    ends = sorted(d for _, d in olds)  # each old pod's deletion + its 10 s grace, as the API server set it
    for name, (_, d, _) in log.seen.items():  # the kwok node kept each one, terminating, for its whole grace
        if d is not None:
            assert log.gone_at[name] >= d.timestamp() - 1, f"{name} went {d.timestamp() - log.gone_at[name]:.1f} s early"
    # On the kwok node each old pod stayed terminating for its grace; each successor's pod was made after one had gone.
    for made, freed in zip(news, ends, strict=True):
        assert made >= freed, f"a successor's pod made at {made}, before a predecessor's grace ended at {freed}"
    assert cli(graced, "destroy", "--stack", "itgrace").returncode == 0
