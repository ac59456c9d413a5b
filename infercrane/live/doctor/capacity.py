"""What ``doctor`` finds of the cluster's capacity for the stack: the DRA API, GPUs per product
(allocatable on the nodes, or devices free in the ResourceSlices under DRA), and image volumes
where a replica mounts a model image. Live-cluster layer.
"""

from __future__ import annotations

from collections import Counter

from lightkube.resources.core_v1 import Node

from infercrane.core.model import gpu
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.kinds import (
    DRA_READER_FILE,
)
from infercrane.live import image_volumes
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.doctor.check import FAIL, PASS, UNVERIFIABLE, WARN, Check


def dra_api(live: Live) -> Check:
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


def gpu_capacity(live: Live, config: InferCraneConfig) -> Check:
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
    cordoned: Counter[str] = Counter()  # a cordoned node takes no new pod: its GPUs are said, not counted
    for n in nodes:
        label = (n["metadata"].get("labels") or {}).get(t.gpu_product_label)
        alloc = (n.get("status") or {}).get("allocatable") or {}
        if label and t.gpu_resource in alloc:
            (cordoned if (n.get("spec") or {}).get("unschedulable") else have)[label] += int(str(alloc[t.gpu_resource]))
    short = {g: (need, have.get(g, 0)) for g, need in want.items() if have.get(g, 0) < need}
    detail = ", ".join(
        f"{g}: {n} requested / {have.get(g, 0)} allocatable" + (f" ({cordoned[g]} more on cordoned nodes)" if cordoned[g] else "")
        for g, n in sorted(want.items())
    )
    detail = detail or "no replicas"
    if short:
        uncordon = ", uncordon a node" if any(cordoned[g] for g in short) else ""
        return Check(
            "GPU capacity",
            WARN,
            detail,
            f"pods for the short GPU values will stay Pending: add nodes{uncordon} or lower gpuCount",
        )
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
