"""Warm-first one wave ahead (:class:`infercrane.shell.warming.WarmAhead`): each wave's next is
warmed as it begins -- beside its own pull, then while it restarts --, a wave waits only for a warm
still pulling, and keys it did not cover are warmed beside that one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection

from infercrane.live.status.prefetch import Turn
from infercrane.shell.warming import WarmAhead


class Pulls:
    """A warm that takes ``seconds`` and records when each began and ended."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.t0 = seconds, time.monotonic()
        self.log: list[tuple[str, tuple[str, ...], float]] = []
        self.lock = threading.Lock()

    def __call__(self, endpoint: str, keys: Collection[str], turn: Turn | None = None) -> list[str]:
        if turn is not None:
            turn.claimed.set()
        with self.lock:
            self.log.append(("began", tuple(sorted(keys)), time.monotonic() - self.t0))
        time.sleep(self.seconds)
        with self.lock:
            self.log.append(("ended", tuple(sorted(keys)), time.monotonic() - self.t0))
        return [f"warm-first: {', '.join(sorted(keys))}: pulled"]


def run(coroutine: object) -> object:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)  # type: ignore[arg-type]
    finally:
        loop.close()


def test_the_next_wave_pulls_while_this_one_restarts_and_is_said_when_its_wave_begins() -> None:
    pulls = Pulls(0.3)
    ahead = WarmAhead(pulls)

    async def waves() -> list[list[str]]:
        said = [await ahead.before("e", ["r0"], ["r1"])]
        await asyncio.sleep(0.4)  # the first wave restarts meanwhile
        came = time.monotonic() - pulls.t0
        said.append(await ahead.before("e", ["r1"], []))
        ended_r1 = next(t for what, keys, t in pulls.log if what == "ended" and keys == ("r1",))
        assert ended_r1 < came, "the next wave's warm began when its wave came, not while the first one restarted"
        return said

    first, second = run(waves())  # type: ignore[misc]
    assert first == ["warm-first: r0: pulled"] and second == ["warm-first: r1: pulled"]
    assert sorted(k for what, k, _ in pulls.log if what == "began") == [("r0",), ("r1",)]  # r1 warmed once, ahead
    began_r1 = next(t for what, k, t in pulls.log if what == "began" and k == ("r1",))
    ended_r0 = next(t for what, k, t in pulls.log if what == "ended" and k == ("r0",))
    assert began_r1 < ended_r0, "the next wave's warm waited for this wave's pull instead of running beside it"


def test_a_wave_waits_for_its_warm_still_pulling_and_warms_the_keys_it_did_not_cover_beside_it() -> None:
    pulls = Pulls(0.2)
    ahead = WarmAhead(pulls)

    async def waves() -> list[str]:
        ahead.begun["e"] = (frozenset({"r1"}), asyncio.ensure_future(asyncio.to_thread(pulls, "e", ["r1"])))
        await asyncio.sleep(0.05)  # r1's warm, begun one wave earlier, still pulls when its wave comes
        return await ahead.before("e", ["r1", "r2"], [])

    said = run(waves())
    assert said == ["warm-first: r1: pulled", "warm-first: r2: pulled"]  # r1's warm said once, then r2's
    ended_r1 = next(t for what, k, t in pulls.log if what == "ended" and k == ("r1",))
    began_r2 = next(t for what, k, t in pulls.log if what == "began" and k == ("r2",))
    assert began_r2 < ended_r1  # not after it: both are this wave's pull
    assert [k for what, k, _ in pulls.log if what == "began"] == [("r1",), ("r2",)]  # r1 not warmed twice


def test_endpoints_warm_ahead_each_on_its_own() -> None:
    pulls = Pulls(0.01)
    ahead = WarmAhead(pulls)

    async def both() -> tuple[list[str], list[str]]:
        a = await ahead.before("a", ["a0"], ["a1"])
        b = await ahead.before("b", ["b0"], ["b1"])
        return a + await ahead.before("a", ["a1"]), b + await ahead.before("b", ["b1"])

    a, b = run(both())  # type: ignore[misc]
    assert a == ["warm-first: a0: pulled", "warm-first: a1: pulled"]
    assert b == ["warm-first: b0: pulled", "warm-first: b1: pulled"]


def test_the_next_waves_warm_claims_its_pulls_only_after_this_waves_warm_has_claimed_its_own() -> None:
    """CI of stop 76: both warms began at once and the next wave's claimed the shared node and release
    first; wave 1 said the release was there already (pulled for r1), wave 2 that it pulled it."""
    order: list[str] = []

    def warm(endpoint: str, keys: Collection[str], turn: Turn) -> list[str]:
        if "r0" in keys:
            time.sleep(0.2)  # this wave's reads take longer than the next wave's
        if turn.after is not None:
            assert turn.after.wait(5)
        order.append(next(iter(keys)))
        turn.claimed.set()
        return []

    ahead = WarmAhead(warm)

    async def wave() -> None:
        await ahead.before("e", ["r0"], ["r1"])
        await ahead.begun["e"][1]

    run(wave())
    assert order == ["r0", "r1"]
