"""Repair of a file backend's checkpoint that a kill left half-written (files only, no engine)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from infercrane.core.errors import EngineError
from infercrane.engine.backend import repair_torn_writes

GOOD = json.dumps({"version": 3, "checkpoint": {"latest": {"resources": []}}}).encode()
ATTRS = b'{"user.content_type":"text/plain; charset=utf-8","md5":"x"}'


def backend(tmp_path: Path) -> tuple[str, Path]:
    stacks = tmp_path / ".pulumi" / "stacks" / "infercrane"
    stacks.mkdir(parents=True)
    (tmp_path / ".pulumi" / "meta.yaml").write_text("version: 1\n")
    return tmp_path.as_uri(), stacks


def test_an_empty_sidecar_and_a_leftover_temp_file_are_removed_with_a_note_each(tmp_path: Path) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(GOOD)
    (stacks / "d2.json.attrs").write_bytes(b"")
    (stacks / "d2.json.bak").write_bytes(GOOD)
    (stacks / "d2.json.bak.attrs").write_bytes(ATTRS)
    (stacks / "d2.json.123456789.tmp").write_bytes(GOOD[:10])
    (stacks / "other.json.attrs").write_bytes(b"")  # another stack: never touched
    (stacks / "other.json.42.tmp").write_bytes(b"")
    notes = repair_torn_writes(url, "d2")
    assert notes == [
        "note: d2.json.attrs of stack 'd2' was empty (a write interrupted by a kill); removed it -- Pulumi reads the "
        "checkpoint without it",
        "note: removed d2.json.123456789.tmp, a checkpoint write of stack 'd2' that a kill interrupted",
    ]
    assert sorted(p.name for p in stacks.iterdir()) == [
        "d2.json",
        "d2.json.bak",
        "d2.json.bak.attrs",
        "other.json.42.tmp",
        "other.json.attrs",
    ]
    assert repair_torn_writes(url, "d2") == []  # nothing left to repair


def test_a_checkpoint_that_does_not_parse_is_kept_aside_and_replaced_by_pulumis_backup(tmp_path: Path) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(GOOD[:25])
    (stacks / "d2.json.attrs").write_bytes(ATTRS)
    (stacks / "d2.json.bak").write_bytes(GOOD)
    (note,) = repair_torn_writes(url, "d2")
    assert note.startswith("note: the checkpoint of stack 'd2' did not parse (kept as d2.json.damaged-")
    assert (stacks / "d2.json").read_bytes() == GOOD and not (stacks / "d2.json.attrs").exists()
    assert [p.read_bytes() for p in stacks.glob("d2.json.damaged-*")] == [GOOD[:25]]


def test_a_damaged_checkpoint_without_a_usable_backup_is_refused_with_the_manual_step(tmp_path: Path) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(b"")
    (stacks / "d2.json.bak").write_bytes(b"{")
    with pytest.raises(EngineError) as exc:
        repair_torn_writes(url, "d2")
    text = str(exc.value)
    assert "the checkpoint of stack 'd2' (" in text and "does not parse" in text and "nothing was applied" in text
    assert "fix: restore the newest file of" in text and "`pulumi stack import --stack d2`" in text
    assert (stacks / "d2.json").read_bytes() == b""  # untouched


def test_nothing_is_repaired_while_a_live_pulumi_process_holds_the_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json.attrs").write_bytes(b"")
    locks = tmp_path / ".pulumi" / "locks" / "organization" / "infercrane" / "d2"
    locks.mkdir(parents=True)
    lock = {"pid": os.getpid(), "hostname": socket.gethostname(), "timestamp": "now"}
    (locks / "a.json").write_text(json.dumps(lock))
    from infercrane.engine import backend as b

    monkeypatch.setattr(b, "process_alive", lambda pid: True)
    assert repair_torn_writes(url, "d2") == []
    assert (stacks / "d2.json.attrs").exists()


def test_other_backends_are_not_touched() -> None:
    assert repair_torn_writes("s3://bucket", "d2") == []
