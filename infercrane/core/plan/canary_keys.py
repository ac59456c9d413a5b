"""Which replicas a rollout's canary is, and which its baseline (:mod:`infercrane.core.plan.canary`
judges the one beside the other); planned per endpoint by :mod:`infercrane.core.plan.rollout`.
Pure core.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.plan.waves import SURGE, Mode

if TYPE_CHECKING:
    from infercrane.core.plan.replicas import LiveReplica, Target


@dataclass(frozen=True)
class Judging:
    """An endpoint's canary: the release it moves to, a replica that serves it already, the
    canary's and the baseline's keys, whether the canary is what the first step starts, and
    whether the first step's replicas alone are judged (nothing available moves)."""

    release: str
    already: str
    canary: tuple[str, ...]
    baseline: tuple[str, ...]
    in_flight: bool
    alone: bool


def judging(
    running: Sequence[LiveReplica],
    targets: Sequence[Target],
    units: Sequence[tuple[str, str | None]],
    first_step: Sequence[str],
    mode: Mode,
    policy: RolloutPolicy,
    unproven: frozenset[str],
) -> Judging:
    """The canary (:mod:`infercrane.core.plan.canary` judges it): the first wave of the available
    replicas' units, judged beside the baseline (the replicas still on the old release while it
    bakes) -- or what the first step starts on the new release: replicas a killed run left down on
    it, new keys that replace nothing, or (``unproven``: a release a canary rejected, retried) the
    replicas still on it, which prove nothing by running. A release already serving elsewhere needs
    none. An endpoint none of whose replicas serves now (every one restarting, say) while they run
    another release: what the first step starts runs the config's unjudged. A required canary has
    no baseline for it -- the plan says so (refused) rather than start it unjudged."""
    releases = {t.key: t.release for t in targets}
    down_elsewhere = [m.key for m in running if not m.available and m.release and m.release != releases.get(m.key)]
    starts = [(key, None) for key in first_step if releases.get(key)]
    alone = not units and bool(down_elsewhere and starts) and policy.canary is not None and policy.canary.required
    release = _release(units or (starts if alone else []), targets)
    moving = {up for up, _ in units} | {old for _, old in units if old is not None}
    already = _already_available(release, moving, [m for m in running if m.release not in unproven])
    target_keys = {t.key for t in targets}
    retried = [m.key for m in running if m.available and m.release in unproven and m.key not in moving and m.key in target_keys]
    # What starts on the release before the available replicas' units -- the first step's replicas --
    # is part of the canary, never unjudged.
    canary, baseline, in_flight = (
        choose(units, mode, policy, running, targets, release, moving, [*first_step, *retried])
        if not already
        else ((), (), False)
    )
    return Judging(release, already, canary, baseline, in_flight, alone)


def _release(units: Sequence[tuple[str, str | None]], targets: Sequence[Target]) -> str:
    """The one release every unit moves to ("" none, unknown, or several)."""
    releases = {t.key: t.release for t in targets}
    wanted = {releases.get(up, "") for up, _ in units}
    return next(iter(wanted)) if len(wanted) == 1 else ""


def _already_available(release: str, moving: Collection[str], running: Sequence[LiveReplica]) -> str:
    """The replica that does not move and already serves ``release`` ("" none): a rerun after an
    accepted canary, or a return to the release the rest of the endpoint serves (a rollback),
    needs no canary -- the release is proven beside the others already."""
    if not release:
        return ""
    return next((m.key for m in running if m.available and m.key not in moving and m.release == release), "")


def choose(
    units: Sequence[tuple[str, str | None]],
    mode: Mode,
    policy: RolloutPolicy,
    running: Sequence[LiveReplica],
    targets: Sequence[Target],
    release: str,
    moving: Collection[str],
    first_step: Sequence[str],
) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The canary's keys, its baseline's, and whether the canary is what starts before the units --
    the keys of ``first_step`` that will run ``release`` (applied with the
    config's manifests: a replica left down on another release and then the config changed moves
    to it too) -- or none when the policy asks for no canary, nothing available changes, or no
    replica would stay on the old release to compare with. The baseline: later units' old
    replicas; with a surge, the old replicas the canary replaces (they go once it is judged); and
    the endpoint's available replicas that do not move, on a release of their own."""
    if policy.canary is None or not units:
        return (), (), False
    runs = {t.key: t.release for t in targets}  # as each will run once applied
    in_flight = [k for k in first_step if release and runs.get(k) == release]
    size = 0 if in_flight else min(policy.canary.replicas, len(units))
    first, rest = units[:size], units[size:]
    baseline = [old if old is not None else up for up, old in rest]
    if mode == SURGE:
        baseline += [old for up, old in first if old is not None and old != up]
    if release:  # one release moves in: the replicas that do not move, on another, are the old release too
        baseline += [m.key for m in running if m.available and m.key not in moving and m.release and m.release != release]
    if not baseline:
        return (), (), False
    return tuple(in_flight or [up for up, _ in first]), tuple(sorted(set(baseline))), bool(in_flight)
