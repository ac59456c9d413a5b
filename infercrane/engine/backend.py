"""Pulumi's self-managed ("DIY") state backends, read directly: stack checkpoints and stack locks.

**Checkpoints.** A stack's state is one blob, ``.pulumi/stacks/<project>/<stack>.json`` (or
``.json.gz``): ``{"version": 3, "checkpoint": {"latest": <deployment>}}`` -- the deployment that
``pulumi stack export`` prints, with secrets left encrypted. Reading it here takes milliseconds,
where a ``pulumi stack export`` process takes most of a second (docs/benchmarks.md); any other layout or version
(the legacy layout without projects, another checkpoint version) returns None and the caller
runs ``pulumi stack export``.

**Locks.**
Every update writes a lock ``.pulumi/locks/organization/<project>/<stack>/<uuid>.json`` holding
the pid and host of its ``pulumi`` process, and removes it when it ends. A CI job killed with
SIGKILL never removes it, and every later update of the stack fails "currently locked" until
someone runs ``pulumi cancel`` -- which removes *all* the stack's locks, a live update's too.

Here, before an update, each lock is read and removed only when it is certainly stale: written
by a ``pulumi`` process that a run of *this machine* started for this stack, never saw end, and
that no longer runs (a zombie or a pid reused by another program counts as gone) -- host name
and pid alone prove nothing, two containers may share a host name (:mod:`infercrane.engine.runs`).
Any other lock is left alone; the update then fails with the "locked" message and its fix.
Removal is exact: that one key, and only if its content is unchanged.

Backends: a local directory and PostgreSQL (:mod:`infercrane.engine.stores`). Others (cloud
buckets) are not read here: their checkpoints come from ``pulumi stack export``, and their locks
are explained, not cleared. Engine layer.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from infercrane.engine import runs
from infercrane.engine.stores import BackendStore, FileBackend, Lock, store_for

CHECKPOINT_VERSION: Final = 3


def has_stack(store: BackendStore, project: str, stack: str) -> bool:
    """Whether the backend holds the stack's checkpoint in either layout (read, never written --
    where the Pulumi CLI would first initialise an empty backend's metadata)."""
    base, legacy = f".pulumi/stacks/{project}/{stack}.json", f".pulumi/stacks/{stack}.json"
    return any(blob is not None for blob in store.read_many([base, base + ".gz", legacy, legacy + ".gz"]).values())


def checkpoint(store: BackendStore, project: str, stack: str) -> dict[str, Any] | None:
    """The stack's latest deployment, read from the backend; ``{}`` when the stack has no
    checkpoint blob in either form; None when it cannot be read here (unknown layout or
    version, both forms present): the caller asks ``pulumi stack export``."""
    import gzip

    base = f".pulumi/stacks/{project}/{stack}.json"
    legacy = f".pulumi/stacks/{stack}.json"
    blobs = store.read_many([".pulumi/meta.yaml", base, base + ".gz", legacy, legacy + ".gz"])  # one round trip
    meta, plain, packed = blobs[".pulumi/meta.yaml"], blobs[base], blobs[base + ".gz"]
    if all(blob is None for blob in blobs.values()):
        return {}  # a backend Pulumi never wrote to: no stack in either layout (a first deploy)
    if meta is None or meta.split(b"#", 1)[0].strip() != b"version: 1":
        return None  # project-scoped layout is version 1; older is not read here
    if plain is not None and packed is not None:
        return None
    raw = plain if plain is not None else (gzip.decompress(packed) if packed is not None else None)
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("version") != CHECKPOINT_VERSION:
        return None
    latest = (doc.get("checkpoint") or {}).get("latest")
    return dict(latest) if isinstance(latest, dict) else {}


