"""Small worlds the exhaustive check's tests share (``tests/rollout_model.py``)."""

from __future__ import annotations

from infercrane.core.model.endpoints import CanaryPolicy, RolloutPolicy
from tests import rollout_model as model


def capped(pool: int, cap: int = 1, adversities: int = 1) -> model.World:
    """Two endpoints surging on one pool, their extra GPUs lent by one ledger of ``cap``."""
    surge = RolloutPolicy(max_unavailable=0, max_surge=1)
    return model.World(
        (model.change("a", "cutover", 2, surge), model.change("b", "update", 2, surge)),
        pool=pool,
        max_extra=cap,
        max_adversities=adversities,
    )


def violations(world: model.World) -> list[str]:
    return model.explore(world).violations


def required(kind: str = "update", mu: int = 1, ms: int = 0, n: int = 2, **kw: object) -> model.World:
    policy = RolloutPolicy(max_unavailable=mu, max_surge=ms, canary=CanaryPolicy(required=True))
    return model.World((model.change("a", kind, n, policy),), pool=n + ms, **kw)  # type: ignore[arg-type]
