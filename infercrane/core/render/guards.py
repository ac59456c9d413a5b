"""Checks on rendered manifests: defence in depth behind config validation, and the one home of
the rules the policy pack (``policy/``) enforces on any Pulumi program.

Each rule has a name (the policy's), a description and a fix. :func:`violations` applies to one
manifest the rules that hold for every workload -- a digest-pinned image, a known GPU product
selected for a pod that requests GPUs with limits = requests (or, by DRA, a claim template that
selects one known product by its productName), no patch-force, no secret-looking
literal in the environment, no ``--api-key`` in the arguments -- and, to an object that carries
InferCrane's ownership (ours, or claiming to be), the ownership rules too: exact metadata and field
manager, a selector on the instance label only, a memory limit with a memory request, read-only claims.
:func:`check` is the program's view: every rule, every object treated as ours. Never raises. Pure core.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.model import gpu, image
from infercrane.core.model.engines import WORKER_KEY_REFERENCE
from infercrane.core.model.kinds import workload_api_of
from infercrane.core.render.volumes import COMPILE_VOLUME


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    fix: str
    ours_only: bool = False  # applies only to objects carrying InferCrane's ownership


RULES: Final = {
    r.name: r
    for r in (
        Rule("image-digest", "Container images are pinned by digest.", f"pin the image by digest: {image.EXAMPLE}"),
        Rule(
            "gpu-product-selector",
            "A pod that requests GPUs selects one known GPU product by its node label.",
            "set nodeSelector <gpu product label>: <value your nodes carry> (InferCrane's GPU table); never guess or substitute",
        ),
        Rule("gpu-limits", "GPU limits equal GPU requests.", "set the GPU resource in limits and requests to the same count"),
        Rule(
            "gpu-claim-product",
            "A claim template's GPU request selects one known GPU product by its DRA productName, a pod's GPU claim names a template.",
            'select device.attributes["gpu.nvidia.com"].productName == "<productName>" (InferCrane\'s GPU table) with '
            "an exact count; never guess or substitute",
        ),
        Rule(
            "no-patch-force",
            "No field-manager conflict is ever forced (no pulumi.com/patchForce, no provider enablePatchForce).",
            "remove pulumi.com/patchForce / enablePatchForce; resolve the conflict with the other manager instead",
        ),
        Rule(
            "no-secret-literals",
            "Secrets reach containers by secretKeyRef, never as literal values or --api-key arguments.",
            "use valueFrom.secretKeyRef for the variable; pass the API key through the environment, not --api-key",
        ),
        Rule(
            "infercrane-ownership",
            "Objects carrying InferCrane's labels have its exact ownership metadata, field manager and selector.",
            "render the object with InferCrane (`infercrane render`), or remove InferCrane's labels from it",
            ours_only=True,
        ),
        Rule(
            "infercrane-pod-contract",
            "InferCrane's pods limit the memory they request (its /dev/shm included) and mount claims read-only.",
            "render the object with InferCrane (`infercrane render`)",
            ours_only=True,
        ),
    )
}


@dataclass(frozen=True)
class Violation:
    rule: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def pod_spec(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    api = workload_api_of(manifest.get("kind"))
    if api is None:
        return None
    spec = manifest.get("spec") or {}
    for step in api.pod_spec:
        spec = spec.get(step) or {}
    return dict(spec)


def claims_ours(manifest: Mapping[str, Any]) -> bool:
    """Whether an object carries InferCrane's ownership (label or annotation): then it must be exact."""
    meta = manifest.get("metadata") or {}
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    return labels.get(naming.LABEL_MANAGED_BY) == naming.MANAGED_BY or any(k.startswith("infercrane.dev/") for k in ann)


@dataclass(frozen=True)
class Gpus:
    """How a cluster names its GPUs: the extended resource and product label (device plugin), the
    DeviceClass (DRA), and the products a stack adds to the table."""

    resource: str = "nvidia.com/gpu"
    label: str = "nvidia.com/gpu.product"
    products: tuple[str, ...] = ()
    device_class: str = gpu.DRA_DRIVER
    product_names: Mapping[str, str] = field(default_factory=dict)


