"""One replica of a stack's config (``infercrane:replicas``): a durable replica intent, every
field with its rule and description. Models only; the whole config is
:mod:`infercrane.core.model.config`. Pure core.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from infercrane.core import naming
from infercrane.core.model import gpu, image
from infercrane.core.model.engines import ENGINES, SECRET_FLAGS, EngineName
from infercrane.core.model.pod import (
    DrainOverride,
    PodSettings,
    ResourcesOverride,
    SecretKeyRef,
    memory_quantity,
)
from infercrane.core.model.schema import Frozen, dns_label


class Replica(Frozen):
    """One durable replica intent: one Deployment + Service, or one InferenceService."""

    key: Annotated[str, Field(min_length=1, max_length=253, description="Durable replica key; names derive from it.")]
    model: Annotated[str, Field(min_length=1, description="Model id served, e.g. Qwen/Qwen3-8B.")]
    name: str = Field(description="Logical endpoint and served model name (DNS label).")
    gpu: str = Field(description="Product-label value, e.g. NVIDIA-L40S; never substituted.")
    gpu_count: int = Field(1, ge=1, le=16, description="GPUs per replica; > 1 sets tensor parallelism.")
    model_revision: str | None = Field(None, description="Pinned model revision (commit); passed as --revision.")
    image: str | None = Field(None, description="Per-replica image (digest); default: kubernetes.imageDigest.")
    model_image: str | None = Field(
        None,
        description="The weights as an OCI image by digest (oci://repo@sha256:<64 hex>, the modelcar layout: the "
        "files under /models), mounted read-only as an image volume and given to the engine as its model; "
        "default: kubernetes.modelImages[model], else the engine fetches the model by id.",
    )
    engine: EngineName = Field("vllm", description="Inference engine: sets command and flags.")
    port: int = Field(8000, ge=1024, le=65535, description="Container and Service port named http.")
    args: tuple[str, ...] = Field((), description="Extra engine flags (never --api-key, never managed flags).")
    startup_budget_seconds: int = Field(
        1800, ge=60, le=86400, description="Seconds a model may take to load: sizes the startup probe and progress deadline."
    )
    startup_probe_period_seconds: int = Field(
        10,
        ge=1,
        le=60,
        description="How often the kubelet asks /health while the model loads (the startup probe's period): a "
        "loaded engine is found started up to this long after it is, at every start of every rollout wave.",
    )
    shm_size: str = Field("8Gi", description="Size limit of the in-memory /dev/shm (tensor parallelism needs it).")
    hugging_face_token: SecretKeyRef | None = Field(None, description="As kubernetes.huggingFaceToken, for this replica.")
    resources: ResourcesOverride = Field(default_factory=lambda: ResourcesOverride.model_validate({}))
    drain: DrainOverride = Field(
        default_factory=lambda: DrainOverride.model_validate({}), description="As kubernetes.drain, for this replica."
    )
    pod: PodSettings = Field(
        default_factory=lambda: PodSettings.model_validate({}), description="As kubernetes.pod, added to it for this replica."
    )
    scaling: Literal["fixed", "external"] = Field(
        "fixed",
        description="fixed: one pod, InferCrane owns spec.replicas; external: the field is left to another "
        "manager (an HPA), so its /scale writes are no conflict (Deployment mode only).",
    )
    cloud: Literal["kubernetes"] = Field("kubernetes", description="Always kubernetes for this provider.")

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v != v.strip() or any(not c.isprintable() for c in v):
            raise ValueError(f"key {v!r} has surrounding whitespace or unprintable characters")
        return v

    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("model_revision", mode="before")
    @classmethod
    def _revision(cls, v: object) -> object:
        if isinstance(v, int | float) and not isinstance(v, bool):
            raise ValueError(f'{v!r} was read as a number by YAML; quote it: modelRevision: "{v}"')
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None:
            problem = image.digest_problem(v)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("model_image")
    @classmethod
    def _model_image(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None:
            problem = image.model_image_problem(v)
            if problem:
                raise ValueError(problem)
            if info.data.get("model_revision"):
                raise ValueError(
                    "a model image is pinned by its digest; modelRevision pins a Hugging Face download -- set one of them"
                )
        return v

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str, info: ValidationInfo) -> str:
        extra = tuple((info.context or {}).get("gpu_products", ()))
        problem = gpu.gpu_problem(v, extra)
        if problem:
            raise ValueError(f"{problem}; known: {gpu.known_list(extra)}")
        return v

    _shm = field_validator("shm_size")(classmethod(lambda cls, v: memory_quantity(v)))

    @field_validator("args")
    @classmethod
    def _args(cls, v: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        engine = info.data.get("engine", "vllm")
        bad = []
        for a in v:
            flag = a.split("=", 1)[0]
            if flag in SECRET_FLAGS:
                bad.append(f"{flag} would put a secret in the process arguments (the key comes from the Secret)")
            elif engine in ENGINES and flag == ENGINES[engine].shutdown_flag:
                bad.append(
                    f"{flag} is set by InferCrane from drain.shutdownSeconds (the replica's, else kubernetes.drain), "
                    "so that the pod's grace period covers it"
                )
            elif engine in ENGINES and flag in ENGINES[engine].managed_flags:
                bad.append(f"{flag} is set by InferCrane from the replica fields")
        if bad:
            raise ValueError("; ".join(bad))
        return v

    @property
    def object_name(self) -> str:
        return naming.object_name(self.key)
