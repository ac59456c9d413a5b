"""``doctor --kubernetes``: read-only checks that the target can take this stack.

API reachable (version) through the explicit context; the KServe API in kserve mode; one
SelfSubjectAccessReview per right of the shipped Role (the seed's rights fail when missing; the
Events read warns) and of the optional pod reader (reported as optional), in the namespace; namespace and service account present; allocatable GPUs
per product label against what the replicas request; image volumes where a replica mounts a model
image (:mod:`~infercrane.live.image_volumes`). Checks run concurrently; each passes,
warns or fails with a hint. Creates no workload (a SelfSubjectAccessReview is not stored).
Live-cluster layer.

One module, past 300 lines: each check is a short function, and together they are the one report ``doctor`` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Final

from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import Namespace, Node, ServiceAccount

from infercrane.core.model import gpu
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.engines import ENGINES
from infercrane.core.model.kinds import (
    DRA_READER_FILE,
    DRA_ROLE_FILE,
    GPU_ALLOCATIONS,
    LABEL_ALLOCATION,
    RESOURCE_CLAIM_TEMPLATE,
    ROLES_SHOWN,
    WORKLOAD_APIS,
)
from infercrane.live import image_volumes
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live
from infercrane.live.status.prefetch import PREFETCHER

PASS, WARN, FAIL, OPTIONAL = "pass", "warn", "fail", "optional"
UNVERIFIABLE = "not verifiable"  # the shipped Role may not read it: not a warning on a healthy set-up
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


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    hint: str = ""


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


def _can(live: Live, namespace: str, verb: str, group: str, resource: str, need: str = "required") -> Check:
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
    fix = f"apply {DRA_ROLE_FILE if resource == RESOURCE_CLAIM_TEMPLATE.plural else ROLES_SHOWN} bound to this identity"
    if need == "shipped":
        return Check(
            name, WARN, f"not granted in namespace {namespace}: a failed deploy cannot quote the scheduler's Events", fix
        )
    return Check(name, FAIL, f"in namespace {namespace}", fix)


def _api(live: Live, config: InferCraneConfig) -> Check:
    version = live.raw_get("/version")
    return Check("API reachable", PASS, f"context {config.kubernetes.context}: Kubernetes {version.get('gitVersion', '?')}")


def _kserve(live: Live, config: InferCraneConfig) -> Check:
    try:
        live.list(cluster.InferenceService, action="KServe API")
    except failures.NotFound:
        return Check(
            "KServe API",
            FAIL,
            "serving.kserve.io/v1beta1 is not served",
            "install KServe (Standard mode) or use workloadApi: deployment",
        )
    return Check("KServe API", PASS, "serving.kserve.io/v1beta1 InferenceService is served")


def _exists(name: str, read: Callable[[], object], what: str, fix: str, forbidden: str, verify: str) -> Check:
    """PASS when ``read`` finds the object, FAIL with ``fix`` when it is absent, not verifiable
    (with ``verify``: what would verify it) when this identity may not read it."""
    try:
        read()
    except failures.NotFound:
        return Check(name, FAIL, f"{what} does not exist", fix)
    except failures.Forbidden:
        return Check(name, UNVERIFIABLE, forbidden, verify)
    return Check(name, PASS, f"{what} exists")


def _namespace(live: Live, config: InferCraneConfig) -> Check:
    ns = config.kubernetes.namespace
    return _exists(
        "namespace",
        lambda: live.get(Namespace, ns, action="namespace"),
        f"namespace {ns}",
        "kubectl apply -f deploy/kubernetes/base/namespace.yaml",
        "not verifiable with the shipped Role (it reads nothing cluster-scoped, by design)",
        f"`kubectl get namespace {ns}` as an administrator; a deploy into a missing namespace is refused by its dry run",
    )


def _service_account(live: Live, config: InferCraneConfig) -> Check:
    t = config.kubernetes
    return _exists(
        "runtime service account",
        lambda: live.get(ServiceAccount, t.service_account, action="runtime service account"),
        f"service account {t.service_account}",
        "kubectl apply -f deploy/kubernetes/base/service-accounts.yaml",
        "not verifiable with the shipped Role (it may not read service accounts, by design)",
        f"`kubectl get serviceaccount {t.service_account} -n {t.namespace}` as an administrator; "
        "without it the ReplicaSet cannot create the pods (inspect shows FailedCreate)",
    )


def _dra_api(live: Live) -> Check:
    """resource.k8s.io/v1 is served (discovery: every authenticated identity may read it)."""
    try:
        live.raw_get("/apis/resource.k8s.io/v1")
    except failures.NotFound:
        return Check(
            "DRA API",
            FAIL,
            "resource.k8s.io/v1 is not served (Dynamic Resource Allocation is GA from Kubernetes 1.34)",
            "use gpuAllocation: label on this cluster, or upgrade it to Kubernetes 1.34 or later",
        )
    return Check("DRA API", PASS, "resource.k8s.io/v1 ResourceClaimTemplate is served")


def _dra_capacity(live: Live, config: InferCraneConfig, want: Counter[str]) -> Check:
    """Free devices per product: the GPU DeviceClass's driver's devices in every ResourceSlice,
    less those a ResourceClaim's allocation holds (the optional DRA reader)."""
    from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceSlice

    t = config.kubernetes
    try:
        classes = {c["metadata"]["name"] for c in live.list(DeviceClass, action="device classes")}
        slices = live.list(ResourceSlice, action="GPU devices")
        claims = live.list(ResourceClaim, action="GPU claims", everywhere=True)
    except failures.Forbidden:
        return Check(
            "GPU capacity",
            UNVERIFIABLE,
            "cannot list ResourceSlices and ResourceClaims (cluster-scoped reads the shipped Roles do not grant, by design)",
            f"grant the optional DRA reader ({DRA_READER_FILE}, docs/rbac.md) to see free devices per product",
        )
    names = {v: k for k, v in gpu.product_names(t.gpu_product_names).items()}
    taken = {(x.get("driver"), x.get("pool"), x.get("device")) for c in claims for x in gpu.allocated(c)}
    have: Counter[str] = Counter()
    free: Counter[str] = Counter()
    for sl in slices:
        spec = sl.get("spec") or {}
        if spec.get("driver") != gpu.DRA_DRIVER:
            continue
        for d in spec.get("devices") or []:
            attributes = d.get("attributes") or {}
            label = names.get(str((attributes.get(gpu.DRA_PRODUCT_ATTRIBUTE) or {}).get("string")))
            if label is None or (attributes.get("type") or {}).get("string", "gpu") != "gpu":
                continue
            have[label] += 1
            if (gpu.DRA_DRIVER, (spec.get("pool") or {}).get("name"), d.get("name")) not in taken:
                free[label] += 1
    detail = (
        ", ".join(f"{g}: {n} requested / {free.get(g, 0)} free of {have.get(g, 0)} published" for g, n in sorted(want.items()))
        or "no replicas"
    )
    if t.gpu_device_class not in classes:
        return Check(
            "GPU capacity",
            FAIL,
            f"DeviceClass {t.gpu_device_class} does not exist ({detail}): no claim of it can ever be allocated",
            "install the GPU DRA driver (its chart installs the DeviceClass), or set gpuDeviceClass to one of: "
            + (", ".join(sorted(classes)) or "none exists"),
        )
    # A deploy's own replicas already hold theirs: a short product is a warning, never a failure.
    if any(have.get(g, 0) < n for g, n in want.items()):
        return Check(
            "GPU capacity",
            WARN,
            detail,
            "claims for the short products stay unallocated (Pending): add devices or lower gpuCount",
        )
    return Check("GPU capacity", PASS, detail)


