"""Which ``pulumi`` processes this machine's runs started: the evidence that a stack lock is stale.

A lock names the pid and host name of the ``pulumi`` process that holds it, nothing else. A pid
means something only in the pid namespace it was read in, and a host name is not unique: two
containers given one host name (a runner image, ``hostname:`` in a pod spec) each see the other's
pid as "not running" and would remove each other's *live* lock. So a lock is only ever removed
when this machine -- this boot of this kernel and this pid namespace, with this host name --
recorded starting that process for that stack, and the run that started it never ended.

While an engine call runs (:func:`watching`), a thread notes each ``pulumi`` child of this
process: its pid and start time, one file per process under
``.infercrane/engine-runs/<machine>/<stack>/`` of the project. The call's end removes its files;
a run killed with SIGKILL (a CI job cancelled) leaves them, and with them the proof its lock is
ours. :func:`started` reads them back.

Each engine call also runs with a temporary directory of its own (:func:`scratch`),
named by this machine and the process that made it (:func:`scratch_prefix`); a killed run leaves
it, and a later run of this machine removes it once that process is gone (:func:`sweep_scratch`).
Engine layer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import stat as modes
import tempfile
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Final, NamedTuple

#: How often the watcher looks for the call's ``pulumi`` process (it writes its lock after
#: starting its engine: hundreds of milliseconds later).
POLL_SECONDS: Final = 0.1
#: A lock is the recorded process's only when written this soon after the process started.
LOCK_AFTER_START_SECONDS: Final = 120.0
#: How every engine run's temporary directory is named first (then :func:`scratch_prefix`).
SCRATCH_PREFIX: Final = "infercrane-run-"


def machine() -> str:
    """This boot of this kernel, this pid namespace and this host name, as a short token."""
    parts = [socket.gethostname()]
    for path, read in (("/proc/sys/kernel/random/boot_id", "text"), ("/proc/self/ns/pid", "link")):
        try:
            parts.append(Path(path).read_text().strip() if read == "text" else os.readlink(path))
        except OSError:
            parts.append("?")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def folder(project_dir: Path, stack: str) -> Path:
    return project_dir / ".infercrane" / "engine-runs" / machine() / stack


def started(project_dir: Path, stack: str) -> dict[int, float]:
    """pid -> start time (epoch seconds) of each ``pulumi`` process a run of this machine started
    for ``stack`` and that run did not see end."""
    out = {}
    here = folder(project_dir, stack)
    for path in here.glob("*.json") if here.is_dir() else ():
        try:
            doc = json.loads(path.read_text())
            out[int(doc["pid"])] = float(doc["started"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def forget(project_dir: Path, stack: str, pid: int) -> None:
    (folder(project_dir, stack) / f"{pid}.json").unlink(missing_ok=True)


def lock_written_by(timestamp: str, start: float) -> bool:
    """Whether a lock written at ``timestamp`` (Pulumi's RFC 3339, nanoseconds) can be the lock of
    a process started at ``start``: not before it, and within :data:`LOCK_AFTER_START_SECONDS`."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", timestamp.strip()).replace("Z", "+00:00")
    try:
        at = datetime.fromisoformat(text).timestamp()
    except ValueError:
        return False
    return start - 1.0 <= at <= start + LOCK_AFTER_START_SECONDS


def _children(tid: int, proc: Path = Path("/proc")) -> set[int]:
    """The children thread ``tid`` of this process started: its ``children`` list (one read; the
    process has dozens of threads -- the SDK's RPC pool, gRPC's), or -- on a kernel without it
    (CONFIG_PROC_CHILDREN) -- from every process's parent pid."""
    children = proc / "self" / "task" / str(tid) / "children"
    with contextlib.suppress(OSError):
        return {int(p) for p in children.read_text().split()}
    out: set[int] = set()
    me = os.getpid()
    for stat in proc.glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            if int(text[text.rindex(")") + 1 :].split()[1]) == me:  # field 4, ppid
                out.add(int(stat.parent.name))
    return out


class _Stat(NamedTuple):
    """What this module reads of a process's ``stat``: fields 2, 3 and 22."""

    name: str  # its command name
    state: str  # "Z": a zombie, killed and not yet reaped
    ticks: int  # when it started, in clock ticks after boot: with the pid, one process of this boot


