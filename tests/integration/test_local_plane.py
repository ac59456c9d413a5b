"""The embedded plane's own start-up: a start that fails midway leaves no process running."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane.core.errors import PlaneError
from infercrane.local.plane import Plane


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (the plane's own state directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def test_a_start_that_fails_in_bootstrap_is_rolled_back_and_leaves_no_process(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes: [unclosed\n")
    plane = Plane(tmp_path / "plane")
    try:
        with pytest.raises(PlaneError, match="bootstrapping the local plane failed"):
            plane.start(nodes_file=nodes, progress=lambda m: None, real_node=False)
        assert (plane.logs / "etcd.log").exists() and (plane.logs / "kube-apiserver.log").exists()  # they did run
        assert processes_mentioning(str(plane.state)) == []
        assert plane.processes() == {}
    finally:
        plane.stop(quiet=True)
