"""Promotion between environment stacks: the health gate, then the bundles written.

The bundles and their diff are pure (:mod:`infercrane.core.promotion`). Here: the source stack
may be promoted only if its last update succeeded (the engine's history) and every promoted
replica is ready (live inspect); the CLI then writes the bundles into the target stack file
(:func:`infercrane.project.stackfile.write_bundles`). Engine layer.
"""

from __future__ import annotations

from infercrane.core import config as cfg
from infercrane.core.errors import PromotionRefused
from infercrane.engine.workspace import Engine
from infercrane.live import cluster
from infercrane.live.inspect import inspect


def check_healthy(source_stack: str, source: cfg.InferCraneConfig, keys: list[str] | None) -> None:
    """Refuse (PromotionRefused) unless the source stack's last update succeeded and every
    promoted replica is ready."""
    updates = [h for h in Engine(source_stack).history() if h.get("kind") == "update"]
    if not updates or updates[0].get("result") != "succeeded":
        state = f"its last update {updates[0].get('result')}" if updates else "it was never deployed"
        raise PromotionRefused(
            f"stack {source_stack!r} is not healthy: {state}; nothing was written.",
            fix=f"make `infercrane deploy --stack {source_stack}` succeed first",
        )
    records = inspect(source, cluster.client(source.kubernetes), stack=source_stack, read_nodes=False)
    not_ready = [r for r in records if r["state"] != "ready" and (keys is None or r["key"] in keys)]
    if not_ready:
        listed = ", ".join(f"{r['key']} ({r['state']})" for r in not_ready)
        raise PromotionRefused(
            f"stack {source_stack!r} has replicas that are not ready: {listed}; nothing was written.",
            fix=f"check `infercrane inspect --stack {source_stack}`; promote only what runs",
        )
