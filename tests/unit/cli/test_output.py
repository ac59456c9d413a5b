"""What ``infercrane local status`` prints of the plane."""

from __future__ import annotations

from infercrane.cli import output


def test_local_status_names_the_planes_real_nodes_and_none_without_them() -> None:
    status = {
        "running": True,
        "kubeconfig": "k",
        "context": "infercrane-local",
        "adminContext": "infercrane-local-admin",
        "realNodes": ["node-l4-0", "node-l4-1"],
        "processes": {"kubelet": True, "kubelet-1": False},
    }
    shown = output.local_status(status, as_doc=False).splitlines()
    assert "  real node(s): node-l4-0, node-l4-1" in shown and "  kubelet-1: down" in shown
    assert not [x for x in output.local_status(status | {"realNodes": []}, as_doc=False).splitlines() if "real node" in x]
