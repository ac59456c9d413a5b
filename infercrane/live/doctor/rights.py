"""The rights ``doctor`` reviews, one SelfSubjectAccessReview each, in the stack's namespace: the
seed's (a command fails without them), the shipped Role's extra reads (a warning), the optional
reads (what each gives, what is missing without, the file that grants it), the opt-in prefetcher
of warm-first, and the read-only plan's identity (its reads, and no write). Live-cluster layer.
"""

from __future__ import annotations

from typing import Final

from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview

from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.kinds import (
    GPU_ALLOCATIONS,
    LABEL_ALLOCATION,
    WORKLOAD_APIS,
    bind_fix,
)
from infercrane.live.client.api import Live
from infercrane.live.doctor.check import FAIL, OPTIONAL, PASS, WARN, Check
from infercrane.live.status.prefetch import PREFETCHER

SEED_VERBS: Final = ("get", "list", "create", "patch", "delete")
# The shipped Role of each workload API (deploy/kubernetes/{base,kserve}/provider-rbac.yaml).
SHIPPED_ROLES: Final = {a.name: a.role_name for a in WORKLOAD_APIS.values()}
# Optional reads, by resource: the file that grants them, what they give, what is missing without.
OPTIONAL_READS: Final = {
    "pods": (
        "deploy/kubernetes/optional/pod-reader.yaml",
        "inspect shows pods",
        "inspect cannot show pods and their nodes",
    ),
    "persistentvolumeclaims": (
        "deploy/kubernetes/optional/pvc-reader.yaml",
        "the preflight verifies model caches",
        "a model cache cannot be verified: prefer downloads, required refuses",
    ),
    "endpointslices": (
        "deploy/kubernetes/optional/endpointslice-reader.yaml",
        "a deploy asks each replica which models it serves (serving evidence)",
        "serving evidence is not verifiable: check reports it, require refuses",
    ),
    "deployments": (
        "deploy/kubernetes/optional/kserve-predictor-reader.yaml",
        "each InferenceService is judged by its predictor Deployment (KServe mode)",
        "each InferenceService is judged by its own status, whose counter KServe copies from the predictor",
    ),
    "events": (
        "deploy/kubernetes/optional/kserve-predictor-reader.yaml",
        "a failed deploy quotes the scheduler's and kubelet's Warning Events (KServe mode)",
        "a failed deploy cannot quote the scheduler's Events",
    ),
}
OPTIONAL_GROUPS: Final = {"endpointslices": "discovery.k8s.io", "deployments": "apps"}  # the others are core ("")
OPTIONAL_RIGHTS: Final = tuple((v, OPTIONAL_GROUPS.get(r, ""), r) for r in OPTIONAL_READS for v in ("get", "list"))


# The read-only plan's identity (`plan --read-only`, a pull request's job): exactly these reads.
PLAN_VIEWER_FILE: Final = "deploy/kubernetes/base/plan-viewer-rbac.yaml"
PLAN_VERBS: Final = ("get", "list")
WRITE_VERBS: Final = ("create", "patch", "update", "delete")


def read_only_checks(config: InferCraneConfig) -> list[tuple[str, str, str, str]]:
    """``doctor --read-only``: every (verb, group, resource, need) of the read-only plan's identity
    -- the reads it needs (``plan-read``) and the writes it must not hold (``no-write``)."""
    kinds = config.kubernetes.api.kinds + config.kubernetes.allocation.extra_kinds
    return [(v, k.group, k.plural, "plan-read") for k in kinds for v in PLAN_VERBS] + [
        (v, k.group, k.plural, "no-write") for k in kinds for v in WRITE_VERBS
    ]


def required_rights(workload_api: str, gpu_allocation: str = LABEL_ALLOCATION.name) -> list[tuple[str, str, str]]:
    """The seed's rights: (verb, group, resource) every command needs in the namespace; on the
    objects the GPU allocation adds too (under ``dra``, the DRA Role's on the claim templates)."""
    kinds = WORKLOAD_APIS[workload_api].kinds + GPU_ALLOCATIONS[gpu_allocation].extra_kinds
    return [(v, k.group, k.plural) for k in kinds for v in SEED_VERBS]


