"""The two self-managed backends read directly: a local directory (``file://``) and PostgreSQL
(``postgres://``, the table Pulumi's PostgreSQL backend keeps: ``key`` = ``<database>/<path>``,
``data`` = ``{"data": <base64 of the blob>}``) -- blobs by key, and the stack locks under
``.pulumi/locks``. What is read from them is :mod:`infercrane.engine.backend`'s. Engine layer.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import parse_qs, unquote, urlparse

LOCK_ROOT: Final = ".pulumi/locks/organization"


PG_DEFAULT_TABLE: Final = "pulumi_state"


@dataclass(frozen=True)
class Lock:
    key: str  # the backend's key (path) of the lock blob
    raw: bytes  # its content, as read (removal is conditional on it)
    pid: int
    host: str
    timestamp: str


class BackendStore(Protocol):
    def locks(self, project: str, stack: str) -> list[Lock]: ...
    def remove(self, lock: Lock) -> None: ...
    def read(self, key: str) -> bytes | None: ...
    def read_many(self, keys: list[str]) -> dict[str, bytes | None]: ...


def _parse(key: str, raw: bytes) -> Lock | None:
    try:
        content = json.loads(raw)
        return Lock(key, raw, int(content["pid"]), str(content["hostname"]), str(content.get("timestamp", "?")))
    except (ValueError, KeyError, TypeError):
        return None


class FileBackend:
    """Locks of a ``file://`` backend: files under the backend directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def locks(self, project: str, stack: str) -> list[Lock]:
        folder = self.root / LOCK_ROOT / project / stack
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                lock = _parse(str(path.relative_to(self.root)), path.read_bytes())
            except OSError:
                continue
            if lock is not None:
                out.append(lock)
        return out

    def read(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None

    def read_many(self, keys: list[str]) -> dict[str, bytes | None]:
        return {key: self.read(key) for key in keys}

    def remove(self, lock: Lock) -> None:
        path = self.root / lock.key
        try:
            if path.read_bytes() == lock.raw:
                path.unlink()
        except OSError:
            pass  # already gone


class PostgresBackend:
    """Locks of a ``postgres://`` backend: rows of Pulumi's state table (pg8000, pure Python)."""

    def __init__(self, url: str) -> None:
        u = urlparse(url)
        query = {k: v[-1] for k, v in parse_qs(u.query).items()}
        self.table = query.get("table", PG_DEFAULT_TABLE)
        # Pulumi's bucket keys start with the URL's path (the database name): "<db>/.pulumi/…".
        self.prefix = f"{u.path.strip('/')}/" if u.path.strip("/") else ""
        if not self.table.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"unexpected table name {self.table!r} in the backend URL")
        sslmode = query.get("sslmode", "require")  # lib/pq's default, which Pulumi's backend uses
        context: ssl.SSLContext | None = None
        if sslmode in ("require", "verify-ca", "verify-full"):
            context = ssl.create_default_context(cafile=query.get("sslrootcert"))
            if sslmode == "require":
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            elif sslmode == "verify-ca":
                context.check_hostname = False
        self.connect_args: dict[str, Any] = {
            "user": unquote(u.username or os.environ.get("PGUSER", "postgres")),
            "password": unquote(u.password) if u.password else os.environ.get("PGPASSWORD"),
            "host": u.hostname or "localhost",
            "port": u.port or 5432,
            "database": unquote(u.path.lstrip("/")) or "postgres",
            "ssl_context": context,
            "timeout": 10,
        }

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        import pg8000.native

        conn = pg8000.native.Connection(**self.connect_args)
        try:
            yield conn
        finally:
            conn.close()

    def locks(self, project: str, stack: str) -> list[Lock]:
        prefix = f"{self.prefix}{LOCK_ROOT}/{project}/{stack}/"
        with self._connection() as conn:
            if not conn.run("SELECT to_regclass(:t)::text", t=self.table)[0][0]:
                return []  # no state stored yet
            rows = conn.run(f"SELECT key, data::text FROM {self.table} WHERE key LIKE :p", p=prefix.replace("_", r"\_") + "%")
        out = []
        for key, data in rows:
            try:
                raw = base64.b64decode(json.loads(data)["data"])
            except (ValueError, KeyError, TypeError):
                continue
            lock = _parse(str(key), raw)
            if lock is not None:
                out.append(lock)
        return out

    def read(self, key: str) -> bytes | None:
        return self.read_many([key])[key]

    def read_many(self, keys: list[str]) -> dict[str, bytes | None]:
        """Several blobs over one connection and one query (absent keys: None)."""
        out: dict[str, bytes | None] = dict.fromkeys(keys)
        with self._connection() as conn:
            if not conn.run("SELECT to_regclass(:t)::text", t=self.table)[0][0]:
                return out  # no state stored yet
            rows = conn.run(
                f"SELECT key, data::text FROM {self.table} WHERE key = ANY(CAST(:ks AS text[]))",
                ks=[self.prefix + k for k in keys],
            )
        for key, data in rows:
            out[str(key).removeprefix(self.prefix)] = base64.b64decode(json.loads(data)["data"])
        return out

    def remove(self, lock: Lock) -> None:
        with self._connection() as conn:
            for key, data in conn.run(f"SELECT key, data::text FROM {self.table} WHERE key = :k", k=lock.key):
                if base64.b64decode(json.loads(data)["data"]) == lock.raw:
                    conn.run(f"DELETE FROM {self.table} WHERE key = :k AND data::text = :d", k=key, d=data)


def store_for(backend_url: str) -> BackendStore | None:
    if backend_url.startswith("file://"):
        return FileBackend(Path(unquote(backend_url.removeprefix("file://")).split("?", 1)[0]))
    if backend_url.startswith(("postgres://", "postgresql://")):
        return PostgresBackend(backend_url)
    return None
