"""Correctness at fleet scale (speed lives in bench/fleet.py): 30 replicas through the CLI, as the
identity bound to exactly the shipped Role -- all ready when deploy returns, a no-op plan, inspect
agrees, destroy leaves zero owned objects."""

from __future__ import annotations

import json

import pytest
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node

from infercrane.core import naming
from infercrane.live.status.verdicts import deployment_verdict
from infercrane.local.bootstrap import node_manifest
from tests.integration.conftest import Project, replica, wait_for
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"
N = 30
EXTRA_NODES = [f"kwok-scale-{i}" for i in range(8)]  # 8 x 4 L40S GPUs on top of the plane's 8


def test_thirty_replicas_deploy_ready_plan_noop_inspect_and_destroy_to_zero(project: Project, admin: Client) -> None:
    for name in EXTRA_NODES:
        admin.create(codecs.from_dict(node_manifest({"name": name, "gpuProduct": "NVIDIA-L40S", "gpus": 4})))
    try:
        keys = [f"it-scale-r{i}" for i in range(N)]
        project.stack("itscale", [replica(k) | {"name": f"scale-{i % 3}"} for i, k in enumerate(keys)])
        r = cli(project, "deploy", "--stack", "itscale", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        names = {naming.object_name(k) for k in keys}
        deps = [d for d in admin.list(Deployment, namespace=NS) if d.metadata.name in names]
        assert len(deps) == N and all(deployment_verdict(d.to_dict(), 1).state == "ready" for d in deps)

        r = cli(project, "plan", "--stack", "itscale", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        assert {p["action"] for p in json.loads(r.stdout)["replicas"]} == {"same"}

        r = cli(project, "inspect", "--stack", "itscale", "--json")
        assert [rec["state"] for rec in json.loads(r.stdout)["replicas"]] == ["ready"] * N

        # Half the GPU nodes go away: the replicas that ran there lose their pods and cannot be
        # rescheduled (no free GPU). They are reported provisioning with no endpoint; nothing of
        # ours is deleted, nothing foreign adopted.
        for name in EXTRA_NODES:
            admin.delete(Node, name)

        def affected() -> list[dict[str, object]]:
            doc = json.loads(cli(project, "inspect", "--stack", "itscale", "--json").stdout)
            return [rec for rec in doc["replicas"] if rec["state"] != "ready"]

        lost = wait_for(lambda: affected() or None, "replicas on the deleted nodes to be reported", timeout=180)
        assert all(rec["state"] == "provisioning" and rec["endpoint"] is None for rec in lost)
        assert len([d for d in admin.list(Deployment, namespace=NS) if d.metadata.name in names]) == N

        r = cli(project, "destroy", "--stack", "itscale", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads(r.stdout)["remaining"] == []
        assert not [d for d in admin.list(Deployment, namespace=NS) if d.metadata.name in names]
    finally:
        for name in EXTRA_NODES:
            if get_or_none_node(admin, name):
                admin.delete(Node, name)


def get_or_none_node(admin: Client, name: str) -> object | None:
    try:
        return admin.get(Node, name)
    except Exception:  # noqa: BLE001 - absent
        return None
