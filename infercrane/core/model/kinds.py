"""The Kubernetes kinds InferCrane renders, and the workload APIs made of them: one home for each
kind's API version, resource plural, Pulumi type token and child-name suffix, and for everything
that differs between ``workloadApi: deployment`` and ``kserve`` (:class:`WorkloadApi`).

Everything else derives from these tables: the renderer's ``apiVersion`` and objects, the URNs
and type tokens (:mod:`~infercrane.core.state.urns`), the live client's resources
(:mod:`~infercrane.live.client.cluster`), the rights ``doctor`` reviews. No code outside them branches
on a workload API's name; the same holds of a GPU allocation (:class:`GpuAllocation`). Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from infercrane.core import naming


@dataclass(frozen=True)
class Kind:
    name: str
    api_version: str  # group/version, or "v1" for the core group
    plural: str
    child_suffix: str  # the child's logical name under its component: <slot>-<suffix>

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def type_token(self) -> str:
        """pulumi-kubernetes' type token (``core`` for the core group)."""
        return f"kubernetes:{self.group or 'core'}/{self.version}:{self.name}"


DEPLOYMENT: Final = Kind("Deployment", "apps/v1", "deployments", "deployment")
SERVICE: Final = Kind("Service", "v1", "services", "service")
INFERENCE_SERVICE: Final = Kind("InferenceService", "serving.kserve.io/v1beta1", "inferenceservices", "inferenceservice")
#: A replica's GPUs under ``gpuAllocation: dra``: its own claim template, beside its workload.
RESOURCE_CLAIM_TEMPLATE: Final = Kind("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates", "claimtemplate")
KINDS: Final = {k.name: k for k in (DEPLOYMENT, SERVICE, INFERENCE_SERVICE, RESOURCE_CLAIM_TEMPLATE)}


@dataclass(frozen=True)
class WorkloadApi:
    """What one ``workloadApi`` means, for each part that differs between them."""

    name: str
    kinds: tuple[Kind, ...]  # the objects of one replica, the workload (readiness) first
    role_file: str  # the shipped Role of the deploying identity
    role_name: str  # its metadata.name
    extra_rights: tuple[tuple[str, str, str], ...]  # (verb, group, resource) the Role adds to the seed's
    optional_reads: tuple[str, ...]  # resources an optional Role may grant for this API (doctor reviews them)
    pod_label: str  # the pod label naming the replica's object: ours, or the one its controller sets
    controller_pods: bool  # a controller (KServe) makes the pods: they carry its labels, not our managed-by
    scaled_by_controller: bool  # the controller scales it: `scaling: external` has nothing to hand over
    explicit_cpu_limit: bool  # the controller fills a missing CPU limit with its own default (KServe: 1 CPU)
    endpoint: str  # the in-cluster URL, from the object {name}, {namespace} and the replica's {port}
    service: str  # the Service that routes to a replica's pods (and the workload they belong to), from its object {name}
    #: Where its pods' spec is, under the workload's spec: a change at its first step restarts them.
    pod_spec: tuple[str, ...] = ("template", "spec")
    #: Its readiness is the one rule over the Deployment its controller makes (KServe's predictor),
    #: read where the identity may list Deployments; else its own status, the weaker rule.
    judged_by_predictor: bool = False
    #: Its status is conditions and the URL it serves at (KServe's), not a Deployment's counters.
    status_by_conditions: bool = False
    crd: Kind | None = None  # served by a CustomResourceDefinition that must be installed

    @property
    def workload(self) -> Kind:
        return self.kinds[0]

    @property
    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)


DEPLOYMENT_API: Final = WorkloadApi(
    name="deployment",
    kinds=(DEPLOYMENT, SERVICE),
    role_file="deploy/kubernetes/base/provider-rbac.yaml",
    role_name="infercrane-provider-deployment",
    extra_rights=(("get", "", "events"), ("list", "", "events")),  # a failed deploy quotes the scheduler
    optional_reads=("pods",),
    pod_label=naming.LABEL_INSTANCE,
    controller_pods=False,
    scaled_by_controller=False,
    explicit_cpu_limit=False,
    endpoint="http://{name}.{namespace}.svc:{port}",
    service="{name}",
)
KSERVE_API: Final = WorkloadApi(
    name="kserve",
    kinds=(INFERENCE_SERVICE,),
    role_file="deploy/kubernetes/kserve/provider-rbac.yaml",
    role_name="infercrane-provider-kserve",
    extra_rights=(),
    optional_reads=("deployments", "events"),  # its predictors, the one readiness rule (optional/kserve-predictor-reader.yaml)
    pod_label=naming.KSERVE_ISVC_LABEL,
    controller_pods=True,
    scaled_by_controller=True,
    explicit_cpu_limit=True,
    endpoint="http://{name}-predictor.{namespace}.svc.cluster.local",
    service="{name}-predictor",  # KServe's predictor, in Standard mode: its Service and its Deployment
    pod_spec=("predictor",),  # KServe rolls its pods on a predictor change
    judged_by_predictor=True,
    status_by_conditions=True,
    crd=INFERENCE_SERVICE,
)
WORKLOAD_APIS: Final = {a.name: a for a in (DEPLOYMENT_API, KSERVE_API)}


