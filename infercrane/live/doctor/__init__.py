"""``doctor --kubernetes``: read-only checks that the target can take this stack.

API reachable (version) through the explicit context; the KServe API in kserve mode; one
SelfSubjectAccessReview per right of the shipped Role (the seed's rights fail when missing; the
Events read warns) and of the optional pod reader (reported as optional), in the namespace; namespace and service account present; allocatable GPUs
per product label against what the replicas request; image volumes where a replica mounts a model
image (:mod:`~infercrane.live.image_volumes`). Checks run concurrently; each passes,
warns or fails with a hint. Creates no workload (a SelfSubjectAccessReview is not stored).
Live-cluster layer.

The rights reviewed are :mod:`~infercrane.live.doctor.rights`, the capacity checks
:mod:`~infercrane.live.doctor.capacity`, a report line :mod:`~infercrane.live.doctor.check`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from lightkube.resources.core_v1 import Namespace, ServiceAccount

from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.engines import ENGINES
from infercrane.live import image_volumes
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live
from infercrane.live.doctor import capacity
from infercrane.live.doctor.check import FAIL, OPTIONAL, PASS, UNVERIFIABLE, WARN, Check
from infercrane.live.doctor.rights import access_checks, read_only_checks, review

__all__ = ["FAIL", "OPTIONAL", "PASS", "UNVERIFIABLE", "WARN", "Check", "run", "sglang_key"]


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
        jobs.append(("DRA API", lambda: capacity.dra_api(live)))
    rights = read_only_checks(config) if read_only else access_checks(config)
    jobs += [(f"can {v} {r}", partial(review, live, t.namespace, v, g, r, need)) for v, g, r, need in rights]
    if not read_only:
        jobs += [
            ("namespace", lambda: _namespace(live, config)),
            ("runtime service account", lambda: _service_account(live, config)),
            ("GPU capacity", lambda: capacity.gpu_capacity(live, config)),
        ]
        if image_volumes.uses(config):
            jobs.append((image_volumes.NAME, lambda: capacity.image_volumes_check(live, config)))

    def guarded(name: str, fn: Callable[[], Check]) -> Check:
        try:
            return fn()
        except failures.LiveError as exc:
            return Check(name, FAIL, str(exc))

    with ThreadPoolExecutor(max_workers=8) as pool:
        checks = list(pool.map(lambda job: guarded(*job), jobs))
    exposed = sglang_key(config)
    return checks + ([exposed] if exposed and not read_only else [])
