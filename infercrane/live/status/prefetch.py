"""Warm-first: the next release's images pulled onto each node an in-place wave is about to restart
a replica on, while its old replica still serves (:mod:`infercrane.core.render.prefetch` renders
the pod that makes the node's kubelet pull them).

For each key of the wave: its running pod's node (the pods are read: the optional pod reader); if
that pod already runs every image of the release, nothing to pull. Else one prefetch pod per node
and release, created, then watched through its own Events (the kubelet's ``Pulled``, or a
pull that failed) until each image is on the node, the replicas' startup budget is spent, or the
pod cannot be placed; then deleted, exactly (its uid). Whatever happens, the wave goes on, said;
its successor pulls cold. A deploy warms each endpoint's next wave beside the current one's pull
and restart (:class:`Run`), so only the first wave waits for a pull. Creating and deleting pods is
an optional right (:data:`PREFETCHER`); without it, or the pod reader, warm-first says so and does
nothing. A prefetch pod a killed run left is deleted by the next run's warm-first (or ``destroy``).
Live-cluster layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final

from lightkube import codecs
from lightkube.resources.core_v1 import Pod

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.render import prefetch as render
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status import pods as listing
from infercrane.live.status import warnings

PREFETCHER: Final = render.ROLE_FILE
POLL_SECONDS: Final = 1.0
JOIN_SECONDS: Final = 0.1  # a warm waiting for another's pull of its node and release: in-process, no request
#: How the kubelet's Events begin when a pull failed (``Failed``, then ``BackOff``); the start that
#: fails by design says ``Error: failed to create containerd task: … exec: "/infercrane-prefetch-pulls-only"``.
PULL_FAILED: Final = ("Failed to pull image", "Error: ErrImagePull", "Back-off pulling image", "Error: ImagePullBackOff")


@dataclass
class Warming:
    """One prefetch pod: the node, the images it pulls, the keys whose successors it warms."""

    manifest: dict[str, Any]
    node: str
    images: tuple[str, ...]
    keys: list[str] = field(default_factory=list)
    uid: str = ""
    pulled: dict[str, bool] = field(default_factory=dict)  # image -> already present
    failed: str = ""


@dataclass
class Run:
    """One deploy's warm-first, shared by its lanes and their waves warmed ahead: the uids of the
    prefetch pods it made (a leftover is any other of the stack's), and the stop that ends a warm
    still waiting when the run ends."""

    made: set[str] = field(default_factory=set)
    making: set[str] = field(default_factory=set)  # names being created: no uid yet, already listed by others
    stop: threading.Event = field(default_factory=threading.Event)
    #: (node, images) this run pulled, for which keys: a later wave there makes no pod (its name may still terminate)
    warmed: dict[tuple[str, tuple[str, ...]], list[str]] = field(default_factory=dict)
    #: (node, images) a warm of this run pulls now, for which keys, set when it ends: a later warm waits for it
    pulling: dict[tuple[str, tuple[str, ...]], tuple[list[str], threading.Event]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Turn:
    """A warm claims its pulls once ``after`` is set (the wave before it has claimed its own) and then
    sets ``claimed``: a wave pulls what it shares with the wave warmed ahead beside it, and says so."""

    after: threading.Event | None = None
    claimed: threading.Event = field(default_factory=threading.Event)


def plan(config: InferCraneConfig, listed: list[dict[str, Any]], keys: Collection[str], stack: str) -> dict[str, Warming]:
    """The prefetch pods ``keys`` need (name -> what it warms): one per node and release, for the
    keys whose running pod lacks an image of their release. Pure over the pods as read."""
    replicas = {r.key: r for r in config.replicas}
    out: dict[str, Warming] = {}
    for key in sorted(keys):
        replica = replicas.get(key)
        if replica is None:
            continue
        running = [
            p
            for p in listing.owned(config, listed, naming.object_name(key))
            if (p.get("status") or {}).get("phase") == "Running" and not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        spec = (running[0].get("spec") or {}) if running else {}
        node = str(spec.get("nodeName") or "")
        if not node:
            continue  # nothing runs it now: its start is cold whatever is done
        runs = {c.get("image") for c in spec.get("containers") or []}
        runs |= {(v.get("image") or {}).get("reference") for v in spec.get("volumes") or []}
        wanted = render.images(config, replica)
        if set(wanted) <= runs:
            continue  # its node has every image of the release: its old pod runs them
        manifest = render.pod(config, replica, node, stack)
        w = out.setdefault(manifest["metadata"]["name"], Warming(manifest, node, wanted))
        w.keys.append(key)
    return out


def observe(warming: dict[str, Warming], events: list[dict[str, Any]]) -> None:
    """What the kubelet said of each prefetch pod (by its uid: never an earlier pod of the same
    name): each image pulled, or already present; or a pull that failed."""
    by_uid = {w.uid: w for w in warming.values() if w.uid}
    for e in events:
        w = by_uid.get(str((e.get("involvedObject") or {}).get("uid") or ""))
        if w is None:
            continue
        reason, message = str(e.get("reason") or ""), str(e.get("message") or "")
        if reason == "Pulled":
            for ref in w.images:
                if f'"{ref}"' in message:
                    w.pulled[ref] = "already present" in message
        elif reason in ("Failed", "BackOff") and message.startswith(PULL_FAILED) and not w.failed:
            w.failed = message.splitlines()[0][:300]  # the kubelet's words: Failed to pull image "…": …


def pulled(w: Warming) -> bool:
    """Every image of the release is on the node (the kubelet said so)."""
    return all(ref in w.pulled for ref in w.images)


def done(w: Warming) -> bool:
    return bool(w.failed) or pulled(w)


def clean(live: Live, stack: str, run: Run | None = None) -> list[str]:
    """Delete the prefetch pods of ``stack`` a killed run left (exactly: label, stack, uid), not
    those of ``run`` (this run's, still warming or being made); their names."""
    keep, making = (run.made, run.making) if run is not None else (set(), set())
    try:
        found = live.list(Pod, labels={render.LABEL: "true"}, action="list prefetch pods")
    except failures.LiveError:
        return []
    gone = []
    for p in found:
        if render.ours(p, stack) and p["metadata"]["uid"] not in keep and p["metadata"]["name"] not in making:
            try:
                live.delete_exact("Pod", p["metadata"]["name"], p["metadata"]["uid"])
                gone.append(p["metadata"]["name"])
            except failures.LiveError:
                pass
    return gone


def before_wave(
    live: Live,
    config: InferCraneConfig,
    stack: str,
    endpoint: str,
    keys: Collection[str],
    run: Run | None = None,
    turn: Turn | None = None,
) -> list[str]:
    """Under ``endpoint``'s ``rollout.warmFirst``, :func:`warm` of an in-place wave's ``keys``,
    within the longest of their startup budgets (a pull that takes longer would fail their start)."""
    turn = turn or Turn()
    if not config.rollout_for(endpoint).warm_first:
        turn.claimed.set()
        return []
    budget = max((r.startup_budget_seconds for r in config.replicas if r.key in keys), default=600)
    return warm(live, config, stack, keys, budget=float(budget), run=run, turn=turn)


def warm(
    live: Live,
    config: InferCraneConfig,
    stack: str,
    keys: Collection[str],
    *,
    budget: float,
    run: Run | None = None,
    turn: Turn | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Pull the release of ``keys`` onto their nodes before their wave (see the module); returns
    what to say, one line per prefetch pod (or why none was made). Never raises for the cluster.
    A node and release this run pulled already, or is pulling now for other keys (the wave before,
    whose ``turn`` came first, or the one warmed ahead beside this one), gets no second pod: this
    warm says so, or waits for that pull."""
    run, turn = run or Run(), turn or Turn()
    lines: list[str] = []
    joined: list[tuple[Warming, list[str], threading.Event]] = []
    try:
        try:
            listed = listing.list_pods(live, config)
        except failures.LiveError as exc:  # the API server lost a moment: the wave goes on, cold
            return [f"warm-first: not done, the pods could not be read ({str(exc).splitlines()[0]}); the wave goes on cold"]
        if listed is None:
            return [f"warm-first: not done, this identity may not read pods (optional: apply {listing.POD_READER})"]
        warming = plan(config, listed, keys, stack)
        if turn.after is not None:
            turn.after.wait(budget)  # set when that warm has claimed, or ended
        with run.lock:
            for name, w in list(warming.items()):
                if (earlier := run.warmed.get((w.node, w.images))) is not None:
                    del warming[name]
                    lines.append(_already(w, earlier))
                elif (pulling := run.pulling.get((w.node, w.images))) is not None:
                    del warming[name]
                    joined.append((w, *pulling))
                else:
                    run.pulling[(w.node, w.images)] = (list(w.keys), threading.Event())
    finally:
        turn.claimed.set()
    try:
        if warming:
            lines += _pull(live, stack, warming, budget, run, clock, sleep)
    finally:
        with run.lock:
            for w in warming.values():
                run.pulling.pop((w.node, w.images))[1].set()
    began = clock()
    for w, theirs, ended in joined:  # the pull another warm of this run began: waited for, not made again
        while not ended.wait(JOIN_SECONDS) and not run.stop.is_set() and clock() - began < budget:
            pass
        if (earlier := run.warmed.get((w.node, w.images))) is not None:
            lines.append(_already(w, earlier))
        else:
            lines.append(
                f"warm-first: {', '.join(w.keys)}: the release was not pulled onto {w.node} (the warm for "
                f"{', '.join(theirs)} did not bring it); its wave goes on cold"
            )
    return lines


def _already(w: Warming, earlier: list[str]) -> str:
    return f"warm-first: {', '.join(w.keys)}: the release is on {w.node} already (pulled for {', '.join(earlier)})"


def _pull(
    live: Live,
    stack: str,
    warming: dict[str, Warming],
    budget: float,
    run: Run,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> list[str]:
    """Each of ``warming``'s prefetch pods made, watched through the Events until its images are on
    its node (or it failed, the budget is spent, the run stops), then deleted by its uid."""
    lines: list[str] = []
    clean(live, stack, run)
    began = clock()
    try:
        for name, w in list(warming.items()):
            run.making.add(name)
            try:
                made = live.create(codecs.from_dict(w.manifest), action=f"create prefetch pod {name}")
                w.uid = str(made.metadata.uid)
                run.made.add(w.uid)
            except failures.Forbidden:
                return [f"warm-first: not done, this identity may not create pods (optional: apply {PREFETCHER})"]
            except failures.LiveError as exc:
                w.failed = f"not created: {str(exc).splitlines()[0]}"
            finally:
                run.making.discard(name)
        while True:
            for w in warming.values():  # each pod's own Events: a LIST of a few, not the namespace's at fleet size
                if w.uid and not done(w) and isinstance(events := warnings.list_events(live, about=w.uid), list):
                    observe(warming, events)
            if all(done(w) for w in warming.values()) or clock() - began >= budget or run.stop.is_set():
                break
            sleep(POLL_SECONDS)
        for w in warming.values():
            took = clock() - began
            who = ", ".join(w.keys)
            if w.failed and not pulled(w):
                lines.append(f"warm-first: {who}: the release was not pulled onto {w.node} ({w.failed}); its wave goes on cold")
            elif not done(w):
                lines.append(
                    f"warm-first: {who}: the release was not on {w.node} after {took:.0f} s (not placed, or still "
                    "pulling); its wave goes on cold"
                )
            else:
                fresh = [ref for ref, present in w.pulled.items() if not present]
                said = f"pulled {len(fresh)} image(s)" if fresh else "every image was already there"
                lines.append(f"warm-first: {who}: {said} onto {w.node} in {took:.0f} s while the old replica served")
                run.warmed[(w.node, w.images)] = list(w.keys)
    finally:
        for name, w in warming.items():
            if w.uid:
                try:
                    live.delete_exact("Pod", name, w.uid)
                    run.made.discard(w.uid)
                except failures.LiveError:
                    pass  # the next run's warm-first (or destroy) deletes it
    return lines
