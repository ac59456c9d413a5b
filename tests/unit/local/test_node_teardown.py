"""What a stopped plane's real nodes left is found and cleaned for every node a plane may run --
the second's bridge, cgroup root, mounts and shims as the first's -- and the host's settings are
given back once, after both. On a stand-in cgroup hierarchy (a temporary directory) and a
recording double of ``ip`` and of the host's record (named so): nothing of the machine is touched."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from infercrane.local import host, node_files, node_teardown


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Both nodes' leftovers on a stand-in machine: their bridges (``ip`` double), their cgroup roots
    with a pod's cgroup each (a cgroup v2 layout under a temporary directory), a link of each
    node's kubelet (``host`` double)."""
    cgroups = tmp_path / "cgroup"
    cgroups.mkdir()
    (cgroups / "cgroup.controllers").write_text("cpu memory\n")
    for n in node_files.NODES:
        (cgroups / n.cgroup_root / "kubepods" / "pod1").mkdir(parents=True)
    seen: dict[str, Any] = {"bridges": {n.bridge for n in node_files.NODES}, "deleted": [], "given_back": []}

    def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if args[:2] == ("link", "show"):
            return subprocess.CompletedProcess(args, 0 if args[2] in seen["bridges"] else 1, "", "")
        if args[:2] == ("link", "del"):
            seen["bridges"].discard(args[2])
            seen["deleted"].append(args[2])
        return subprocess.CompletedProcess(args, 0, "", "")

    def give_back(state: Path, logs: Any) -> list[str]:
        seen["given_back"].append(logs)
        return ["kernel.panic=0"]

    monkeypatch.setattr(node_teardown, "CGROUP_V1", cgroups)
    monkeypatch.setattr(node_teardown, "ip", ip)
    monkeypatch.setattr(node_teardown, "procs", lambda cgroup: set())
    monkeypatch.setattr(node_teardown, "all_pids", lambda: [])
    monkeypatch.setattr(host, "give_back", give_back)
    monkeypatch.setattr(host, "changed", lambda state, logs: [])
    seen["cgroups"] = cgroups
    return seen


def test_a_stopped_two_node_planes_bridges_and_cgroups_are_all_removed_and_the_host_given_back_once(
    machine: dict[str, Any], tmp_path: Path
) -> None:
    state = tmp_path / "plane"
    before = node_teardown.leftovers(state)
    assert {"interface icbr0", "interface icbr1"} <= set(before), before
    assert {f"cgroup {machine['cgroups'] / r}" for r in ("infercrane-node", "infercrane-node-1")} <= set(before), before

    left = node_teardown.clean_up(state)
    assert machine["deleted"] == ["icbr0", "icbr1"] and "interface icbr1" in left
    assert not [d for d in machine["cgroups"].iterdir() if d.is_dir()]  # both roots, their pods' cgroups first
    (logs,) = machine["given_back"]  # once, after both nodes: no kubelet of the plane runs by then
    assert logs == (state / "node" / "pod-logs", state / "node-1" / "pod-logs")
    assert left[-1] == "host: kernel.panic=0"
    assert node_teardown.leftovers(state) == []


def test_each_real_node_has_its_own_names_state_and_ports_and_the_first_keeps_a_one_node_planes() -> None:
    first, second = node_files.NODES
    assert (first.name, first.bridge, first.ip, first.cgroup_root) == ("node-l4-0", "icbr0", "10.88.0.1", "infercrane-node")
    assert (second.name, second.bridge, second.subnet, second.ip) == ("node-l4-1", "icbr1", "10.88.1.0/24", "10.88.1.1")
    assert first.home(Path("/s")) == Path("/s/node") and second.home(Path("/s")) == Path("/s/node-1")
    assert (first.certs, second.certs) == ("node", "node-1") and second.ports == ("kubelet_1", "kubelet_healthz_1")
    h = Path("/s/node-1")
    kubelet = node_files.kubelet_config(second, h, Path("/pki"), 1, 2)
    assert kubelet["address"] == "10.88.1.1" and kubelet["cgroupRoot"] == "/infercrane-node-1"
    assert kubelet["tlsCertFile"] == "/pki/node-1-serving.crt" and kubelet["podLogsDir"] == "/s/node-1/pod-logs"
    (bridge, _) = node_files.cni_config(second, h)["plugins"]
    assert bridge["bridge"] == "icbr1" and bridge["ipam"]["ranges"] == [[{"subnet": "10.88.1.0/24", "gateway": "10.88.1.1"}]]
    containerd = node_files.containerd_config(h, Path("/runc"), Path("/cni"), "pause")
    assert "address = '/s/node-1/containerd.sock'" in containerd and "'io.containerd.nri.v1.nri'" in containerd
