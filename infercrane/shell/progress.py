"""Where a run's progress goes: the caller's sink (typed events and notes, the :class:`Channel`'s
``progress``), else Pulumi's log as lines, for a person reading plain ``pulumi up``'s output.
Pulumi shell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi

from infercrane.core.events import Note, Readiness
from infercrane.shell.channel import Channel


def evidence_note(channel: Channel) -> Callable[[str], None]:
    """Where a replica's evidence line goes: the caller's sink (a Note), else Pulumi's log."""
    sink = channel.progress
    if sink is None:
        return pulumi.log.info
    return lambda text: sink(Note(text))


def readiness_line(event: Readiness) -> str:
    """The readiness wait as one log line, for a person reading plain ``pulumi up``'s output."""
    if event.ready == event.total and not event.waiting:
        return f"readiness: {event.ready}/{event.total} ready"
    why = f" ({event.why})" if event.why else ""
    return f"readiness: {event.ready}/{event.total} ready after {event.elapsed:.0f}s; waiting on {event.waiting}{why}"


def readiness_progress(channel: Channel) -> Callable[[Readiness], None]:
    """Where the readiness wait's snapshots go: the caller's sink (typed events, the
    :class:`Channel`'s ``progress``), else Pulumi's log as a line (plain ``pulumi``)."""
    sink = channel.progress

    def publish(event: Readiness) -> None:
        if sink is not None:
            sink(event)
        else:
            pulumi.log.info(readiness_line(event))

    return publish


def publish_snapshot(publish: Callable[[Readiness], None], p: Any) -> None:
    """One :class:`infercrane.live.status.progress.Progress` snapshot, published."""
    publish(Readiness(p.ready, p.total, len(p.waiting), p.summary(), p.elapsed))
