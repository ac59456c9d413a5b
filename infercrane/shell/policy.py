"""The policy pack: InferCrane's guards as mandatory Pulumi policies for *any* program.

``pulumi preview --policy-pack policy`` runs them on every Deployment, Service, KServe
InferenceService and DRA ResourceClaimTemplate or ResourceClaim (any version) a program registers -- ours, a teammate's plain pulumi-kubernetes program, a YAML
``ConfigFile`` -- and on every Kubernetes provider. One policy per rule of
:mod:`infercrane.core.render.guards` (the one home of each rule: this module maps resources to manifests
and reports, it does not judge). Each violation names the rule, the object and the fix; Pulumi
adds the resource URN. Pulumi shell (pulumi-policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from infercrane.core.errors import with_fix
from infercrane.core.render import guards

# Pulumi type token -> Kubernetes kind of the objects the rules judge.
KINDS: Final = {
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:core/v1:Service": "Service",
    "kubernetes:serving.kserve.io/v1beta1:InferenceService": "InferenceService",
    # DRA's claims and claim templates of every version that has device requests (the SDK's classes
    # are v1alpha3..v1beta2; v1 comes as a CustomResource): a GPU request is judged whatever its shape.
    **{
        f"kubernetes:resource.k8s.io/{version}:{kind}": kind
        for version in ("v1alpha3", "v1beta1", "v1beta2", "v1")
        for kind in ("ResourceClaimTemplate", "ResourceClaim")
    },
}
PROVIDER: Final = "pulumi:providers:kubernetes"
_GPUS: Final = guards.Gpus()
DEFAULTS: Final = {
    "gpuResource": _GPUS.resource,
    "gpuProductLabel": _GPUS.label,
    "gpuProducts": [],
    "gpuDeviceClass": _GPUS.device_class,
    "gpuProductNames": {},
}
CONFIG: Final = PolicyConfigSchema(
    properties={
        "gpuResource": {"type": "string", "default": DEFAULTS["gpuResource"]},
        "gpuProductLabel": {"type": "string", "default": DEFAULTS["gpuProductLabel"]},
        "gpuProducts": {"type": "array", "items": {"type": "string"}, "default": DEFAULTS["gpuProducts"]},
        "gpuDeviceClass": {"type": "string", "default": DEFAULTS["gpuDeviceClass"]},
        "gpuProductNames": {"type": "object", "additionalProperties": {"type": "string"}, "default": {}},
    }
)


def plain(value: Any) -> Any:
    """pulumi-policy's read-only proxies as plain dicts and lists (what the guards compare and print)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or (
        hasattr(value, "__iter__") and hasattr(value, "__getitem__") and not isinstance(value, str | bytes)
    ):
        return [plain(v) for v in value]
    return value


def manifest_of(resource_type: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Kubernetes object a resource registers (its inputs carry the wire names), or None."""
    kind = KINDS.get(resource_type)
    if kind is None:
        return None
    return {"kind": kind, "metadata": plain(props.get("metadata") or {}), "spec": plain(props.get("spec") or {})}


def judge(rule: str, resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """What ``rule`` finds wrong with one resource: a message per violation, with the fix."""
    fix = guards.RULES[rule].fix
    if resource_type == PROVIDER:
        if rule == "no-patch-force" and props.get("enablePatchForce") in (True, "true"):
            return [with_fix("the Kubernetes provider sets enablePatchForce; InferCrane never forces a conflict", fix)]
        return []
    manifest = manifest_of(resource_type, props)
    if manifest is None:
        return []
    gpus = guards.Gpus(
        resource=str(config.get("gpuResource") or _GPUS.resource),
        label=str(config.get("gpuProductLabel") or _GPUS.label),
        products=tuple(config.get("gpuProducts") or ()),
        device_class=str(config.get("gpuDeviceClass") or _GPUS.device_class),
        product_names={str(k): str(v) for k, v in (config.get("gpuProductNames") or {}).items()},
    )
    found = guards.violations(manifest, gpus)
    return [with_fix(str(v), fix) for v in found if v.rule == rule]


def _validate(rule: str) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for message in judge(rule, args.resource_type, args.props, args.get_config() or {}):
            report(message, None)

    return validate


def pack() -> PolicyPack:
    """The pack, every policy mandatory: a violation blocks preview and up."""
    policies: list[Policy] = [
        ResourceValidationPolicy(name=r.name, description=r.description, validate=_validate(r.name), config_schema=CONFIG)
        for r in guards.RULES.values()
    ]
    return PolicyPack(name="infercrane", enforcement_level=EnforcementLevel.MANDATORY, policies=policies)
