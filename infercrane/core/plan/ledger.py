"""The GPU ledger of one rollout: what the lanes borrow, per GPU product, beyond their own. Pure core.

Each endpoint's own GPUs of a product are what it holds before the change or after it, whichever
is more (its *own*). A surge holds more for a while: its new pod starts beside the old one. That
extra is *borrowed*, and each stage says how much it borrows while it runs and how much it still
holds once its deletions are gone (:attr:`~infercrane.core.plan.waves.Stage.borrow` /
:attr:`~infercrane.core.plan.waves.Stage.keep`). With ``rollout.maxExtraGpus`` set, the lanes
borrow from one ledger of that many GPUs per product: a stage starts only when the ledger can lend
what it borrows, and returns it once its deletions -- their pods -- are gone. So the stack's pods
of a product never hold more than the endpoints' own plus ``maxExtraGpus``, whatever the lanes'
timing: two endpoints' surges on a tight pool take turns instead of leaving it to the scheduler
which Pending pod gets the next free GPU. An in-place lane borrows nothing: what its deletion frees
is what its next wave takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Gpus = tuple[tuple[str, int], ...]  # (product, GPUs), sorted; no zero entries


def gpus(counts: Mapping[str, int]) -> Gpus:
    """``counts`` in the ledger's form: sorted, zero entries left out."""
    return tuple(sorted((p, n) for p, n in counts.items() if n > 0))


@dataclass(frozen=True)
class Ledger:
    """What each lane has borrowed, per product, against ``cap`` GPUs per product (None: no cap)."""

    cap: int | None
    #: endpoint -> what it holds borrowed; at a run's start, what a run cut short left it holding
    #: beyond its own (:attr:`~infercrane.core.plan.waves.Rollout.lent`): it may be over the cap then.
    lent: tuple[tuple[str, Gpus], ...] = ()

    def of(self, endpoint: str) -> dict[str, int]:
        return dict(dict(self.lent).get(endpoint, ()))

    def out(self, product: str) -> int:
        """GPUs of ``product`` lent now, all lanes together."""
        return sum(n for _, held in self.lent for p, n in held if p == product)

    def take(self, endpoint: str, need: Gpus) -> Ledger | None:
        """The ledger once ``endpoint`` holds ``need`` (what it holds already counts toward it);
        None when the cap cannot lend the rest now. All or nothing, so no lane holds part of a
        stage's need while it waits for the rest. A need within what it holds takes nothing new:
        never refused, whatever the others hold."""
        mine = self.of(endpoint)
        grown = {**mine, **{p: max(n, mine.get(p, 0)) for p, n in need}}
        more = {p: n for p, n in grown.items() if n > mine.get(p, 0)}  # beyond what it holds: only that is lent
        if self.cap is not None and any(self.out(p) - mine.get(p, 0) + n > self.cap for p, n in more.items()):
            return None
        return self._with(endpoint, grown)

    def holds(self, endpoint: str, need: Gpus) -> bool:
        """Whether ``endpoint`` holds ``need`` already: taking it takes nothing new."""
        mine = self.of(endpoint)
        return all(n <= mine.get(p, 0) for p, n in need)

    def keep(self, endpoint: str, kept: Gpus) -> Ledger:
        """The ledger once ``endpoint``'s deletions are gone and it holds only ``kept`` borrowed."""
        mine = self.of(endpoint)
        return self._with(endpoint, {p: min(n, mine.get(p, 0)) for p, n in kept})

    def _with(self, endpoint: str, held: Mapping[str, int]) -> Ledger:
        rest = tuple((e, h) for e, h in self.lent if e != endpoint)
        mine = gpus(held)
        return Ledger(self.cap, tuple(sorted(rest + ((endpoint, mine),) if mine else rest)))


def in_words(held: Gpus) -> str:
    """``2 GPU(s) of NVIDIA-L4, 1 GPU(s) of NVIDIA-H100-80GB-HBM3`` -- what a lane borrows or holds, in words."""
    return ", ".join(f"{n} GPU(s) of {product or 'its GPU product'}" for product, n in held)


def too_large(cap: int | None, stages: Mapping[str, Gpus]) -> list[str]:
    """Each stage (named by ``stages``' keys) that borrows more of a product at once than the cap
    can ever lend: ``qwen wave 1/2 borrows 2 GPU(s) of NVIDIA-L4 at once``."""
    if cap is None:
        return []
    return [f"{where} borrows {in_words(((p, n),))} at once" for where, need in stages.items() for p, n in need if n > cap]
