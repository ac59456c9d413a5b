"""Edit stack files in place, keeping comments and order (ruamel.yaml round trip).

Used by ``deploy MODEL …`` (write the replica intent first) and ``promote`` (copy release
bundles). Operations layer; validates nothing itself -- callers validate the result.
"""

from __future__ import annotations

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


def dump(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(".yaml.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        _yaml().dump(doc, fh)
    tmp.replace(path)


def upsert_replica(path: Path, replica: dict[str, Any]) -> str:
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
            dump(path, doc)
            return "updated" if changed else "unchanged"
    replicas.append(CommentedMap(replica))
    dump(path, doc)
    return "added"
