"""What a stopped plane's real nodes may leave behind, found and removed: the processes in their
cgroups or speaking to their runtimes, mounts under their state, their bridges, their cgroups, and
the host's settings. Local-plane layer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from infercrane.local import host
from infercrane.local.node_files import CGROUP_V1, FIRST, NODES, RealNode, pod_logs


def cgroup_dirs(n: RealNode = FIRST) -> list[Path]:
    """Node ``n``'s cgroup root in every hierarchy (cgroup v1: one per controller; v2: one)."""
    root = n.cgroup_root
    if (CGROUP_V1 / "cgroup.controllers").is_file():
        return [CGROUP_V1 / root]
    return [d / root for d in sorted(CGROUP_V1.iterdir()) if d.is_dir() and not d.is_symlink() and d.name != "unified"]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def clean_up(state: Path) -> list[str]:
    """What the plane's stopped nodes left (every node a plane may run, started or not): every
    process in their cgroups (the pods' containers) and their runtimes' shims are killed, their
    mounts and network namespaces unmounted, their bridges deleted, their cgroups removed, and then
    the host's settings put back (:func:`host.give_back`, once: no node of the plane runs by then).
    Returns what it cleaned or put back (empty: nothing was left, nothing had changed)."""
    left: list[str] = []
    for n in NODES:
        left += _clean_node(state, n)
    left += [f"host: {what}" for what in host.give_back(state, tuple(pod_logs(n.home(state)) for n in NODES))]
    for n in NODES:
        for d in cgroup_dirs(n):
            if d.is_dir():
                for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                    try:
                        sub.rmdir()
                    except OSError as exc:
                        left.append(f"cgroup {sub} ({exc.strerror})")
    return left


def _clean_node(state: Path, n: RealNode) -> list[str]:
    """Node ``n``'s processes killed, its mounts unmounted, its bridge deleted."""
    h = n.home(state)
    left: list[str] = []
    pids = {pid for pid in node_pids(h, n) if alive(pid)}
    if pids:
        left.append(f"{len(pids)} process(es)" + (f" of {n.name}" if n.index else ""))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
    mounts = mounts_under(h)
    if mounts:
        left.append(f"{len(mounts)} mount(s)" + (f" of {n.name}" if n.index else ""))
    for m in mounts:
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=10)
    if ip("link", "show", n.bridge, check=False).returncode == 0:
        left.append(f"interface {n.bridge}")
        ip("link", "del", n.bridge, check=False)
    return left


def leftovers(state: Path) -> list[str]:
    """What of the plane's real nodes is still there (empty after a clean stop): processes in their
    cgroups or speaking to their runtimes, mounts under their state, their bridges, their cgroups, a
    host setting not put back, a link to their pods' logs, a pod log under /var/log."""
    left: list[str] = []
    for n in NODES:
        h = n.home(state)
        left += [f"process {pid} ({cmdline(pid)[:60]})" for pid in sorted(node_pids(h, n)) if alive(pid)]
        left += [f"mount {m}" for m in mounts_under(h)]
        left += [f"interface {n.bridge}"] if ip("link", "show", n.bridge, check=False).returncode == 0 else []
        left += [f"cgroup {d}" for d in cgroup_dirs(n) if d.is_dir()]
    left += [f"host: {what}" for what in host.changed(state, tuple(pod_logs(n.home(state)) for n in NODES))]
    left += [f"pod logs {d}" for d in sorted(Path("/var/log/pods").glob("infercrane-*"))]
    return left


def node_pids(h: Path, n: RealNode = FIRST) -> set[int]:
    """Node ``n``'s pods' processes (in its cgroups) and its runtime's shims (by their address)."""
    pids = {pid for d in cgroup_dirs(n) if d.is_dir() for pid in procs(d)}
    return pids | {pid for pid in all_pids() if str(h / "containerd.sock") in cmdline(pid)}


def procs(cgroup: Path) -> set[int]:
    found: set[int] = set()
    for f in cgroup.rglob("cgroup.procs"):
        try:
            found |= {int(line) for line in f.read_text().split()}
        except OSError:
            continue  # removed meanwhile
    return found


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running (a zombie is not: it waits only for its parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def mounts_under(root: Path) -> list[str]:
    """Mount points at or under ``root``, deepest first (/proc/self/mountinfo)."""
    prefix = str(root)
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    mine = {p for p in points if p == prefix or p.startswith(prefix + "/")}
    return sorted(mine, key=lambda p: -p.count("/"))
