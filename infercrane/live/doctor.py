"""``doctor --kubernetes``: read-only checks that the target can take this stack.

API reachable (version) through the explicit context; the KServe API in kserve mode; one
SelfSubjectAccessReview per right of the shipped Role (the seed's rights fail when missing; the
Events read warns) and of the optional pod reader (reported as optional), in the namespace; namespace and service account present; allocatable GPUs
per product label against what the replicas request. Checks run concurrently; each passes,
warns or fails with a hint. Creates no workload (a SelfSubjectAccessReview is not stored).
Live-cluster layer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Final

from lightkube import Client
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import Namespace, Node, ServiceAccount

from infercrane.core.model.config import InferCraneConfig, KubernetesTarget
from infercrane.core.model.kinds import ROLES_SHOWN, WORKLOAD_APIS
from infercrane.live import cluster, failures

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
}
OPTIONAL_RIGHTS: Final = tuple((v, "", r) for r in OPTIONAL_READS for v in ("get", "list"))


def required_rights(workload_api: str) -> list[tuple[str, str, str]]:
    """The seed's rights: (verb, group, resource) every command needs in the namespace."""
    return [(v, k.group, k.plural) for k in WORKLOAD_APIS[workload_api].kinds for v in SEED_VERBS]


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
    need = [(v, g, r, "required") for v, g, r in required_rights(api)]
    need += [(v, g, r, "shipped") for v, g, r in shipped_extra_rights(api)]
    cache_required = config.kubernetes.artifact_cache.policy == "required"
    for v, g, r in OPTIONAL_RIGHTS:
        if r == "persistentvolumeclaims":
            need.append((v, g, r, "required-optional" if cache_required else "optional"))
        elif r in config.kubernetes.api.optional_reads:
            need.append((v, g, r, "optional"))
    return need


def _can(client: Client, namespace: str, verb: str, group: str, resource: str, need: str = "required") -> Check:
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(namespace=namespace, verb=verb, group=group, resource=resource)
        )
    )
    res = client.create(review)
    allowed = bool(res.status and res.status.allowed)
    full = f"{resource}.{group}" if group else resource
    name = f"can {verb} {full}"
    if need in ("optional", "required-optional"):
        file, gives, without = OPTIONAL_READS[resource]
        if allowed:
            return Check(name, PASS, f"in namespace {namespace} (optional: {gives})")
        if need == "required-optional":  # an optional read this stack's settings depend on
            return Check(name, FAIL, f"not granted in namespace {namespace}: artifactCache.policy is required", f"apply {file}")
        return Check(name, OPTIONAL, f"not granted (optional: {without})", f"apply {file} if you want them")
    if allowed:
        return Check(name, PASS, f"in namespace {namespace}")
    fix = f"apply {ROLES_SHOWN} bound to this identity"
    if need == "shipped":
        return Check(
            name, WARN, f"not granted in namespace {namespace}: a failed deploy cannot quote the scheduler's Events", fix
        )
    return Check(name, FAIL, f"in namespace {namespace}", fix)


def _api(client: Client, config: InferCraneConfig) -> Check:
    version = cluster.raw_get(client, "/version")
    return Check("API reachable", PASS, f"context {config.kubernetes.context}: Kubernetes {version.get('gitVersion', '?')}")


def _kserve(client: Client, config: InferCraneConfig) -> Check:
    t = config.kubernetes
    try:
        with failures.request("KServe API", t):
            list(client.list(cluster.InferenceService, namespace=t.namespace))
    except failures.NotFound:
        return Check(
            "KServe API",
            FAIL,
            "serving.kserve.io/v1beta1 is not served",
            "install KServe (Standard mode) or use workloadApi: deployment",
        )
    return Check("KServe API", PASS, "serving.kserve.io/v1beta1 InferenceService is served")


