"""Whether one workload is ready, from the object alone: the rule of ``kubectl rollout status``
with the seed's guard against stale status -- ready only when ``status.observedGeneration ==
metadata.generation`` (at least the generation we applied), every replica updated to the current
template, no old replica left, and an updated replica available; failed on a progress deadline
our apply's template reached, or on a ReplicaFailure. Live-cluster layer (pure functions of the
objects a LIST returned).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from infercrane.core import naming
from infercrane.core.errors import POD_SECURITY_FIX, with_fix
from infercrane.core.model.kinds import KSERVE_API, judged_by_predictor, workload_api_of
from infercrane.core.plan import states
from infercrane.core.plan.states import ReplicaState
from infercrane.core.state import times

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


def applied_at(meta: Mapping[str, Any]) -> datetime | None:
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
    applied, updated = applied_at(meta), times.parse(condition.get("lastUpdateTime"))
    if applied is None or updated is None:
        return True
    return updated >= applied if same_second else updated > applied


def _timed_out(meta: Mapping[str, Any], progressing: Mapping[str, Any]) -> bool:
    """``Progressing=False/ProgressDeadlineExceeded`` about the template we applied."""
    if progressing.get("status") != "False" or progressing.get("reason") != "ProgressDeadlineExceeded":
        return False
    return _since_our_apply(meta, progressing, same_second=False)


def deployment_verdict(
    obj: Mapping[str, Any],
    applied_generation: int,
    applied: Mapping[str, Any] | None = None,
    *,
    zero_ok: bool = False,
    held: bool = False,
) -> Verdict:
    """The rollout rule of ``kubectl rollout status`` plus the seed's generation guard. ``applied``:
    the metadata whose managedFields date our apply (default: the object's own; a KServe predictor's
    are its InferenceService's). ``zero_ok``: its count is an autoscaler's (``scaling: external``),
    which may scale it to zero -- then no pod is awaited; a count of ours is one pod, always.
    ``held``: a surge canary whose old pods are held beside it (:mod:`infercrane.live.status.hold`):
    ready once a pod of its current template is, and every pod it runs is ready -- its rollout
    completes only after the verdict."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ours = meta if applied is None else applied
    generation = int(meta.get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    if generation < applied_generation or observed < generation:
        return Verdict("waiting", f"controller has not observed generation {max(generation, applied_generation)} yet")
    progressing = _conditions(status).get("Progressing") or {}
    if _timed_out(ours, progressing):
        return Verdict("failed", f"ProgressDeadlineExceeded: {progressing.get('message') or 'no progress within the deadline'}")
    want = int(spec.get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    failure = _conditions(status).get("ReplicaFailure") or {}
    if (
        failure.get("status") == "True"
        and POD_SECURITY_REJECTION in str(failure.get("message"))
        and _since_our_apply(ours, failure, same_second=True)
    ):
        # The namespace enforces a Pod Security level the pods do not meet: no pod will ever be
        # created for this template, so there is nothing to wait for. (A template rejected right
        # after a rejected one keeps the old condition: reported at the budget, same words.)
        return Verdict("failed", with_fix(f"ReplicaFailure: {failure.get('message')}", POD_SECURITY_FIX, indent=6))
    suffix = f" (ReplicaFailure: {failure.get('message')})" if failure.get("status") == "True" else ""
    if held:
        ready = int(status.get("readyReplicas") or 0)
        if updated < min(want, 1):
            return Verdict("waiting", f"no replica updated yet (its old pod held){suffix}")
        if ready < total:
            return Verdict("waiting", f"{ready} of {total} pod(s) ready (the canary's beside its held old pod){suffix}")
        return Verdict("ready")
    if updated < want:
        return Verdict("waiting", f"{updated} of {want} replica(s) updated{suffix}")
    if total > updated:
        return Verdict("waiting", f"{total - updated} old replica(s) pending termination{suffix}")
    # As many available as the Deployment asks for -- and at least one, unless an autoscaler that owns
    # the count (scaling: external; KEDA) scaled it to zero: then there is no pod to wait for.
    if available < updated or (not available and (want or not zero_ok)):
        return Verdict("waiting", f"{available} of {updated} updated replica(s) available{suffix}")
    # A deleted pod still holds its GPUs and drains its requests: the next wave waits until it is
    # gone, not merely deleted (status.terminatingReplicas: Kubernetes >= 1.35; absent before).
    terminating = int(status.get("terminatingReplicas") or 0)
    if terminating:
        return Verdict("waiting", f"{terminating} old pod(s) still terminating (draining)")
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


def predictor_name(isvc_name: str) -> str:
    """The Deployment KServe (Standard mode) runs an InferenceService's predictor in."""
    return KSERVE_API.service.format(name=isvc_name)


def inference_service_by_predictor(
    obj: Mapping[str, Any], applied_generation: int, predictor: Mapping[str, Any] | None
) -> Verdict:
    """KServe, judged by current evidence: the predictor Deployment runs the template of *this*
    intent and is ready by the Deployment rule, and the InferenceService says ``Ready=True``.

    KServe 0.16 copies ``status.observedGeneration`` from the predictor Deployment
    (``PropagateRawStatus``), so the InferenceService's own counter is no guard: after a predictor
    restart it runs ahead (a stale ``Ready`` passes), after metadata-only applies it runs behind
    (never ready). KServe copies the InferenceService's annotations onto the predictor's pod
    template and patches it when they change, so our intent hash there says which intent the
    predictor's pods were made from; its own status comes from the Deployment controller."""
    meta = obj.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    if generation < applied_generation:
        return Verdict("waiting", f"generation {applied_generation} not listed yet")
    name = predictor_name(str(meta.get("name")))
    if predictor is None:
        return Verdict("waiting", f"KServe has not created Deployment {name} yet")
    want = (meta.get("annotations") or {}).get(naming.ANNOTATION_INTENT)
    template = ((predictor.get("spec") or {}).get("template") or {}).get("metadata") or {}
    if want and (template.get("annotations") or {}).get(naming.ANNOTATION_INTENT) != want:
        return Verdict("waiting", f"KServe has not applied this intent to Deployment {name} yet")
    rolled = deployment_verdict(predictor, 0, applied=meta)
    if rolled.state != "ready":
        return Verdict(rolled.state, f"Deployment {name}: {rolled.reason}")
    ready = _conditions(obj.get("status") or {}).get("Ready") or {}
    if ready.get("status") == "True":
        return Verdict("ready")
    return Verdict(
        "waiting", f"Ready={ready.get('status', 'Unknown')}: {ready.get('reason') or ''} {ready.get('message') or ''}".strip()
    )


def _pod_available(obj: Mapping[str, Any]) -> bool:
    """Whether a workload has a pod available now, settled or not: a Deployment mid-surge still
    answers from its old pod; one whose only pod restarts in place does not. (An InferenceService:
    its ``Ready`` condition, whatever generation it speaks for.)"""
    status = obj.get("status") or {}
    api = workload_api_of(obj.get("kind"))
    if api is not None and api.status_by_conditions:
        return (_conditions(status).get("Ready") or {}).get("status") == "True"
    return int(status.get("availableReplicas") or 0) >= 1


VERDICTS: Final[dict[str, Callable[[Mapping[str, Any], int], Verdict]]] = {
    "Deployment": deployment_verdict,
    "InferenceService": inference_service_verdict,
}


#: The predictor Deployments of a namespace, by name (KServe copies our labels onto them), or None
#: when this identity may not list Deployments (a KServe-only identity without
#: deploy/kubernetes/optional/kserve-predictor-reader.yaml).
Predictors = Mapping[str, Mapping[str, Any]] | None


def judged(
    kind: str,
    obj: Mapping[str, Any],
    applied_generation: int,
    predictors: Predictors = None,
    *,
    zero_ok: bool = False,
    held: bool = False,
) -> Verdict:
    """The one readiness rule of a workload object, for every reader (the wait, membership,
    ``inspect``, the promotion gate): a Deployment by the rollout rule; an InferenceService by its
    predictor Deployment (:func:`inference_service_by_predictor`) whenever ``predictors`` could be
    read, else by its own status -- the weaker rule, used only where the predictors cannot be read.
    ``zero_ok``: a Deployment whose count is an autoscaler's; ``held``: a surge canary's, its old
    pods held (:func:`deployment_verdict`)."""
    if judged_by_predictor(kind) and predictors is not None:
        name = predictor_name(str((obj.get("metadata") or {}).get("name")))
        return inference_service_by_predictor(obj, applied_generation, predictors.get(name))
    if kind == "Deployment":
        return deployment_verdict(obj, applied_generation, zero_ok=zero_ok, held=held)
    return VERDICTS[kind](obj, applied_generation)


def holds_more(kind: str, obj: Mapping[str, Any], predictors: Predictors = None) -> bool:
    """Whether a workload's pods hold more GPUs than its own count now: its Deployment (an
    InferenceService's predictor, when readable) counts more pods -- running, or terminating --
    than it asks for. A rolling update keeps an old pod beside the new ones until they are
    available, also when the old one is itself still loading (the controller's maxScaledDown): a
    replica not available can hold two pods' GPUs."""
    if judged_by_predictor(kind):
        name = str((obj.get("metadata") or {}).get("name"))
        d = None if predictors is None else predictors.get(predictor_name(name))
        if d is None:
            return False
    else:
        d = obj
    spec, status = d.get("spec") or {}, d.get("status") or {}
    asked = spec.get("replicas")
    return int(status.get("replicas") or 0) + int(status.get("terminatingReplicas") or 0) > (1 if asked is None else int(asked))


def replica_state(kind: str, obj: Mapping[str, Any], predictors: Predictors = None) -> ReplicaState:
    """A workload object's rollout state (:mod:`infercrane.core.plan.states`): draining once it
    is being deleted, settled by the readiness rule (:func:`judged`), available with a pod available
    (an InferenceService's: its predictor's, when readable), else starting."""
    if judged_by_predictor(kind) and predictors is not None:
        predictor = predictors.get(predictor_name(str((obj.get("metadata") or {}).get("name"))))
        available = predictor is not None and _pod_available(predictor)
    else:
        available = _pod_available({"kind": kind, **obj})
    return states.replica_state(
        deleting=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
        settled=judged(kind, obj, 0, predictors).state == "ready",
        available=available,
    )
