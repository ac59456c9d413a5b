"""The program's pacing: at most ``limit`` replica components registered ahead of the engine's answers."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from infercrane.shell.components import Ahead

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """On a loop of its own, never set as the thread's: ``asyncio.run`` leaves the thread with no
    loop, and the program tier's Pulumi mocks, run later in the same process, ask for one."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


@dataclass
class Answer:
    """Stands in for a component's URN output; the test answers it, as the engine would."""

    done: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def future(self) -> asyncio.Future[str]:
        return self.done


@dataclass
class ComponentDouble:
    key: str
    urn: Answer = field(default_factory=Answer)


def test_a_component_beyond_the_limit_is_built_only_once_an_earlier_one_is_answered() -> None:
    async def scenario() -> list[str]:
        ahead, built, log = Ahead(limit=2), [], []

        def build(key: str) -> ComponentDouble:
            log.append(f"built {key}")
            built.append(ComponentDouble(key))
            return built[-1]

        await ahead.register(lambda: build("a"))
        await ahead.register(lambda: build("b"))
        third = asyncio.ensure_future(ahead.register(lambda: build("c")))
        await asyncio.sleep(0.01)
        log.append("answer a")
        built[0].urn.done.set_result("urn-a")
        await third
        return log

    assert run(scenario()) == ["built a", "built b", "answer a", "built c"]


def test_a_failed_registration_frees_its_place_and_is_left_to_the_engine_to_report() -> None:
    async def scenario() -> str:
        ahead = Ahead(limit=1)
        first = await ahead.register(lambda: ComponentDouble("a"))
        first.urn.done.set_exception(RuntimeError("the engine failed the registration"))
        second = await asyncio.wait_for(ahead.register(lambda: ComponentDouble("b")), timeout=1)
        return second.key

    assert run(scenario()) == "b"


def test_a_build_that_raises_frees_its_place() -> None:
    async def scenario() -> str:
        ahead = Ahead(limit=1)

        def broken() -> ComponentDouble:
            raise ValueError("refused")

        try:
            await ahead.register(broken)
        except ValueError:
            pass
        return (await asyncio.wait_for(ahead.register(lambda: ComponentDouble("b")), timeout=1)).key

    assert run(scenario()) == "b"


def test_a_registration_first_takes_the_next_free_place_before_the_ones_waiting_without_it() -> None:
    async def scenario() -> list[str]:
        ahead, built = Ahead(limit=1), []

        def build(key: str) -> ComponentDouble:
            built.append(ComponentDouble(key))
            return built[-1]

        await ahead.register(lambda: build("held"))
        later = [asyncio.ensure_future(ahead.register(lambda k=k: build(k))) for k in ("same-1", "same-2")]
        await asyncio.sleep(0.01)
        changed = [asyncio.ensure_future(ahead.register(lambda k=k: build(k), first=True)) for k in ("new-1", "new-2")]
        await asyncio.sleep(0.01)
        for _ in range(4):  # the engine answers each in turn: the next one is built
            built[-1].urn.done.set_result("urn")
            await asyncio.sleep(0.01)
        await asyncio.gather(*later, *changed)
        return [c.key for c in built]

    assert run(scenario()) == ["held", "new-1", "new-2", "same-1", "same-2"]


def test_a_wait_cancelled_before_its_turn_gives_the_place_to_the_next() -> None:
    async def scenario() -> str:
        ahead = Ahead(limit=1)
        held = await ahead.register(lambda: ComponentDouble("held"))
        gone = asyncio.ensure_future(ahead.register(lambda: ComponentDouble("gone"), first=True))
        nxt = asyncio.ensure_future(ahead.register(lambda: ComponentDouble("next")))
        await asyncio.sleep(0.01)
        gone.cancel()
        held.urn.done.set_result("urn")
        return (await asyncio.wait_for(nxt, timeout=1)).key

    assert run(scenario()) == "next"