def workload_api_of(kind: str | None) -> WorkloadApi | None:
    """The workload API whose workload is of ``kind`` (None: a Service, a claim template)."""
    return next((a for a in WORKLOAD_APIS.values() if a.workload.name == kind), None)


def judged_by_predictor(kind: str | None) -> bool:
    """Whether a workload of ``kind`` is judged by its controller's Deployment (:attr:`WorkloadApi.judged_by_predictor`)."""
    api = workload_api_of(kind)
    return api is not None and api.judged_by_predictor


#: The workload kind of every API: what holds a replica's GPUs, whichever API rendered it.
WORKLOADS: Final = frozenset(a.workload.name for a in WORKLOAD_APIS.values())

#: The Role the claim templates need under ``gpuAllocation: dra`` (beside the workload API's, never
#: added to the seed's), and the optional reads of the cluster's devices and claims.
DRA_ROLE_FILE: Final = "deploy/kubernetes/dra/provider-rbac.yaml"
DRA_ROLE_NAME: Final = "infercrane-provider-dra"
DRA_READER_FILE: Final = "deploy/kubernetes/optional/dra-reader.yaml"


@dataclass(frozen=True)
class GpuAllocation:
    """What one ``gpuAllocation`` means, for each part that differs between them: how a replica's
    pods get their GPUs, what it adds to its workload API's objects, and how its GPUs are counted."""

    name: str
    #: Each container requests (and limits) ``gpuResource``, and each pod selects its product by
    #: ``gpuProductLabel``: the device plugin's GPUs, which nodes list as capacity.
    device_plugin: bool
    #: Each pod claims its devices through the replica's own claim template (``resourceClaims``),
    #: and carries its intent: the GPUs it claims are in that template, not in its workload.
    claims: bool
    extra_kinds: tuple[Kind, ...]  # the objects a replica adds beside its workload API's
    pool_suffix: str  # a rollout's GPU pool of a product: a node publishes its GPUs one way, never both
    role_file: str | None  # the Role its objects need beside the workload API's (never added to the seed's)
    reader_file: str | None  # the optional read of the cluster's devices and claims
    described: str  # how a command names the target's GPUs ({device_class}: gpuDeviceClass)

    def pool(self, product: str) -> str:
        """The GPU pool a replica of ``product`` draws from: the device plugin's GPUs of that
        product, or -- claimed by DRA -- the ResourceSlices' devices of it. Never the same GPUs,
        so a rollout counts them apart: a GPU freed by one is no device of the other."""
        return f"{product}{self.pool_suffix}" if product else product


LABEL_ALLOCATION: Final = GpuAllocation(
    name="label",
    device_plugin=True,
    claims=False,
    extra_kinds=(),
    pool_suffix="",
    role_file=None,
    reader_file=None,
    described="",
)
DRA_ALLOCATION: Final = GpuAllocation(
    name="dra",
    device_plugin=False,
    claims=True,
    extra_kinds=(RESOURCE_CLAIM_TEMPLATE,),
    pool_suffix=" (DRA)",
    role_file=DRA_ROLE_FILE,
    reader_file=DRA_READER_FILE,
    described=", GPUs claimed by DRA (DeviceClass {device_class})",
)
GPU_ALLOCATIONS: Final = {a.name: a for a in (LABEL_ALLOCATION, DRA_ALLOCATION)}


#: How a message names the shipped Roles: the deployment Role, and the KServe one beside it.
ROLES_SHOWN: Final = f"{DEPLOYMENT_API.role_file} (or {KSERVE_API.role_file.removeprefix('deploy/kubernetes/')})"
BIND_ROLE_FIX: Final = f"bind {ROLES_SHOWN} to this identity"


def bind_fix(forbidden: str) -> str:
    """The Role to bind for an API server's 403 text: the DRA Role's kind, else the workload APIs'."""
    if RESOURCE_CLAIM_TEMPLATE.plural in forbidden:
        return f"bind {DRA_ROLE_FILE} (gpuAllocation dra) to this identity, beside the workload API's Role"
    return BIND_ROLE_FIX
