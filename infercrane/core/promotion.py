"""Promote release bundles between environment stacks (dev -> staging -> prod).

A release bundle is what was tested: the image digest, model and model revision, engine and its
args, GPU value and count. ``promote`` copies exactly that, per replica key, into the target stack
file (comments kept) and never touches target fields (context, namespace, secret, ...). It refuses
unless the source stack's last update succeeded and every source replica is ready
(:mod:`infercrane.engine.promotion`), and it never resolves a tag: bundles carry digests only
(the config rules refuse anything else). Pure core: bundles and their diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from infercrane.core.errors import PromotionRefused
from infercrane.core.model import config as cfg
from infercrane.core.model.engines import ENGINES
from infercrane.core.model.replica import Replica
from infercrane.core.plan.workload import claimed_gpus, containers_of, flag_value, gpus_of, pod_of
from infercrane.core.render.command import command_and_args

BUNDLE_FIELDS: Final = ("model", "modelRevision", "engine", "args", "gpu", "gpuCount")


@dataclass(frozen=True)
class Change:
    key: str
    field: str
    old: Any
    new: Any


def bundle(config: cfg.InferCraneConfig, replica: Replica) -> dict[str, Any]:
    """The release bundle of one replica (wire names), the image resolved to its digest."""
    data = replica.model_dump(by_alias=True, mode="json")
    out = {f: data[f] for f in BUNDLE_FIELDS}
    out["image"] = config.image_for(replica)
    return out


def unlike_live(
    config: cfg.InferCraneConfig,
    replica: Replica,
    obj: Mapping[str, Any] | None,
    templates: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """How the live workload of ``replica`` differs from the bundle its stack file names (empty:
    it runs that bundle) -- what a promotion copies must be what the source runs, not an edit of
    its file that was never deployed: every field of the bundle (the engine and its args as the
    container's command line). Its GPU: the product label it selects and the count it requests,
    or under ``gpuAllocation: dra`` what its claim template (``templates``, live) selects."""
    if obj is None:
        return ["no live workload"]
    want = bundle(config, replica)
    first = containers_of(obj)[:1]
    live = {
        "image": first[0].get("image") if first else None,
        "model": flag_value(obj, ENGINES[replica.engine].model_flag),
        "modelRevision": flag_value(obj, "--revision"),
        "gpu": (pod_of(obj).get("nodeSelector") or {}).get(config.kubernetes.gpu_product_label),
    }
    live["gpuCount"] = gpus_of(obj, config.kubernetes.gpu_resource)
    if pod_of(obj).get("resourceClaims"):
        count, product = claimed_gpus(obj, templates or {}, config.kubernetes.gpu_product_names)
        live["gpu"] = live["gpu"] or product or None
        live["gpuCount"] = count or None
    out = [f"{f} {live[f]!r} (the file: {want[f]!r})" for f in live if live[f] != want[f]]
    # The engine and its args: the container's command line, against what the file renders.
    command, args = command_and_args(replica, config.drain_for(replica).shutdown_seconds)
    running = [*(first[0].get("command") or []), *(first[0].get("args") or [])] if first else []
    if running != [*command, *args]:
        out.append(f"engine and args {' '.join(running)!r} (the file renders: {' '.join([*command, *args])!r})")
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


def field_name(alias: str) -> str:
    return next(n for n, f in Replica.model_fields.items() if f.alias == alias or n == alias)
