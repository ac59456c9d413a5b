"""The target of a stack's config (``infercrane:kubernetes``): where and how replicas are applied,
with the ``INFERCRANE_KUBERNETES_*`` variables that set it. Models only; the whole config is
:mod:`infercrane.core.model.config`. Pure core.
"""

from __future__ import annotations

import urllib.parse
from typing import Final, Literal

from pydantic import Field, field_validator

from infercrane.core.model import gpu, image
from infercrane.core.model.caches import ArtifactCache, CompileCache
from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.model.kinds import GPU_ALLOCATIONS, WORKLOAD_APIS, GpuAllocation, WorkloadApi
from infercrane.core.model.pod import (
    Drain,
    PodIdentity,
    PodSettings,
    Resources,
    SecretKeyRef,
    WorkerSecret,
)
from infercrane.core.model.schema import DNS_SUBDOMAIN_RE, QUALIFIED_NAME_RE, Frozen, dns_label

# INFERCRANE_KUBERNETES_* variable -> path inside infercrane:kubernetes. Same names as the seed.
ENV_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "INFERCRANE_KUBERNETES_CONTEXT": ("context",),
    "INFERCRANE_KUBERNETES_NAMESPACE": ("namespace",),
    "INFERCRANE_KUBERNETES_WORKLOAD_API": ("workloadApi",),
    "INFERCRANE_KUBERNETES_SERVICE_ACCOUNT": ("serviceAccount",),
    "INFERCRANE_KUBERNETES_WORKER_SECRET_NAME": ("workerSecret", "name"),
    "INFERCRANE_KUBERNETES_WORKER_SECRET_KEY": ("workerSecret", "key"),
    "INFERCRANE_KUBERNETES_IMAGE_DIGEST": ("imageDigest",),
    "INFERCRANE_KUBERNETES_GPU_RESOURCE": ("gpuResource",),
    "INFERCRANE_KUBERNETES_GPU_PRODUCT_LABEL": ("gpuProductLabel",),
    "INFERCRANE_KUBERNETES_GPU_ALLOCATION": ("gpuAllocation",),
    "INFERCRANE_KUBERNETES_KUBECONFIG": ("kubeconfig",),
    "INFERCRANE_KUBERNETES_ARTIFACT_CACHE_POLICY": ("artifactCache", "policy"),
    "INFERCRANE_KUBERNETES_ARTIFACT_PVCS_JSON": ("artifactCache", "pvcs"),
    "INFERCRANE_KUBERNETES_CANARY_PROMETHEUS": ("canaryMetrics", "prometheus"),
    # The provider's own variables (pulumi-kubernetes reads them when its program sets no rate).
    "PULUMI_K8S_CLIENT_QPS": ("providerClient", "qps"),
    "PULUMI_K8S_CLIENT_BURST": ("providerClient", "burst"),
}
# Variables whose value is JSON (a map), not a plain string.
JSON_ENV_FIELDS: Final = frozenset({"INFERCRANE_KUBERNETES_ARTIFACT_PVCS_JSON"})


class CanaryMetrics(Frozen):
    """Where a canary's engine counts come from: each pod's ``/metrics`` read directly (the default:
    no extra component, no extra right), or a Prometheus that already scrapes the pods."""

    prometheus: str | None = Field(
        None,
        description="Base URL of a Prometheus scraping the replicas' pods (http(s)://host:port[/path]): the canary's "
        "counts come from its series whose instance is each pod's address; default none: each pod's /metrics.",
    )

    @field_validator("prometheus")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urllib.parse.urlsplit(v)
        if parts.username or parts.password or parts.query or parts.fragment:  # first: the value is never echoed then
            raise ValueError("a Prometheus URL with credentials, a query or a fragment is refused (it would be shown)")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{v!r} is not an http(s) URL with a host")
        return v


