"""The program's waits block threads of their own: every lane's at once, none of the loop's default
executor (Pulumi's, which its own calls to the engine share)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from infercrane.shell.awaiting import BLOCKING_PER_LANE, Waits, blocking_pool


def test_every_lane_blocks_at_once_however_few_threads_the_loops_default_executor_has() -> None:
    """33 endpoints baking their canaries at once on Pulumi's 32 threads (2 cores) baked in two
    rounds; here each lane has its threads: 11 lanes' 33 blocking waits meet at one barrier."""
    lanes = 11
    pool = blocking_pool(SimpleNamespace(lanes=[None] * lanes))  # type: ignore[arg-type]
    barrier = threading.Barrier(BLOCKING_PER_LANE * lanes)
    loop = asyncio.new_event_loop()
    loop.set_default_executor(ThreadPoolExecutor(1))
    try:

        async def all_at_once() -> list[int]:
            return await asyncio.gather(*(loop.run_in_executor(pool, barrier.wait, 5) for _ in range(barrier.parties)))

        assert sorted(loop.run_until_complete(all_at_once())) == list(range(barrier.parties))
    finally:
        loop.close()
        pool.shutdown()


def test_a_canary_bake_runs_on_the_runs_own_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from infercrane.live.evidence import baking

    ran_on: list[str] = []

    def bake(*args: Any, **kwargs: Any) -> str:
        ran_on.append(threading.current_thread().name)
        return "ACCEPT"

    monkeypatch.setattr(baking, "bake", bake)
    waits = Waits.__new__(Waits)  # only what a bake reads: no cluster
    waits.config, waits.checker, waits.live, waits.held = None, None, None, set()  # type: ignore[assignment]
    waits.pool = blocking_pool(None)
    loop = asyncio.new_event_loop()
    try:
        said = loop.run_until_complete(waits.bake(SimpleNamespace(canary=("c0",)), lambda _: None))  # type: ignore[arg-type]
    finally:
        loop.close()
        waits.pool.shutdown()
    assert said == "ACCEPT" and ran_on[0].startswith("infercrane-wait")
