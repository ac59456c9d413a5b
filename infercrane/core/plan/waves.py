"""What a rollout is, as :mod:`infercrane.core.plan.rollout` plans it: per endpoint its waves and the
lowest point on the way (:class:`EndpointRollout`), and the engine runs that carry it out
(:class:`Step`, :class:`Rollout`). Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Mode = Literal["in place", "surge"]


IN_PLACE: Final = "in place"


SURGE: Final = "surge"


@dataclass(frozen=True)
class Wave:
    """One wave of an endpoint: ``down`` stop serving (deleted, or restarted in place), ``up`` start
    and are ready before the next wave begins."""

    down: tuple[str, ...]
    up: tuple[str, ...]


@dataclass(frozen=True)
class EndpointRollout:
    """What a change does to one endpoint: its waves and the lowest point on the way."""

    endpoint: str
    max_unavailable: int
    max_surge: int
    mode: Mode
    waves: tuple[Wave, ...]
    ready_before: int
    ready_after: int
    lowest_ready: int
    gpus_before: int
    gpus_after: int
    peak_gpus: int  # the sum over GPU products of each product's peak on the way
    peak_by_product: tuple[tuple[str, int], ...] = ()  # each GPU product's peak, when the change spans several
    extra_gpus: int = 0  # per product, GPUs above both what the endpoint holds of it before and after: what a surge borrows
    updates: int = 0  # serving replicas whose pods restart
    replacements: int = 0  # new keys taking serving old keys' places
    moves: int = 0  # keys moving to another workload API (their old form goes, their new one starts)
    deleted_idle: tuple[str, ...] = ()  # leave while not serving: deleted in the first step
    replaced_first: tuple[str, ...] = ()  # in place: the first wave's old replicas, deleted before it starts
    repaired_first: tuple[str, ...] = ()  # not serving now: applied and ready before the first wave starts
    deleted_last: tuple[str, ...] = ()  # serving replicas that leave without a successor

    @property
    def steps_needed(self) -> int:
        """Engine runs this endpoint alone needs: one per wave, and one before the first wave
        when in place replacements must free their GPUs first or replicas that do not serve must
        serve again first."""
        return (1 if self.replaced_first or self.repaired_first else 0) + max(1, len(self.waves))

    def all_at_once(self) -> str:
        """What one engine run doing this endpoint's whole change at once would do to it."""
        parts = []
        if self.updates:
            parts.append(f"{self.updates} serving replica(s) would restart together")
        if self.replacements:
            parts.append(f"{self.replacements} new replica(s) would need GPUs beside the ones they replace")
        if self.moves:
            parts.append(f"{self.moves} replica(s) would move to the new workload API together, each beside its old form")
        return " and ".join(parts)


@dataclass(frozen=True)
class Step:
    """One engine run (see the module docstring)."""

    apply: frozenset[str]
    hold: frozenset[str]
    delete: frozenset[str] = frozenset()  # live keys (or, for a moved key, its old form) gone at the end of this step


@dataclass(frozen=True)
class Rollout:
    endpoints: tuple[EndpointRollout, ...]
    steps: tuple[Step, ...]
    first_wave_step: int = 0  # 1 when replacements in place or replicas not serving need a step of their own first

    @property
    def waves(self) -> int:
        return max((len(e.waves) for e in self.endpoints), default=0)

    def beyond_one_step(self) -> list[EndpointRollout]:
        """The endpoints that one engine run doing everything at once would take outside their
        policy (more replicas down, or more GPUs, than allowed): they need several steps."""
        return [e for e in self.endpoints if e.steps_needed > 1]
