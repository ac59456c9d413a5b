"""What runs for each endpoint now, and the rollout from there to the config.

The live replicas of a stack are its workload objects (Deployments, or InferenceServices in KServe
mode) that carry the stack's exact ownership: their key annotation, their endpoint label (objects
rendered before the label existed: the first ``--served-model-name``, which InferCrane always
renders as the endpoint name), whether they are ready by the readiness rule, and the GPUs their
pods request. Read from the preflight's one LIST per kind -- no extra request. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import ConfigError, Problem
from infercrane.core.model.config import KEY_ENDPOINTS, KEY_TARGET, InferCraneConfig
from infercrane.core.model.kinds import DRA_ALLOCATION, RESOURCE_CLAIM_TEMPLATE, WORKLOADS
from infercrane.core.plan import replicas, rollout
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.waves import Rollout
from infercrane.core.plan.workload import claimed_gpus, endpoint_of, gpus_of, pod_of, release_of
from infercrane.core.render import RenderedReplica
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.stack.preflight import Report
from infercrane.live.status.verdicts import Predictors, holds_more, replica_state


def _workloads(
    config: InferCraneConfig,
    live: Mapping[tuple[str, str], Mapping[str, Any]],
    stack_id: str,
    elsewhere: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
) -> dict[str, tuple[str, str, Mapping[str, Any]]]:
    """key -> (namespace, kind, object) of the stack's live workload objects of every workload
    API, in the target namespace (``live``) and in the namespaces the state records them in
    (``elsewhere``, ``(namespace, kind, name) -> object``: after a ``namespace`` switch). An
    object with an owner is a controller's child -- KServe copies our labels and annotations onto
    its predictor Deployment -- never one of ours; a key found in several forms is the target's."""
    t = config.kubernetes
    current = (t.namespace, t.object_kinds[0])
    workload_kinds = set(WORKLOADS)
    found = [(t.namespace, kind, obj) for (kind, _), obj in sorted(live.items())]
    found += [(ns, kind, obj) for (ns, kind, _), obj in sorted((elsewhere or {}).items())]
    out: dict[str, tuple[str, str, Mapping[str, Any]]] = {}
    for ns, kind, obj in found:
        meta = obj.get("metadata") or {}
        if kind not in workload_kinds or naming.not_owned(dict(obj), namespace=ns, stack=stack_id):
            continue
        key = str((meta.get("annotations") or {})[naming.ANNOTATION_KEY])
        if key not in out or (ns, kind) == current:
            out[key] = (ns, kind, obj)
    return out


def live_replicas(
    config: InferCraneConfig,
    live: Mapping[tuple[str, str], Mapping[str, Any]],
    stack_id: str,
    elsewhere: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
    predictors: Predictors = None,
) -> list[replicas.LiveReplica]:
    """The stack's live replicas, in name order: owned workload objects only; KServe's judged by
    their ``predictors`` when readable (verdicts.judged)."""
    t = config.kubernetes
    out = []
    found = _workloads(config, live, stack_id, elsewhere)
    templates = {name: obj for (kind, name), obj in live.items() if kind == RESOURCE_CLAIM_TEMPLATE.name}
    for key, (_ns, kind, obj) in sorted(found.items(), key=lambda kv: str(kv[1][2]["metadata"]["name"])):
        gpus, product = gpus_of(obj, t.gpu_resource), str((pod_of(obj).get("nodeSelector") or {}).get(t.gpu_product_label) or "")
        if not gpus:  # its GPUs are claimed (DRA): what its templates request, from the devices' pool
            gpus, claimed = claimed_gpus(obj, templates, t.gpu_product_names)
            product = DRA_ALLOCATION.pool(claimed)
        out.append(
            replicas.LiveReplica(
                key=key,
                endpoint=endpoint_of(obj) or "",
                state=replica_state(kind, obj, predictors),
                gpus=gpus,
                surplus=holds_more(kind, obj, predictors),
                product=product,
                release=release_of(obj),
            )
        )
    return out


