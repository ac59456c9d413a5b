"""Promotion between environment stacks: the health gate, then the bundles written.

The bundles and their diff are pure (:mod:`infercrane.core.promotion`). Here: the source stack
may be promoted only if its last update succeeded (the engine's history) and every promoted
replica is ready (live inspect); the CLI then writes the bundles into the target stack file
(:func:`infercrane.project.stackfile.write_bundles`). Engine layer.
"""

from __future__ import annotations

from infercrane.core import naming, promotion
from infercrane.core.errors import PromotionRefused, bullets
from infercrane.core.model import config as cfg
from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE
from infercrane.engine.workspace import Engine
from infercrane.live.client.api import Live
from infercrane.live.inspect import inspect


def check_healthy(source_stack: str, source: cfg.InferCraneConfig, keys: list[str] | None) -> None:
    """Refuse (PromotionRefused) unless the source stack's last update succeeded and every
    promoted replica is ready and runs the bundle its stack file names (image, model, revision,
    GPU: an edited, never-deployed source file is not what was tested)."""
    updates = [h for h in Engine(source_stack).history() if h.get("kind") == "update"]
    if not updates or updates[0].get("result") != "succeeded":
        state = f"its last update {updates[0].get('result')}" if updates else "it was never deployed"
        raise PromotionRefused(
            f"stack {source_stack!r} is not healthy: {state}; nothing was written.",
            fix=f"make `infercrane deploy --stack {source_stack}` succeed first",
        )
    live = Live.connect(source.kubernetes)
    records = inspect(source, live, stack=source_stack, read_nodes=False)
    not_ready = [r for r in records if r["state"] != "ready" and (keys is None or r["key"] in keys)]
    if not_ready:
        listed = ", ".join(f"{r['key']} ({r['state']})" for r in not_ready)
        raise PromotionRefused(
            f"stack {source_stack!r} has replicas that are not ready: {listed}; nothing was written.",
            fix=f"check `infercrane inspect --stack {source_stack}`; promote only what runs",
        )
    t = source.kubernetes
    running = live.by_name(t.object_kinds)  # the workloads, and under gpuAllocation dra the claim templates
    templates = {name: obj for (kind, name), obj in running.items() if kind == RESOURCE_CLAIM_TEMPLATE.name}
    unlike = [
        f"{r.key}: {'; '.join(why)}"
        for r in source.replicas
        if (keys is None or r.key in keys)
        and (why := promotion.unlike_live(source, r, running.get((t.object_kinds[0], naming.object_name(r.key))), templates))
    ]
    if unlike:
        raise PromotionRefused(
            f"stack {source_stack!r} does not run what its stack file names; nothing was written:\n" + bullets(unlike),
            fix=f"deploy the source first (`infercrane deploy --stack {source_stack}`), then promote what it runs",
        )