class ProviderClient(Frozen):
    """How fast the Kubernetes provider may send requests: its client's token bucket.

    pulumi-kubernetes throttles itself at 50 requests/s with a burst of 120 (client-go's bucket,
    raised from client-go's 5). A deploy applies every object through it -- a create is one PATCH,
    an update a GET and a PATCH -- so a fleet's applies queued behind that bucket: at 1,000
    replicas most of the minute between the first apply and the last, and about 8 s of every
    rollout wave of 250 endpoints (docs/benchmarks.md). Our default is a ceiling a deploy does not
    reach on a small machine, and leaves the pacing to the API server's own API Priority and
    Fairness (controller-runtime's clients now run with no client-side limit at all, on SIG API
    Machinery's advice); a platform team sharing an API server sets a lower one here, or with the
    provider's own ``PULUMI_K8S_CLIENT_QPS`` and ``PULUMI_K8S_CLIENT_BURST``."""

    qps: float = Field(
        500.0,  # a float as a stack's value becomes: the recorded input is the same either way
        gt=0,
        le=100_000,
        description="Requests per second the provider's client may send on average (pulumi-kubernetes' own default: 50).",
    )
    burst: int = Field(
        1000, ge=1, le=1_000_000, description="Requests it may send at once above that rate (pulumi-kubernetes' own: 120)."
    )


