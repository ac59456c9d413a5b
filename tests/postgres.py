"""A throwaway PostgreSQL on 127.0.0.1 (trust auth, no TLS, no fsync) for Pulumi's PostgreSQL
backend: the integration tests' ``postgres`` fixture and ``make bench-fleet BACKENDS=postgres``."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

INSTALL_HINT = "install PostgreSQL's server (Debian: `apt-get install postgresql`); it is started on loopback for the run"


class PostgresMissing(RuntimeError):
    """PostgreSQL's server tools, or the user to run them as, are not on this machine."""


def tool(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise PostgresMissing(f"PostgreSQL's {name} not found: {INSTALL_HINT}")
    return found


@contextlib.contextmanager
def throwaway() -> Iterator[str]:
    """A new server in a temporary directory, removed afterwards; yields its URL as Pulumi takes it."""
    as_user: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="infercrane-pg-"))
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as the postgres user
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(base, ignore_errors=True)
            raise PostgresMissing(f"no 'postgres' user to run PostgreSQL as: {INSTALL_HINT}") from None
        os.chown(base, owner.pw_uid, owner.pw_gid)
        base.chmod(0o755)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data, log = base / "data", base / "server.log"
    try:
        subprocess.run(
            [*as_user, tool("initdb"), "-D", str(data), "-U", "infercrane", "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
        )
        options = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off"
        subprocess.run(
            [*as_user, tool("pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"],
            check=True,
            capture_output=True,
        )
        yield f"postgres://infercrane@127.0.0.1:{port}/postgres?sslmode=disable"
    finally:
        if data.exists():
            subprocess.run([*as_user, tool("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
