"""The real node's cleanup never reaches another plane's node (issue #66): ``local stop`` and
``reset`` of a plane that once ran the node clean what it left only under the node lock. On a
stand-in lock file and a recording double of the machine-wide cleanup (named so)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from infercrane.local import node, node_files


@pytest.fixture
def cleaned(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The states :func:`node.clean_up` was asked to clean (a double: it kills and deletes nothing)."""
    asked: list[Path] = []
    monkeypatch.setattr(node, "clean_up", lambda state: asked.append(state) or [f"interface {node.BRIDGE}"])
    monkeypatch.setattr(node, "_owner", lambda: None)
    return asked


def test_a_stopped_plane_cleans_what_its_node_left_when_no_other_plane_holds_the_node(
    cleaned: list[Path], tmp_path: Path
) -> None:
    assert node.clean_up_if_free(tmp_path / "plane", tmp_path / "node.lock") == [f"interface {node.BRIDGE}"]
    assert cleaned == [tmp_path / "plane"]


def test_a_stopped_plane_touches_nothing_while_another_planes_node_holds_the_lock(cleaned: list[Path], tmp_path: Path) -> None:
    lock = tmp_path / "node.lock"
    other = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)  # another plane's node processes hold it
    fcntl.flock(other, fcntl.LOCK_EX)
    os.pwrite(other, str(tmp_path / "other-plane").encode(), 0)
    try:
        assert node.clean_up_if_free(tmp_path / "plane", lock) is None
        assert cleaned == [], "another plane's pods, bridge and host settings were never touched"
    finally:
        os.close(other)
    assert node.clean_up_if_free(tmp_path / "plane", lock) is not None  # released: its own leftovers are its to clean


def test_a_stopped_plane_cleans_its_own_pods_that_still_hold_the_lock_in_its_name(cleaned: list[Path], tmp_path: Path) -> None:
    """Its pods' runtime shims inherit the lock's descriptor: held in this plane's own name, it is
    this plane's to clean (they are killed), never taken for another plane's."""
    lock, plane = tmp_path / "node.lock", tmp_path / "plane"
    shim = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(shim, fcntl.LOCK_EX)
    os.pwrite(shim, str(plane).encode(), 0)
    try:
        assert node.clean_up_if_free(plane, lock) is not None and cleaned == [plane]
    finally:
        os.close(shim)


def test_local_start_notes_a_model_image_the_stack_pins_that_the_planes_registry_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    double = "infercrane.local/engine-double@sha256:" + "a" * 64
    held = "infercrane.local/models/double@sha256:" + "b" * 64
    monkeypatch.setattr(node, "find_tool", lambda name: tmp_path / name)
    monkeypatch.setattr(node.images, "engine_double", lambda binary: SimpleNamespace(reference=double))
    state = tmp_path / "plane"
    node_files.home(state).mkdir(parents=True)
    (node_files.home(state) / "model-images.json").write_text(json.dumps({"double-7b": held}))

    def stack(model_ref: str) -> Path:
        (tmp_path / "stacks").mkdir(exist_ok=True)
        target = {"imageDigest": double, "modelImages": {"Qwen/Qwen3-0.6B": model_ref}}
        (tmp_path / node.STACK_FILE).write_text(json.dumps({"config": {"infercrane:kubernetes": target}}))
        return tmp_path

    assert node.pin_note(stack("oci://" + held), state) is None
    other = "oci://infercrane.local/models/double@sha256:" + "c" * 64
    note = node.pin_note(stack(other), state)
    assert note is not None and note.startswith(f"note: {node.STACK_FILE} pins the model image {other} for Qwen/Qwen3-0.6B")
    assert f"which the plane's registry does not hold ({held})" in note
