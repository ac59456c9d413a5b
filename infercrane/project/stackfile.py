"""Stack files: read them strictly, validate them with the environment, edit them in place.

Reading refuses what Pulumi would accept silently or with a raw error (duplicate keys, unknown
top-level keys); :func:`load_stack` is the one place a stack file meets ``os.environ``. Edits
(``deploy MODEL …``, ``promote``) keep comments and order (ruamel.yaml round trip) and are checked
before they replace the file, so an invalid result is never written. Project-files layer.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter

from infercrane.core import promotion
from infercrane.core.errors import ConfigError, Problem
from infercrane.core.load.loading import load as load_values
from infercrane.core.load.loading import overrides
from infercrane.core.model.config import KEY_REPLICAS, InferCraneConfig
from infercrane.core.model.replica import Replica
from infercrane.project.paths import display_path, stack_file

# Top-level keys of a Pulumi stack file; anything else is a typo (a misspelt `config:` would
# otherwise leave the stack silently empty).
STACK_FILE_KEYS: Final = ("config", "encryptionsalt", "secretsprovider", "encryptedkey", "environment")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (Pulumi refuses them too, with a raw error)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        try:
            first = seen.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:  # an unhashable key: let the constructor report it
            continue
        if first != key_node.start_mark.line + 1:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {first})", key_node.start_mark
            )
    return dict(loader.construct_mapping(node, deep=deep))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_stack_values(path: Path) -> dict[str, Any]:
    """The ``config:`` map of a stack file. Raises ConfigError -- never anything else -- when the
    file is missing, not YAML, has duplicate keys, unknown top-level keys or non-string config keys."""
    rel = display_path(path)
    if not path.is_file():
        raise ConfigError(
            [Problem(rel, "stack file not found", "create it (copy stacks/Pulumi.dev.yaml) or pick another --stack")],
            rel,
        )
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader) or {}  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{rel}:{mark.line + 1}" if mark is not None else rel
        raise ConfigError(
            [Problem(where, f"is not valid YAML ({getattr(exc, 'problem', exc)})", "fix the YAML syntax")], rel
        ) from exc
    except RecursionError as exc:
        raise ConfigError(
            [
                Problem(
                    rel,
                    "nests maps or lists too deeply to be read (thousands of levels; a stack file needs a handful)",
                    "look for a runaway indentation or a generated block of '[' / '- ' and flatten it",
                )
            ],
            rel,
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem(rel, f"is not UTF-8 text (byte {exc.start}: {exc.reason})", "save the file as UTF-8")], rel
        ) from exc
    except ValueError as exc:
        raise ConfigError([Problem(rel, f"cannot be read as a stack file: {exc}", "fix the value it names")], rel) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ConfigError([Problem(rel, "has no 'config:' map", "put settings under 'config:'")], rel)
    problems = [
        Problem(
            f"{rel}: {key!r}",
            "is not a stack file key",
            f"use one of: {', '.join(STACK_FILE_KEYS)} (settings go under 'config:')",
        )
        for key in doc
        if key not in STACK_FILE_KEYS
    ]
    config = dict(doc.get("config") or {})
    problems += [
        Problem(f"{rel}: config.{key!r}", "is not a string key", "config keys look like infercrane:kubernetes")
        for key in config
        if not isinstance(key, str)
    ]
    if problems:
        raise ConfigError(problems, rel)
    return config


def check_stack_file(real: Path) -> Callable[[Path], InferCraneConfig]:
    """A ``stackfile.dump`` check: validate a candidate file as if it were ``real`` (messages name ``real``)."""
    return lambda candidate: load_values(read_stack_values(candidate), source=display_path(real), env=os.environ)


def load_stack(stack: str, *, project_dir: Path | None = None, env: Mapping[str, str] | None = None) -> InferCraneConfig:
    """Read and validate ``stacks/Pulumi.<stack>.yaml`` merged with the environment."""
    path = stack_file(stack, project_dir)
    return load_values(read_stack_values(path), source=display_path(path), env=os.environ if env is None else env)


def env_overrides(stack: str, *, project_dir: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per ``INFERCRANE_KUBERNETES_*`` variable that overrides a field of the stack
    (a CI job's exported production variables retarget *every* stack: say so first)."""
    path = stack_file(stack, project_dir)
    try:
        values = read_stack_values(path)
    except ConfigError:
        return []  # the command's own load says what is wrong with the file
    return [o.sentence(display_path(path)) for o in overrides(values, os.environ if env is None else env)]


