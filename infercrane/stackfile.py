"""Edit stack files in place, keeping comments and order (ruamel.yaml round trip).

Used by ``deploy MODEL …`` (write the replica intent first) and ``promote`` (copy release
bundles). Callers pass a ``check`` (config validation) that sees the new file before it replaces
the old one, so an invalid result is never written. Operations layer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from infercrane.config import KEY_REPLICAS


def _yaml() -> YAML:
    y = YAML()
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def load(path: Path) -> Any:
    return _yaml().load(path.read_text(encoding="utf-8"))


def dump(path: Path, doc: Any, check: Callable[[Path], object] | None = None) -> None:
    """Write ``doc`` to ``path`` atomically. ``check`` sees the new file first (under a temporary
    name); if it raises, nothing is written and the error propagates."""
    tmp = path.with_suffix(".yaml.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            _yaml().dump(doc, fh)
        if check is not None:
            check(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def upsert_replica(path: Path, replica: dict[str, Any], check: Callable[[Path], object] | None = None) -> str:
    """Add ``replica`` to the stack file, or update the entry with the same key. Returns the action."""
    doc = load(path)
    config = doc.setdefault("config", CommentedMap())
    replicas = config.get(KEY_REPLICAS)
    if replicas is None:
        replicas = CommentedSeq()
        config[KEY_REPLICAS] = replicas
    for entry in replicas:
        if entry.get("key") == replica["key"]:
            changed = False
            for k, v in replica.items():
                if entry.get(k) != v:
                    entry[k] = v
                    changed = True
            dump(path, doc, check)
            return "updated" if changed else "unchanged"
    replicas.append(CommentedMap(replica))
    dump(path, doc, check)
    return "added"