def _gpu_capacity(live: Live, config: InferCraneConfig) -> Check:
    t = config.kubernetes
    want: Counter[str] = Counter()
    for r in config.replicas:
        want[r.gpu] += r.gpu_count
    if t.allocation.claims:
        return _dra_capacity(live, config, want)
    try:
        nodes = live.list(Node, action="GPU capacity")
    except failures.Forbidden:
        return Check(
            "GPU capacity",
            UNVERIFIABLE,
            "cannot list nodes (a cluster-scoped read the shipped Role does not grant, by design)",
            "grant the optional node reader (deploy/kubernetes/optional/node-reader.yaml, docs/rbac.md) to check capacity",
        )
    have: Counter[str] = Counter()
    for n in nodes:
        label = (n["metadata"].get("labels") or {}).get(t.gpu_product_label)
        alloc = (n.get("status") or {}).get("allocatable") or {}
        if label and t.gpu_resource in alloc:
            have[label] += int(str(alloc[t.gpu_resource]))
    short = {g: (need, have.get(g, 0)) for g, need in want.items() if have.get(g, 0) < need}
    detail = ", ".join(f"{g}: {n} requested / {have.get(g, 0)} allocatable" for g, n in sorted(want.items())) or "no replicas"
    if short:
        return Check("GPU capacity", WARN, detail, "pods for the short GPU values will stay Pending: add nodes or lower gpuCount")
    return Check("GPU capacity", PASS, detail)


