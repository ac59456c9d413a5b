"""Evidence per replica from the live cluster: objects, state, field managers, pod placement.

State follows the one readiness rule (:mod:`infercrane.live.status.verdicts`): ``ready`` only when ``status.observedGeneration ==
metadata.generation`` and (Deployment) ``availableReplicas > 0`` / (KServe) condition
``Ready=True``; ``degraded`` when a replica's object set is incomplete; otherwise
``provisioning``. A stale observedGeneration is never ready. Read-only. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.kinds import DRA_READER_FILE, GPU_ALLOCATIONS, LABEL_ALLOCATION, workload_api_of
from infercrane.core.model.replica import Replica
from infercrane.live.client import cluster
from infercrane.live.client.api import Live
from infercrane.live.evidence import said, served
from infercrane.live.status import startup, verdicts, warnings
from infercrane.live.status.pods import POD_READER, claim_devices, list_pods, node_gpus, owned, placed
from infercrane.live.status.readiness import list_predictors


def object_state(kind: str, obj: dict[str, Any], predictors: verdicts.Predictors = None, *, zero_ok: bool = False) -> str:
    """ready / provisioning for one live workload object (Services and claim templates are ready
    when present).

    The same rule the readiness wait uses (:func:`verdicts.judged`: an InferenceService by its
    predictor when ``predictors`` were readable; ``zero_ok``: a count that is an autoscaler's), so
    ``inspect`` and ``deploy`` never disagree."""
    if kind not in verdicts.VERDICTS:
        return "ready"
    return "ready" if verdicts.judged(kind, obj, 0, predictors, zero_ok=zero_ok).state == "ready" else "provisioning"


def replica_state(
    expected: list[str], found: dict[str, dict[str, Any]], predictors: verdicts.Predictors = None, *, zero_ok: bool = False
) -> str:
    if any(kind not in found for kind in expected):
        return "degraded"
    states = [object_state(kind, obj, predictors, zero_ok=zero_ok) for kind, obj in found.items()]
    return "ready" if all(s == "ready" for s in states) else "provisioning"


def managers(obj: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"manager": m.get("manager", ""), "operation": m.get("operation", ""), "subresource": m.get("subresource", "")}
        for m in (obj.get("metadata") or {}).get("managedFields") or []
    ]


def _not_owned(obj: dict[str, Any], key: str, namespace: str, stack_id: str | None) -> list[str]:
    """Why ``obj`` is not this stack's (any stack's, when ``stack_id`` is None)."""
    stack = stack_id or str((obj["metadata"].get("annotations") or {}).get(naming.ANNOTATION_STACK, ""))
    return naming.ownership_mismatches(obj, key=key, namespace=namespace, stack=stack)


def members(
    config: InferCraneConfig,
    workloads: dict[str, dict[str, Any]],
    stack_id: str | None,
    evidence: dict[str, dict[str, Any]] | None = None,
    predictors: verdicts.Predictors = None,
) -> dict[str, list[dict[str, Any]]]:
    """Routing membership as it is now: per endpoint, the replicas whose workload is ready --
    configured or not (one a rollout is taking out still serves) -- with key, model revision and
    intent hash, from the live objects (this stack's when ``stack_id`` is given), and the serving
    evidence taken of each (``evidence``, by key). A replica with evidence against it (serving other
    names, refusing the key) is no member; nor, under ``servingEvidence: require``, one without any."""
    evidence = evidence or {}
    policy = config.kubernetes.serving_evidence
    from infercrane.core.plan.workload import endpoint_of, flag_value, release_of, routing_member

    out: dict[str, list[dict[str, Any]]] = {}
    for name, obj in sorted(workloads.items()):
        key = ((obj.get("metadata") or {}).get("annotations") or {}).get(naming.ANNOTATION_KEY)
        if key is None or _not_owned(obj, key, config.kubernetes.namespace, stack_id):
            continue
        external = key in {r.key for r in config.replicas if r.scaling == "external"}
        if object_state(config.kubernetes.object_kinds[0], obj, predictors, zero_ok=external) != "ready":
            continue
        taken = evidence.get(key)
        if taken is not None and not served.counts(taken["state"], policy):
            continue
        revision = flag_value(obj, "--revision")
        intent = (obj["metadata"].get("annotations") or {}).get(naming.ANNOTATION_INTENT)
        out.setdefault(endpoint_of(obj) or "", []).append(
            routing_member(key, revision=revision, intent=intent, release=release_of(obj), evidence=taken, name=name)
        )
    return out


def inspect(
    config: InferCraneConfig,
    live: Live,
    *,
    stack: str | None = None,
    read_nodes: bool = True,
    pod_reader: Live | None = None,
) -> list[dict[str, Any]]:
    """The evidence records of :func:`inspect_report`."""
    return inspect_report(config, live, stack=stack, read_nodes=read_nodes, pod_reader=pod_reader)[0]


def _object_record(
    kind: str, name: str, obj: dict[str, Any], predictors: dict[str, dict[str, Any]] | None, *, zero_ok: bool
) -> dict[str, Any]:
    """One present, owned object of a replica as ``inspect`` shows it."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return {
        "kind": kind,
        "name": name,
        "present": True,
        "uid": meta.get("uid"),
        "generation": meta.get("generation"),
        "observedGeneration": status.get("observedGeneration"),
        "availableReplicas": status.get("availableReplicas"),
        "readyReplicas": status.get("readyReplicas"),
        # Raw condition metadata as the controller reports it (KServe adds severity and
        # lastTransitionTime; Deployments lastUpdateTime too): nothing dropped.
        "conditions": [dict(c) for c in status.get("conditions") or []],
        "state": object_state(kind, obj, predictors, zero_ok=zero_ok),
        "managers": managers(obj),
    }


