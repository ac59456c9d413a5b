"""What a canary's rejection leaves behind: the stack's tag that refuses the release until
``--retry-rejected``, the verdicts ``inspect`` shows, and the rollback a rejected canary's
endpoint gets from the same command. Engine layer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from infercrane.core.errors import InferCraneError
from infercrane.core.events import Note, Sink, discard
from infercrane.core.model import config as cfg
from infercrane.core.model.kinds import WORKLOADS
from infercrane.core.model.replica import Replica
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.marks import (
    GPUS_TAG,
    JUDGING_TAG,
    REJECTED_TAG,
    Marks,
    gpus_value,
    judging_value,
    moves,
    rejected_value,
)
from infercrane.core.plan.rollback import Rollback, plan_rollback
from infercrane.core.plan.waves import EndpointRollout, Rollout
from infercrane.core.plan.workload import release_of
from infercrane.core.state import urns
from infercrane.core.stops import CanaryRejected, RolledBack, RolloutStopped
from infercrane.engine.deletions import delete_keys
from infercrane.engine.observed import Observed
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import Prepared, StackContext
from infercrane.shell.channel import Channel, Pinned


def marks(engine: Engine, rollout: Rollout | None) -> Marks:
    """The stack's canary marks (:mod:`infercrane.core.plan.marks`) when ``rollout`` moves a release
    (one Pulumi CLI call), else none. A backend that cannot say its tags fails the command
    (:meth:`Engine.tags` fails closed): a rejection or an unjudged canary is never taken as absent."""
    borrows = rollout is not None and rollout.max_extra_gpus is not None  # its GPUs at the change's start
    return Marks.of(engine.tags()) if moves(rollout) or borrows else Marks()


@dataclass(frozen=True)
class Judged:
    """A stack's rollout as its canary marks make it: the releases a canary rejected that it moves
    to, and those a run began to judge and never finished judging -- their replicas prove nothing
    by running, so the rollout judges them again (``unproven``)."""

    rollout: Rollout | None
    rejected: dict[str, tuple[str, str]]  # endpoint -> (release, the rejection in words)
    unjudged: dict[str, str]  # endpoint -> release
    started: dict[str, Gpus] = dataclasses.field(default_factory=dict)  # endpoint -> its GPUs at the change's start, marked


def judged(engine: Engine, seen: Observed, *, retry_rejected: bool = False) -> Judged:
    """``seen``'s rollout planned with the stack's marks (one Pulumi CLI call when it moves a
    release): a release whose judging never ended is unproven; with ``retry_rejected``, so is a
    release a canary rejected (its replicas still on it prove nothing). An endpoint whose GPUs at
    the change's start a run cut short left marked counts its own from them."""
    rollout = seen.rollout
    found = marks(engine, rollout)
    rejected, unjudged = found.rejected_in(rollout), found.unjudged_in(rollout)
    unproven = frozenset(unjudged.values()) | (frozenset(r for r, _ in rejected.values()) if retry_rejected else frozenset())
    planned = {e.endpoint for e in rollout.endpoints} if rollout is not None else set()
    started = {e: held for e, held in found.started.items() if e in planned}
    if unproven or started:
        rollout = seen.ctx.rollout(seen.rendered, seen.report, seen.state, unproven, started)
    return Judged(rollout, rejected, unjudged, started)


def last_verdicts(engine: Engine, endpoints: Collection[str]) -> dict[str, str]:
    """endpoint -> its canary's last verdict in words (``inspect``): the later of the one the stack
    output ``canaries`` records (a deploy that finished) and the rejection the stack remembers (its
    tag; the deploy that rejected it failed, and wrote no output)."""
    seen: dict[str, tuple[str, str]] = {}  # endpoint -> (when, words)
    for endpoint, v in (urns.stack_outputs(engine.state()).get("canaries") or {}).items():
        if endpoint in endpoints and isinstance(v, dict):
            at = str(v.get("at") or "")
            seen[endpoint] = (at, f"{v.get('outcome')} at {at or 'an earlier deploy'}, record {v.get('digest')}")
    found = Marks.of(engine.tags())
    for endpoint, (_, said) in found.rejected.items():  # said: <outcome> at <time>, record <digest>
        if endpoint in endpoints:
            at = said.partition(" at ")[2].partition(",")[0]
            if at >= seen.get(endpoint, ("", ""))[0]:  # ISO times, UTC: their order is the text's
                seen[endpoint] = (at, f"{said}; that release is refused unless deploy --retry-rejected")
    for endpoint, release in found.judging.items():
        if endpoint in endpoints:
            seen[endpoint] = (
                "",
                f"none yet for release {release}: a deploy began judging it and has no verdict (still baking, or it ended "
                "without one); the next deploy judges it again before it goes further",
            )
    return {endpoint: words for endpoint, (_, words) in sorted(seen.items())}