def violations(manifest: Mapping[str, Any], gpus: Gpus, *, ours: bool | None = None) -> list[Violation]:
    """Every rule ``manifest`` breaks. ``ours``: apply the ownership rules (default: when it claims
    InferCrane's ownership, :func:`claims_ours`)."""
    meta = manifest.get("metadata") or {}
    where = f"{manifest.get('kind')}/{meta.get('name')}"
    ours = claims_ours(manifest) if ours is None else ours
    out = [Violation(rule, where, what) for rule, what in _workload(manifest, gpus, ours)]
    out += [Violation("gpu-claim-product", where, what) for what in _claim_template(manifest, gpus, ours)]
    if ours:
        out += [Violation("infercrane-ownership", where, what) for what in _ownership(manifest)]
        out += [Violation("infercrane-pod-contract", where, what) for what in _pod_contract(manifest)]
    return out


def _workload(m: Mapping[str, Any], gpus: Gpus, ours: bool) -> Iterator[tuple[str, str]]:
    """The rules for any workload; ``ours``: its pods always request GPUs (by resource, or by a claim)."""
    gpu_resource, gpu_label, products = gpus.resource, gpus.label, gpus.products + tuple(gpus.product_names)
    ann = (m.get("metadata") or {}).get("annotations") or {}
    if str(ann.get(naming.PULUMI_PATCH_FORCE, "")).lower() not in ("", "false"):
        yield "no-patch-force", f"{naming.PULUMI_PATCH_FORCE} is set; InferCrane never forces a conflict"
    pod = pod_spec(m)
    if pod is None:
        return
    wants_gpu = False
    pod_claims = {str(x.get("name")): x for x in pod.get("resourceClaims") or []}
    for c in pod.get("containers") or []:
        cname = f"container {c.get('name')}"
        problem = image.digest_problem(str(c.get("image", "")))
        if problem:
            yield "image-digest", f"{cname}: {problem}"
        res = c.get("resources") or {}
        lim, req = (res.get("limits") or {}), (res.get("requests") or {})
        claims = [str(x.get("name")) for x in res.get("claims") or []]
        if claims and gpu_resource not in lim and gpu_resource not in req:
            # GPUs by DRA: the claim's template selects the product (its own rule); ours name one.
            for name in claims:
                if ours and not (pod_claims.get(name) or {}).get("resourceClaimTemplateName"):
                    yield "gpu-claim-product", f"{cname}: claim {name!r} names no ResourceClaimTemplate of the pod"
        elif gpu_resource in lim or gpu_resource in req or ours:
            wants_gpu = True
            if gpu_resource not in lim or lim.get(gpu_resource) != req.get(gpu_resource):
                yield "gpu-limits", f"{cname}: {gpu_resource} limits must equal requests and be set"
        if _key_in_args(c):
            yield "no-secret-literals", f"{cname}: --api-key in args would expose the worker key"
        for e in c.get("env") or []:
            name = str(e.get("name", ""))
            if "value" in e and (name in naming.SECRET_ENV or naming.SECRET_NAME_RE.search(name)):
                yield "no-secret-literals", f"{cname}: {name} must come from a secretKeyRef, not a literal value"
    if wants_gpu:
        value = (pod.get("nodeSelector") or {}).get(gpu_label)
        if value is None:
            yield "gpu-product-selector", f"requests {gpu_resource} but nodeSelector {gpu_label} is missing"
        elif problem := gpu.gpu_problem(str(value), products):
            yield "gpu-product-selector", f"nodeSelector {gpu_label}: {problem}"
        for other in _affinity_products(pod, gpu_label):
            if other != value:
                yield "gpu-product-selector", f"node affinity asks {gpu_label} {other!r} besides nodeSelector {value!r}"


