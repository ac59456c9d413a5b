"""Process supervision for the local plane: launch, wait ready, stop, roll back.

Every launched process is recorded (pid and executable) in a JSON file beside its log, so a later
``stop`` -- from another process -- ends exactly the processes that were started, never one that
reused a pid. A :class:`Supervisor` that fails midway rolls back: what it started is stopped, so
a failed ``local start`` leaves nothing running. Local-plane layer.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from infercrane.core.errors import PlaneError

STOP_GRACE_SECONDS: Final = 15.0


EPHEMERAL_RANGE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT: Final = 10000


def free_port(taken: Iterable[int] = ()) -> int:
    """A loopback port nothing listens on, not in ``taken``, and outside the kernel's ephemeral
    range: an outgoing connection's source port comes from that range, so a port chosen there
    (``bind`` to port 0 chooses there) can be taken by any connection of the machine between this
    choice and the component's own bind -- a plane restarted beside busy test workers once lost its
    KServe manager to "bind: address already in use"."""
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    avoid = set(taken)
    outside = [p for p in range(LOWEST_PORT, 65536) if not low <= p <= high and p not in avoid]
    for port in random.sample(outside, min(len(outside), 500)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a machine whose every such port is in use
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def alive(pid: int, exe: str) -> bool:
    """Is ``pid`` a live process running ``exe``? (never another process that reused the pid)

    Reads the ``/proc/<pid>/exe`` link, which names the executable from ``exec`` on; the cmdline
    is not used: it can read empty for a live process (seen for most reads right after Popen)."""
    try:
        running = os.readlink(f"/proc/{pid}/exe")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and running == os.path.realpath(exe)


def read_record(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


KILL_WAIT_SECONDS: Final = 5.0


def stop_recorded(record_path: Path, order: Iterable[str], grace: float = STOP_GRACE_SECONDS) -> list[str]:
    """Stop every recorded process still alive, one at a time in ``order`` (dependents first):
    each gets SIGTERM and up to ``grace`` seconds to exit before the next is asked, and SIGKILL if
    it outlives them. One at a time because a process whose dependency went first can hang in its
    shutdown (an API server without its etcd waited out the whole grace). Clears the record;
    returns the names that were running."""
    rec = read_record(record_path)
    procs = rec.get("processes", {})
    stopped = []
    for name in order:
        p = procs.get(name)
        if not (p and alive(p["pid"], p["exe"])):
            continue
        os.kill(p["pid"], signal.SIGTERM)
        stopped.append(name)
        deadline = time.monotonic() + grace
        while alive(p["pid"], p["exe"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        if alive(p["pid"], p["exe"]):
            os.kill(p["pid"], signal.SIGKILL)
            deadline = time.monotonic() + KILL_WAIT_SECONDS  # returns when it is gone, not when it was told
            while alive(p["pid"], p["exe"]) and time.monotonic() < deadline:
                time.sleep(0.02)
    if rec:
        rec["processes"] = {}
        record_path.write_text(json.dumps(rec, indent=2))
    return stopped


class Supervisor:
    """The processes of one start: each launched with its own log file and session, recorded
    at once; :meth:`wait` fails fast when one exits; :meth:`rollback` stops all of them."""

    def __init__(self, record_path: Path, logs: Path, record: dict[str, Any], timeout: float) -> None:
        self.record_path, self.logs, self.timeout = record_path, logs, timeout
        self.record = {**record, "processes": {}}
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.began = time.monotonic()
        logs.mkdir(parents=True, exist_ok=True)
        self._save()

    def _save(self) -> None:
        self.record_path.write_text(json.dumps(self.record, indent=2))

    def launch(
        self, name: str, exe: Path, args: list[str], env: Mapping[str, str] | None = None, keep: tuple[int, ...] = ()
    ) -> None:
        """Start ``name``; ``keep``: descriptors it inherits (a lock it holds for its life)."""
        with (self.logs / f"{name}.log").open("ab") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [str(exe), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **env} if env else None,
                pass_fds=keep,
            )
        self.children[name] = proc
        self.record["processes"][name] = {"pid": proc.pid, "exe": str(exe)}
        self._save()

    def exited(self) -> list[str]:
        """Processes of this start that have exited (asked of the child itself)."""
        return [n for n, p in self.children.items() if p.poll() is not None]

    def check(self) -> None:
        dead = self.exited()
        if dead:
            raise PlaneError(f"{dead[0]} exited during start; see {self.logs / (dead[0] + '.log')}")

    def wait(self, ready: Callable[[], bool], what: str) -> None:
        """Until ``ready()``; PlaneError when a process of this start exits or time runs out."""
        while not ready():
            self.check()
            if time.monotonic() - self.began > self.timeout:
                raise PlaneError(f"timed out waiting for {what}; see {self.logs}")
            time.sleep(0.2)

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def rollback(self) -> list[str]:
        """Stop every process this start launched (newest first) and reap them."""
        stopped = stop_recorded(self.record_path, reversed(list(self.children)))
        self.release()
        return stopped

    def release(self) -> None:
        """Forget the children (they run on in their own sessions; ``stop`` ends them by record),
        reaping those that have exited."""
        for proc in self.children.values():
            proc.poll()
        self.children.clear()