def moved(
    config: InferCraneConfig,
    live: Mapping[tuple[str, str], Mapping[str, Any]],
    stack_id: str,
    elsewhere: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
) -> set[str]:
    """Keys whose live workload is of another form than the config renders: another kind (a
    ``workloadApi`` switch) or another namespace (a ``namespace`` switch)."""
    t = config.kubernetes
    current = (t.namespace, t.object_kinds[0])
    return {key for key, (ns, kind, _) in _workloads(config, live, stack_id, elsewhere).items() if (ns, kind) != current}


def plan_rollout(
    config: InferCraneConfig,
    rendered: Sequence[RenderedReplica],
    report: Report,
    stack_id: str,
    elsewhere: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
    unproven: frozenset[str] = frozenset(),
    started: Mapping[str, Gpus] | None = None,
) -> Rollout:
    """The rollout from what runs (the preflight's view, and ``elsewhere``) to ``rendered``;
    ``unproven``: releases a canary rejected that are retried (their replicas prove nothing);
    ``started``: each endpoint's GPUs at the change's start, as the stack recorded them."""
    moving = moved(config, report.live, stack_id, elsewhere)
    targets = [
        replicas.Target(
            key=r.replica.key,
            endpoint=r.replica.name,
            gpus=r.replica.gpu_count,
            restarts=r.name in report.restarts,
            moves=r.replica.key in moving,
            product=config.kubernetes.allocation.pool(r.replica.gpu),
            release=release_of(next(m for m in r.manifests if m["kind"] in WORKLOADS)),
        )
        for r in rendered
    ]
    planned = rollout.plan(
        live_replicas(config, report.live, stack_id, elsewhere, report.predictors),
        targets,
        config.rollout_for,
        max_extra_gpus=config.kubernetes.rollout.max_extra_gpus,
        unproven=unproven,
        started=started,
    )
    never = planned.never_lent()
    if never:
        raise ConfigError(
            [
                Problem(
                    f"{KEY_TARGET}.rollout.maxExtraGpus",
                    f"is {planned.max_extra_gpus}, and {'; '.join(never)}: that stage could never start",
                    "raise maxExtraGpus to what the widest stage borrows, or lower that endpoint's maxSurge "
                    "(each surge borrows maxSurge replicas' GPUs)",
                )
            ],
            "the stack file",
        )
    required = [e for e in planned.endpoints if e.no_canary and e.canary_policy is not None and e.canary_policy.required]
    if required:
        raise ConfigError(
            [
                Problem(
                    f"{KEY_ENDPOINTS}.{e.endpoint}.rollout.canary.required"
                    if e.endpoint in config.endpoints and config.endpoints[e.endpoint].rollout.canary is not None
                    else f"{KEY_TARGET}.rollout.canary.required",
                    f"is true, and endpoint {e.endpoint}'s release has no canary: {e.no_canary}"
                    + (f" (its {len(e.waves)} wave(s) change every replica serving now)" if e.ready_before else ""),
                    "give the endpoint more replicas than canary.replicas (the others stay on the old release as "
                    "the baseline while the canary bakes), or set required: false for this change"
                    if e.ready_before
                    else "wait until its replicas serve the old release again (or deploy the previous config), then "
                    "deploy this one; or set required: false for this change",
                )
                for e in required
            ],
            "the stack file",
        )
    return planned


def recorded_elsewhere(
    config: InferCraneConfig, namespaces: Iterable[str], live: Live
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The workload objects in ``namespaces`` (where the state records this stack's objects, other
    than the target's: a ``namespace`` switch), ``(namespace, kind, name) -> object``, one LIST per
    namespace and workload kind. A namespace this identity may not list fails: its replicas still
    run and hold GPUs, and a rollout that cannot count them would start every replica beside them."""
    from infercrane.core.errors import ClusterError

    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    kinds = set(WORKLOADS)
    others = sorted(set(namespaces) - {config.kubernetes.namespace})
    for ns in others:
        try:
            listed = live.at(ns).by_name(config.kubernetes.object_kinds[:1], optional=kinds)
        except failures.Forbidden as exc:
            raise ClusterError(
                f"the state records this stack's replicas in namespace {ns!r}, which this identity cannot list: {exc}",
                fix=f"grant the deploying identity the shipped Role in {ns!r} too (it deletes them there), then deploy again",
            ) from exc
        out |= {(ns, kind, name): obj for (kind, name), obj in listed.items()}
    return out
