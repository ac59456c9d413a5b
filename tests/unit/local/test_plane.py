"""A running plane is reused as it is by ``local start``: what it keeps that the start asked
otherwise is said, with how to change it. On a plane's record alone (no process runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercrane.local.plane import Plane


def reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: dict[str, object], **start: object) -> list[str]:
    (tmp_path / "plane.json").write_text(json.dumps({"podReadyDelaySeconds": 0, "podGrace": False} | record))
    monkeypatch.setattr(Plane, "running", lambda self: True)
    said: list[str] = []
    Plane(tmp_path).start(progress=said.append, **start)  # type: ignore[arg-type]
    return said


def test_a_running_plane_with_one_real_node_says_it_keeps_it_when_two_are_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = reused(tmp_path, monkeypatch, {"realNode": "node-l4-0", "realNodes": ["node-l4-0"]}, real_nodes=2)
    assert "note: it keeps its 1 real node(s); `local stop` then `local start --real-nodes 2` to change it" in said, said


def test_a_running_plane_asked_for_what_it_runs_says_nothing_of_its_real_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = {"realNode": "node-l4-0", "realNodes": ["node-l4-0", "node-l4-1"]}
    assert not [x for x in reused(tmp_path, monkeypatch, two, real_nodes=2) if "real node" in x]
    assert not [x for x in reused(tmp_path, monkeypatch, two) if "real node" in x]  # the default asks for none more
