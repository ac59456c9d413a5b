"""What a long command tells the person while it runs, as typed events on one sink.

The program's readiness wait, the operations' view of the engine's steps, destroy's deletes and
every note the engine and operations layers have for the person travel as these values to the
one :data:`Sink` the caller gives (the CLI's progress view: a live line, plain lines, or JSON
events) -- no layer below the CLI prints, and nothing is parsed back out of a log line. Pure core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Applied:
    """One object of a replica has its outputs from the engine (``replica``: its component name)."""

    replica: str


@dataclass(frozen=True)
class Readiness:
    """The program's fleet wait: ``ready`` of ``total`` replicas, ``waiting`` on how many, and why,
    ``elapsed`` seconds into the wait."""

    ready: int
    total: int
    waiting: int = 0
    why: str = ""
    elapsed: float = 0.0


@dataclass(frozen=True)
class Deleted:
    """destroy: ``done`` of ``total`` owned objects accepted for deletion."""

    done: int
    total: int


@dataclass(frozen=True)
class Remaining:
    """destroy's wait: ``count`` deleted objects still present after the last LIST."""

    count: int


@dataclass(frozen=True)
class Note:
    """A sentence for the person between updates: a rollout's wave, a repair, a warning."""

    text: str


Event = Applied | Readiness | Deleted | Remaining | Note
Sink = Callable[[Event], None]


def discard(event: Event) -> None:
    """The sink of a caller that shows nothing (a test, a library use of the engine)."""


def warning_notes(sink: Sink) -> Callable[[str], None]:
    """Where a check's warning goes in a command: a note on the caller's sink."""
    return lambda warning: sink(Note(f"warning: {warning}"))
