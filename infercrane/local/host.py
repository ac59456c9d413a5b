"""What the real node changes on the machine, recorded before it starts and put back when it stops.

The kubelet insists on six kernel tunables (``vm.overcommit_memory=1``, ``kernel.panic=10``,
``kernel.panic_on_oops=1``, …). Left to itself it writes them and never restores them; here it runs
with ``protectKernelDefaults`` (it changes none, and refuses to start when one differs), and the
plane writes them itself just before the kubelet starts, after recording what they were, and puts
each back when the node stops -- ``local stop``, ``local reset``, or the next start cleaning up after
a killed plane. The record is the machine's, not a plane's (:data:`RECORD`, under /run: gone at a
reboot, as the tunables' values are): a plane killed and its state directory removed leaves it,
and the next plane restores the values the first one found, never the kubelet's as "found". The
kubelet also makes ``/var/log/containers`` (a directory of links to its pods'
logs, which live in the plane's state): its links go with the node, and the directory too when the
node made it. Nothing else of the host changes: the node's bridge forwards nothing (no gateway, so
``net.ipv4.ip_forward`` stays as it is), its cgroups, mounts and network namespaces are the node's
own (:func:`infercrane.local.node_teardown.clean_up`). Local-plane layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from infercrane.core.errors import PlaneError

#: The kernel tunables the kubelet requires (its ``setupKernelTunables``), and their values.
KUBELET_TUNABLES: Final = {
    "vm.overcommit_memory": "1",
    "vm.panic_on_oom": "0",
    "kernel.panic": "10",
    "kernel.panic_on_oops": "1",
    "kernel.keys.root_maxkeys": "1000000",
    "kernel.keys.root_maxbytes": "25000000",
}
#: Watched too, never written: what a CNI gateway bridge would turn on.
WATCHED: Final = ("net.ipv4.ip_forward",)
#: The directory of links the kubelet makes whatever its configuration says.
LOG_LINKS: Final = Path("/var/log/containers")
RECORD: Final = Path("/run/infercrane-host.json")  # the host as found, one per machine
LEGACY_RECORD: Final = "host.json"  # where a plane kept it before (its state directory): read, then moved
PROC_SYS: Final = Path("/proc/sys")


def _sysctl(name: str) -> Path:
    return PROC_SYS / name.replace(".", "/")


def read(name: str) -> str:
    return _sysctl(name).read_text().strip()


def settings() -> dict[str, str]:
    """Every setting the node could change, as it is now."""
    return {name: read(name) for name in (*KUBELET_TUNABLES, *WATCHED)}


def _record(state: Path) -> Path:
    """The machine's record, a plane's older one moved to it first."""
    legacy = state / LEGACY_RECORD
    if legacy.is_file() and not RECORD.is_file():
        RECORD.write_text(legacy.read_text())
    legacy.unlink(missing_ok=True)
    return RECORD


def take_over(state: Path, links: Path = LOG_LINKS) -> None:
    """Record the host as found (once per machine: a start after a killed plane, its state
    directory removed or not, keeps the first record), then set the kubelet's tunables."""
    record = _record(state)
    if not record.is_file():
        found = {"settings": settings(), "linksDirMade": not links.exists()}
        record.write_text(json.dumps(found, indent=1))
    for name, value in KUBELET_TUNABLES.items():
        if read(name) != value:
            try:
                _sysctl(name).write_text(value)
            except OSError as exc:
                give_back(state, state / "none", links)
                raise PlaneError(
                    f"the real node's kubelet needs kernel setting {name}={value}, which cannot be written: {exc.strerror}.",
                    fix="run `local start` as root on a host whose /proc/sys is writable, or `local start --no-real-node`",
                ) from exc


def give_back(state: Path, logs: Path | tuple[Path, ...], links: Path = LOG_LINKS) -> list[str]:
    """Put back what :func:`take_over` recorded and remove the kubelets' links into ``logs`` (each
    node's pods' logs);
    returns what was put back (``kernel.panic=0``) or removed (empty: nothing had changed)."""
    done = [f"removed the link {link.name}" for link in _links_into(logs, links)]
    for link in _links_into(logs, links):
        link.unlink(missing_ok=True)
    record = _record(state)
    if not record.is_file():
        return done
    found = json.loads(record.read_text())
    for name, value in found["settings"].items():
        if read(name) != value:
            _sysctl(name).write_text(value)
            done.append(f"{name}={value}")
    if found.get("linksDirMade") and links.is_dir() and not any(links.iterdir()):
        links.rmdir()
        done.append(f"removed the directory {links}")
    record.unlink()
    return done


def changed(state: Path, logs: Path | tuple[Path, ...], links: Path = LOG_LINKS) -> list[str]:
    """What the node changed that is not back (empty after a clean stop)."""
    left = [f"link {link}" for link in _links_into(logs, links)]
    record = RECORD if RECORD.is_file() else state / LEGACY_RECORD
    if record.is_file():
        found = json.loads(record.read_text())
        left += [f"{name} is {read(name)}, was {v}" for name, v in found["settings"].items() if read(name) != v]
        left += [f"{links} (made by the node)"] if found.get("linksDirMade") and links.exists() else []
        left += [f"{record} (the host as found, not yet given back)"]
    return left


def _links_into(logs: Path | tuple[Path, ...], links: Path) -> list[Path]:
    """The kubelets' links in ``links`` to a log under ``logs``."""
    if not links.is_dir():
        return []
    inside = tuple(str(d) + "/" for d in ((logs,) if isinstance(logs, Path) else logs))
    return [p for p in sorted(links.iterdir()) if p.is_symlink() and str(p.readlink()).startswith(inside)]