def shipped_extra_rights(workload_api: str) -> list[tuple[str, str, str]]:
    """Read rights the shipped Role adds to the seed's (a failed deploy quotes the scheduler's Events)."""
    return list(WORKLOAD_APIS[workload_api].extra_rights)


def access_checks(config: InferCraneConfig) -> list[tuple[str, str, str, str]]:
    """Every (verb, group, resource, need) to review: need is required / shipped / optional (or
    required-optional: an optional read the stack's settings depend on, the model cache's claims)."""
    api = config.kubernetes.workload_api
    need = [(v, g, r, "required") for v, g, r in required_rights(api, config.kubernetes.gpu_allocation)]
    need += [(v, g, r, "shipped") for v, g, r in shipped_extra_rights(api)]
    cache_required = config.kubernetes.artifact_cache.policy == "required"
    evidence_required = config.kubernetes.serving_evidence == "require"
    for v, g, r in OPTIONAL_RIGHTS:
        if r == "persistentvolumeclaims":
            need.append((v, g, r, "required-optional" if cache_required else "optional"))
        elif r == "endpointslices":
            need.append((v, g, r, "required-optional" if evidence_required else "optional"))
        elif r in config.kubernetes.api.optional_reads:
            need.append((v, g, r, "optional"))
    if any(config.rollout_for(r.name).warm_first for r in config.replicas):
        need += [(v, "", "pods", "warm-first") for v in ("create", "delete")]  # the prefetcher, an opt-in write
    return need


def review(live: Live, namespace: str, verb: str, group: str, resource: str, need: str = "required") -> Check:
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(namespace=namespace, verb=verb, group=group, resource=resource)
        )
    )
    res = live.create(review, action=f"can {verb} {resource}")
    allowed = bool(res.status and res.status.allowed)
    full = f"{resource}.{group}" if group else resource
    name = f"can {verb} {full}"
    if need == "plan-read":
        if allowed:
            return Check(name, PASS, f"in namespace {namespace} (the read-only plan reads it)")
        return Check(name, FAIL, f"not granted in namespace {namespace}", f"bind {PLAN_VIEWER_FILE} to this identity")
    if need == "no-write":
        if allowed:
            return Check(
                name,
                FAIL,
                f"granted in namespace {namespace}: a read-only plan's identity holds no write right (a pull request's code runs with it)",
                f"give the job an identity bound only to {PLAN_VIEWER_FILE}",
            )
        return Check(f"cannot {verb} {full}", PASS, f"in namespace {namespace} (read-only)")
    if need == "warm-first":
        if allowed:
            return Check(name, PASS, f"in namespace {namespace} (warm-first: each in-place wave's release pulled first)")
        return Check(name, OPTIONAL, "not granted (rollout.warmFirst: the waves pull cold)", f"apply {PREFETCHER} to warm them")
    if need in ("optional", "required-optional"):
        file, gives, without = OPTIONAL_READS[resource]
        if allowed:
            return Check(name, PASS, f"in namespace {namespace} (optional: {gives})")
        if need == "required-optional":  # an optional read this stack's settings depend on
            setting = "servingEvidence is require" if resource == "endpointslices" else "artifactCache.policy is required"
            return Check(name, FAIL, f"not granted in namespace {namespace}: {setting}", f"apply {file}")
        return Check(name, OPTIONAL, f"not granted (optional: {without})", f"apply {file} if you want them")
    if allowed:
        return Check(name, PASS, f"in namespace {namespace}")
    fix = bind_fix(resource)  # the one phrasing of which Role to bind, as a 403 says it
    if need == "shipped":
        return Check(
            name, WARN, f"not granted in namespace {namespace}: a failed deploy cannot quote the scheduler's Events", fix
        )
    return Check(name, FAIL, f"in namespace {namespace}", fix)
