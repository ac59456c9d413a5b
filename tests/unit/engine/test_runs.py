"""The run directories that killed engine runs leave: which a later run removes (files only)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from infercrane.engine import runs


def test_a_run_directory_is_named_by_this_machine_and_the_process_that_made_it() -> None:
    prefix = runs.scratch_prefix()
    assert prefix == f"infercrane-run-{runs.machine()}-{os.getpid()}-{runs._ticks(os.getpid())}-"


def test_a_killed_runs_directory_is_removed_and_a_running_ones_is_kept(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])  # a process that has ended: its pid runs nothing, or another start
    gone.wait()
    dead = tmp_path / f"infercrane-run-{runs.machine()}-{gone.pid}-1-abcd1234"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "kubeconfig123").write_text("token")
    mine = tmp_path / f"{runs.scratch_prefix()}efgh5678"  # this process: still running
    mine.mkdir()
    assert runs.sweep_scratch(tmp_path) == [dead.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name]


def test_a_directory_of_another_machine_or_not_a_runs_is_never_touched(tmp_path: Path) -> None:
    other = tmp_path / "infercrane-run-0123456789abcdef-999999-1-abcd1234"  # another machine's (a shared TMPDIR)
    other.mkdir()
    old_style = tmp_path / "infercrane-run-abcd1234"  # no machine, no process: never ours to judge
    old_style.mkdir()
    a_file = tmp_path / f"infercrane-run-{runs.machine()}-999999-1-file"
    a_file.write_text("")
    link = tmp_path / f"infercrane-run-{runs.machine()}-999999-1-link"
    link.symlink_to(other)
    assert runs.sweep_scratch(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, old_style.name, a_file.name, link.name])


def test_the_process_start_tells_a_reused_pid_from_the_run_that_made_the_directory(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "stat").write_text("4242 (sleep) S 1 " + " ".join(["0"] * 17) + " 777 0 0\n")  # field 22: 777
    scratch = tmp_path / "tmp"
    reused = scratch / f"infercrane-run-{runs.machine()}-4242-555-x"  # made by pid 4242 started at tick 555
    running = scratch / f"infercrane-run-{runs.machine()}-4242-777-y"  # made by the process running now
    reused.mkdir(parents=True)
    running.mkdir()
    assert runs.sweep_scratch(scratch, proc) == [reused.name]
    assert [p.name for p in scratch.iterdir()] == [running.name]


def test_a_killed_runs_directory_is_removed_while_its_process_is_an_unreaped_zombie(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "stat").write_text("4242 (python) Z 1 " + " ".join(["0"] * 17) + " 555 0 0\n")  # killed, not reaped
    scratch = tmp_path / "tmp"
    left = scratch / f"infercrane-run-{runs.machine()}-4242-555-x"
    left.mkdir(parents=True)
    assert runs.sweep_scratch(scratch, proc) == [left.name]


def test_a_killed_runs_directory_that_outlives_a_runs_start_is_gone_when_that_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    env: dict[str, str] = {}
    with runs.scratch(env):
        own = Path(env["TMPDIR"])
        late = tmp_path / f"infercrane-run-{runs.machine()}-{gone.pid}-1-late"  # its removal at the start raced with a writer
        (late / "sub").mkdir(parents=True)
    assert not own.exists() and not late.exists() and "TMPDIR" not in env
    assert list(tmp_path.iterdir()) == []


def test_a_pulumi_child_seen_between_its_fork_and_its_exec_is_recorded_once_it_is_pulumi(tmp_path: Path) -> None:
    """The watcher may look at a child before it became ``pulumi`` (still the forked shell): it
    looks again, so a kill after the exec still finds the record that proves the lock ours."""

    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\nsleep 1\n")
    fake.chmod(0o755)
    with runs.watching(tmp_path, "st"):
        child = subprocess.Popen(["sh", "-c", f"sleep 0.4; exec {fake}"])
        time.sleep(0.9)  # seen as `sh` first, then as `pulumi`
        recorded = runs.started(tmp_path, "st")
        child.wait()
    assert child.pid in recorded
    assert runs.started(tmp_path, "st") == {}  # the call's end removes its records