def load_stack_with(
    stack: str, replica: Mapping[str, Any], *, project_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> InferCraneConfig:
    """The stack's config as if ``replica`` were in its file (an entry with the same key updated
    field by field, else appended) -- validated with the real file's name, the file untouched."""
    path = stack_file(stack, project_dir)
    values = read_stack_values(path)
    entries = [dict(e) if isinstance(e, Mapping) else e for e in (values.get(KEY_REPLICAS) or [])]
    same = next((e for e in entries if isinstance(e, dict) and e.get("key") == replica["key"]), None)
    if same is not None:
        same.update(replica)
    else:
        entries.append(dict(replica))
    values[KEY_REPLICAS] = entries
    return load_values(values, source=display_path(path), env=os.environ if env is None else env)


# --- comment-preserving edits


class _Representer(RoundTripRepresenter):
    """Round-trip output that reads back as it was meant: a string that a YAML 1.1 reader would
    take for something else (``on``, ``no``, ``1e3``, ``null``: the strict reader here is one) is
    written quoted. Plain strings are written as they are."""


def _represent_str(representer: RoundTripRepresenter, data: str) -> Any:
    resolved = yaml.resolver.Resolver().resolve(yaml.ScalarNode, data, (True, False))  # type: ignore[no-untyped-call]
    style = '"' if resolved != "tag:yaml.org,2002:str" else None
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Representer.add_representer(str, _represent_str)


def _yaml() -> YAML:
    y = YAML()
    y.Representer = _Representer
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def load_document(path: Path) -> Any:
    return _yaml().load(path.read_text(encoding="utf-8"))


def dump(path: Path, doc: Any, check: Callable[[Path], object] | None = None) -> None:
    """Write ``doc`` to ``path`` atomically. ``check`` sees the new file first (under a temporary
    name); if it raises, nothing is written and the error propagates."""
    buffer = io.StringIO()
    _yaml().dump(doc, buffer)
    write_atomically(path, buffer.getvalue(), check)


def write_atomically(path: Path, text: str, check: Callable[[Path], object] | None = None) -> None:
    """Replace ``path`` by ``text`` so that a kill at any instant leaves the old file or the new
    one, never a part: written to ``<path>.tmp`` and flushed to disk, then renamed over it. A
    leftover ``.tmp`` from a killed write is simply overwritten by the next one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if check is not None:
            check(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def upsert_replica(path: Path, replica: dict[str, Any], check: Callable[[Path], object] | None = None) -> str:
    """Add ``replica`` to the stack file, or update the entry with the same key. Returns the action."""
    doc = load_document(path)
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


def write_bundles(target_file: Path, source: InferCraneConfig, target: InferCraneConfig, keys: list[str] | None) -> None:
    """Write the bundles into the target stack file, keeping its comments and target fields.
    The result is validated before it replaces the file (ConfigError: nothing written)."""
    doc = load_document(target_file)
    entries = doc["config"].setdefault(KEY_REPLICAS, [])
    default_image = target.kubernetes.image_digest
    for r in source.replicas:
        if keys is not None and r.key not in keys:
            continue
        b = promotion.bundle(source, r)
        entry = next((e for e in entries if e.get("key") == r.key), None)
        if entry is None:
            entry = {"key": r.key, "name": r.name}
            entries.append(entry)
        for f in promotion.BUNDLE_FIELDS:
            value, spec = b[f], Replica.model_fields[promotion.field_name(f)]
            default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
            if not spec.is_required() and value == default:
                entry.pop(f, None)  # leave defaults implicit, as people write them
            else:
                entry[f] = value
        if b["image"] == default_image:
            entry.pop("image", None)
        else:
            entry["image"] = b["image"]
    dump(target_file, doc, check_stack_file(target_file))