def _stat(pid: int, proc: Path = Path("/proc")) -> _Stat | None:
    """``pid``'s :class:`_Stat`; None: no such process."""
    try:
        text = (proc / str(pid) / "stat").read_text()
        fields = text[text.rindex(")") + 1 :].split()
        return _Stat(text[text.index("(") + 1 : text.rindex(")")], fields[0], int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _start_time(pid: int) -> float | None:
    """When ``pid`` started (epoch seconds), if it is a ``pulumi`` process."""
    stat = _stat(pid)
    if stat is None or "pulumi" not in stat.name:
        return None
    try:
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration):
        return None
    return int(boot.split()[1]) + stat.ticks / os.sysconf("SC_CLK_TCK")


def _ticks(pid: int, proc: Path = Path("/proc")) -> int | None:
    """When ``pid`` started, in clock ticks after boot; None: no such process."""
    stat = _stat(pid, proc)
    return None if stat is None else stat.ticks


def _runs(pid: int, ticks: int, proc: Path = Path("/proc")) -> bool:
    """Whether the process ``pid`` started at ``ticks`` still runs: a zombie (killed and not yet
    reaped -- in a container whose first process reaps nobody, it stays one) does not."""
    stat = _stat(pid, proc)
    return stat is not None and stat.ticks == ticks and stat.state != "Z"


def scratch_prefix() -> str:
    """How this process's run directories are named first: :data:`SCRATCH_PREFIX`, this machine,
    this process's pid and start (``infercrane-run-<machine>-<pid>-<ticks>-``)."""
    pid = os.getpid()
    return f"{SCRATCH_PREFIX}{machine()}-{pid}-{_ticks(pid)}-"


def sweep_scratch(tmp: Path, proc: Path = Path("/proc")) -> list[str]:
    """Remove from ``tmp`` the run directories that killed runs of this machine left: named by this
    machine (:func:`scratch_prefix`), owned by this user, and the process that made them no longer
    running (no process with that pid and start). Never one of another machine (a temporary
    directory shared between containers) or of a process still running. The names removed."""
    named = re.compile(rf"{re.escape(SCRATCH_PREFIX)}{machine()}-(\d+)-(\d+)-")
    removed = []
    try:
        entries = list(tmp.iterdir())
    except OSError:
        return []
    for entry in entries:
        made_by = named.match(entry.name)
        if made_by is None:
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if not modes.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        if _runs(int(made_by[1]), int(made_by[2]), proc):
            continue  # its process still runs
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


@contextlib.contextmanager
def watching(project_dir: Path, stack: str) -> Iterator[None]:
    """Record each ``pulumi`` child this process starts while the block runs (see the module
    docstring); at its end -- the run ended, its process with it -- remove the records."""
    here = folder(project_dir, stack)
    seen: set[int] = set()
    done = threading.Event()

    starter = threading.get_native_id()  # the engine call runs its `pulumi` from this thread

    def watch() -> None:
        while not done.wait(POLL_SECONDS):
            for pid in _children(starter) - seen:
                start = _start_time(pid)
                if start is None:
                    continue  # not `pulumi`, or not yet: a child between its fork and its exec is looked at again
                seen.add(pid)
                here.mkdir(parents=True, exist_ok=True)
                tmp = here / f".{pid}.tmp"
                tmp.write_text(json.dumps({"pid": pid, "started": start}))
                tmp.replace(here / f"{pid}.json")

    thread = threading.Thread(target=watch, name="infercrane-runs", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        for pid in seen:
            forget(project_dir, stack, pid)


@contextlib.contextmanager
def scratch(env: dict[str, str]) -> Iterator[None]:
    """The run's own temporary directory (mode 0700) as the engine's ``TMPDIR``, removed with
    all it holds when the run ends. pulumi-kubernetes writes the kubeconfig it is given into a new
    temporary file each time its provider is configured (for Helm) and never removes it: a copy
    of the kubeconfig, with any credentials it embeds, left by every plan and deploy (docs/faults.md).
    A run killed with SIGKILL leaves its directory: the next run of this machine removes it
    (:func:`sweep_scratch`), at its start and again at its end -- a
    removal at the start can race with the killed run's last process, still writing there."""
    before = env.get("TMPDIR")
    tmp = Path(tempfile.gettempdir())
    sweep_scratch(tmp)  # what killed runs of this machine left there
    try:
        with tempfile.TemporaryDirectory(prefix=scratch_prefix(), ignore_cleanup_errors=True) as scratch:
            env["TMPDIR"] = scratch
            yield
    finally:
        if before is None:
            env.pop("TMPDIR", None)
        else:
            env["TMPDIR"] = before
        sweep_scratch(tmp)
