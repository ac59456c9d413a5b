"""What a stopped real node may leave behind, found and removed: the processes in its cgroups or
speaking to its runtime, mounts under its state, its bridge, its cgroups. Local-plane layer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from infercrane.local import host
from infercrane.local.node_files import BRIDGE, CGROUP_ROOT, CGROUP_V1, home, pod_logs


def cgroup_dirs() -> list[Path]:
    """The node's cgroup root in every hierarchy (cgroup v1: one per controller; v2: one)."""
    if (CGROUP_V1 / "cgroup.controllers").is_file():
        return [CGROUP_V1 / CGROUP_ROOT]
    return [d / CGROUP_ROOT for d in sorted(CGROUP_V1.iterdir()) if d.is_dir() and not d.is_symlink() and d.name != "unified"]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def clean_up(state: Path) -> list[str]:
    """What a stopped node left: every process in its cgroups (the pods' containers) and the
    runtime's shims are killed, its mounts and network namespaces unmounted, its bridge deleted,
    its cgroups removed and the host's settings put back (:func:`host.give_back`). Returns what it
    cleaned or put back (empty: nothing was left, nothing had changed)."""
    h = home(state)
    left: list[str] = []
    pids = {pid for pid in node_pids(h) if alive(pid)}
    if pids:
        left.append(f"{len(pids)} process(es)")
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
        left.append(f"{len(mounts)} mount(s)")
    for m in mounts:
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=10)
    if ip("link", "show", BRIDGE, check=False).returncode == 0:
        left.append(f"interface {BRIDGE}")
        ip("link", "del", BRIDGE, check=False)
    left += [f"host: {what}" for what in host.give_back(state, pod_logs(h))]
    for d in cgroup_dirs():
        if d.is_dir():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                try:
                    sub.rmdir()
                except OSError as exc:
                    left.append(f"cgroup {sub} ({exc.strerror})")
    return left


def leftovers(state: Path) -> list[str]:
    """What of the plane's real node is still there (empty after a clean stop): processes in its
    cgroups or speaking to its runtime, mounts under its state, its bridge, its cgroups, a host
    setting not put back, a link to its pods' logs, a pod log under /var/log."""
    h = home(state)
    left = [f"process {pid} ({cmdline(pid)[:60]})" for pid in sorted(node_pids(h)) if alive(pid)]
    left += [f"mount {m}" for m in mounts_under(h)]
    left += [f"interface {BRIDGE}"] if ip("link", "show", BRIDGE, check=False).returncode == 0 else []
    left += [f"cgroup {d}" for d in cgroup_dirs() if d.is_dir()]
    left += [f"host: {what}" for what in host.changed(state, pod_logs(h))]
    left += [f"pod logs {d}" for d in sorted(Path("/var/log/pods").glob("infercrane-*"))]
    return left


def node_pids(h: Path) -> set[int]:
    """The node's pods' processes (in its cgroups) and its runtime's shims (by their address)."""
    pids = {pid for d in cgroup_dirs() if d.is_dir() for pid in procs(d)}
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