def clear_stale_locks(stack: str, env: Mapping[str, str], project_dir: Path, *, project: str = "infercrane") -> list[str]:
    """Remove this stack's locks left by a ``pulumi`` process a run of this machine started and
    that no longer runs -- a CI job killed mid-update -- and say so (see the module docstring). A
    lock of this host name that no run here recorded is left, with a note: another container
    with the same host name may hold it."""
    store = store_for(env.get("PULUMI_BACKEND_URL", ""))
    if store is None:
        return []
    try:
        locks = store.locks(project, stack)
    except Exception:  # noqa: BLE001 - the backend unreadable here: the update itself reports it
        return []
    notes = []
    ours = runs.started(project_dir, stack)
    for lock in locks:
        if stale(lock, ours):
            store.remove(lock)
            runs.forget(project_dir, stack, lock.pid)
            notes.append(
                f"note: removed the lock of stack {stack!r} left by pulumi process {lock.pid} (started by a run on this "
                f"machine, no longer running, since {lock.timestamp}); the interrupted update's objects carry this "
                "stack's ownership and are checked before anything is applied"
            )
        elif lock.host == socket.gethostname() and not process_alive(lock.pid):
            notes.append(
                f"note: stack {stack!r} is locked by pulumi process {lock.pid} of host {lock.host!r} (since "
                f"{lock.timestamp}), which no run on this machine started: it may run in another container with "
                f"this host name, so the lock is left; if no update of {stack!r} runs anywhere, "
                f"`pulumi cancel --stack {stack}` removes it"
            )
    return notes


def stale(lock: Lock, ours: Mapping[int, float]) -> bool:
    """Whether ``lock`` was certainly left by a ``pulumi`` process that is gone: one a run of this
    machine started (``ours``: :func:`infercrane.engine.runs.started`), writing the lock soon after
    it started, and that no longer runs."""
    return (
        lock.host == socket.gethostname()
        and lock.pid in ours
        and runs.lock_written_by(lock.timestamp, ours[lock.pid])
        and not process_alive(lock.pid)
    )


