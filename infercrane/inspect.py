"""Evidence per replica from the live cluster: objects, state, field managers, pod placement.

State follows the DESIGN.md rule: ``ready`` only when ``status.observedGeneration ==
metadata.generation`` and (Deployment) ``availableReplicas > 0`` / (KServe) condition
``Ready=True``; ``degraded`` when a replica's object set is incomplete; otherwise
``provisioning``. A stale observedGeneration is never ready. Read-only. Live-cluster layer.
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event, Node, Pod, Service

from infercrane import naming
from infercrane.cluster import InferenceService
from infercrane.config import InferCraneConfig


def _dict(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def object_state(kind: str, obj: dict[str, Any]) -> str:
    """ready / provisioning for one live workload object (Services are ready when present)."""
    if kind == "Service":
        return "ready"
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if status.get("observedGeneration") != meta.get("generation"):
        return "provisioning"
    if kind == "Deployment":
        return "ready" if (status.get("availableReplicas") or 0) > 0 else "provisioning"
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return "ready" if conditions.get("Ready") == "True" else "provisioning"


def replica_state(expected: list[str], found: dict[str, dict[str, Any]]) -> str:
    if any(kind not in found for kind in expected):
        return "degraded"
    states = [object_state(kind, obj) for kind, obj in found.items()]
    return "ready" if all(s == "ready" for s in states) else "provisioning"


def managers(obj: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"manager": m.get("manager", ""), "operation": m.get("operation", ""), "subresource": m.get("subresource", "")}
        for m in (obj.get("metadata") or {}).get("managedFields") or []
    ]


def pending_reasons(client: Client, pod: dict[str, Any], namespace: str) -> list[str]:
    """Why a pod is not running: the scheduler's condition message and recent warning events."""
    reasons = []
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            reasons.append(
                f"FailedScheduling: {c.get('message')}"
                if c.get("reason") == "Unschedulable"
                else f"{c.get('reason')}: {c.get('message')}"
            )
    try:
        name = pod["metadata"]["name"]
        for ev in client.list(Event, namespace=namespace, fields={"involvedObject.name": name}):
            e = _dict(ev)
            if e.get("type") == "Warning":
                msg = f"{e.get('reason')}: {e.get('message')}"
                if msg not in reasons:
                    reasons.append(msg)
    except ApiError:
        pass
    return reasons


def inspect(config: InferCraneConfig, client: Client, *, read_nodes: bool = True) -> list[dict[str, Any]]:
    """One evidence record per configured replica."""
    t = config.kubernetes
    ns = t.namespace
    kinds = ["InferenceService"] if t.workload_api == "kserve" else ["Deployment", "Service"]
    res: dict[str, Any] = {"Deployment": Deployment, "Service": Service, "InferenceService": InferenceService}
    node_labels: dict[str, str] = {}
    out = []
    for r in config.replicas:
        name = naming.object_name(r.key)
        found: dict[str, dict[str, Any]] = {}
        objects = []
        for kind in kinds:
            try:
                obj = _dict(client.get(res[kind], name, namespace=ns))
            except ApiError as exc:
                if exc.status.code == 404:
                    objects.append({"kind": kind, "name": name, "present": False})
                    continue
                raise
            found[kind] = obj
            meta, status = obj.get("metadata") or {}, obj.get("status") or {}
            objects.append(
                {
                    "kind": kind,
                    "name": name,
                    "present": True,
                    "uid": meta.get("uid"),
                    "generation": meta.get("generation"),
                    "observedGeneration": status.get("observedGeneration"),
                    "availableReplicas": status.get("availableReplicas"),
                    "readyReplicas": status.get("readyReplicas"),
                    "conditions": [
                        {"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason")}
                        for c in status.get("conditions") or []
                    ],
                    "state": object_state(kind, obj),
                    "managers": managers(obj),
                }
            )
        pods = []
        for p in client.list(Pod, namespace=ns, labels={naming.LABEL_INSTANCE: name}):
            pod = _dict(p)
            node = (pod.get("spec") or {}).get("nodeName")
            if node and read_nodes and node not in node_labels:
                try:
                    node_labels[node] = _dict(client.get(Node, node))["metadata"]["labels"].get(t.gpu_product_label, "")
                except ApiError:
                    node_labels[node] = "?"
            phase = (pod.get("status") or {}).get("phase")
            pods.append(
                {
                    "name": pod["metadata"]["name"],
                    "phase": phase,
                    "node": node,
                    "nodeGpu": node_labels.get(node or "", None),
                    "reasons": pending_reasons(client, pod, ns) if phase == "Pending" else [],
                }
            )
        endpoint = None
        if "Service" in found:
            endpoint = f"http://{name}.{ns}.svc:{r.port}"
        elif "InferenceService" in found:
            st = found["InferenceService"].get("status") or {}
            endpoint = ((st.get("address") or {}).get("url")) or st.get("url")
        out.append(
            {
                "key": r.key,
                "name": name,
                "endpointName": r.name,
                "gpu": r.gpu,
                "gpuLabel": t.gpu_product_label,
                "state": replica_state(kinds, found),
                "objects": objects,
                "pods": pods,
                "endpoint": endpoint,
            }
        )
    return out


def render_text(records: list[dict[str, Any]]) -> str:
    """The human-readable form of :func:`inspect`'s records (``--json`` prints them as they are)."""
    out = []
    for rec in records:
        out.append(f"replica {rec['key']} -> {rec['name']}: {rec['state']}  endpoint {rec['endpoint']}")
        for o in rec["objects"]:
            if not o["present"]:
                out.append(f"  {o['kind']:<17} {o['name']}  MISSING")
                continue
            mgrs = ", ".join(
                f"{m['manager']} ({m['operation']}{'/' + m['subresource'] if m['subresource'] else ''})" for m in o["managers"]
            )
            extra = (
                ""
                if o["kind"] == "Service"
                else (f" generation {o['generation']}/{o['observedGeneration']} available {o['availableReplicas']}")
            )
            out.append(f"  {o['kind']:<17} {o['name']}{extra}")
            out.append(f"  {'':<17} field managers: {mgrs}")
        for p in rec["pods"]:
            out.append(f"  Pod               {p['name']} {p['phase']} on {p['node']} ({rec['gpuLabel']}={p['nodeGpu']})")
            out += [f"  {'':<17} {reason}" for reason in p["reasons"]]
    return "\n".join(out)
