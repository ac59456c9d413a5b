"""Two real nodes of one plane (``local start --real-nodes 2``), each its own kubelet, containerd
and image store, bridge and /24, cgroup root and ports: a replica on each pulls the release into
its own node's store, and an in-place rollout under warm-first warms the second node one wave
ahead -- its prefetch pulls onto that node while the first wave restarts -- so each successor
starts with every image present. One node could not show it: its second wave found the release
its first had pulled."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from lightkube import Client

from infercrane.core.state import urns
from infercrane.live.status.prefetch import PREFETCHER
from infercrane.local import node_files
from infercrane.project.tools import find_tool
from tests.integration.conftest import Project, cli
from tests.integration.test_model_images import forget, grant, model_image
from tests.integration.test_real_node import double, on_node
from tests.integration.test_serving import key_file, namespace_with_evidence, pods


def held(state: Path, n: node_files.RealNode) -> str:
    """What node ``n``'s containerd lists (its own store)."""
    ctr = [str(find_tool("ctr")), "--address", str(n.home(state) / "containerd.sock"), "-n", "k8s.io"]
    return subprocess.run([*ctr, "images", "ls"], capture_output=True, text=True, check=True).stdout


def test_each_real_node_pulls_into_its_own_store_and_warm_first_warms_the_next_node_one_wave_ahead(
    project: Project, admin: Client, second_node: str, tmp_path: Path
) -> None:
    ns, keys = "it-two", ["it-two-r0", "it-two-r1"]
    namespace_with_evidence(admin, ns)
    grant(admin, ns)
    grant(admin, ns, PREFETCHER)
    env = key_file(tmp_path)
    state = project.plane.state
    first, following = model_image(state), model_image(state, "double-7b-next")

    def stack(model: str) -> Any:
        # 2 of a node's 3 GPUs each: one replica per node, and in place a successor fits only where its predecessor ran
        replicas = [on_node(k, modelImage=model, gpuCount=2, drain={"preStopSeconds": 0}) for k in keys]
        rollout = {"maxUnavailable": 1, "maxSurge": 0, "warmFirst": True}
        return project.stack("ittwo", replicas, imageDigest=double(), namespace=ns, rollout=rollout)

    digest = first.rsplit("@", 1)[1]
    for n in node_files.NODES:
        forget(state, first.removeprefix("oci://"), on=n)
        assert digest not in held(state, n)
    engine = stack(first)
    done = cli(project, "deploy", "--stack", "ittwo", env=env)
    assert done.returncode == 0, done.stderr
    placed = {k: pods(admin, ns, k)[0].spec.nodeName for k in keys}
    assert sorted(placed.values()) == sorted([node_files.NAME, second_node]), placed
    for n in node_files.NODES:  # each node pulled the model image into its own store
        assert digest in held(state, n), n.name
    starts = urns.stack_outputs(engine.state())["starts"]
    assert not any(starts[k]["imagePresent"] for k in keys), starts  # each a pull of its own

    for n in node_files.NODES:
        forget(state, following.removeprefix("oci://"), on=n)
    engine = stack(following)
    done = cli(project, "deploy", "--stack", "ittwo", env=env)
    assert done.returncode == 0, done.stderr
    for k in keys:  # the second wave's node warmed while the first wave restarted: no "already there"
        assert f"warm-first: {k}: pulled 1 image(s) onto {placed[k]} in " in done.stderr, done.stderr
    starts = urns.stack_outputs(engine.state())["starts"]
    assert all(starts[k]["imagePresent"] for k in keys), starts
    assert {k: pods(admin, ns, k)[0].spec.nodeName for k in keys} == placed  # in place: each on its own node again
    assert cli(project, "destroy", "--stack", "ittwo").returncode == 0
    for n in node_files.NODES:  # the nodes' stores as the tests after it expect them: neither model image pulled
        forget(state, first.removeprefix("oci://"), following.removeprefix("oci://"), on=n)
