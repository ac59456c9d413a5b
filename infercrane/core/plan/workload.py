"""Reading a workload object, rendered or live: its containers (a Deployment's pod template, an
InferenceService's predictor), the engine flags InferCrane renders, the endpoint it serves and the
GPUs it requests -- by extended resource and product label, or by the claim templates it names
(``gpuAllocation: dra``) -- and what a change of one does: other pods, other claimed devices.
Pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercrane.core import naming
from infercrane.core.model import gpu
from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE
from infercrane.core.plan.fields import NOT_A_POD_CHANGE, POD_SPEC_PATH


def pod_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod part of a workload: a Deployment's pod template spec, an InferenceService's predictor."""
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") if "template" in spec else spec.get("predictor")
    return pod or {}


def containers_of(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers of a workload: a Deployment's pod template, an InferenceService's predictor."""
    return list(pod_of(obj).get("containers") or [])


def flag_value(obj: Mapping[str, Any], flag: str) -> str | None:
    """The value after ``flag`` in the workload's first container's args (as InferCrane renders them)."""
    for c in containers_of(obj)[:1]:
        args = list(c.get("args") or [])
        if flag in args[:-1]:
            return str(args[args.index(flag) + 1])
    return None


def endpoint_of(obj: Mapping[str, Any]) -> str | None:
    """The endpoint an object serves: its endpoint label, else its first served model name."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(naming.LABEL_ENDPOINT):
        return str(labels[naming.LABEL_ENDPOINT])
    return flag_value(obj, "--served-model-name")


def gpus_of(obj: Mapping[str, Any], gpu_resource: str) -> int:
    total = 0
    for c in containers_of(obj):
        value = ((c.get("resources") or {}).get("requests") or {}).get(gpu_resource)
        try:
            total += int(str(value)) if value is not None else 0
        except ValueError:
            pass
    return total


def claimed_gpus(
    obj: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]], product_names: Mapping[str, str] = gpu.NO_NAMES
) -> tuple[int, str]:
    """The GPUs a workload's pods claim through its claim templates (``templates``: name ->
    template, live or rendered): the devices they request, and the product's label value when one
    known product is selected (else "")."""
    count, products = 0, set()
    for ref in pod_of(obj).get("resourceClaims") or []:
        for r in gpu.requests_of(templates.get(str(ref.get("resourceClaimTemplateName")))):
            exactly = r.get("exactly") or {}
            count += int(exactly.get("count") or 0)
            for sel in exactly.get("selectors") or []:
                name = gpu.selected_product(str((sel.get("cel") or {}).get("expression", "")))
                products.add(gpu.label_of(name, product_names) if name else None)
    return count, (next(iter(products)) or "") if len(products) == 1 else ""


def release_of(obj: Mapping[str, Any]) -> str:
    """What a workload's pods run, as one hash: each container's image, command, args and env --
    the same for two replicas of one release whatever their keys, names or GPUs. A canary
    compares releases (core.plan.rollout): one already available needs none."""
    runs = [
        {
            "image": c.get("image"),
            "command": c.get("command"),
            "args": c.get("args"),
            "env": [_env(e) for e in c.get("env") or []],
        }
        for c in containers_of(obj)
    ]
    return naming.intent_hash({"containers": runs}) if runs else ""


def _env(var: Mapping[str, Any]) -> dict[str, Any]:
    """An env var as rendered: the API server's defaults (a fieldRef's apiVersion) left out."""
    source = {
        kind: {k: v for k, v in ref.items() if not (kind == "fieldRef" and k == "apiVersion")}
        for kind, ref in (var.get("valueFrom") or {}).items()
        if isinstance(ref, Mapping)
    }
    return {"name": var.get("name"), "value": var.get("value"), "valueFrom": source or None}


def restarts_pods(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether applying turns ``before`` (live) into ``after`` (the dry run) with other pods."""
    part = POD_SPEC_PATH.get(str(before.get("kind")))
    if part is None:
        return False

    def pods(obj: Mapping[str, Any]) -> Any:
        value = (obj.get("spec") or {}).get(part)
        return {k: v for k, v in value.items() if k not in NOT_A_POD_CHANGE} if isinstance(value, dict) else value

    return bool(pods(before) != pods(after))


def claims_differ(live: Mapping[str, Any], rendered: Mapping[str, Any]) -> bool:
    """Does a live ResourceClaimTemplate claim other devices than the rendered one? (Compared by what
    is claimed -- each request's device class, allocation mode, count and selectors -- not by the
    fields the API server defaults.)"""
    if rendered.get("kind") != RESOURCE_CLAIM_TEMPLATE.name:
        return False

    def claimed(obj: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (
                where,
                r.get("deviceClassName"),
                r.get("allocationMode", "ExactCount"),
                r.get("count"),
                [(s.get("cel") or {}).get("expression") for s in r.get("selectors") or []],
            )
            for where, r in gpu.device_requests({"kind": RESOURCE_CLAIM_TEMPLATE.name, **obj})
        ]

    return claimed(live) != claimed(rendered)


def routing_member(
    key: str, *, revision: str | None, intent: str | None, release: str | None, evidence: Any, name: str | None = None
) -> dict[str, Any]:
    """One replica of an endpoint's routing membership, as the stack's outputs (from what a run
    registered) and ``inspect`` (from the live objects, with its object's ``name``) both give it:
    its key, model revision, intent hash, the release its pods run and its serving evidence."""
    return (
        {"key": key}
        | ({"name": name} if name is not None else {})
        | {
            "modelRevision": revision,
            "intentHash": intent,
            "release": release,
            "evidence": evidence,
        }
    )
