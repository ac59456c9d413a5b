"""Readiness and deletion waits for a whole stack: one LIST per kind per tick, never a Pod read.

pulumi-kubernetes awaits each Deployment with its own informers on Deployments, ReplicaSets, Pods
and PVCs (the seed's Role grants none of the last three) and each Service deletion with a watch.
Here one poller serves every replica of a stack: each tick it LISTs the workload kind in the
namespace (label ``managed-by=infercrane``) and judges every object still waited for. That needs
only ``list`` on the replica objects -- the seed's own right -- and costs the same at 100 replicas
as at 1. The reason a replica is not ready comes from the object's own conditions and, when the
identity may read them, the namespace's Warning Events (FailedScheduling names the missing GPU).

The verdict rule is ``kubectl rollout status``'s, with the seed's guard against stale status:
ready only when ``status.observedGeneration == metadata.generation`` (at least the generation we
applied), every replica updated to the current template, no old replica left, and an updated
replica available. Live-cluster layer: lightkube only, never pulumi.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from lightkube import Client
from lightkube.resources.core_v1 import Event

from infercrane.core import naming, times
from infercrane.core.config import KubernetesTarget
from infercrane.core.errors import POD_SECURITY_FIX, ClusterError
from infercrane.live import cluster, failures

POLL_SECONDS: Final = 1.0  # one LIST per second for the whole stack: latency <= 1 s, load flat in N
AWAIT_MARGIN_SECONDS: Final = 60  # past the startup budget (the progress deadline), before giving up
API_GRACE_SECONDS: Final = 30.0  # an API server unreachable this long fails the wait (not the startup budget)
EVENTS_GRANT: Final = "get/list on events (deploy/kubernetes/base/provider-rbac.yaml grants it)"

State = Literal["ready", "waiting", "failed"]

POD_SECURITY_REJECTION: Final = "violates PodSecurity"


@dataclass(frozen=True)
class Verdict:
    """What one object's live status says: ready, still waiting (and why), or failed (and why)."""

    state: State
    reason: str = ""
    api_lost: bool = False  # failed because the API server stopped answering (not the object's fault)


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in status.get("conditions") or []}


def _applied_at(meta: Mapping[str, Any]) -> datetime | None:
    """When our field manager last changed what it applies (its managedFields entry's time, the API
    server's clock): the moment the template we wait for was set."""
    for entry in meta.get("managedFields") or []:
        if entry.get("manager") == naming.FIELD_MANAGER and entry.get("operation") == "Apply" and not entry.get("subresource"):
            return times.parse(entry.get("time"))
    return None


def _since_our_apply(meta: Mapping[str, Any], condition: Mapping[str, Any], *, same_second: bool) -> bool:
    """Whether a failure condition is a verdict on the template we applied, not the one before.

    The controller keeps a failure condition -- a timeout naming the old ReplicaSet, a
    ReplicaFailure naming its rejected pods -- after it observed a new template, until the new
    rollout makes progress (it never rewrites a condition of the same status and reason): a fix
    applied right after a failure would fail at once on the failure it fixes. A condition last set
    before our apply is that stale verdict; a new one comes after it. Timestamps are whole
    seconds: ``same_second`` says whether a condition of the very second of our apply counts (a
    pod rejection comes within milliseconds of the apply; a timeout never does -- it comes a
    progress deadline later -- while a stale one can share the second of a quick rerun)."""
    applied, updated = _applied_at(meta), times.parse(condition.get("lastUpdateTime"))
    if applied is None or updated is None:
        return True
    return updated >= applied if same_second else updated > applied


def _timed_out(meta: Mapping[str, Any], progressing: Mapping[str, Any]) -> bool:
    """``Progressing=False/ProgressDeadlineExceeded`` about the template we applied."""
    if progressing.get("status") != "False" or progressing.get("reason") != "ProgressDeadlineExceeded":
        return False
    return _since_our_apply(meta, progressing, same_second=False)


