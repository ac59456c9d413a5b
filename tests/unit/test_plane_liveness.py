"""Start-up liveness of the local plane's processes: a live process is never reported dead."""

from __future__ import annotations

import shutil
import subprocess

from infercrane.local.plane import _alive


def test_a_process_is_alive_from_the_first_moment_and_dead_after_it_exits() -> None:
    exe = shutil.which("sleep")
    assert exe
    for _ in range(50):  # the old cmdline check read an empty cmdline for most fresh processes
        proc = subprocess.Popen([exe, "30"])
        try:
            assert _alive(proc.pid, exe)
        finally:
            proc.kill()
            proc.wait()
        assert not _alive(proc.pid, exe)


def test_another_executable_under_the_same_pid_is_not_ours() -> None:
    proc = subprocess.Popen([shutil.which("sleep") or "sleep", "30"])
    try:
        assert not _alive(proc.pid, shutil.which("cat") or "/bin/cat")
    finally:
        proc.kill()
        proc.wait()
