"""A replica's start, stage by stage, from what the cluster records of it: the scheduler's and the
kubelet's Events about its pod (``Scheduled``, ``Pulling``/``Pulled``, ``Started``)
and, when the identity may read pods, the pod's own Ready condition -- its engine's ``/health``
answering (the startup and readiness probes ask it). Pure functions of listed objects.
Live-cluster layer.

The stages, in order: **scheduling** (no node yet), **waiting for its node** (scheduled, and no
word from the node's kubelet yet: a kubelet says ``Pulling`` or ``Pulled`` within a second or so
of the pod's binding -- a node whose kubelet is down, or a simulated one, says nothing),
**pulling its image**, **creating its container**, **loading** (started, ``/health`` not 200 yet: the weights, the compile, the
warm-up -- the engines tell these apart only in their logs), **healthy**. A start is the pod's:
a restarted container starts again from *loading*. What the Events cannot say, this does not
guess: without the pod reader, *healthy* is not known (``None``); an image the node had already
is ``present``.

A wait that ends in failure names the stage the replica stalled in and since when
(:func:`stalled`), with the fix for that stage: the cluster's words say what failed, the stage says
where the time went.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from infercrane.core.state import times

SCHEDULING: Final = "scheduling"
NODE: Final = "waiting for its node (scheduled; no word from its kubelet yet)"
PULLING: Final = "pulling its image"
CREATING: Final = "creating its container"
LOADING: Final = "loading (its engine's /health not 200 yet)"
HEALTHY: Final = "healthy"

#: What to do when a start stalls in each stage.
FIXES: Final = {
    SCHEDULING: "free or add a node with the replica's GPU (`infercrane doctor --kubernetes` shows capacity per product)",
    NODE: "check the node it was scheduled to: its kubelet and container runtime running (`kubectl describe node`)",
    PULLING: "check that the nodes can pull imageDigest (its registry reachable from them, an imagePullSecret "
    "where it needs one), or pre-pull it onto the nodes",
    CREATING: "read the kubelet's words above (a Secret, ConfigMap or volume it cannot make)",
    LOADING: "raise the replica's startupBudgetSeconds if its model loads that long, or read its pod's log for "
    "where the engine spends the time",
}

_PULLED_IN: Final = re.compile(r"Successfully pulled image \"([^\"]*)\" in ([0-9.]+)(ms|s)\b")
_PULLED_SIZE: Final = re.compile(r"Image size: ([0-9]+) bytes")
_PRESENT: Final = re.compile(r"image \"([^\"]*)\" already present")


def _when(e: Mapping[str, Any], first: bool) -> datetime | None:
    series = (e.get("series") or {}).get("lastObservedTime")
    if first:
        return times.parse(e.get("firstTimestamp") or e.get("eventTime") or e.get("lastTimestamp"))
    return times.parse(series or e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))


@dataclass(frozen=True)
class Pull:
    """One image of a start as the kubelet reported it: already present, or pulled in so many
    seconds, so many bytes."""

    image: str
    present: bool
    seconds: float | None = None
    bytes: int | None = None

    def as_output(self) -> dict[str, Any]:
        return {"image": self.image, "present": self.present, "seconds": self.seconds, "bytes": self.bytes}


@dataclass(frozen=True)
class Start:
    """One pod's start: when each stage ended (None: not yet, or not known)."""

    pod: str
    created: datetime | None = None
    first_seen: datetime | None = None  # its first Event: its creation, give or take, when the pod is not read
    scheduled: datetime | None = None
    pull_began: datetime | None = None
    pulled: datetime | None = None
    present: bool = False  # the node had every image already: no pull
    pull_seconds: float | None = None  # the kubelet's own figure for the pulls, summed
    pulls: tuple[Pull, ...] = ()  # each image's (the engine's, a model image's), in the kubelet's order
    started: datetime | None = None
    healthy: datetime | None = None
    served: datetime | None = None  # its serving evidence taken (the deploy's, not the cluster's)
    restarts: int = 0

    @property
    def stage(self) -> str:
        """The stage the start is in now."""
        if self.healthy is not None:
            return HEALTHY
        if self.started is not None:
            return LOADING
        if self.pulled is not None:
            return CREATING
        if self.pull_began is not None:
            return PULLING
        if self.scheduled is not None:
            return NODE
        return SCHEDULING

    @property
    def since(self) -> datetime | None:
        """When the start entered its stage."""
        return {
            HEALTHY: self.healthy,
            LOADING: self.started,
            CREATING: self.pulled,
            PULLING: self.pull_began,
            NODE: self.scheduled,
            SCHEDULING: self.created or self.first_seen,
        }[self.stage]

    def as_output(self) -> dict[str, Any]:
        """Seconds from the pod's creation (its first Event when the pod was not read) to the end
        of each stage (None: not yet or not known)."""
        base = self.created or self.first_seen

        def at(t: datetime | None) -> float | None:
            return None if t is None or base is None else round(max(0.0, (t - base).total_seconds()), 1)

        return {
            "pod": self.pod,
            "stage": self.stage,
            "scheduled": at(self.scheduled),
            "imagePulled": at(self.pulled),
            "imagePresent": self.present,
            "pullSeconds": self.pull_seconds,
            **({"pulls": [p.as_output() for p in self.pulls]} if self.pulls else {}),
            "started": at(self.started),
            "healthy": at(self.healthy),
            **({"served": at(self.served)} if self.served is not None else {}),
            "restarts": self.restarts,
        }