def _affinity_products(pod: Mapping[str, Any], gpu_label: str) -> Iterator[str]:
    required = (
        ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == gpu_label and expr.get("operator") == "In":
                yield from (str(v) for v in expr.get("values") or [])


def _ownership(m: Mapping[str, Any]) -> Iterator[str]:
    meta = m.get("metadata") or {}
    labels = meta.get("labels") or {}
    ann = meta.get("annotations") or {}
    key = ann.get(naming.ANNOTATION_KEY)
    if not isinstance(key, str):
        yield f"annotation {naming.ANNOTATION_KEY} is missing"
    else:
        for k, v in naming.labels(key).items():
            if labels.get(k) != v:
                yield f"label {k} is {labels.get(k)!r}, expected {v!r}"
        if meta.get("name") != naming.object_name(key):
            yield "name does not derive from the replica key"
    for k in (naming.ANNOTATION_CONTRACT, naming.ANNOTATION_INTENT, naming.ANNOTATION_STACK):
        if k not in ann:
            yield f"annotation {k} is missing"
    if ann.get(naming.PULUMI_FIELD_MANAGER) != naming.FIELD_MANAGER:
        yield f"field manager must be {naming.FIELD_MANAGER} ({naming.PULUMI_FIELD_MANAGER})"
    spec = m.get("spec") or {}
    instance_only = {naming.LABEL_INSTANCE: labels.get(naming.LABEL_INSTANCE)}
    if m.get("kind") == "Deployment":
        sel = (spec.get("selector") or {}).get("matchLabels")
        if sel != instance_only or (spec.get("selector") or {}).get("matchExpressions"):
            yield f"selector must be the instance label only, got {sel!r}"
    if m.get("kind") == "Service" and spec.get("selector") != instance_only:
        yield f"selector must be the instance label only, got {spec.get('selector')!r}"


def _pod_contract(m: Mapping[str, Any]) -> Iterator[str]:
    pod = pod_spec(m)
    if pod is None:
        return
    mounts = [mt for c in pod.get("containers") or [] for mt in c.get("volumeMounts") or []]
    for v in pod.get("volumes") or []:
        claim, name = v.get("persistentVolumeClaim"), v.get("name")
        if claim is not None and claim.get("readOnly") is not True:
            if name != COMPILE_VOLUME:
                yield f"volume {name} mounts claim {claim.get('claimName')} writable; a model cache is read-only"
            elif any(mt.get("name") == name and not mt.get("subPath") for mt in mounts):
                yield f"volume {name} is mounted whole; a compile cache is mounted at its key's own directory (subPath)"
        reference = (v.get("image") or {}).get("reference")
        if v.get("image") is not None and (not reference or image.digest_problem(str(reference))):
            yield f"volume {name}: model {image.digest_problem(str(reference or ''))}"
    for c in pod.get("containers") or []:
        res = c.get("resources") or {}
        if "memory" in (res.get("requests") or {}) and "memory" not in (res.get("limits") or {}):
            yield f"container {c.get('name')}: a memory request needs a memory limit (request + /dev/shm, which is charged to it)"


def _claim_template(m: Mapping[str, Any], gpus: Gpus, ours: bool) -> Iterator[str]:
    """A ResourceClaimTemplate's or ResourceClaim's requests of the GPU DeviceClass (every request,
    when ours) -- in any version's shape, each ``firstAvailable`` alternative too: one exact count of
    devices whose productName is a known product's, by one selector."""
    if m.get("kind") not in ("ResourceClaimTemplate", "ResourceClaim"):
        return
    known = gpu.product_names(gpus.product_names)
    for where, exactly in gpu.device_requests(m):
        if exactly.get("deviceClassName") != gpus.device_class and not ours:
            continue
        if exactly.get("deviceClassName") != gpus.device_class:
            yield f"{where}: deviceClassName is {exactly.get('deviceClassName')!r}, expected {gpus.device_class!r}"
        selectors = exactly.get("selectors") or []
        names = [gpu.selected_product(str((s.get("cel") or {}).get("expression", ""))) for s in selectors]
        if len(selectors) != 1 or names[0] is None:
            yield f"{where}: selects no GPU product (one selector naming its productName is needed)"
        elif names[0] not in known.values():
            yield f"{where}: productName {names[0]!r} is not in the GPU table (known: {', '.join(known.values())})"
        if exactly.get("allocationMode", "ExactCount") != "ExactCount" or not exactly.get("count"):
            yield f"{where}: needs an exact count of GPUs (allocationMode ExactCount, count >= 1)"


def check(manifest: dict[str, Any], gpus: Gpus) -> list[str]:
    """Every rule ``manifest`` (rendered by InferCrane: all rules apply) breaks, as ``Kind/name: what``."""
    return [str(v) for v in violations(manifest, gpus, ours=True)]


def check_all(manifests: list[dict[str, Any]], gpus: Gpus) -> list[str]:
    out: list[str] = []
    for m in manifests:
        out += check(m, gpus)
    return out


def _key_in_args(container: Mapping[str, Any]) -> bool:
    """Whether the args carry an ``--api-key`` other than exactly the kubelet's reference to the
    worker key's variable, that variable coming from a secretKeyRef in this container."""
    args = [str(a) for a in container.get("args") or []]
    from_secret = any(
        e.get("name") == naming.WORKER_KEY_ENV and "secretKeyRef" in (e.get("valueFrom") or {})
        for e in container.get("env") or []
    )
    for i, a in enumerate(args):
        flag, eq, inline = a.partition("=")
        if flag != "--api-key":
            continue
        value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
        if not (from_secret and value == WORKER_KEY_REFERENCE):
            return True
    return False