def image_volumes_check(live: Live, config: InferCraneConfig) -> Check:
    """What the replicas' model images need: image volumes in the API server and on their GPU nodes."""
    server = str(live.raw_get("/version").get("gitVersion", "?"))
    users = image_volumes.uses(config)
    said = f"{len(users)} replica(s) mount a model image"
    problem = image_volumes.api_problem(server)
    if problem is not None:
        status, what = problem
        return Check(
            image_volumes.NAME, FAIL if status == "fail" else WARN, f"{said}; {what}", "upgrade the cluster, or drop modelImage"
        )
    try:
        nodes = live.list(Node, action="image volumes on the GPU nodes")
    except failures.Forbidden:
        return Check(
            image_volumes.NAME,
            UNVERIFIABLE,
            f"{said}; Kubernetes {server} serves image volumes; the GPU nodes' kubelets and runtimes cannot be read "
            "(a cluster-scoped read the shipped Role does not grant)",
            f"grant the optional node reader ({image_volumes.NODE_READER}) to check them",
        )
    products = {r.gpu for r in config.replicas if config.model_image_for(r) is not None}
    checked, problems = image_volumes.node_problems(nodes, config.kubernetes.gpu_product_label, products)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        return Check(image_volumes.NAME, FAIL, f"{said}; {shown}", "upgrade those nodes' kubelet or runtime, or drop modelImage")
    return Check(
        image_volumes.NAME,
        PASS,
        f"{said}; Kubernetes {server}, and the {checked} node(s) of their GPU products run a kubelet and runtime that mount them",
    )


def sglang_key(config: InferCraneConfig) -> Check | None:
    """What SGLang's replicas expose of the worker key (None: no replica runs SGLang). SGLang reads its
    key from ``--api-key`` only (no variable, no file), so the kubelet expands it into the engine's
    command line, which every user of its node can read, unlike vLLM's environment."""
    keys = [r.key for r in config.replicas if ENGINES[r.engine].key_flag]  # the key on its command line
    if not keys:
        return None
    shown = ", ".join(keys[:3]) + (", …" if len(keys) > 3 else "")
    return Check(
        "worker key of SGLang replicas",
        WARN,
        f"{len(keys)} replica(s) run SGLang ({shown}), which takes the worker key only as --api-key: on its node the "
        "key is in the engine's command line, readable by every user of that node (/proc/<pid>/cmdline, ps)",
        "mount /proc with hidepid=2 on the GPU nodes, keep other users off them, or run these replicas on vLLM "
        "(VLLM_API_KEY: the key stays in the process's environment)",
    )


def run(config: InferCraneConfig, live: Live | None = None, *, read_only: bool = False) -> list[Check]:
    """All checks, concurrently, in a stable order. Never raises for a failed check. ``read_only``:
    the checks of the read-only plan's identity (:func:`read_only_checks`) instead of the deploying one's."""
    t = config.kubernetes
    live = live or Live.connect(t)
    jobs: list[tuple[str, Callable[[], Check]]] = [("API reachable", lambda: _api(live, config))]
    if t.api.crd is not None:
        jobs.append(("KServe API", lambda: _kserve(live, config)))
    if t.allocation.claims:
        jobs.append(("DRA API", lambda: _dra_api(live)))
    rights = read_only_checks(config) if read_only else access_checks(config)
    jobs += [(f"can {v} {r}", partial(_can, live, t.namespace, v, g, r, need)) for v, g, r, need in rights]
    if not read_only:
        jobs += [
            ("namespace", lambda: _namespace(live, config)),
            ("runtime service account", lambda: _service_account(live, config)),
            ("GPU capacity", lambda: _gpu_capacity(live, config)),
        ]
        if image_volumes.uses(config):
            jobs.append((image_volumes.NAME, lambda: image_volumes_check(live, config)))

    def guarded(name: str, fn: Callable[[], Check]) -> Check:
        try:
            return fn()
        except failures.LiveError as exc:
            return Check(name, FAIL, str(exc))

    with ThreadPoolExecutor(max_workers=8) as pool:
        checks = list(pool.map(lambda job: guarded(*job), jobs))
    exposed = sglang_key(config)
    return checks + ([exposed] if exposed and not read_only else [])