def size_text(n: int) -> str:
    """Bytes as a person reads them: ``5.2 GiB``, ``256 MiB``, ``12 KiB``, ``80 B``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.1f} {unit}" if unit == "GiB" and value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


def line(out: Mapping[str, Any]) -> str:
    """One start (:meth:`Start.as_output`) in words: ``scheduled 0.1 s, image present, started 1.2 s, healthy 7.9 s``."""
    parts = []
    if out.get("scheduled") is not None:
        parts.append(f"scheduled {out['scheduled']:g} s")
    if out.get("imagePresent"):
        parts.append("image present")
    elif out.get("imagePulled") is not None:
        moved = sum(int(p.get("bytes") or 0) for p in out.get("pulls") or [])
        figures = [f"pull {out['pullSeconds']:g} s"] if out.get("pullSeconds") is not None else []
        figures += [size_text(moved)] if moved else []
        took = f" ({', '.join(figures)})" if figures else ""
        parts.append(f"image pulled {out['imagePulled']:g} s{took}")
    for field, said in (("started", "started"), ("healthy", "healthy"), ("served", "serving")):
        if out.get(field) is not None:
            parts.append(f"{said} {out[field]:g} s")
    if out.get("restarts"):
        parts.append(f"{out['restarts']} restart(s)")
    return ", ".join(parts) + (f"; now {out['stage']}" if out.get("stage") != HEALTHY else "")


def starts(events: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> dict[str, Start]:
    """Each pod's start by pod name, from the namespace's Events (any type) and, where given, the
    pods themselves (their creation, their Ready condition, their restarts)."""
    seen: dict[str, dict[str, Any]] = {}
    for e in events:
        involved = e.get("involvedObject") or {}
        if involved.get("kind") != "Pod":
            continue
        s = seen.setdefault(str(involved.get("name") or ""), {})
        reason, message = str(e.get("reason") or ""), str(e.get("message") or "")
        first = _when(e, True)
        if first is not None and (s.get("first_seen") is None or first < s["first_seen"]):
            s["first_seen"] = first
        if reason == "Scheduled":
            s["scheduled"] = _when(e, True)
        elif reason == "Pulling":  # the first image's (a model image's pull begins before its engine's)
            t = _when(e, True)
            s["pull_began"] = t if s.get("pull_began") is None or (t is not None and t < s["pull_began"]) else s["pull_began"]
        elif reason == "Pulled":  # the last image's
            t = _when(e, True)
            s["pulled"] = t if s.get("pulled") is None or (t is not None and t > s["pulled"]) else s["pulled"]
            s["pulls"] = (*s.get("pulls", ()), _pull(message))
        elif reason == "Started":
            s["started"] = _when(e, False)  # a restarted container starts again from loading
    for fields in seen.values():
        pulls = fields.get("pulls", ())
        if pulls:
            fields["present"] = all(p.present for p in pulls)
            took = [p.seconds for p in pulls if p.seconds is not None]
            fields["pull_seconds"] = round(sum(took), 1) if took else None
    out = {name: Start(name, **fields) for name, fields in seen.items() if name}
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = str(meta.get("name") or "")
        ready: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        base = out.get(name, Start(name))
        out[name] = Start(
            **{
                **base.__dict__,
                "created": times.parse(meta.get("creationTimestamp")),
                "healthy": times.parse(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None,
                "restarts": sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
            }
        )
    return {name: in_order(s) for name, s in out.items()}


def _pull(message: str) -> Pull:
    """A ``Pulled`` Event's message: ``Container image "x" already present on machine``, or
    ``Successfully pulled image "x" in 1.2s (1.2s including waiting). Image size: 123 bytes.``"""
    present = _PRESENT.search(message)
    if present:
        return Pull(present[1], True)
    pulled, size = _PULLED_IN.search(message), _PULLED_SIZE.search(message)
    seconds = round(float(pulled[2]) / (1000 if pulled[3] == "ms" else 1), 1) if pulled else None
    return Pull(pulled[1] if pulled else "", False, seconds, int(size[1]) if size else None)


_ORDER: Final = ("created", "scheduled", "pull_began", "pulled", "started", "healthy", "served")


def in_order(s: Start) -> Start:
    """Each stage's end no earlier than the one before it: the kubelet stamps its Events to the
    second, the scheduler to the microsecond -- a pull stamped 10:00:00 after a scheduling at
    10:00:00.3 ended in that same second."""
    fields, last = dict(s.__dict__), None
    for f in _ORDER:
        t = fields[f]
        if t is not None and last is not None and t < last:
            fields[f] = last
        last = fields[f] or last
    return Start(**fields)


def of_replica(all_starts: Mapping[str, Start], name: str) -> list[Start]:
    """The starts of replica ``name``'s pods (named ``<name>-<hash>-<suffix>``; KServe's predictor
    pods ``<name>-predictor-<hash>-<suffix>``), oldest first."""
    return sorted(
        (s for pod, s in all_starts.items() if pod.startswith(name + "-")),
        key=lambda s: (s.created or s.first_seen or datetime.min.replace(tzinfo=UTC), s.pod),
    )


def where(
    all_starts: Mapping[str, Start], name: str, now: datetime, current: str | None = None
) -> tuple[str, float | None] | None:
    """The stage replica ``name``'s newest start is in and for how many seconds (None: not known);
    None when it is healthy or none of its pods has left a trace (no Event yet). ``current``: its
    current ReplicaSet -- another's pods are an earlier template's."""
    mine = [s for s in of_replica(all_starts, name) if current is None or s.pod.startswith(current + "-")]
    if not mine or mine[-1].stage == HEALTHY:
        return None
    s = mine[-1]
    return s.stage, (max(0.0, (now - s.since).total_seconds()) if s.since is not None else None)


def stall(at: tuple[str, float | None]) -> str:
    """A stage a start is stuck in and for how long (:func:`where`) as a failure says it:
    ``stalled pulling its image for 540 s -- fix: …``."""
    stage, seconds = at
    took = f" for {seconds:.0f} s" if seconds is not None else ""
    return f"stalled {stage}{took} -- fix: {FIXES[stage]}"


def stalled(all_starts: Mapping[str, Start], name: str, now: datetime, current: str | None = None) -> str:
    """Where replica ``name``'s newest start stalled (:func:`where`, :func:`stall`); "" when it is not
    stalled anywhere known."""
    at = where(all_starts, name, now, current)
    return "" if at is None else stall(at)