class KubernetesTarget(Frozen):
    """Where and how replicas are applied. Mirrors ``INFERCRANE_KUBERNETES_*`` (and the provider's
    ``PULUMI_K8S_CLIENT_*``): :data:`ENV_FIELDS`."""

    context: str = Field(description="kubeconfig context, always explicit; never the current-context.")
    namespace: str = Field("infercrane-system", description="Namespace of every object (DNS label).")
    workload_api: Literal["deployment", "kserve"] = Field(
        "deployment", description="deployment: Deployment + Service; kserve: one InferenceService."
    )
    service_account: str = Field("infercrane-runtime", description="Runtime service account (token not mounted).")
    worker_secret: WorkerSecret = Field(default_factory=lambda: WorkerSecret.model_validate({}))
    hugging_face_token: SecretKeyRef | None = Field(
        None, description="Secret key with a Hugging Face token (gated models), given to every replica as HF_TOKEN."
    )
    security_context: PodIdentity | None = Field(
        None,
        description="Run the pods as this non-root identity with seccomp RuntimeDefault and no capabilities "
        "(Pod Security restricted); default none: baseline.",
    )
    pod_security_warnings: Literal["refuse", "report"] = Field(
        "refuse",
        description="The preflight's answer to the API server's Pod Security warnings for the rendered pods: "
        "refuse (a namespace warns at the level it enforces) or report them and apply (it only warns).",
    )
    artifact_cache: ArtifactCache = Field(default_factory=lambda: ArtifactCache.model_validate({}))
    model_images: dict[str, str] = Field(
        default_factory=dict,
        description="Model id -> its weights as an OCI image by digest (oci://repo@sha256:<64 hex>), for every "
        "replica of that model that names none itself (replicas[].modelImage) and pins no modelRevision.",
    )
    compile_cache: CompileCache | None = Field(
        None, description="A volume for the engines' compile artifacts, keyed by engine, model and GPU; default none."
    )
    pod: PodSettings = Field(
        default_factory=lambda: PodSettings.model_validate({}),
        description="Pod-level settings of every replica: pull secrets, priority, tolerations, node labels, env, labels.",
    )
    resources: Resources | None = Field(
        None,
        description="CPU and memory per GPU of every replica ({} for the defaults; override per replica with "
        "replicas[].resources); default none: no CPU/memory requests.",
    )
    serving_evidence: Literal["check", "require"] = Field(
        "check",
        description="After a replica is ready, ask its engine GET /v1/models with the worker key: it must serve the "
        "names its intent renders. check: a replica that serves other names, or refuses the key, fails the deploy; "
        "one that cannot be asked (no key, no route, no right) is reported as not verifiable. require: that too fails.",
    )
    drain: Drain = Field(
        default_factory=lambda: Drain.model_validate({}),
        description="How every replica's pod leaves routing and drains before it stops (override per replica).",
    )
    canary_metrics: CanaryMetrics = Field(
        default_factory=lambda: CanaryMetrics.model_validate({}),
        description="Where a canary's engine counts come from (rollout.canary): each pod's /metrics, or a Prometheus.",
    )
    image_digest: str = Field(description="Default image, pinned by digest: repo@sha256:<64 hex>.")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource requested and limited per GPU.")
    gpu_product_label: str = Field("nvidia.com/gpu.product", description="Node label the GPU value must match.")
    gpu_products: tuple[str, ...] = Field((), description="Extra accepted product-label values.")
    gpu_toleration_key: str = Field("nvidia.com/gpu", description="Taint key tolerated (NoSchedule) by GPU pods.")
    gpu_allocation: Literal["label", "dra"] = Field(
        "label",
        description="label: request gpuResource and select the product by gpuProductLabel (the device plugin); dra: "
        "each replica claims gpuCount devices of gpuDeviceClass whose productName is its GPU's (Dynamic Resource "
        "Allocation, resource.k8s.io/v1), with its own ResourceClaimTemplate.",
    )
    gpu_device_class: str = Field(
        gpu.DRA_DRIVER,
        description="DeviceClass of the claims under gpuAllocation dra (NVIDIA's DRA driver installs gpu.nvidia.com).",
    )
    gpu_product_names: dict[str, str] = Field(
        default_factory=dict,
        description="Extra GPU products: label value -> the productName its DRA driver publishes (accepted in both modes).",
    )
    kserve_deployment_mode: Literal["Standard", "RawDeployment"] = Field(
        "Standard", description="KServe deploymentMode annotation; RawDeployment for controllers <= 0.15."
    )
    rollout: RolloutPolicy = Field(
        default_factory=lambda: RolloutPolicy.model_validate({}),
        description="Default rollout policy of every endpoint (override per endpoint in infercrane:endpoints).",
    )
    kubeconfig: str | None = Field(None, description="kubeconfig file; default: $KUBECONFIG or ~/.kube/config.")
    provider_client: ProviderClient = Field(
        default_factory=lambda: ProviderClient.model_validate({}),
        description="How fast the Kubernetes provider may send requests (qps, burst); default 500/s, burst 1000.",
    )

    @property
    def api(self) -> WorkloadApi:
        """What this target's workload API means (kinds, Role, pods, limits): :mod:`~infercrane.core.model.kinds`."""
        return WORKLOAD_APIS[self.workload_api]

    @property
    def allocation(self) -> GpuAllocation:
        """What this target's GPU allocation means (how pods get GPUs, extra objects, pools):
        :mod:`~infercrane.core.model.kinds`."""
        return GPU_ALLOCATIONS[self.gpu_allocation]

    @property
    def object_kinds(self) -> tuple[str, ...]:
        """The kinds of object each replica has: its workload API's (the workload first), and those
        its GPU allocation adds (its claim template under ``gpuAllocation: dra``)."""
        return self.api.kind_names + tuple(k.name for k in self.allocation.extra_kinds)

    @property
    def extra_products(self) -> tuple[str, ...]:
        """The label values a stack adds to the table, with or without a productName."""
        return self.gpu_products + tuple(self.gpu_product_names)

    @field_validator("context")
    @classmethod
    def _context(cls, v: str) -> str:
        if not v or v != v.strip() or any(c.isspace() for c in v):
            raise ValueError(f"context {v!r} is empty or contains whitespace")
        return v

    _labels = field_validator("namespace", "service_account")(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("image_digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        problem = image.digest_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("model_images")
    @classmethod
    def _model_images(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [f"{k}: {p}" for k, ref in v.items() if (p := image.model_image_problem(ref))]
        if bad:
            raise ValueError("; ".join(bad))
        return v

    @field_validator("gpu_resource", "gpu_product_label", "gpu_toleration_key")
    @classmethod
    def _qualified(cls, v: str) -> str:
        if not QUALIFIED_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a qualified Kubernetes name")
        return v

    @field_validator("gpu_products")
    @classmethod
    def _products(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [p for p in v if not gpu.LABEL_VALUE_RE.match(p)]
        if bad:
            raise ValueError(f"{bad!r} are not valid label values")
        return v

    @field_validator("gpu_product_names")
    @classmethod
    def _product_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not gpu.LABEL_VALUE_RE.match(k)]
        if bad:
            raise ValueError(f"{bad!r} are not valid label values (the keys are the label form, e.g. NVIDIA-L40S)")
        names = [n for n in v.values() if not gpu.PRODUCT_NAME_RE.match(n)]
        if names:
            raise ValueError(f"{names!r} are not product names (letters, digits, spaces and ._()+-, e.g. 'NVIDIA L40S')")
        return v

    @field_validator("gpu_device_class")
    @classmethod
    def _device_class(cls, v: str) -> str:
        if not DNS_SUBDOMAIN_RE.match(v):
            raise ValueError(f"{v!r} is not a DeviceClass name (a DNS subdomain, e.g. gpu.nvidia.com)")
        return v

    def product_name(self, value: str) -> str:
        """The productName a DRA claim selects for the label value ``value`` (validated before)."""
        return gpu.product_names(self.gpu_product_names)[value]