def deployment_verdict(obj: Mapping[str, Any], applied_generation: int) -> Verdict:
    """The rollout rule of ``kubectl rollout status`` plus the seed's generation guard."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    generation = int(meta.get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    if generation < applied_generation or observed < generation:
        return Verdict("waiting", f"controller has not observed generation {max(generation, applied_generation)} yet")
    progressing = _conditions(status).get("Progressing") or {}
    if _timed_out(meta, progressing):
        return Verdict("failed", f"ProgressDeadlineExceeded: {progressing.get('message') or 'no progress within the deadline'}")
    want = int(spec.get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    failure = _conditions(status).get("ReplicaFailure") or {}
    if (
        failure.get("status") == "True"
        and POD_SECURITY_REJECTION in str(failure.get("message"))
        and _since_our_apply(meta, failure, same_second=True)
    ):
        # The namespace enforces a Pod Security level the pods do not meet: no pod will ever be
        # created for this template, so there is nothing to wait for. (A template rejected right
        # after a rejected one keeps the old condition: reported at the budget, same words.)
        return Verdict("failed", f"ReplicaFailure: {failure.get('message')}\n      fix: {POD_SECURITY_FIX}")
    suffix = f" (ReplicaFailure: {failure.get('message')})" if failure.get("status") == "True" else ""
    if updated < want:
        return Verdict("waiting", f"{updated} of {want} replica(s) updated{suffix}")
    if total > updated:
        return Verdict("waiting", f"{total - updated} old replica(s) pending termination{suffix}")
    if available < max(updated, 1):
        return Verdict("waiting", f"{available} of {updated} updated replica(s) available{suffix}")
    return Verdict("ready")


def inference_service_verdict(obj: Mapping[str, Any], applied_generation: int) -> Verdict:
    """KServe: ``Ready=True`` of the current generation (a stale Ready never counts)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    generation = int(meta.get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    if generation < applied_generation or observed < generation:
        return Verdict("waiting", f"controller has not observed generation {max(generation, applied_generation)} yet")
    ready = _conditions(status).get("Ready") or {}
    if ready.get("status") == "True":
        return Verdict("ready")
    return Verdict(
        "waiting", f"Ready={ready.get('status', 'Unknown')}: {ready.get('reason') or ''} {ready.get('message') or ''}".strip()
    )


VERDICTS: Final[dict[str, Callable[[Mapping[str, Any], int], Verdict]]] = {
    "Deployment": deployment_verdict,
    "InferenceService": inference_service_verdict,
}


@dataclass
class _Waited:
    generation: int
    deadline: float
    future: asyncio.Future[Verdict]
    tick: int  # the LIST under way (or last made) when the wait began: it may predate the object
    last: Verdict = field(default_factory=lambda: Verdict("waiting", "not observed yet"))


@dataclass(frozen=True)
class Progress:
    """A snapshot for a progress line: how many are ready, and why the others are not."""

    ready: int
    total: int
    waiting: dict[str, str]
    elapsed: float
    warnings: dict[str, list[str]] = field(default_factory=dict)  # name -> its Warning Events, most telling first

    def summary(self) -> str:
        """Why the waiting ones wait, in a few words: the commonest of each replica's most telling
        warning by reason (``FailedScheduling on 2``), else the commonest status reason."""
        from collections import Counter

        reasons = Counter(lines[0].split(":", 1)[0] for lines in self.warnings.values() if lines and not lines[0].startswith("("))
        if reasons:
            return ", ".join(f"{reason} on {n}" for reason, n in reasons.most_common(2))
        common = Counter(self.waiting.values()).most_common(1)
        return common[0][0] if common else ""


class FleetWaiter:
    """Waits for many objects of one kind in one namespace with one LIST per tick.

    ``await waiter.wait(name, generation, budget)`` returns the object's :class:`Verdict`: ready,
    or failed with the reason (ProgressDeadlineExceeded, the budget spent, the object deleted
    during the wait, the API unreachable for :data:`API_GRACE_SECONDS`). It never raises for
    these: the caller collects every verdict and reports all failures together.
    """

    def __init__(
        self,
        client: Client,
        target: KubernetesTarget,
        kind: str,
        *,
        poll_seconds: float = POLL_SECONDS,
        api_grace_seconds: float = API_GRACE_SECONDS,
        report: Callable[[Progress], None] | None = None,
        report_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client, self._target, self._kind = client, target, kind
        self._resource = cluster.resource_for({"kind": kind})
        self._verdict = VERDICTS[kind]
        self._poll, self._grace = poll_seconds, api_grace_seconds
        self._report, self._report_every, self._clock = report, report_every, clock
        self._waited: dict[str, _Waited] = {}
        self._ticks = 0  # LISTs begun
        self._done = 0
        self._task: asyncio.Task[None] | None = None
        self._began = clock()

    async def wait(self, name: str, generation: int, budget_seconds: float) -> Verdict:
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._waited[name] = _Waited(generation, self._clock() + budget_seconds, future, self._ticks)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        return await future

    def _list(self) -> dict[str, dict[str, Any]]:
        out = {}
        with failures.request(f"list {self._kind}s", self._target):
            for obj in self._client.list(
                self._resource, namespace=self._target.namespace, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}
            ):
                raw = cluster.as_dict(obj)
                out[raw["metadata"]["name"]] = raw
        return out

    def _resolve(self, name: str, verdict: Verdict) -> None:
        waited = self._waited.pop(name)
        self._done += verdict.state == "ready"
        if not waited.future.done():
            waited.future.set_result(verdict)

    def _fail_all(self, reason: str, *, api_lost: bool = False) -> None:
        for name in list(self._waited):
            self._resolve(name, Verdict("failed", reason, api_lost=api_lost))

    async def _run(self) -> None:
        unreachable_since: float | None = None
        last_report = self._clock()
        while self._waited:
            self._ticks += 1
            tick = self._ticks
            try:
                live = await asyncio.to_thread(self._list)
                unreachable_since = None
            except failures.Unreachable as exc:
                now = self._clock()
                unreachable_since = unreachable_since or now
                if now - unreachable_since >= self._grace:
                    first = str(exc).splitlines()[0]
                    self._fail_all(f"{first} (for {self._grace:.0f} s while waiting for readiness)", api_lost=True)
                    return
                await asyncio.sleep(self._poll)
                continue
            except failures.Unavailable:  # the next tick asks again anyway
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
                verdict = (
                    Verdict("failed", "the object was deleted while waiting for it")
                    if obj is None
                    else self._verdict(obj, waited.generation)
                )
                if verdict.state == "waiting" and now >= waited.deadline:
                    verdict = Verdict("failed", f"not ready within its startup budget + margin; last seen: {verdict.reason}")
                waited.last = verdict
                if verdict.state == "failed":
                    failed.append(name)
                elif verdict.state == "ready":
                    self._resolve(name, verdict)
            if failed:
                why = await asyncio.to_thread(self.warnings, failed)
                for name in failed:
                    reason = self._waited[name].last.reason
                    self._resolve(name, Verdict("failed", reason + "".join(f"\n      {w}" for w in why.get(name, []))))
            if self._report and self._waited and now - last_report >= self._report_every:
                last_report = now
                snapshot = self.progress()
                warnings = await asyncio.to_thread(self.warnings, list(snapshot.waiting))  # one Events LIST
                self._report(dataclasses.replace(snapshot, warnings=warnings))
            if self._waited:
                await asyncio.sleep(self._poll)

    def progress(self) -> Progress:
        waiting = {name: w.last.reason for name, w in self._waited.items()}
        return Progress(self._done, self._done + len(waiting), waiting, self._clock() - self._began)

    def warnings(self, names: Iterable[str]) -> dict[str, list[str]]:
        """Recent Warning Events of each object and its pods (``<name>-…``), newest last; one LIST."""
        return pod_warnings(self._client, self._target, names)


#: Whose warnings say most about why a replica is not ready: its pods, then what creates them.
#: An autoscaler's metric warnings (KServe's HPA without a metrics API) come every 15 s and must
#: not push a pod's FailedScheduling out of the few lines shown.
_WARNING_RANK: Final = {"Pod": 0, "ReplicaSet": 1, "Deployment": 2, "InferenceService": 2}
_OTHERS_RANK: Final = 3


def pod_warnings(client: Client, target: KubernetesTarget, names: Iterable[str], *, limit: int = 3) -> dict[str, list[str]]:
    """Warning Events in the namespace about each replica's objects or pods, by replica name: one
    line per kind and reason (its newest message), at most ``limit``, the most telling first --
    pods', then their creators', then the rest; newest first within each.

    Pods are never read: an Event names its object, and a replica's pods are named
    ``<replica name>-<hash>-<suffix>``. Without the right to list Events, says which right is missing.
    """
    wanted = sorted(set(names))
    if not wanted:
        return {}
    try:
        with failures.request("list events", target):
            events: list[dict[str, Any]] = [
                e.to_dict() for e in client.list(Event, namespace=target.namespace, fields={"type": "Warning"})
            ]
    except failures.Unreachable:
        return {}
    except failures.LiveError as exc:
        why = (exc.api.status.reason or exc.code) if exc.api is not None else exc.code
        note = f"(Events not readable by this identity: {why}; grant {EVENTS_GRANT})"
        return {n: [note] for n in wanted}
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    newest: dict[str, dict[tuple[str, str], tuple[int, int, str]]] = {}
    for order, e in enumerate(events):
        involved = e.get("involvedObject") or {}
        name, kind = str(involved.get("name") or ""), str(involved.get("kind") or "")
        for n in wanted:
            if name == n or name.startswith(n + "-"):
                line = f"{e.get('reason')}: {' '.join(str(e.get('message') or '').split())}"
                rank = _WARNING_RANK.get(kind, _OTHERS_RANK)
                newest.setdefault(n, {})[(kind, str(e.get("reason")))] = (rank, -order, line)
    return {n: [line for _, _, line in sorted(by_reason.values())[:limit]] for n, by_reason in newest.items()}


def wait_gone(
    client: Client,
    target: KubernetesTarget,
    objects: Mapping[tuple[str, str], str],
    *,
    kinds: Iterable[str] = (),
    timeout: float,
    poll_seconds: float = 0.5,
    report: Callable[[int], None] | None = None,
    api_grace: float = API_GRACE_SECONDS,
) -> tuple[list[str], dict[tuple[str, str], dict[str, Any]]]:
    """Wait until every ``(kind, name) -> uid`` is gone (or replaced by another uid); one LIST per
    kind per tick -- the objects' kinds and ``kinds`` -- of the objects carrying our managed-by
    label (``report`` gets the count still there after each). Returns ``Kind/name`` of what is
    still there after ``timeout`` and the last tick's listing, ``(kind, name) -> object``: the
    caller's proof of what remains, without another round of LISTs. An API server that stops
    answering is waited for ``api_grace`` seconds, then ClusterError (never a raw client error)."""
    left = dict(objects)
    every = sorted(set(kinds) | {k for k, _ in left})
    deadline = time.monotonic() + timeout
    lost_since: float | None = None  # when the API server stopped answering (a tick is then skipped)
    while True:
        listing: dict[tuple[str, str], dict[str, Any]] = {}
        try:
            for kind in every:
                try:
                    with failures.request(f"list {kind}s in namespace {target.namespace}", target):
                        items = client.list(
                            cluster.resource_for({"kind": kind}),
                            namespace=target.namespace,
                            labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY},
                        )
                        listing.update({(kind, o.metadata.name): cluster.as_dict(o) for o in items})
                except failures.NotFound:  # the kind is no longer served, nothing of it remains
                    continue
        except (failures.Unreachable, failures.Unavailable) as exc:
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since >= api_grace:
                raise ClusterError(
                    f"the Kubernetes API stopped answering while waiting for {len(left)} object(s) to be gone; "
                    f"the deletes were sent: {exc}"
                ) from None
            time.sleep(poll_seconds)
            continue
        lost_since = None
        for ref, uid in list(left.items()):
            if (listing.get(ref) or {}).get("metadata", {}).get("uid") != uid:
                del left[ref]
        if report:
            report(len(left))
        if not left or time.monotonic() >= deadline:
            return sorted(f"{k}/{n}" for k, n in left), listing
        time.sleep(poll_seconds)
