"""Warm-first one wave ahead, for the lanes of one run (:meth:`infercrane.shell.awaiting.Waits.warm`
over :func:`infercrane.live.status.prefetch.before_wave`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.live.client.api import Live


class WarmAhead:
    """Warm-first one wave ahead: before a wave, what the warm begun for it one wave earlier did
    (waited for while still pulling) and a warm of the keys it did not cover; then the endpoint's
    next wave warmed while this one restarts -- so only a rollout's first wave waits for a pull,
    and at most two waves of an endpoint pull at once. ``warm(endpoint, keys)`` returns what to say."""

    def __init__(self, warm: Callable[[str, Collection[str]], list[str]], stop: Callable[[], None] = lambda: None) -> None:
        self.warm, self.stop = warm, stop
        self.begun: dict[str, tuple[frozenset[str], asyncio.Future[list[str]]]] = {}  # endpoint -> its next wave

    @classmethod
    def of(cls, live: Live, config: InferCraneConfig, stack: str) -> WarmAhead:
        """One run's, over the cluster: its prefetch pods known as its own to each of its warms,
        ``stop`` ending a warm still waiting."""
        from infercrane.live.status import prefetch

        run = prefetch.Run()
        return cls(lambda endpoint, keys: prefetch.before_wave(live, config, stack, endpoint, keys, run), run.stop.set)

    async def before(self, endpoint: str, keys: Collection[str], upcoming: Collection[str] = ()) -> list[str]:
        said: list[str] = []
        covered: frozenset[str] = frozenset()
        if keys and (begun := self.begun.pop(endpoint, None)) is not None:
            covered, warming = begun
            said += await warming
        if rest := [k for k in keys if k not in covered]:
            said += await asyncio.to_thread(self.warm, endpoint, rest)
        if upcoming and endpoint not in self.begun:
            self.begun[endpoint] = (frozenset(upcoming), asyncio.ensure_future(asyncio.to_thread(self.warm, endpoint, upcoming)))
        return said
