"""What a readiness wait says while it waits and when a replica fails: a progress snapshot and its
few words, and -- from one LIST of the namespace's Events -- each waiting replica's Warning Events
and the stage its start is in. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from infercrane.live.client.api import Live
from infercrane.live.status import startup
from infercrane.live.status.warnings import list_events, pod_warnings


@dataclass(frozen=True)
class Progress:
    """A snapshot for a progress line: how many are ready, and why the others are not."""

    ready: int
    total: int
    waiting: dict[str, str]
    elapsed: float
    warnings: dict[str, list[str]] = field(default_factory=dict)  # name -> its Warning Events, most telling first
    stages: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # name -> its start's stage, for how long

    def summary(self) -> str:
        """Why the waiting ones wait, in a few words: the commonest of each replica's most telling
        warning by reason (``FailedScheduling on 2``), else where their starts are (``loading on
        3 (longest 41 s)``), else the commonest status reason."""
        from collections import Counter

        reasons = Counter(lines[0].split(":", 1)[0] for lines in self.warnings.values() if lines and not lines[0].startswith("("))
        if reasons:
            return ", ".join(f"{reason} on {n}" for reason, n in reasons.most_common(2))
        if self.stages:
            return summary(self.stages)
        common = Counter(self.waiting.values()).most_common(1)
        return common[0][0] if common else ""


def explained(live: Live, names: Iterable[str], current: Mapping[str, str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """For replicas that failed: their Warning Events and the stage each one's start stalled in
    (:func:`~infercrane.live.status.startup.stall`), from :meth:`looked`'s one Events LIST."""
    said, stages = looked(live, names, current)
    return said, {n: startup.stall(at) for n, at in stages.items()}


def looked(
    live: Live, names: Iterable[str], current: Mapping[str, str]
) -> tuple[dict[str, list[str]], dict[str, tuple[str, float | None]]]:
    """For a progress line, from one LIST of the namespace's Events (every type, from the API
    server's cache: :func:`~infercrane.live.status.warnings.list_events`): the Warning Events
    of each waiting object and its current ReplicaSet's pods (an earlier template's are
    history), most telling first, and the stage each one's start is in
    (:func:`~infercrane.live.status.startup.where`)."""
    names = list(names)
    events = list_events(live)
    if isinstance(events, str):
        return ({} if not events else {n: [events] for n in names}), {}
    said = pod_warnings(live, names, current=dict(current), events=events)
    all_starts, now = startup.starts(events), datetime.now(UTC)
    stages = {n: at for n in names if (at := startup.where(all_starts, n, now, current.get(n))) is not None}
    return said, stages


#: How a progress line names each stage (one line, many replicas).
SHORT: Final = {
    startup.SCHEDULING: "scheduling",
    startup.NODE: "waiting for its node",
    startup.PULLING: "pulling its image",
    startup.CREATING: "creating its container",
    startup.LOADING: "loading",
}


def summary(stages: Mapping[str, tuple[str, float | None]]) -> str:
    """The stages of the replicas a deploy waits for, in a few words, the commonest first:
    ``loading on 3 (longest 41 s), pulling its image on 1 (12 s)``."""
    by_stage: dict[str, list[float]] = {}
    for stage, seconds in stages.values():
        by_stage.setdefault(stage, []).append(seconds or 0.0)
    parts = []
    for stage, took in sorted(by_stage.items(), key=lambda kv: (-len(kv[1]), -max(kv[1]))):
        longest = f"longest {max(took):.0f} s" if len(took) > 1 else f"{took[0]:.0f} s"
        parts.append(f"{SHORT.get(stage, stage)} on {len(took)} ({longest})")
    return ", ".join(parts[:2])
