"""The pod's part of the configuration: the worker Secret and other secret references, the pod
identity, resources, the pod settings a target or a replica may add (pull secrets, priority,
tolerations, node selector, environment, labels, annotations) -- each field with its rule; the
caches it mounts are :mod:`~infercrane.core.model.caches`. Pure core.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from infercrane.core import naming
from infercrane.core.model import gpu, quantity
from infercrane.core.model.schema import DNS_SUBDOMAIN_RE, QUALIFIED_NAME_RE, SECRET_KEY_RE, Frozen, dns_label


class SecretKeyRef(Frozen):
    """One data key of a Secret in the target namespace. Only referenced (``secretKeyRef``): its
    value is never read, never in the state, the logs or the process arguments."""

    name: str = Field(description="Secret name (DNS label), in the target namespace.")
    key: str = Field(description="Data key inside the Secret.")

    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not SECRET_KEY_RE.match(v):
            raise ValueError(f"{v!r} is not a valid Secret data key")
        return v


class WorkerSecret(SecretKeyRef):
    """The Secret holding the worker API key. Only referenced; its value is never read."""

    name: str = Field("infercrane-worker", description="Secret name (DNS label), in the target namespace.")
    key: str = Field("api-key", description="Data key inside the Secret.")


class PodIdentity(Frozen):
    """The non-root identity the pods run as; with it they satisfy Pod Security ``restricted``."""

    run_as_user: StrictInt = Field(ge=1, description="UID of the engine process (never 0: non-root).")
    run_as_group: StrictInt = Field(ge=0, description="Primary GID of the engine process.")
    fs_group: StrictInt = Field(ge=0, description="GID that owns mounted volumes (the model cache).")


def memory_quantity(v: str) -> str:
    quantity.memory_bytes(v)  # raises ValueError with the reason
    return v


def cpu_quantity(v: str) -> str:
    quantity.cpu_millis(v)
    return v


class Resources(Frozen):
    """CPU and memory of every replica, scaled by its GPU count (the defaults fit a GPU node's
    share per GPU on common 4- and 8-GPU machines). Requests make the pods Burstable -- never
    BestEffort, evicted first under node pressure; the memory limit adds the in-memory /dev/shm,
    which the kernel charges to the container."""

    cpu_per_gpu: str = Field("4", description="CPU requested per GPU (no CPU limit unless guaranteed: no throttling).")
    memory_per_gpu: str = Field("32Gi", description="Memory requested per GPU; the limit adds shmSize.")
    guaranteed: bool = Field(False, description="Limits = requests for CPU and memory: Guaranteed QoS, evicted last.")

    _cpu = field_validator("cpu_per_gpu")(classmethod(lambda cls, v: cpu_quantity(v)))
    _memory = field_validator("memory_per_gpu")(classmethod(lambda cls, v: memory_quantity(v)))


class ResourcesOverride(Frozen):
    """One replica's own CPU and memory (totals, not per GPU); a field left out scales the target's."""

    cpu: str | None = Field(None, description="CPU requested by this replica.")
    memory: str | None = Field(None, description="Memory requested by this replica (the limit adds shmSize).")
    guaranteed: bool | None = Field(None, description="As kubernetes.resources.guaranteed, for this replica.")

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: str | None) -> str | None:
        return None if v is None else cpu_quantity(v)

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        return None if v is None else memory_quantity(v)


#: Past the preStop wait and the engine's shutdown, before the kubelet's SIGKILL: the process's own exit.
DRAIN_MARGIN_SECONDS: Final = 5


class Drain(Frozen):
    """How a replica's pod leaves, on every stop (a rollout, a destroy, a drained node): out of
    routing first, then its engine finishes what is in flight. The pod's
    ``terminationGracePeriodSeconds`` is derived from both (:attr:`grace_seconds`), never set apart."""

    pre_stop_seconds: int = Field(
        10,
        ge=0,
        le=600,
        description="Seconds a deleted pod keeps serving before its engine gets SIGTERM (a preStop sleep): the "
        "endpoint controllers mark it terminating at once, and the gateways that route by them need this long to "
        "stop sending to it. 0: no preStop.",
    )
    shutdown_seconds: int = Field(
        30,
        ge=0,
        le=3600,
        description="Seconds the engine may take, after SIGTERM, to finish the requests in flight (vLLM's "
        "--shutdown-timeout, which vLLM has since 0.18.0; SGLang drains on SIGTERM by itself). 0: no flag is "
        "rendered and vLLM aborts them at once (its default) -- the setting for a vLLM older than 0.18.0.",
    )

    @property
    def grace_seconds(self) -> int:
        """The pod's terminationGracePeriodSeconds: the preStop wait, the engine's shutdown, the margin."""
        return self.pre_stop_seconds + self.shutdown_seconds + DRAIN_MARGIN_SECONDS


class DrainOverride(Frozen):
    """One replica's own drain; a field left out is the target's."""

    pre_stop_seconds: int | None = Field(None, ge=0, le=600, description="As kubernetes.drain.preStopSeconds, for this replica.")
    shutdown_seconds: int | None = Field(
        None, ge=0, le=3600, description="As kubernetes.drain.shutdownSeconds, for this replica."
    )

    def over(self, base: Drain) -> Drain:
        return Drain(
            pre_stop_seconds=base.pre_stop_seconds if self.pre_stop_seconds is None else self.pre_stop_seconds,
            shutdown_seconds=base.shutdown_seconds if self.shutdown_seconds is None else self.shutdown_seconds,
        )


ENV_NAME_RE: Final = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class Toleration(Frozen):
    """A taint the pods tolerate besides the GPU one (e.g. a dedicated inference pool)."""

    key: str | None = Field(None, description="Taint key (none with operator Exists: every taint).")
    operator: Literal["Equal", "Exists"] = Field("Equal", description="Equal: the key's value must match; Exists: any value.")
    value: str | None = Field(None, description="Taint value (operator Equal only).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Effect (none: all).")
    toleration_seconds: StrictInt | None = Field(None, ge=0, description="NoExecute only: how long the pod stays.")

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        if v is not None and not QUALIFIED_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a qualified Kubernetes name")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator Equal needs a key")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds applies to effect NoExecute only")
        return self


class EnvVar(Frozen):
    """One extra environment variable: a plain value, or a key of a named Secret (never read)."""

    name: str = Field(description="Variable name; never one InferCrane sets.")
    value: str | None = Field(None, description="Plain value (not for secrets: it is in the pod spec and the state).")
    secret_key_ref: SecretKeyRef | None = Field(None, description="Secret key in the target namespace, by reference.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not ENV_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not an environment variable name")
        if v in naming.MANAGED_ENV:
            raise ValueError(f"{v} is set by InferCrane (the worker key, the token or the model cache)")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if (self.value is None) == (self.secret_key_ref is None):
            raise ValueError(f"{self.name} needs exactly one of value or secretKeyRef")
        if self.value is not None and naming.SECRET_NAME_RE.search(self.name):
            raise ValueError(
                f"{self.name} looks like a secret: a plain value is in the pod spec and the state; give it a secretKeyRef"
            )
        return self


def _label_map(v: dict[str, str], what: str, value_re: re.Pattern[str] | None) -> dict[str, str]:
    bad = [f"{k!r} is not a qualified {what} key" for k in v if not QUALIFIED_NAME_RE.match(k)]
    bad += [f"{k} is InferCrane's own (ownership and identity are never overridden)" for k in v if naming.own_key(k)]
    if value_re is not None:
        bad += [f"{k}: {x!r} is not a valid label value" for k, x in v.items() if not value_re.match(x)]
    if bad:
        raise ValueError("; ".join(bad))
    return v


class PodSettings(Frozen):
    """Pod-level settings platform teams need; every field adds to what InferCrane renders and
    never replaces a guarantee (the GPU selector and toleration, the keys it owns, the managed env)."""

    image_pull_secrets: tuple[str, ...] = Field((), description="Secrets (names, in the namespace) to pull the image.")
    priority_class_name: str | None = Field(None, description="PriorityClass of the pods (e.g. preempt batch work).")
    tolerations: tuple[Toleration, ...] = Field((), description="Tolerations besides the GPU taint's.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node labels besides the GPU product label.")
    env: tuple[EnvVar, ...] = Field((), description="Extra environment of the engine container (e.g. VLLM_* tuning).")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra pod labels (never InferCrane's keys).")
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra pod annotations (never InferCrane's keys).")

    @field_validator("image_pull_secrets")
    @classmethod
    def _pull(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [n for n in v if not DNS_SUBDOMAIN_RE.match(n)]
        if bad:
            raise ValueError(f"{bad!r} are not Secret names")
        return v

    @field_validator("priority_class_name")
    @classmethod
    def _priority(cls, v: str | None) -> str | None:
        if v is not None and not DNS_SUBDOMAIN_RE.match(v):
            raise ValueError(f"{v!r} is not a PriorityClass name")
        return v

    @field_validator("node_selector")
    @classmethod
    def _selector(cls, v: dict[str, str]) -> dict[str, str]:
        return _label_map(v, "node label", gpu.LABEL_VALUE_RE)

    _labels = field_validator("labels")(classmethod(lambda cls, v: _label_map(v, "label", gpu.LABEL_VALUE_RE)))
    _annotations = field_validator("annotations")(classmethod(lambda cls, v: _label_map(v, "annotation", None)))

    @field_validator("env")
    @classmethod
    def _unique(cls, v: tuple[EnvVar, ...]) -> tuple[EnvVar, ...]:
        names = [e.name for e in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{', '.join(dup)} listed more than once")
        return v

    def over(self, base: PodSettings) -> PodSettings:
        """These settings over ``base`` (the target's): lists add, maps and env merge, ours win."""
        env = {e.name: e for e in base.env} | {e.name: e for e in self.env}
        return PodSettings(
            image_pull_secrets=tuple(dict.fromkeys(base.image_pull_secrets + self.image_pull_secrets)),
            priority_class_name=self.priority_class_name or base.priority_class_name,
            tolerations=tuple(dict.fromkeys(base.tolerations + self.tolerations)),
            node_selector=base.node_selector | self.node_selector,
            env=tuple(env.values()),
            labels=base.labels | self.labels,
            annotations=base.annotations | self.annotations,
        )