def recorded_starts(stack: str, keys: list[str]) -> list[dict[str, Any] | None]:
    """Each replica's last start as the stack's last deploy recorded it (its output ``starts``, read
    back for ``inspect`` beside the canaries' verdicts), or None: none recorded, or the backend not
    readable -- a record, never a reason to fail ``inspect``."""
    from infercrane.engine.workspace import Engine

    try:
        starts = urns.stack_outputs(Engine(stack).state()).get("starts") or {}
    except InferCraneError:
        return [None] * len(keys)
    return [starts.get(k) if isinstance(starts.get(k), dict) else None for k in keys]


def begin_judging(engine: Engine, rollout: Rollout | None, at: str) -> list[str]:
    """Before a run whose canaries bake: each such endpoint's release marked as being judged, so a
    command after a run that ends without a verdict (killed, lost) judges it again. Returns the
    endpoints marked. A mark the backend refuses fails the deploy before anything is applied."""
    baking = [e for e in (rollout.endpoints if rollout is not None else ()) if e.canary and e.release and e.canary_policy]
    if baking:
        _ = engine.stack  # a stack the deploy creates (a first deploy, a lost state) exists before its tags
    for e in baking:
        engine.set_tag(JUDGING_TAG + e.endpoint, judging_value(e.release, at))
    return [e.endpoint for e in baking]


def begin_borrowing(engine: Engine, rollout: Rollout | None, marked: Mapping[str, Gpus], at: str) -> list[str]:
    """Before a run whose lanes borrow GPUs under ``rollout.maxExtraGpus``: each such endpoint's
    GPUs at the change's start marked, unless ``marked`` has them already (a run cut short wrote
    them), so a rerun after this one is cut short counts the same own. Returns every endpoint
    marked now. A mark the backend refuses fails the deploy before anything is applied."""
    if rollout is None or rollout.max_extra_gpus is None:
        return []
    started = rollout.started()
    new = {e: held for e, held in started.items() if e not in marked}
    if new:
        _ = engine.stack  # a stack the deploy creates exists before its tags
    for endpoint, held in new.items():
        engine.set_tag(GPUS_TAG + endpoint, gpus_value(held, at))
    return sorted({*started, *(e for e in marked if e in {x.endpoint for x in rollout.endpoints})})


def end_borrowing(engine: Engine, endpoints: Iterable[str]) -> None:
    """These endpoints' lanes finished: what they hold is their own again, their marks removed."""
    for endpoint in endpoints:
        engine.remove_tag(GPUS_TAG + endpoint)


def end_judging(engine: Engine, endpoints: Iterable[str]) -> None:
    """The runs that judged these endpoints' canaries ended with a verdict: their marks removed."""
    for endpoint in endpoints:
        engine.remove_tag(JUDGING_TAG + endpoint)


def remember_rejections(
    engine: Engine, rollout: Rollout | None, exc: InferCraneError, at: str, sink: Sink = discard
) -> list[str]:
    """A rollout stopped by canary verdicts: each rejected release remembered as a stack tag.
    Returns the endpoints remembered. A tag the backend refuses is said as a warning, never raised:
    the rollback comes first (the judging mark stays: a later command judges the release again)."""
    releases = {e.endpoint: e.release for e in rollout.endpoints} if rollout is not None else {}
    remembered = []
    for endpoint, _, cause in exc.stopped if isinstance(exc, RolloutStopped) else []:
        if isinstance(cause, CanaryRejected) and releases.get(endpoint):
            try:
                engine.set_tag(REJECTED_TAG + endpoint, rejected_value(releases[endpoint], cause.outcome, at, cause.digest))
                remembered.append(endpoint)
            except InferCraneError as err:
                sink(
                    Note(
                        f"warning: the rejection of endpoint {endpoint}'s release could not be remembered ({err.message}): "
                        "a rerun of the same config would give it another canary; the rollback goes on"
                    )
                )
    return remembered


