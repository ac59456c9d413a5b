"""Supervision of the local plane's processes: liveness by pid and executable, fail-fast waits,
roll-back of a failed start, no file descriptor left open in the parent."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infercrane.core.errors import PlaneError
from infercrane.local.supervise import Supervisor, alive, read_record, stop_recorded


def test_a_process_is_alive_from_the_first_moment_and_dead_after_it_exits() -> None:
    exe = shutil.which("sleep")
    assert exe
    for _ in range(50):  # the old cmdline check read an empty cmdline for most fresh processes
        proc = subprocess.Popen([exe, "30"])
        try:
            assert alive(proc.pid, exe)
        finally:
            proc.kill()
            proc.wait()
        assert not alive(proc.pid, exe)


def test_another_executable_under_the_same_pid_is_not_ours() -> None:
    proc = subprocess.Popen([shutil.which("sleep") or "sleep", "30"])
    try:
        assert not alive(proc.pid, shutil.which("cat") or "/bin/cat")
    finally:
        proc.kill()
        proc.wait()


def _exe(name: str) -> Path:
    found = shutil.which(name)
    assert found, name
    return Path(found)


def test_a_start_that_fails_is_rolled_back_leaving_nothing_running(tmp_path: Path) -> None:
    record = tmp_path / "plane.json"
    run = Supervisor(record, tmp_path / "logs", {"ports": {"x": 1}}, timeout=30)
    run.launch("sleeper", _exe("sleep"), ["60"])
    run.launch("quitter", _exe("false"), [])
    with pytest.raises(PlaneError, match=r"quitter exited during start; see .*quitter\.log"):
        run.wait(lambda: False, "something that never comes")
    sleeper = read_record(record)["processes"]["sleeper"]
    assert alive(sleeper["pid"], sleeper["exe"])
    assert run.rollback() == ["sleeper"]
    assert not alive(sleeper["pid"], sleeper["exe"])
    assert read_record(record) == {"ports": {"x": 1}, "processes": {}}


def test_a_wait_that_runs_out_of_time_names_what_it_waited_for(tmp_path: Path) -> None:
    run = Supervisor(tmp_path / "plane.json", tmp_path / "logs", {}, timeout=0.3)
    with pytest.raises(PlaneError, match="timed out waiting for the API server"):
        run.wait(lambda: False, "the API server")


def test_launched_processes_log_to_their_own_file_and_the_parent_keeps_no_descriptor(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    run = Supervisor(tmp_path / "plane.json", logs, {}, timeout=30)
    run.launch("echo", _exe("sh"), ["-c", "echo hello from the child"])
    run.children["echo"].wait()
    assert (logs / "echo.log").read_text() == "hello from the child\n"
    open_files = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}
    assert str(logs / "echo.log") not in open_files
    run.release()


def test_stop_asks_one_process_at_a_time_so_a_dependent_still_sees_its_dependency(tmp_path: Path) -> None:
    """Plane order: the API server is stopped while its etcd still runs (stopped together, the
    API server hung in its shutdown until the grace ran out and it was killed)."""
    run = Supervisor(tmp_path / "plane.json", tmp_path / "logs", {}, timeout=30)
    run.launch("dependency", _exe("sleep"), ["60"])
    dep = run.children["dependency"].pid
    out, log = tmp_path / "seen", tmp_path / "logs" / "dependent.log"
    # On SIGTERM the dependent records the dependency's process state (S: running; Z or none: ended).
    script = f"trap 'cut -d\\  -f3 /proc/{dep}/stat > {out}; exit 0' TERM; echo ready; while :; do sleep 0.2; done"
    run.launch("dependent", _exe("sh"), ["-c", script])
    run.wait(lambda: log.read_text() == "ready\n", "the dependent's trap")
    assert run.rollback() == ["dependent", "dependency"]
    assert out.read_text() == "S\n"


def test_a_process_that_ignores_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    run = Supervisor(tmp_path / "plane.json", tmp_path / "logs", {}, timeout=30)
    run.launch("stubborn", _exe("sh"), ["-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"])
    run.wait(lambda: (tmp_path / "logs" / "stubborn.log").read_text() == "ready\n", "the trap")
    stubborn = read_record(tmp_path / "plane.json")["processes"]["stubborn"]
    assert stop_recorded(tmp_path / "plane.json", ["stubborn"], grace=0.5) == ["stubborn"]
    run.release()
    assert not alive(stubborn["pid"], stubborn["exe"])


def test_a_plane_port_is_chosen_outside_the_ephemeral_range_free_and_apart_from_those_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from infercrane.local import supervise

    low, high = (int(n) for n in supervise.EPHEMERAL_RANGE.read_text().split())
    chosen = [supervise.free_port() for _ in range(20)]
    assert not [p for p in chosen if low <= p <= high or p < supervise.LOWEST_PORT], (low, high, chosen)

    # Only three ports left outside a patched range: one is listened on, one taken -- the third it is.
    def bindable(port: int) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    first = next(p for p in range(20000, 30000, 3) if all(bindable(p + i) for i in range(3)))
    narrow = tmp_path / "range"
    narrow.write_text(f"{first + 3} 65535\n")
    monkeypatch.setattr(supervise, "EPHEMERAL_RANGE", narrow)
    monkeypatch.setattr(supervise, "LOWEST_PORT", first)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first))
        busy.listen()
        for _ in range(10):
            assert supervise.free_port(taken=[first + 1]) == first + 2
