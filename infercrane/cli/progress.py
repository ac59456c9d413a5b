"""What a person sees during a long ``deploy``, ``plan`` or ``destroy``: one progress line.

``applied 100/100 · ready 63/100 · waiting on 37 (Pending: FailedScheduling …) · 41 s`` -- the
view is the command's sink of typed events (:mod:`infercrane.core.events`): a replica is
*applied* when every object of it has its outputs, *ready* counts come from the program's
readiness wait, destroy's from its deletes and wait, and notes from the layers below. Three ways
to show it:

- on a terminal, one line updated in place (rich's ``Live``), and a final line;
- otherwise (CI logs), a plain line whenever the counts change, at most every 10 s, and a final line;
- with ``--json``, one JSON object per event on stderr (stdout keeps the command's result).

Pulumi's own log goes to a file the command names (``.infercrane/logs/…``), or to stderr with
``--verbose``. CLI layer.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from infercrane.core.events import Applied, Deleted, Event, Note, Readiness, Remaining

PLAIN_EVERY_SECONDS: Final = 10.0


@dataclass
class Counts:
    op: str  # deploy | plan | destroy
    total: int  # replicas (deploy, plan) or objects (destroy)
    applied: set[str] = field(default_factory=set)  # replicas (component names) whose objects all have outputs
    objects_done: dict[str, int] = field(default_factory=dict)
    ready: int = 0
    waiting_on: int | None = None
    why: str = ""
    deleted: int = 0
    remaining: int | None = None
    began: float = field(default_factory=time.monotonic)

    def line(self, now: float | None = None) -> str:
        elapsed = f"{(now or time.monotonic()) - self.began:.0f} s"
        if self.op == "destroy":
            parts = [f"deleted {self.deleted}/{self.total}"]
            if self.remaining is not None:
                parts.append(f"remaining {self.remaining}")
        elif self.op == "plan":
            parts = [f"checked {len(self.applied)}/{self.total}"]
        else:
            # A rollout's steps also register the replicas they hold (some leave the config): capped.
            parts = [f"applied {min(len(self.applied), self.total)}/{self.total}", f"ready {self.ready}/{self.total}"]
            if self.waiting_on:
                parts.append(f"waiting on {self.waiting_on}" + (f" ({self.why})" if self.why else ""))
        return " · ".join([*parts, elapsed])


class ProgressView:
    """The sink of one command's events (call it with one) and of Pulumi's log lines
    (:meth:`on_output`, for the log file only); shows :class:`Counts` as the mode says."""

    def __init__(
        self,
        op: str,
        total: int,
        *,
        stream: IO[str],
        mode: str,  # live | lines | json
        children_per_replica: int = 1,
        log: IO[str] | None = None,
        echo: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.counts = Counts(op, total, began=clock())
        self.stream, self.mode, self.log, self.echo, self.clock = stream, mode, log, echo, clock
        self.children = children_per_replica
        self._lock = threading.Lock()
        self._last_plain = ""
        self._last_plain_at = -PLAIN_EVERY_SECONDS
        self._live: Any = None
        if mode == "live":
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            console = Console(file=stream, force_terminal=True)
            self._live = Live(get_renderable=lambda: Text(self.counts.line(self.clock())), console=console, refresh_per_second=4)
            self._live.start()

    # -- inputs ---------------------------------------------------------------------------------
    def on_output(self, line: str) -> None:
        """One line of Pulumi's own log: to the log file, and to stderr with --verbose."""
        if self.log is not None:
            self.log.write(line if line.endswith("\n") else line + "\n")
        if self.echo:
            self._write(f"  | {line.rstrip()}")

    def __call__(self, event: Event) -> None:
        """One typed event of the command (:mod:`infercrane.core.events`)."""
        if isinstance(event, Applied):
            with self._lock:
                done = self.counts.objects_done.get(event.replica, 0) + 1
                self.counts.objects_done[event.replica] = done
                if done >= self.children:
                    self.counts.applied.add(event.replica)
            self._changed("applied")
        elif isinstance(event, Readiness):
            with self._lock:
                self.counts.ready, self.counts.waiting_on, self.counts.why = event.ready, event.waiting, event.why
                if self.log is not None:
                    why = f" ({event.why})" if event.why else ""
                    self.log.write(
                        f"[infercrane] readiness: {event.ready}/{event.total} ready; waiting on {event.waiting}{why}\n"
                    )
            self._changed("readiness")
        elif isinstance(event, Deleted):
            with self._lock:
                self.counts.deleted, self.counts.total = event.done, event.total
            self._changed("deleted")
        elif isinstance(event, Remaining):
            with self._lock:
                self.counts.remaining = event.count
            self._changed("remaining")
        elif isinstance(event, Note):
            self.note(event.text)

    def checked(self, count: int) -> None:
        """Every replica planned (the plan's result is in)."""
        with self._lock:
            self.counts.applied = {f"#{i}" for i in range(count)}
        self._changed("checked")

    def note(self, text: str) -> None:
        """A line for the person between updates (a rollout's wave, a repair): a plain line, or a
        ``note`` event with ``--json``; also into Pulumi's log file, where it happened."""
        if self.log is not None:
            self.log.write(f"[infercrane] {text}\n")
            self.log.flush()
        self._write(json.dumps({"event": "note", "op": self.counts.op, "text": text}) if self.mode == "json" else text)

    # -- output ---------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _changed(self, what: str) -> None:
        if self.mode == "json":
            c = self.counts
            event = {"event": what, "op": c.op, "total": c.total, "elapsed": round(self.clock() - c.began, 1)}
            if c.op == "destroy":
                event |= {"deleted": c.deleted, "remaining": c.remaining}
            elif c.op == "plan":
                event |= {"checked": len(c.applied)}
            else:
                event |= {
                    "applied": min(len(c.applied), c.total),
                    "ready": c.ready,
                    "waitingOn": c.waiting_on,
                    "why": c.why or None,
                }
            self._write(json.dumps(event))
        elif self.mode == "lines":
            now = self.clock()
            line = self.counts.line(now)
            body = line.rsplit(" · ", 1)[0]
            if body != self._last_plain and now - self._last_plain_at >= PLAIN_EVERY_SECONDS:
                self._last_plain, self._last_plain_at = body, now
                self._write(line)

    def close(self, outcome: str) -> None:
        """The final line (``done`` / ``failed``), whatever the mode."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.mode == "json":
            self._write(
                json.dumps({"event": outcome, "op": self.counts.op, "elapsed": round(self.clock() - self.counts.began, 1)})
            )
        else:
            self._write(f"{self.counts.op} {outcome}: {self.counts.line(self.clock())}")


def log_path(root: Path, stack: str, op: str) -> Path:
    """Where the full Pulumi log of one command goes (kept, one file per command: two commands started
    in the same second, two racing deploys of one stack, never share one)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    path = root / ".infercrane" / "logs" / f"{stack}-{op}-{stamp}-{os.getpid()}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