def _exists(
    name: str, target: KubernetesTarget, read: Callable[[], object], what: str, fix: str, forbidden: str, verify: str
) -> Check:
    """PASS when ``read`` finds the object, FAIL with ``fix`` when it is absent, not verifiable
    (with ``verify``: what would verify it) when this identity may not read it."""
    try:
        with failures.request(name, target):
            read()
    except failures.NotFound:
        return Check(name, FAIL, f"{what} does not exist", fix)
    except failures.Forbidden:
        return Check(name, UNVERIFIABLE, forbidden, verify)
    return Check(name, PASS, f"{what} exists")


def _namespace(client: Client, config: InferCraneConfig) -> Check:
    ns = config.kubernetes.namespace
    return _exists(
        "namespace",
        config.kubernetes,
        lambda: client.get(Namespace, ns),
        f"namespace {ns}",
        "kubectl apply -f deploy/kubernetes/base/namespace.yaml",
        "not verifiable with the shipped Role (it reads nothing cluster-scoped, by design)",
        f"`kubectl get namespace {ns}` as an administrator; a deploy into a missing namespace is refused by its dry run",
    )


def _service_account(client: Client, config: InferCraneConfig) -> Check:
    t = config.kubernetes
    return _exists(
        "runtime service account",
        t,
        lambda: client.get(ServiceAccount, t.service_account, namespace=t.namespace),
        f"service account {t.service_account}",
        "kubectl apply -f deploy/kubernetes/base/service-accounts.yaml",
        "not verifiable with the shipped Role (it may not read service accounts, by design)",
        f"`kubectl get serviceaccount {t.service_account} -n {t.namespace}` as an administrator; "
        "without it the ReplicaSet cannot create the pods (inspect shows FailedCreate)",
    )


def _gpu_capacity(client: Client, config: InferCraneConfig) -> Check:
    t = config.kubernetes
    want: Counter[str] = Counter()
    for r in config.replicas:
        want[r.gpu] += r.gpu_count
    try:
        with failures.request("GPU capacity", t):
            nodes = list(client.list(Node))
    except failures.Forbidden:
        return Check(
            "GPU capacity",
            UNVERIFIABLE,
            "cannot list nodes (a cluster-scoped read the shipped Role does not grant, by design)",
            "grant the optional node reader (deploy/kubernetes/optional/node-reader.yaml, docs/rbac.md) to check capacity",
        )
    have: Counter[str] = Counter()
    for n in nodes:
        label = ((n.metadata.labels if n.metadata else None) or {}).get(t.gpu_product_label)
        alloc = (n.status.allocatable or {}) if n.status else {}
        if label and t.gpu_resource in alloc:
            have[label] += int(str(alloc[t.gpu_resource]))
    short = {g: (need, have.get(g, 0)) for g, need in want.items() if have.get(g, 0) < need}
    detail = ", ".join(f"{g}: {n} requested / {have.get(g, 0)} allocatable" for g, n in sorted(want.items())) or "no replicas"
    if short:
        return Check("GPU capacity", WARN, detail, "pods for the short GPU values will stay Pending: add nodes or lower gpuCount")
    return Check("GPU capacity", PASS, detail)


def run(config: InferCraneConfig, client: Client | None = None) -> list[Check]:
    """All checks, concurrently, in a stable order. Never raises for a failed check."""
    t = config.kubernetes
    client = client or cluster.client(t)
    jobs: list[tuple[str, Callable[[], Check]]] = [("API reachable", lambda: _api(client, config))]
    if t.api.crd is not None:
        jobs.append(("KServe API", lambda: _kserve(client, config)))
    jobs += [(f"can {v} {r}", partial(_can, client, t.namespace, v, g, r, need)) for v, g, r, need in access_checks(config)]
    jobs += [
        ("namespace", lambda: _namespace(client, config)),
        ("runtime service account", lambda: _service_account(client, config)),
        ("GPU capacity", lambda: _gpu_capacity(client, config)),
    ]

    def guarded(name: str, fn: Callable[[], Check]) -> Check:
        try:
            with failures.request(name, t):
                return fn()
        except failures.LiveError as exc:
            return Check(name, FAIL, str(exc))

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda job: guarded(*job), jobs))
