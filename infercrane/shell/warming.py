"""Warm-first one wave ahead, for the lanes of one run (:meth:`infercrane.shell.awaiting.Waits.warm`
over :func:`infercrane.live.status.prefetch.before_wave`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from infercrane.live.status.prefetch import Turn

if TYPE_CHECKING:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.live.client.api import Live


class WarmAhead:
    """Warm-first one wave ahead: before a wave, what the warm begun for it one wave earlier did
    (waited for while still pulling) and a warm of the keys it did not cover; the endpoint's next
    wave is warmed beside them, as this wave begins -- while this one pulls, drains and restarts --
    so only a rollout's first wave waits for a pull, and at most two waves of an endpoint pull at
    once (a node and release both warm is pulled once: :class:`~infercrane.live.status.prefetch.Run`).
    ``warm(endpoint, keys, turn)`` returns what to say; it runs on ``pool`` (None: the loop's own)."""

    def __init__(
        self,
        warm: Callable[[str, Collection[str], Turn], list[str]],
        stop: Callable[[], None] = lambda: None,
        pool: Executor | None = None,
    ) -> None:
        self.warm, self.stop, self.pool = warm, stop, pool
        self.begun: dict[str, tuple[frozenset[str], asyncio.Future[list[str]]]] = {}  # endpoint -> its next wave

    @classmethod
    def of(cls, live: Live, config: InferCraneConfig, stack: str, pool: Executor | None = None) -> WarmAhead:
        """One run's, over the cluster: its prefetch pods known as its own to each of its warms,
        ``stop`` ending a warm still waiting."""
        from infercrane.live.status import prefetch

        run = prefetch.Run()
        return cls(
            lambda endpoint, keys, turn: prefetch.before_wave(live, config, stack, endpoint, keys, run, turn), run.stop.set, pool
        )

    async def before(self, endpoint: str, keys: Collection[str], upcoming: Collection[str] = ()) -> list[str]:
        begun = self.begun.pop(endpoint, None) if keys else None
        covered = begun[0] if begun is not None else frozenset()
        rest = [k for k in keys if k not in covered]
        turn = Turn()  # this wave's warm claims its pulls before the next wave's, begun beside it
        own = self._start(endpoint, rest, turn) if rest else None
        if upcoming and endpoint not in self.begun:  # beside this wave's own pull, not after it
            self.begun[endpoint] = (frozenset(upcoming), self._start(endpoint, upcoming, Turn(turn.claimed if rest else None)))
        said: list[str] = await begun[1] if begun is not None else []
        return said + (await own if own is not None else [])

    def _start(self, endpoint: str, keys: Collection[str], turn: Turn) -> asyncio.Future[list[str]]:
        return asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(self.warm, endpoint, keys, turn))
