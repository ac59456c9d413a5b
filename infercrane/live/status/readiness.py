"""Readiness and deletion waits for a whole stack: one LIST per kind per tick, never a Pod read.

pulumi-kubernetes awaits each Deployment with its own informers on Deployments, ReplicaSets, Pods
and PVCs (the seed's Role grants none of the last three) and each Service deletion with a watch.
Here one poller serves every replica of a stack: each tick it LISTs the workload kind in the
namespace (label ``managed-by=infercrane``) and judges every object still waited for. That needs
only ``list`` on the replica objects -- the seed's own right -- and costs the same at 100 replicas
as at 1. Each object is judged by :mod:`infercrane.live.status.verdicts` (``kubectl rollout status``'s rule
with the seed's guard against stale status); the reason a replica is not ready comes from its own
conditions and, when the identity may read them, the namespace's Warning Events
(:mod:`infercrane.live.status.warnings`). Live-cluster layer: lightkube only, never pulumi.

One module, past 300 lines: the readiness wait and its one-LIST questions (what drains, what
serves) share the LIST per tick. Its progress lines are :mod:`infercrane.live.status.progress`, the
deletion wait :mod:`infercrane.live.status.gone`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from lightkube import operators

from infercrane.core import naming
from infercrane.core.errors import STARTUP_FAILING
from infercrane.core.model.kinds import judged_by_predictor
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live
from infercrane.live.status import hold, progress, startup
from infercrane.live.status.progress import Progress
from infercrane.live.status.verdicts import VERDICTS, Verdict, judged, predictor_name, replica_state
from infercrane.live.status.warnings import current_replica_set, pod_warnings

POLL_SECONDS: Final = 0.5  # two LISTs a second for the whole stack: latency <= 0.5 s (a rolling lane waits on it per wave)
#: Up to this many waited objects are LISTed by name (their instance label); more, as every object
#: of ours of the kind. A tick then rests at least as long as its LIST took: the waiter's share of
#: the machine stays bounded when a LIST of a fleet takes longer than the poll interval.
NAMED_LIST_LIMIT: Final = 100
#: What the kubelet says of a pod whose spec names a Secret, ConfigMap or key that is not there (a
#: Warning Event, `reason: message`): the pod waits in CreateContainerConfigError, which no wait
#: cures, so the replica fails at once instead of at the end of its startup budget.
UNMAKEABLE: Final = re.compile(r"^Failed: Error: (?:secret|configmap) \"[^\"]+\" not found|^Failed: Error: couldn't find key ")
CONFIG_ERROR: Final = "CreateContainerConfigError"
#: The kubelet's Warning when a startup probe check fails; failureThreshold of them in a row (the
#: startup budget, :mod:`infercrane.core.render.workloads`) and it kills the engine and restarts it.
STARTUP_PROBE_FAILED: Final = "Unhealthy: Startup probe failed"
AWAIT_MARGIN_SECONDS: Final = 60  # past the startup budget (the progress deadline), before giving up
API_GRACE_SECONDS: Final = 30.0  # an API server unreachable this long fails the wait (not the startup budget)


@dataclass
class _Waited:
    generation: int
    deadline: float
    future: asyncio.Future[Verdict]
    tick: int  # the LIST under way (or last made) when the wait began: it may predate the object
    since: datetime  # when the wait began (UTC, whole seconds): a Warning Event older than that cannot fail it at once
    current: str | None = None  # its current ReplicaSet, as last seen: other ReplicaSets' pods' Events are history
    zero_ok: bool = False  # its count is an autoscaler's: scaled to zero, it awaits no pod
    held: bool = False  # a surge canary, its old pods held beside it until the verdict (live.status.hold)
    last: Verdict = field(default_factory=lambda: Verdict("waiting", "not observed yet"))


def list_predictors(live: Live) -> dict[str, dict[str, Any]] | None:
    """KServe's predictor Deployments by name (they carry the labels KServe copies from their
    InferenceService): one LIST; None when this identity may not list Deployments (a KServe-only
    identity without deploy/kubernetes/optional/kserve-predictor-reader.yaml)."""
    try:
        items = live.list(
            cluster.resource_for({"kind": "Deployment"}), labels=naming.managed_selector(), action="list deployments"
        )
    except failures.Forbidden:
        return None
    return {o["metadata"]["name"]: o for o in items}


class FleetWaiter:
    """Waits for many objects of one kind in one namespace with one LIST per tick.

    ``await waiter.wait(name, generation, budget)`` returns the object's :class:`Verdict`: ready,
    or failed with the reason (ProgressDeadlineExceeded, the budget spent, the object deleted
    during the wait, the API unreachable for :data:`API_GRACE_SECONDS`). It never raises for
    these: the caller collects every verdict and reports all failures together.
    """

    def __init__(
        self,
        live: Live,
        kind: str,
        *,
        poll_seconds: float = POLL_SECONDS,
        api_grace_seconds: float = API_GRACE_SECONDS,
        report: Callable[[Progress], None] | None = None,
        report_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._live, self._kind = live, kind
        self._wall = wall
        self._resource = cluster.resource_for({"kind": kind})
        self._verdict = VERDICTS[kind]
        self._poll, self._grace = poll_seconds, api_grace_seconds
        self._report, self._report_every, self._clock = report, report_every, clock
        self._waited: dict[str, _Waited] = {}
        # KServe: each tick also LISTs the predictor Deployments (the evidence that is current,
        # verdicts.inference_service_by_predictor) -- with the deployment Role's `list`; without
        # it, the InferenceService's own status (weaker: its counter is copied, see there).
        self._predictors: dict[str, dict[str, Any]] | None = {} if judged_by_predictor(kind) else None
        self._ticks = 0  # LISTs begun
        self._done = 0
        self._task: asyncio.Task[None] | None = None
        self._began = clock()

    async def wait(
        self, name: str, generation: int, budget_seconds: float, *, zero_ok: bool = False, held: bool = False
    ) -> Verdict:
        """``name``'s verdict at ``generation`` within ``budget_seconds``; ``zero_ok``: its count is an
        autoscaler's (``scaling: external``), which may ask for no pod; ``held``: a surge canary
        whose old pods are held beside it (:mod:`~infercrane.live.status.hold`). A wait that is not
        held releases a hold it finds on its object once the object is at ``generation`` (a rollback
        that put the old template back, a rerun, a revert): the rollout then completes."""
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        since = self._wall().replace(microsecond=0)
        self._waited[name] = _Waited(
            generation, self._clock() + budget_seconds, future, self._ticks, since, zero_ok=zero_ok, held=held
        )
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._guarded())
        return await future

    async def _guarded(self) -> None:
        """:meth:`_run`, whose every failure ends the waits: an error nobody expected (a new kind
        of answer, a bug) fails each wait with its words instead of leaving them pending forever."""
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported on every wait, never swallowed
            first = (str(exc).splitlines() or [exc.__class__.__name__])[0]
            self._fail_all(f"the wait stopped: {exc.__class__.__name__}: {first}")

    async def drained(self, names: Collection[str], budget_seconds: float) -> str:
        """Until none of ``names`` has a pod still terminating (its Deployment's
        ``status.terminatingReplicas``, Kubernetes >= 1.35; before it, nothing is seen): "" then,
        else what still drains once ``budget_seconds`` have passed. A replica's new template is
        applied only then: a ReplicaSet counts no terminating pod, so a Deployment flipped back to
        the template of a pod still draining starts another pod of it at once, beside the one that
        still holds its GPUs. An InferenceService's pods are its predictor's: not seen here."""
        if self._kind != "Deployment" or not names:
            return ""
        deadline = self._clock() + budget_seconds
        held: dict[str, int] = {}
        while True:
            try:
                listed = await asyncio.to_thread(self._list, list(names))
                held = {
                    n: count
                    for n in names
                    if (count := int(((listed.get(n) or {}).get("status") or {}).get("terminatingReplicas") or 0))
                }
                if not held:
                    return ""
            except (failures.Unreachable, failures.Unavailable):
                pass  # asked again on the next tick, within the budget
            if self._clock() >= deadline:
                seen = (
                    ", ".join(f"{n} ({k} pod(s))" for n, k in sorted(held.items())) or "not seen: the API server did not answer"
                )
                return f"still terminating after {budget_seconds:.0f} s: {seen}"
            await asyncio.sleep(self._poll)

    async def serving(self, names: Collection[str]) -> set[str]:
        """Of ``names``, those with a pod available now (:func:`~infercrane.live.status.verdicts.replica_state`)
        -- one LIST; none when the API server does not answer (the apply that follows fails then)."""
        if not names:
            return set()
        try:
            listed = await asyncio.to_thread(self._list, list(names))
        except (failures.Unreachable, failures.Unavailable):
            return set()
        return {n for n, obj in listed.items() if n in names and replica_state(self._kind, obj, self._predictors).available}

    def _list(self, names: Collection[str]) -> dict[str, dict[str, Any]]:
        """The objects of ``names`` (by their instance label), or, past :data:`NAMED_LIST_LIMIT`
        names, every object of ours of the kind: an answer, and its decoding, that grows with what
        is waited for, not with the namespace (one replica changed in a fleet of 1,000)."""
        labels = naming.managed_selector()
        if len(names) <= NAMED_LIST_LIMIT:
            labels[naming.LABEL_INSTANCE] = operators.in_(names)
        listed = self._live.list(self._resource, labels=labels, action=f"list {self._kind}s")
        out = {raw["metadata"]["name"]: raw for raw in listed}
        if self._predictors is not None:
            self._predictors = self._list_predictors()
        return out

    def _list_predictors(self) -> dict[str, dict[str, Any]] | None:
        return list_predictors(self._live)

    def _workload_of(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """The Deployment that runs ``obj``'s pods: itself, or KServe's predictor when readable."""
        if not self._predictors:
            return obj
        return self._predictors.get(predictor_name(str((obj.get("metadata") or {}).get("name")))) or {}

    def _judge(self, obj: Mapping[str, Any], waited: _Waited) -> Verdict:
        return judged(self._kind, obj, waited.generation, self._predictors, zero_ok=waited.zero_ok, held=waited.held)

    def _holding(self, obj: Mapping[str, Any], waited: _Waited) -> bool:
        """Whether ``obj`` carries a hold its wait did not place, at the generation waited for
        (in memory: no request, no thread, for the fleet's objects that carry none)."""
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        return self._kind == "Deployment" and not waited.held and generation >= waited.generation and hold.holds(obj)

    def _unheld(self, name: str, obj: Mapping[str, Any], waited: _Waited) -> bool:
        """Release the hold ``obj`` carries (:meth:`_holding`); the wait then waits for the
        generation the release made. Whether it released one."""
        if not self._holding(obj, waited):
            return False
        waited.generation = max(waited.generation, hold.release(self._live, name))
        return True

    def _resolve(self, name: str, verdict: Verdict) -> None:
        waited = self._waited.pop(name)
        self._done += verdict.state == "ready"
        if not waited.future.done():
            waited.future.set_result(verdict)

    def _fail_all(self, reason: str, *, api_lost: bool = False) -> None:
        for name in list(self._waited):
            self._resolve(name, Verdict("failed", reason, api_lost=api_lost))

    def _expire(self, now: float) -> None:
        """Fail every wait past its deadline with what was last seen of it: a tick whose LIST got
        no answer still ends the waits whose budget is spent (the bound never rests on a LIST)."""
        for name, waited in list(self._waited.items()):
            if now >= waited.deadline:
                self._resolve(
                    name, Verdict("failed", f"not ready within its startup budget + margin; last seen: {waited.last.reason}")
                )

    async def _run(self) -> None:
        lost_since: float | None = None  # since when no LIST got an answer it could use (none: the last did)
        last_report = self._clock()
        while self._waited:
            self._ticks += 1
            tick = self._ticks
            asked = time.monotonic()
            try:
                live = await asyncio.to_thread(self._list, list(self._waited))
                lost_since = None
                listing = time.monotonic() - asked
            except (failures.Unreachable, failures.Unavailable) as exc:
                # No answer (connection, TLS, timeout), or an answer of "not now" (429 from API
                # Priority and Fairness, 5xx while etcd is gone): ask again on the next tick, within
                # both bounds -- each wait's own deadline and the grace for a lost API server.
                now = self._clock()
                lost_since = lost_since if lost_since is not None else now
                if now - lost_since >= self._grace:
                    first = str(exc).splitlines()[0]
                    self._fail_all(f"{first} (for {self._grace:.0f} s while waiting for readiness)", api_lost=True)
                    return
                self._expire(now)
                if self._waited:
                    await asyncio.sleep(self._poll)
                continue
            except failures.LiveError as exc:
                self._fail_all(str(exc))
                return
            failed: list[str] = []
            now = self._clock()
            for name, waited in list(self._waited.items()):
                if waited.tick >= tick:
                    continue  # its wait began while this LIST was under way: the object may be newer than it
                obj = live.get(name)
                if obj is not None:
                    waited.current = current_replica_set(self._workload_of(obj))
                    try:
                        if self._holding(obj, waited) and await asyncio.to_thread(self._unheld, name, obj, waited):
                            continue  # judged on a later tick, at the generation the release made
                    except (failures.Unreachable, failures.Unavailable):
                        continue  # asked again on the next tick, within its budget
                verdict = (
                    Verdict("failed", "the object was deleted while waiting for it") if obj is None else self._judge(obj, waited)
                )
                if verdict.state == "waiting" and now >= waited.deadline:
                    verdict = Verdict("failed", f"not ready within its startup budget + margin; last seen: {verdict.reason}")
                waited.last = verdict
                if verdict.state == "failed":
                    failed.append(name)
                elif verdict.state == "ready":
                    self._resolve(name, verdict)
            if failed:
                why, stalls = await asyncio.to_thread(progress.explained, self._live, failed, self._current(failed))
                for name in failed:
                    reason, said = self._waited[name].last.reason, why.get(name, [])
                    if any(w.startswith(STARTUP_PROBE_FAILED) for w in said):
                        reason = (
                            f"{STARTUP_FAILING} (its engine did not answer within its startup budget; the kubelet "
                            f"restarts it): {reason}"
                        )
                    said = ([stalls[name]] if stalls.get(name) else []) + said
                    self._resolve(name, Verdict("failed", reason + "".join(f"\n      {w}" for w in said)))
            if self._report and self._waited and now - last_report >= self._report_every:
                last_report = now
                snapshot = self.progress()
                waiting = list(snapshot.waiting)
                warnings, stages = await asyncio.to_thread(
                    progress.looked, self._live, waiting, self._current(waiting)
                )  # one Events LIST
                self._fail_unmakeable(warnings)
                self._report(dataclasses.replace(snapshot, warnings=warnings, stages=stages))
            if self._waited:
                await asyncio.sleep(max(self._poll, listing))

    def _fail_unmakeable(self, warnings: Mapping[str, list[str]]) -> None:
        """Fail at once each wait whose pods the kubelet cannot make from their spec (a Secret,
        ConfigMap or key it names is missing: CreateContainerConfigError), in the kubelet's words --
        said since the wait began: the same words from before it may be a failure fixed since
        (the Secret created), which the kubelet's next try cures."""
        named = [n for n, lines in warnings.items() if n in self._waited and any(UNMAKEABLE.match(line) for line in lines)]
        if not named:
            return
        since = {n: self._waited[n].since for n in named}
        fresh = pod_warnings(self._live, named, since=since, current=self._current(named))
        for name in named:
            said = next((line for line in fresh.get(name, []) if UNMAKEABLE.match(line)), None)
            if said is not None:
                reason = f"{CONFIG_ERROR}: the kubelet cannot create its container: {said}\n      stalled {startup.CREATING}"
                self._resolve(name, Verdict("failed", reason))

    def _current(self, names: Iterable[str]) -> dict[str, str]:
        return {n: w.current for n in names if (w := self._waited.get(n)) is not None and w.current}

    def progress(self) -> Progress:
        waiting = {name: w.last.reason for name, w in self._waited.items()}
        return Progress(self._done, self._done + len(waiting), waiting, self._clock() - self._began)