def process_alive(pid: int) -> bool:
    """Is ``pid`` a running ``pulumi`` process? A zombie (killed, its parent gone, not yet reaped)
    or a reused pid running something else counts as gone."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").is_file():
        try:
            text = stat.read_text()
        except OSError:
            return False
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 1 :].split()
        return rest[0] != "Z" and "pulumi" in comm
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# A blob's temporary file while the file backend writes it (gocloud fileblob: os.CreateTemp with
# "<name>.*.tmp", the star a decimal number), and its attributes sidecar.
ATTRS_SUFFIX: Final = ".attrs"


def _parses(raw: bytes) -> bool:
    try:
        doc = json.loads(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("version") == CHECKPOINT_VERSION and isinstance(doc.get("checkpoint"), dict)


#: Why a checkpoint is older than the live objects show (None: it is not), see :func:`repair_torn_writes`.
Vouch = Callable[[Mapping[str, Any]], str | None]


def repair_torn_writes(
    backend_url: str, stack: str, project_dir: Path, *, project: str = "infercrane", vouch: Vouch | None = None
) -> list[str]:
    """Repair what a kill in the middle of a file-backend write leaves of *this* stack's
    checkpoint, before the engine reads it, and say what was done -- only when no live ``pulumi``
    process holds the stack's lock, nor may (then the files may be mid-write by their owner).

    The blob store writes a checkpoint to a temporary file, renames it, and writes an ``.attrs``
    sidecar (content type, md5) in a separate step. Killed between them: an empty or unparsable
    sidecar (Pulumi then fails every command: "failed to load checkpoint: EOF") -- removed, Pulumi
    reads a blob without one; a leftover ``<stack>.json.<n>.tmp`` -- removed; a checkpoint that
    does not parse -- kept beside as ``.damaged``, replaced by Pulumi's own ``.bak`` (the state
    before the last write) when that parses and ``vouch`` (given the backup's checkpoint) finds it
    not older than the live objects show; its sidecar no longer matches and goes too. A damaged
    checkpoint without a usable ``.bak`` raises EngineError naming the file and the manual step,
    and so does a ``.bak`` that ``vouch`` refuses. Other backends write a blob in one
    transaction: nothing to repair."""
    store = store_for(backend_url)
    if not isinstance(store, FileBackend):
        return []
    folder = store.root / ".pulumi" / "stacks" / project
    if not folder.is_dir():
        return []
    ours = runs.started(project_dir, stack)
    if not all(stale(lock, ours) for lock in store.locks(project, stack)):
        return []  # an update holds the stack (or may: a lock not proven stale): its files are its own
    base = folder / f"{stack}.json"
    notes = _torn_sidecars(base, stack) + _torn_temporaries(folder, stack)
    if base.is_file() and not _parses(base.read_bytes()):
        notes.append(_restored(base, stack, store.root / ".pulumi" / "backups" / project / stack, vouch))
    return notes


def _torn_sidecars(base: Path, stack: str) -> list[str]:
    """Each empty or unparsable ``.attrs`` sidecar of the stack's blobs removed (a kill between the
    blob's write and its sidecar's)."""
    notes = []
    blobs = [base, base.with_name(base.name + ".gz")]
    blobs += [b.with_name(b.name + ".bak") for b in blobs]
    for blob in blobs:
        attrs = blob.with_name(blob.name + ATTRS_SUFFIX)
        try:
            raw = attrs.read_bytes()
        except FileNotFoundError:
            continue
        try:
            ok = isinstance(json.loads(raw), dict)
        except ValueError:
            ok = False
        if not ok:
            attrs.unlink()
            notes.append(
                f"note: {attrs.name} of stack {stack!r} was {'empty' if not raw else 'unreadable'} (a write interrupted by a kill); "
                "removed it -- Pulumi reads the checkpoint without it"
            )
    return notes


def _torn_temporaries(folder: Path, stack: str) -> list[str]:
    """Each leftover ``<stack>.json.<n>.tmp`` of an interrupted write removed."""
    import re

    notes = []
    tmp = re.compile(rf"^{re.escape(stack)}\.json(\.gz)?(\.bak)?\.\d+\.tmp$")
    for leftover in sorted(p for p in folder.iterdir() if tmp.match(p.name)):
        leftover.unlink()
        notes.append(f"note: removed {leftover.name}, a checkpoint write of stack {stack!r} that a kill interrupted")
    return notes


def _restored(base: Path, stack: str, backups: Path, vouch: Vouch | None) -> str:
    """A checkpoint that does not parse kept aside as ``.damaged``, Pulumi's ``.bak`` put in its
    place -- when it parses and ``vouch`` finds it not older than the live objects; else EngineError."""
    import shutil
    import time

    from infercrane.core.errors import EngineError

    bak = base.with_name(base.name + ".bak")
    if not (bak.is_file() and _parses(bak.read_bytes())):
        raise EngineError(
            f"the checkpoint of stack {stack!r} ({base}) does not parse (a write interrupted by a kill?) and there is no "
            f"usable {bak.name} beside it; nothing was applied.",
            fix=f"restore the newest file of {backups} (Pulumi keeps one per "
            f"update) as {base.name}, or `pulumi stack import --stack {stack}` an exported state; then rerun",
        )
    why = vouch(json.loads(bak.read_bytes())["checkpoint"]) if vouch is not None else None
    if why is not None:
        raise EngineError(
            f"the checkpoint of stack {stack!r} ({base}) does not parse (a write interrupted by a kill?), and Pulumi's "
            f"{bak.name} beside it is older than the cluster: {why}; nothing was applied.",
            fix=f"restore the newest file of {backups} that records those "
            f"objects as {base.name}, or `pulumi stack import --stack {stack}` an exported state; then rerun",
        )
    damaged = base.with_name(f"{base.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    base.replace(damaged)
    shutil.copyfile(bak, base)
    base.with_name(base.name + ATTRS_SUFFIX).unlink(missing_ok=True)
    return (
        f"note: the checkpoint of stack {stack!r} did not parse (kept as {damaged.name}); restored Pulumi's "
        f"{bak.name}, the state before the interrupted write -- objects applied since carry this stack's "
        "ownership and are picked up again"
    )
