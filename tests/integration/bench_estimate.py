"""Bench, not a test (``make bench-estimate`` runs it; ``make test`` collects only ``test_*.py``):
``plan``'s predicted rollout duration against the measured ``deploy`` on the real node.

Two replicas of the engine double (a test double of the engines' interfaces, never an engine)
that load for ``INFERCRANE_BENCH_LOAD`` seconds (default 20) before their ``/health`` answers,
with the default drain (a 10 s preStop): deployed once (which records each replica's start), then
rolled to a new pod template in place (maxUnavailable 1) and under a surge (maxSurge 1), each
roll planned first. Prints, per roll, the plan's estimate beside the measured deploy; asserts
only that both ran."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.integration.conftest import Project
from tests.integration.test_cli_ops import cli
from tests.integration.test_real_node import double, on_node

pytestmark = pytest.mark.integration
LOAD = os.environ.get("INFERCRANE_BENCH_LOAD", "20")


def test_plan_predicts_the_real_nodes_rollouts(project: Project) -> None:
    keys = ["bench-est-r0", "bench-est-r1"]

    def stack(release: str, rollout: dict[str, int]) -> None:
        env = [{"name": "INFERCRANE_DOUBLE_LOAD_SECONDS", "value": LOAD}, {"name": "BENCH_RELEASE", "value": release}]
        replicas = [on_node(k, pod={"env": env}) for k in keys]
        project.stack("benchest", replicas, imageDigest=double(), rollout=rollout)

    stack("0", {"maxUnavailable": 1, "maxSurge": 0})
    first = cli(project, "deploy", "--stack", "benchest")
    assert first.returncode == 0, first.stderr
    rows = []
    for i, (mode, rollout) in enumerate(
        (("in place", {"maxUnavailable": 1, "maxSurge": 0}), ("surge", {"maxUnavailable": 0, "maxSurge": 1})), 1
    ):
        stack(str(i), rollout)
        planned = cli(project, "plan", "--stack", "benchest", "--json")
        assert planned.returncode == 3, planned.stderr
        predicted = json.loads(planned.stdout)["estimate"]["seconds"]
        began = time.monotonic()
        done = cli(project, "deploy", "--stack", "benchest")
        took = time.monotonic() - began
        assert done.returncode == 0, done.stderr
        rows.append(f"| {mode} | {predicted:.1f} s | {took:.1f} s | {(took - predicted) / predicted:+.0%} |")
    assert cli(project, "destroy", "--stack", "benchest").returncode == 0
    print(f"\n2 replicas on the real node, the engine double loading {LOAD} s, a 10 s preStop")
    print("| roll | plan's estimate | measured deploy | measured against the estimate |\n|---|---|---|---|")
    print("\n".join(rows))
