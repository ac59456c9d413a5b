"""Promote release bundles between environment stacks (dev -> staging -> prod).

A release bundle is what was tested: the image digest, model and model revision, engine and its
args, GPU value and count. ``promote`` copies exactly that, per replica key, into the target stack
file (comments kept) and never touches target fields (context, namespace, secret, ...). It refuses
unless the source stack's last update succeeded and every source replica is ready, and it never
resolves a tag: bundles carry digests only (the config rules refuse anything else).
Operations layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infercrane import config as cfg
from infercrane import stackfile
from infercrane.errors import InferCraneError

BUNDLE_FIELDS: Final = ("model", "modelRevision", "engine", "args", "gpu", "gpuCount")


class PromotionRefused(InferCraneError):
    """The source environment is not in a state that may be promoted; nothing was written."""


@dataclass(frozen=True)
class Change:
    key: str
    field: str
    old: Any
    new: Any


def bundle(config: cfg.InferCraneConfig, replica: cfg.Replica) -> dict[str, Any]:
    """The release bundle of one replica (wire names), the image resolved to its digest."""
    data = replica.model_dump(by_alias=True, mode="json")
    out = {f: data[f] for f in BUNDLE_FIELDS}
    out["image"] = config.image_for(replica)
    return out


def diff(source: cfg.InferCraneConfig, target: cfg.InferCraneConfig, keys: list[str] | None) -> list[Change]:
    """Field-by-field changes the promotion would make to the target, in source order."""
    wanted = [r for r in source.replicas if keys is None or r.key in keys]
    missing = sorted(set(keys or []) - {r.key for r in source.replicas})
    if missing:
        raise PromotionRefused(f"replica key(s) {', '.join(missing)} are not in the source stack; nothing was written")
    by_key = {r.key: r for r in target.replicas}
    changes = []
    for r in wanted:
        new = bundle(source, r)
        old = bundle(target, by_key[r.key]) if r.key in by_key else dict.fromkeys(new)
        if r.key not in by_key:
            changes.append(Change(r.key, "(replica)", None, "added"))
        changes += [Change(r.key, f, old[f], new[f]) for f in new if old[f] != new[f]]
    return changes


def apply(target_file: Path, source: cfg.InferCraneConfig, target: cfg.InferCraneConfig, keys: list[str] | None) -> None:
    """Write the bundles into the target stack file, keeping its comments and target fields.
    The result is validated before it replaces the file (ConfigError: nothing written)."""
    doc = stackfile.load(target_file)
    entries = doc["config"].setdefault(cfg.KEY_REPLICAS, [])
    default_image = target.kubernetes.image_digest
    for r in source.replicas:
        if keys is not None and r.key not in keys:
            continue
        b = bundle(source, r)
        entry = next((e for e in entries if e.get("key") == r.key), None)
        if entry is None:
            entry = {"key": r.key, "name": r.name}
            entries.append(entry)
        for f in BUNDLE_FIELDS:
            value, spec = b[f], cfg.Replica.model_fields[_attr(f)]
            default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
            if not spec.is_required() and value == default:
                entry.pop(f, None)  # leave defaults implicit, as people write them
            else:
                entry[f] = value
        if b["image"] == default_image:
            entry.pop("image", None)
        else:
            entry["image"] = b["image"]
    stackfile.dump(target_file, doc, cfg.check_stack_file(target_file))


def _attr(alias: str) -> str:
    return next(n for n, f in cfg.Replica.model_fields.items() if f.alias == alias or n == alias)


def render_diff(changes: list[Change], source: str, target: str) -> str:
    if not changes:
        return f"promote {source} -> {target}: nothing to change (the bundles are already equal)"
    lines = [f"promote {source} -> {target}:"]
    for c in changes:
        lines.append(f"  {c.key}: {c.field}: {c.old!r} -> {c.new!r}" if c.field != "(replica)" else f"  {c.key}: new replica")
    return "\n".join(lines)
