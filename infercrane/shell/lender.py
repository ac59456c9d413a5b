"""The run's GPU ledger shared by its lanes (:mod:`infercrane.shell.lanes`): each surge stage
borrows from it before its replicas are registered, and gives back once its deletions are gone.
Pulumi shell (asyncio; no Pulumi import)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Collection

from infercrane.core.errors import InferCraneError
from infercrane.core.plan.ledger import Gpus, Ledger, in_words


class Lender:
    """The run's GPU ledger (:class:`~infercrane.core.plan.ledger.Ledger`) shared by the lanes: a
    stage takes what it borrows before its replicas are registered and gives back what it no longer
    holds once its deletions are gone. Lanes are served in the order they asked (no lane waits
    behind later ones); a lane whose need can never be met -- every other lane holding GPUs of the
    ledger has stopped, keeping what its replicas may still hold -- stops, saying so."""

    def __init__(
        self, cap: int | None, lanes: Collection[str], halted: asyncio.Event, lent: tuple[tuple[str, Gpus], ...] = ()
    ) -> None:
        self.ledger = Ledger(cap, lent)  # what a run cut short left lent: never lent again
        self.running = set(lanes)
        self.queue: deque[str] = deque()
        self.changed = asyncio.Condition()
        self.halted = halted  # the engine failed: a waiting lane goes no further (the failing lane's end wakes it)

    async def take(self, endpoint: str, need: Gpus, where: str, note: Callable[[str], None]) -> bool:
        """Whether ``endpoint`` now holds ``need``: False when the engine failed meanwhile."""
        async with self.changed:
            if self.ledger.holds(endpoint, need):  # it takes nothing new: never queued behind a lane that waits for it
                return not self.halted.is_set()
            self.queue.append(endpoint)
            try:
                said = False
                while True:
                    if self.halted.is_set():
                        return False
                    if self.queue[0] == endpoint:
                        taken = self.ledger.take(endpoint, need)
                        if taken is not None:
                            self.ledger = taken
                            return True
                        holders = sorted(e for e, _ in self.ledger.lent if e != endpoint)
                        # a holder gives back only by going on: not once stopped, nor while it waits behind this lane
                        if not any(e in self.running and e not in self.queue for e in holders):
                            stopped = all(e not in self.running for e in holders)
                            raise InferCraneError(
                                f"{where} borrows {in_words(need)} beyond the endpoint's own, and rollout.maxExtraGpus "
                                f"{self.ledger.cap} is held by {', '.join(holders) or 'no endpoint'}, which "
                                + ("stopped with it" if stopped else "cannot give it back before this lane goes on")
                                + " (their replicas may still hold those GPUs)",
                                fix="fix what stopped them, then rerun the same command: it lends again only what their surges no longer hold",
                            )
                    if not said:
                        lent = ", ".join(f"{e} {in_words(h)}" for e, h in self.ledger.lent)
                        note(
                            f"rollout: {endpoint} {where} waits to borrow {in_words(need)} "
                            f"(rollout.maxExtraGpus {self.ledger.cap}; lent now: {lent or 'nothing'})"
                        )
                        said = True
                    await self.changed.wait()
            finally:
                self.queue.remove(endpoint)
                self.changed.notify_all()

    async def keep(self, endpoint: str, kept: Gpus) -> None:
        async with self.changed:
            self.ledger = self.ledger.keep(endpoint, kept)
            self.changed.notify_all()

    async def ended(self, endpoint: str) -> None:
        """``endpoint``'s lane is done or stopped: a stopped lane keeps what it borrowed (its new
        replicas may hold those GPUs); the lanes waiting behind it look again."""
        async with self.changed:
            self.running.discard(endpoint)
            self.changed.notify_all()
