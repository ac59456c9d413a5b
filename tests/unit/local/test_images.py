"""The real node's images, built without a registry: reproducible to the byte, so the digest a
stack pins is the digest every machine builds; and the node's refusal, said when it cannot run."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from infercrane.local import images, node


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: m for m in tar.getmembers()}


def read(archive: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def test_an_image_built_twice_is_the_same_bytes_and_digest(tmp_path: Path) -> None:
    binary = tmp_path / "engine-double"
    binary.write_bytes(b"\x7fELF not really" * 100)
    first, again = images.engine_double(binary), images.engine_double(binary)
    assert first.archive == again.archive and first.digest == again.digest
    binary.write_bytes(b"\x7fELF another build" * 100)
    assert images.engine_double(binary).digest != first.digest


def test_the_next_release_of_the_double_is_another_digest_of_the_same_repository_and_stable(tmp_path: Path) -> None:
    binary = tmp_path / "engine-double"
    binary.write_bytes(b"\x7fELF not really" * 100)
    first, following = images.engine_double(binary), images.engine_double(binary, release=images.NEXT_RELEASE)
    assert following.repo == first.repo and following.digest != first.digest
    assert following.reference == images.engine_double(binary, release=images.NEXT_RELEASE).reference


def test_the_archive_names_the_image_by_its_manifest_digest_and_its_entries_carry_no_time_or_owner(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"pause")
    image = images.pause(binary)
    index = json.loads(read(image.archive, "index.json"))
    (entry,) = index["manifests"]
    manifest = read(image.archive, f"blobs/sha256/{entry['digest'].removeprefix('sha256:')}")
    assert entry["digest"] == image.digest == "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == image.reference == f"{images.PAUSE_REPO}@{image.digest}"
    entries = members(image.archive)
    assert list(entries) == sorted(entries)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in entries.values()} == {(0, 0, 0, "", "")}


def test_the_real_node_needs_root_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert node.why_not(tmp_path) == "the real node needs root (cgroups, mounts, network namespaces)"


def test_two_planes_claiming_the_real_node_at_once_one_holds_it_for_its_processes_life(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One real node per machine, by a lock, not a check: the loser is told whose node it is; the
    winner's processes inherit the lock and hold it after the process that started them exits."""
    lock = tmp_path / "node.lock"
    monkeypatch.setattr(node, "_owner", lambda: None)
    first, second = tmp_path / "plane-a", tmp_path / "plane-b"
    with ThreadPoolExecutor(max_workers=2) as pool:
        claims = list(pool.map(lambda state: node.claim(state, lock), [first, second]))
    held = [c for c in claims if isinstance(c, int)]
    assert len(held) == 1, claims
    winner = first if isinstance(claims[0], int) else second
    refused = next(c for c in claims if isinstance(c, str))
    assert refused.startswith(f"the real node of the plane at {winner} runs (one per machine"), refused
    kubelet = subprocess.Popen(["sleep", "30"], pass_fds=held)  # the node's process inherits it
    os.close(held[0])  # the CLI that started the plane exits
    try:
        assert isinstance(node.claim(tmp_path / "plane-c", lock), str)
    finally:
        kubelet.kill()
        kubelet.wait()
    after = node.claim(tmp_path / "plane-c", lock)  # the node stopped: its lock went with it
    assert isinstance(after, int)
    os.close(after)


def test_the_node_of_a_killed_plane_is_cleaned_up_only_by_the_lock_holder_and_a_running_one_never(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "other-plane"
    monkeypatch.setattr(node, "_owner", lambda: other)
    monkeypatch.setattr(node, "_kubelet_runs", lambda state: state == other)  # started before the lock existed
    cleaned: list[Path] = []
    monkeypatch.setattr(node, "clean_up", lambda state: cleaned.append(state) or [])
    said = node.claim(tmp_path / "this-plane", tmp_path / "node.lock")
    assert said == f"the real node of the plane at {other} runs (one per machine: its bridge and cgroups are the machine's)"
    assert cleaned == []
    monkeypatch.setattr(node, "_kubelet_runs", lambda state: False)  # that plane was killed: its leftovers go
    held = node.claim(tmp_path / "this-plane", tmp_path / "node.lock")
    assert isinstance(held, int) and cleaned == [other]
    os.close(held)


def test_local_start_says_when_the_built_engine_double_is_not_the_digest_the_node_stack_pins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    binary = tmp_path / "engine-double"
    binary.write_bytes(b"a double")
    monkeypatch.setattr(node, "find_tool", lambda name: binary)
    built = images.engine_double(binary).reference
    stack = tmp_path / node.STACK_FILE
    stack.parent.mkdir(parents=True)

    def pinned(reference: str) -> str | None:
        stack.write_text(f"config:\n  infercrane:kubernetes:\n    imageDigest: {reference}\n")
        return node.pin_note(tmp_path)

    assert pinned(built) is None
    note = pinned(images.ENGINE_DOUBLE_REPO + "@sha256:" + "0" * 64)
    assert note is not None and f"the engine double built here is {built}" in note
    assert "set imageDigest to the built reference" in note


def test_a_machine_without_runc_is_told_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node, "first", lambda paths, name="": None)
    said = node.why_not(tmp_path) or ""
    assert said.startswith("runc is not installed") and "fix: `apt-get install runc containernetworking-plugins` as root" in said
