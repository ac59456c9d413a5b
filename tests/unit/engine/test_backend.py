"""Repair of a file backend's checkpoint that a kill left half-written (files only, no engine)."""

from __future__ import annotations

import json
import socket
from datetime import UTC
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
    notes = repair_torn_writes(url, "d2", tmp_path)
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
    assert repair_torn_writes(url, "d2", tmp_path) == []  # nothing left to repair


def test_a_checkpoint_that_does_not_parse_is_kept_aside_and_replaced_by_pulumis_backup(tmp_path: Path) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(GOOD[:25])
    (stacks / "d2.json.attrs").write_bytes(ATTRS)
    (stacks / "d2.json.bak").write_bytes(GOOD)
    (note,) = repair_torn_writes(url, "d2", tmp_path)
    assert note.startswith("note: the checkpoint of stack 'd2' did not parse (kept as d2.json.damaged-")
    assert (stacks / "d2.json").read_bytes() == GOOD and not (stacks / "d2.json.attrs").exists()
    assert [p.read_bytes() for p in stacks.glob("d2.json.damaged-*")] == [GOOD[:25]]


def test_a_damaged_checkpoint_without_a_usable_backup_is_refused_with_the_manual_step(tmp_path: Path) -> None:
    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(b"")
    (stacks / "d2.json.bak").write_bytes(b"{")
    with pytest.raises(EngineError) as exc:
        repair_torn_writes(url, "d2", tmp_path)
    text = str(exc.value)
    assert "the checkpoint of stack 'd2' (" in text and "does not parse" in text and "nothing was applied" in text
    assert "fix: restore the newest file of" in text and "`pulumi stack import --stack d2`" in text
    assert (stacks / "d2.json").read_bytes() == b""  # untouched


@pytest.mark.parametrize("recorded", [True, False], ids=["a-live-process-of-this-machine", "a-lock-no-run-here-recorded"])
def test_nothing_is_repaired_while_a_pulumi_process_holds_the_stack_or_may(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: bool
) -> None:
    """Live, or not proven gone: a lock of this host name that no run of this machine recorded may
    be another container's (same host name, another pid namespace) -- its files are its own."""
    from datetime import datetime

    from infercrane.engine import backend as b
    from infercrane.engine import runs

    url, stacks = backend(tmp_path)
    (stacks / "d2.json.attrs").write_bytes(b"")
    locks = tmp_path / ".pulumi" / "locks" / "organization" / "infercrane" / "d2"
    locks.mkdir(parents=True)
    lock = {"pid": 424242, "hostname": socket.gethostname(), "timestamp": "2026-12-03T06:00:01.123456789Z"}
    (locks / "a.json").write_text(json.dumps(lock))
    if recorded:
        monkeypatch.setattr(b, "process_alive", lambda pid: True)
        monkeypatch.setattr(
            runs, "started", lambda project_dir, stack: {424242: datetime(2026, 12, 3, 6, 0, tzinfo=UTC).timestamp()}
        )
    assert repair_torn_writes(url, "d2", tmp_path) == []
    assert (stacks / "d2.json.attrs").exists()


def test_other_backends_are_not_touched() -> None:
    assert repair_torn_writes("s3://bucket", "d2", Path(".")) == []


def checkpoint_at(time: str, names: list[str]) -> bytes:
    resources = [{"type": "kubernetes:apps/v1:Deployment", "inputs": {"metadata": {"name": n}}, "outputs": {}} for n in names]
    return json.dumps({"version": 3, "checkpoint": {"latest": {"manifest": {"time": time}, "resources": resources}}}).encode()


def test_a_backup_older_than_the_live_objects_is_not_restored_and_the_message_names_the_manual_step(tmp_path: Path) -> None:
    from infercrane.core.state import urns

    url, stacks = backend(tmp_path)
    (stacks / "d2.json").write_bytes(GOOD[:25])
    (stacks / "d2.json.bak").write_bytes(checkpoint_at("2026-12-01T12:00:30.5Z", ["infercrane-a"]))
    live = {("Deployment", "infercrane-a"): "2026-12-01T11:00:00Z", ("Deployment", "infercrane-b"): "2026-12-01T12:00:10Z"}
    with pytest.raises(EngineError) as err:
        repair_torn_writes(url, "d2", tmp_path, vouch=lambda cp: ", ".join(urns.unrecorded_before(cp, live)) or None)
    assert "d2.json.bak beside it is older than the cluster: Deployment/infercrane-b; nothing was applied." in str(err.value)
    assert "that records those objects as d2.json, or `pulumi stack import --stack d2`" in str(err.value.fix)
    assert (stacks / "d2.json").read_bytes() == GOOD[:25]  # nothing moved


def test_a_backup_is_older_only_for_objects_that_existed_when_it_was_written() -> None:
    from infercrane.core.state import urns

    cp = json.loads(checkpoint_at("2026-12-01T12:00:30.5Z", ["infercrane-a"]))["checkpoint"]
    live = {
        ("Deployment", "infercrane-a"): "2026-12-01T11:00:00Z",  # recorded
        ("Deployment", "infercrane-c"): "2026-12-01T12:00:31Z",  # created by the interrupted write's update
        ("Deployment", "infercrane-d"): "2026-12-01T12:00:29Z",  # within the clock slack
    }
    assert urns.unrecorded_before(cp, live) == []
    cp["latest"]["pending_operations"] = [
        {"type": "creating", "resource": {"type": "kubernetes:core/v1:Service", "inputs": {"metadata": {"name": "s"}}}}
    ]
    assert urns.unrecorded_before(cp, {("Service", "s"): "2026-12-01T10:00:00Z"}) == []
    assert urns.unrecorded_before(cp, {("Service", "t"): "2026-12-01T10:00:00Z"}) == ["Service/t"]


WRITER = """
import sys
from pathlib import Path
from infercrane.project.stackfile import write_atomically
path, texts = Path(sys.argv[1]), [sys.argv[2] * 400_000, sys.argv[3] * 400_000]
print("ready", flush=True)
i = 0
while True:
    write_atomically(path, texts[i % 2])
    i += 1
"""


def test_a_stack_file_write_killed_at_any_instant_leaves_the_old_file_or_the_new_one(tmp_path: Path) -> None:
    # deploy MODEL (the intent, then its restore) and promote write stack files this way; a kill
    # (SIGKILL, as a CI runner's) in the middle of a 2 MB write must never leave a part of one.
    import random
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "Pulumi.dev.yaml"
    old, new = "a: 1\n", "b: 22\n"
    path.write_text(old * 400_000)
    rng = random.Random(19)
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), old, new], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = path.read_text()
        assert text in (old * 400_000, new * 400_000), f"a torn write: {len(text)} characters"