def _endpoint_url(config: InferCraneConfig, r: Replica, found: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Where a ready replica answers: its Service's cluster URL, or the workload's own status URL."""
    t, name = config.kubernetes, naming.object_name(r.key)
    if "Service" in found:
        return f"http://{name}.{t.namespace}.svc:{r.port}"
    if t.api.status_by_conditions and t.api.workload.name in found:
        st = found[t.api.workload.name].get("status") or {}
        return ((st.get("address") or {}).get("url")) or st.get("url")
    return None


def inspect_report(
    config: InferCraneConfig,
    live: Live,
    *,
    stack: str | None = None,
    read_nodes: bool = True,
    pod_reader: Live | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """One evidence record per configured replica, from one LIST per kind (never a GET per object).

    Pods are read only when the identity may (the optional pod reader); Events explain a replica
    that is not ready either way. An object with our name but not our exact ownership is shown
    as not owned, never counted as ours. ``pod_reader`` (default ``live``) reads pods and nodes:
    e.g. a separate read-only identity, so the deploying one keeps exactly the shipped Role."""
    t = config.kubernetes
    ns = t.namespace
    kinds = list(t.object_kinds)
    stack_id = naming.stack_id(stack) if stack else None
    listed: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in kinds:
        res = cluster.resource_for({"kind": kind})
        items = live.list(res, labels=naming.managed_selector(), action=f"list {res.__name__}s")
        listed[kind] = {o["metadata"]["name"]: o for o in items}
    predictors = list_predictors(live) if t.api.judged_by_predictor else None
    pod_reader = pod_reader or live
    pods = list_pods(pod_reader, config)
    # With pods read: one LIST of every Event, for each pod's start and the not-ready's warnings.
    events = warnings.list_events(live) if pods else None
    all_starts = startup.starts(events if isinstance(events, list) else [], pods or [])
    node_gpu = node_gpus(pod_reader, t.gpu_product_label) if pods and read_nodes and t.allocation.device_plugin else {}
    allocations = claim_devices(pod_reader, config) if pods else None
    out: list[dict[str, Any]] = []
    for r in config.replicas:
        name = naming.object_name(r.key)
        found: dict[str, dict[str, Any]] = {}
        objects: list[dict[str, Any]] = []
        for kind in kinds:
            obj = listed[kind].get(name)
            foreign = [] if obj is None else _not_owned(obj, r.key, ns, stack_id)
            if obj is None or foreign:
                objects.append({"kind": kind, "name": name, "present": False} | ({"notOwned": foreign} if foreign else {}))
                continue
            found[kind] = obj
            objects.append(_object_record(kind, name, obj, predictors, zero_ok=r.scaling == "external"))
        replica_pods = None if pods is None else [placed(p, node_gpu, allocations, all_starts) for p in owned(config, pods, name)]
        state = replica_state(kinds, found, predictors, zero_ok=r.scaling == "external")
        endpoint = _endpoint_url(config, r, found) if state == "ready" else None
        out.append(
            {
                "key": r.key,
                "name": name,
                "endpointName": r.name,
                "gpu": r.gpu,
                "gpuLabel": t.gpu_product_label,
                "gpuAllocation": t.gpu_allocation,
                "state": state,
                "objects": objects,
                "pods": replica_pods,
                "reasons": [],
                "endpoint": endpoint,
            }
        )
    not_ready = [rec["name"] for rec in out if rec["state"] != "ready" and any(o["present"] for o in rec["objects"])]
    if isinstance(events, str):  # not readable: the note says which right is missing
        said = {n: [events] for n in not_ready if events}
    else:  # without pods read, a LIST of Warnings only, and only when a replica is not ready
        said = warnings.pod_warnings(live, not_ready, events=events)
    for rec in out:
        rec["reasons"] = said.get(rec["name"], [])
    evidence = serving_evidence(config, live, [r for r, rec in zip(config.replicas, out, strict=True) if rec["state"] == "ready"])
    for rec in out:
        rec["evidence"] = evidence.get(rec["key"])
    return out, members(config, listed[kinds[0]], stack_id, evidence, predictors)


def serving_evidence(config: InferCraneConfig, live: Live, ready: list[Any]) -> dict[str, dict[str, Any]]:
    """Each ready replica asked what it serves, all at once (:class:`~infercrane.live.evidence.served.Checker`,
    the key from where the command runs): key -> the evidence's output form."""
    if not ready:
        return {}
    taken = served.Checker.from_env(live, config).check_all(ready)
    return {r.key: e.as_output() for r, e in zip(ready, taken, strict=True)}


def render_text(records: list[dict[str, Any]], endpoints: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """The human-readable form of :func:`inspect_report` (``--json`` prints it as it is)."""
    out = []
    for name, members in sorted((endpoints or {}).items()):
        listed = ", ".join(
            f"{m['key']} ({(m['intentHash'] or '')[:19]}…{', revision ' + m['modelRevision'] if m['modelRevision'] else ''})"
            for m in members
        )
        out.append(f"endpoint {name}: {len(members)} in routing: {listed}")
    for rec in records:
        out.append(f"replica {rec['key']} -> {rec['name']}: {rec['state']}  endpoint {rec['endpoint']}")
        if rec.get("evidence"):
            out.append(f"  {'evidence':<17} {said.line(rec['evidence'])}")
        for o in rec["objects"]:
            if not o["present"]:
                why = f"  NOT OWNED: {'; '.join(o['notOwned'])}" if o.get("notOwned") else "  MISSING"
                out.append(f"  {o['kind']:<17} {o['name']}{why}")
                continue
            mgrs = ", ".join(
                f"{m['manager']} ({m['operation']}{'/' + m['subresource'] if m['subresource'] else ''})" for m in o["managers"]
            )
            if o["kind"] not in verdicts.VERDICTS:  # a Service, a claim template: present is all they say
                extra = ""
            elif (api := workload_api_of(o["kind"])) is not None and api.status_by_conditions:  # KServe's, as it reports them
                conditions = " ".join(f"{c['type']}={c['status']}" for c in o["conditions"])
                extra = f" generation {o['generation']}/{o['observedGeneration']} {conditions}"
            else:
                extra = f" generation {o['generation']}/{o['observedGeneration']} available {o['availableReplicas']}"
            out.append(f"  {o['kind']:<17} {o['name']}{extra}")
            out.append(f"  {'':<17} field managers: {mgrs}")
        for p in rec["pods"] or []:
            if GPU_ALLOCATIONS[rec.get("gpuAllocation") or LABEL_ALLOCATION.name].claims:
                devices = (
                    ", ".join(p["devices"]) if p.get("devices") is not None else f"devices not shown (apply {DRA_READER_FILE})"
                )
                out.append(f"  Pod               {p['name']} {p['phase']} on {p['node']} (claimed: {devices or 'none yet'})")
            else:
                out.append(f"  Pod               {p['name']} {p['phase']} on {p['node']} ({rec['gpuLabel']}={p['nodeGpu']})")
            if p.get("start"):
                out.append(f"  {'':<17} start: {startup.line(p['start'])}")
            out += [f"  {'':<17} {reason}" for reason in p["reasons"]]
        if rec["pods"] is None and rec.get("recordedStart"):
            start = rec["recordedStart"]
            out.append(f"  {'last start':<17} {startup.line(start)} (recorded by the deploy of {start.get('at') or '?'})")
        out += [f"  {'':<17} {reason}" for reason in rec.get("reasons") or []]
    if any(rec["pods"] is None for rec in records):
        out.append(f"pods: not shown (this identity may not read pods; optional: apply {POD_READER})")
    return "\n".join(out)