def roll_back(
    ctx: StackContext,
    before: Mapping[str, Any],
    rollout: Rollout | None,
    prepared: Prepared,
    exc: InferCraneError,
    run: Callable[..., None],
    sink: Sink,
    deleted: Collection[str] = (),
) -> InferCraneError:
    """A rollout stopped by canary verdicts: each rejected canary rolled back by the command that
    rejected it (:mod:`infercrane.core.plan.rollback`) in one more engine run -- its keys registered
    as the state recorded them ``before`` the deploy, the keys it brought deleted, each endpoint's
    lane under its own policy and waited for (ready, serving). That run ends failed on purpose, so
    Pulumi deletes nothing it did not register. ``deleted``: the keys the stopped run's lanes
    deleted. Returns what the deploy ends with: ``exc`` itself when no canary stopped it, else
    ``exc`` with each rejection saying how its rollback ended."""
    if rollout is None or not isinstance(exc, RolloutStopped):
        return exc
    rejected = {endpoint for endpoint, _, cause in exc.stopped if isinstance(cause, CanaryRejected)}
    if not rejected:
        return exc
    recorded, summaries = urns.recorded_objects(before), urns.recorded_summaries(before)
    releases = {k: release_of(next((m for m in ms if m.get("kind") in WORKLOADS), {})) for k, ms in recorded.items()}
    lanes = {lane.endpoint: lane for lane in rollout.lanes}
    plans = {e.endpoint: (e, plan_rollback(e, lanes[e.endpoint], releases)) for e in rollout.endpoints if e.endpoint in rejected}
    for _, back in plans.values():
        sink(Note(f"rollback: {back.describe()}"))
    restore = {k for _, back in plans.values() for k in back.restore}
    lanes_back = tuple(back.lane for _, back in plans.values() if back.lane.stages)
    failed = ""
    started = time.monotonic()
    if lanes_back:
        channel = Channel(
            context=dataclasses.replace(
                ctx, config=ctx.config.model_copy(update={"replicas": _waited_as(ctx.config, plans.values(), summaries)})
            ),
            driven=True,
            progress=sink,
            rollout=Rollout(tuple(e for e, _ in plans.values()), lanes_back, rollout.max_extra_gpus),
            delete=lambda keys: delete_keys(ctx, keys),
            prepared=prepared,
            rollback={k: Pinned(recorded[k], summaries.get(k) or {"key": k}) for k in restore},
        )
        try:
            # A restored key a lane deleted before its canary started is gone, though the state
            # still records it: the run refreshes first, so registering it makes it again.
            run(refresh=bool(restore & set(deleted)), channel=channel)
            failed = "its run ended without saying its lanes were done"  # a rollback's run always ends failed
        except RolledBack:
            pass
        except InferCraneError as err:
            failed = err.message
    stopped = [
        (endpoint, where, _after_rollback(cause, plans[endpoint][1], failed, time.monotonic() - started))
        if isinstance(cause, CanaryRejected) and endpoint in plans
        else (endpoint, where, cause)
        for endpoint, where, cause in exc.stopped
    ]
    return RolloutStopped(stopped, len(rollout.lanes))


def _waited_as(
    config: cfg.InferCraneConfig, plans: Iterable[tuple[EndpointRollout, Rollback]], summaries: Mapping[str, Mapping[str, Any]]
) -> tuple[Replica, ...]:
    """The config's replicas for a rollback's wait: a restored key is waited for as the replica it
    was -- its own config (or, one that left the config, the canary's of its endpoint) with the
    model the state recorded for it (the names it serves)."""
    configured = {r.key: r for r in config.replicas}
    waited: dict[str, Replica] = {}
    for e, back in plans:
        ours = [configured[k] for k in e.canary if k in configured]
        for key in back.restore:
            base = configured.get(key) or (ours[0] if ours else None)
            if base is not None:
                model = (summaries.get(key) or {}).get("model") or base.model
                waited[key] = base.model_copy(update={"key": key, "model": model})
    return (*(waited.pop(r.key, r) for r in config.replicas), *waited.values())


def _after_rollback(cause: CanaryRejected, back: Rollback, failed: str, seconds: float = 0.0) -> CanaryRejected:
    """A rejection, saying how its rollback ended (``seconds``: how long it took, from the end of
    the lanes to every rolled-back replica ready and serving, or gone)."""
    if back.left:
        return cause.after_rollback(
            f"not rolled back: {', '.join(back.left)} ran before this deploy with nothing in the state to return to "
            "(the rejected release, another workload API, or no record at all: after takeover or a lost state); it is "
            "left as it runs, never deleted",
            failed=True,
        )
    if not back.lane.stages:
        return cause.after_rollback("nothing to roll back", failed=False)
    if failed:
        return cause.after_rollback(f"the rollback stopped: {failed}", failed=True)
    return cause.after_rollback(f"rolled back: {back.describe()}; ready and serving again after {seconds:.0f} s", failed=False)
