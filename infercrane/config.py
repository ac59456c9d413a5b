"""Typed, frozen configuration: ``infercrane:kubernetes`` (the target) and ``infercrane:replicas``.

Validated once, at the edge, all-or-nothing: :func:`load` merges the stack file's values with the
``INFERCRANE_KUBERNETES_*`` variables field by field, validates everything, and either returns a
frozen :class:`InferCraneConfig` or raises one :class:`~infercrane.errors.ConfigError` listing every
problem with where it came from (stack file + key path, or variable) and how to fix it.
Pure: no pulumi, no Kubernetes client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from infercrane import gpu, image, naming
from infercrane.errors import ConfigError, Problem

PROJECT: Final = "infercrane"
KEY_TARGET: Final = "infercrane:kubernetes"
KEY_REPLICAS: Final = "infercrane:replicas"
FORBIDDEN_STACK_KEYS: Final = {
    "kubernetes:enablePatchForce": "InferCrane never forces a field-manager conflict; remove this key",
}

DNS_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SECRET_KEY_RE: Final = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
QUALIFIED_NAME_RE: Final = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
QUANTITY_RE: Final = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")

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
    "INFERCRANE_KUBERNETES_KUBECONFIG": ("kubeconfig",),
}

# How to fix a bad value, by field (alias). The message itself names the bad value.
FIX: Final[dict[str, str]] = {
    "context": "name a context of your kubeconfig explicitly (InferCrane never uses the current-context)",
    "namespace": "use a DNS label: lowercase letters, digits and '-', at most 63 characters",
    "workloadApi": "use 'deployment' or 'kserve'",
    "serviceAccount": "use a DNS label, e.g. infercrane-runtime",
    "name": "use a DNS label: lowercase letters, digits and '-', at most 63 characters",
    "workerSecret.key": "use letters, digits, '-', '_' and '.' only",
    "key": "use 1-253 printable characters without surrounding whitespace; keep it durable",
    "model": "name the model to serve, e.g. Qwen/Qwen3-8B",
    "imageDigest": f"pin the image by digest: {image.EXAMPLE} (e.g. from `crane digest` or your registry)",
    "image": f"pin the image by digest: {image.EXAMPLE}",
    "gpuResource": "use an extended resource name such as nvidia.com/gpu",
    "gpuProductLabel": "use a node label key such as nvidia.com/gpu.product",
    "gpu": "use a product-label value exactly as your nodes carry it, or add it to infercrane:kubernetes.gpuProducts",
    "gpuCount": "use a whole number of GPUs from 1 to 16",
    "port": "use a port from 1024 to 65535",
    "startupBudgetSeconds": "use seconds from 60 to 86400; size it to the model's load time",
    "engine": "use 'vllm' or 'sglang'",
    "args": "remove flags that InferCrane sets itself or that would carry a secret",
    "cloud": "use 'kubernetes' (or leave it out)",
    "kserveDeploymentMode": "use 'Standard' (KServe >= 0.16) or 'RawDeployment' (older controllers)",
    "rollout": "use 'recreate' (default: scarce GPUs never deadlock) or 'surge'",
    "shmSize": "use a Kubernetes quantity such as 8Gi",
}


@dataclass(frozen=True)
class EngineSpec:
    """How one inference engine is started: the command and the flags that differ per engine."""

    command: tuple[str, ...]
    model_flag: str
    tensor_parallel_flag: str
    # vLLM's --served-model-name takes several names (the first is reported and used in metrics);
    # SGLang's takes one string, so there the model is served under the endpoint name only.
    several_served_names: bool = False

    @property
    def managed_flags(self) -> tuple[str, ...]:
        """Flags InferCrane renders itself; user args may not repeat them."""
        return (self.model_flag, "--host", "--port", "--served-model-name", "--revision", self.tensor_parallel_flag)


ENGINES: Final = {
    "vllm": EngineSpec(
        ("python3", "-m", "vllm.entrypoints.openai.api_server"), "--model", "--tensor-parallel-size", several_served_names=True
    ),
    "sglang": EngineSpec(("python3", "-m", "sglang.launch_server"), "--model-path", "--tp-size"),
}
SECRET_FLAGS: Final = ("--api-key",)


class _Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True, str_strip_whitespace=False
    )


def _dns_label(value: str) -> str:
    if not DNS_LABEL_RE.match(value):
        raise ValueError(f"{value!r} is not a DNS label")
    return value


class WorkerSecret(_Frozen):
    """The Secret holding the worker API key. Only referenced; its value is never read."""

    name: str = Field("infercrane-worker", description="Secret name (DNS label), in the target namespace.")
    key: str = Field("api-key", description="Data key inside the Secret.")

    _name = field_validator("name")(classmethod(lambda cls, v: _dns_label(v)))

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not SECRET_KEY_RE.match(v):
            raise ValueError(f"{v!r} is not a valid Secret data key")
        return v


class KubernetesTarget(_Frozen):
    """Where and how replicas are applied. Mirrors ``INFERCRANE_KUBERNETES_*``."""

    context: str = Field(description="kubeconfig context, always explicit; never the current-context.")
    namespace: str = Field("infercrane-system", description="Namespace of every object (DNS label).")
    workload_api: Literal["deployment", "kserve"] = Field(
        "deployment", description="deployment: Deployment + Service; kserve: one InferenceService."
    )
    service_account: str = Field("infercrane-runtime", description="Runtime service account (token not mounted).")
    worker_secret: WorkerSecret = Field(default_factory=lambda: WorkerSecret.model_validate({}))
    image_digest: str = Field(description="Default image, pinned by digest: repo@sha256:<64 hex>.")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource requested and limited per GPU.")
    gpu_product_label: str = Field("nvidia.com/gpu.product", description="Node label the GPU value must match.")
    gpu_products: tuple[str, ...] = Field((), description="Extra accepted product-label values.")
    gpu_toleration_key: str = Field("nvidia.com/gpu", description="Taint key tolerated (NoSchedule) by GPU pods.")
    kserve_deployment_mode: Literal["Standard", "RawDeployment"] = Field(
        "Standard", description="KServe deploymentMode annotation; RawDeployment for controllers <= 0.15."
    )
    rollout: Literal["recreate", "surge"] = Field(
        "recreate",
        description="When a slot's replica key changes: recreate deletes the old objects before creating the "
        "new ones (scarce GPUs never deadlock); surge creates first.",
    )
    kubeconfig: str | None = Field(None, description="kubeconfig file; default: $KUBECONFIG or ~/.kube/config.")

    @property
    def object_kinds(self) -> tuple[str, ...]:
        """The kinds of object each replica has under this workload API."""
        return ("InferenceService",) if self.workload_api == "kserve" else ("Deployment", "Service")

    @field_validator("context")
    @classmethod
    def _context(cls, v: str) -> str:
        if not v or v != v.strip() or any(c.isspace() for c in v):
            raise ValueError(f"context {v!r} is empty or contains whitespace")
        return v

    _labels = field_validator("namespace", "service_account")(classmethod(lambda cls, v: _dns_label(v)))

    @field_validator("image_digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        problem = image.digest_problem(v)
        if problem:
            raise ValueError(problem)
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


class Replica(_Frozen):
    """One durable replica intent: one Deployment + Service, or one InferenceService."""

    key: Annotated[str, Field(min_length=1, max_length=253, description="Durable replica key; names derive from it.")]
    model: Annotated[str, Field(min_length=1, description="Model id served, e.g. Qwen/Qwen3-8B.")]
    name: str = Field(description="Logical endpoint and served model name (DNS label).")
    gpu: str = Field(description="Product-label value, e.g. NVIDIA-L40S; never substituted.")
    gpu_count: int = Field(1, ge=1, le=16, description="GPUs per replica; > 1 sets tensor parallelism.")
    model_revision: str | None = Field(None, description="Pinned model revision (commit); passed as --revision.")
    image: str | None = Field(None, description="Per-replica image (digest); default: kubernetes.imageDigest.")
    engine: Literal["vllm", "sglang"] = Field("vllm", description="Inference engine: sets command and flags.")
    port: int = Field(8000, ge=1024, le=65535, description="Container and Service port named http.")
    args: tuple[str, ...] = Field((), description="Extra engine flags (never --api-key, never managed flags).")
    startup_budget_seconds: int = Field(
        1800, ge=60, le=86400, description="Seconds a model may take to load: sizes the startup probe and progress deadline."
    )
    shm_size: str = Field("8Gi", description="Size limit of the in-memory /dev/shm (tensor parallelism needs it).")
    cloud: Literal["kubernetes"] = Field("kubernetes", description="Always kubernetes for this provider.")

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v != v.strip() or any(not c.isprintable() for c in v):
            raise ValueError(f"key {v!r} has surrounding whitespace or unprintable characters")
        return v

    _name = field_validator("name")(classmethod(lambda cls, v: _dns_label(v)))

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

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str, info: ValidationInfo) -> str:
        extra = tuple((info.context or {}).get("gpu_products", ()))
        problem = gpu.gpu_problem(v, extra)
        if problem:
            raise ValueError(f"{problem}; known: {gpu.known_list(extra)}")
        return v

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        if not QUANTITY_RE.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes quantity")
        return v

    @field_validator("args")
    @classmethod
    def _args(cls, v: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        engine = info.data.get("engine", "vllm")
        bad = []
        for a in v:
            flag = a.split("=", 1)[0]
            if flag in SECRET_FLAGS:
                bad.append(f"{flag} would put a secret in the process arguments (the key comes from the Secret)")
            elif engine in ENGINES and flag in ENGINES[engine].managed_flags:
                bad.append(f"{flag} is set by InferCrane from the replica fields")
        if bad:
            raise ValueError("; ".join(bad))
        return v

    @property
    def object_name(self) -> str:
        return naming.object_name(self.key)


class InferCraneConfig(_Frozen):
    """The whole validated configuration of one stack."""

    kubernetes: KubernetesTarget
    replicas: tuple[Replica, ...] = ()

    def image_for(self, replica: Replica) -> str:
        return replica.image or self.kubernetes.image_digest

    def intent(self, replica: Replica) -> str:
        """The intent hash of one replica: its spec plus the target settings that shape its objects."""
        t = self.kubernetes
        spec = {
            "replica": replica.model_dump(by_alias=True, mode="json"),
            "target": {
                "namespace": t.namespace,
                "workloadApi": t.workload_api,
                "serviceAccount": t.service_account,
                "workerSecret": t.worker_secret.model_dump(by_alias=True),
                "image": self.image_for(replica),
                "gpuResource": t.gpu_resource,
                "gpuProductLabel": t.gpu_product_label,
                "gpuTolerationKey": t.gpu_toleration_key,
                "kserveDeploymentMode": t.kserve_deployment_mode,
            },
        }
        return naming.intent_hash(spec)


def stack_file(stack: str, project_dir: Path | None = None) -> Path:
    return (project_dir or project_root()) / "stacks" / f"Pulumi.{stack}.yaml"


def code_root() -> Path:
    """The checkout this package runs from (tools/, deploy/ live there)."""
    return Path(__file__).resolve().parent.parent


def project_root() -> Path:
    """The Pulumi project directory: $INFERCRANE_PROJECT_DIR, else the current directory when it
    holds this project's Pulumi.yaml, else the directory this package was installed from."""
    if os.environ.get("INFERCRANE_PROJECT_DIR"):
        return Path(os.environ["INFERCRANE_PROJECT_DIR"]).resolve()
    cwd = Path.cwd()
    pulumi_yaml = cwd / "Pulumi.yaml"
    if pulumi_yaml.is_file() and re.search(r"(?m)^name:\s*infercrane\s*$", pulumi_yaml.read_text(encoding="utf-8")):
        return cwd
    return Path(__file__).resolve().parent.parent


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def _fix_for(loc: tuple[Any, ...]) -> str:
    names = [p for p in loc if isinstance(p, str)]
    if len(names) >= 2 and ".".join(names[-2:]) in FIX:
        return FIX[".".join(names[-2:])]
    for part in reversed(loc):
        if isinstance(part, str) and part in FIX:
            return FIX[part]
    return ""


def _set_path(target: dict[str, Any], path: tuple[str, ...], value: str) -> None:
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def load(
    values: Mapping[str, Any],
    *,
    source: str,
    env: Mapping[str, str] | None = None,
) -> InferCraneConfig:
    """Validate a stack's config map (``infercrane:*`` keys) merged with the environment.

    ``source`` names the stack file in messages. Raises ConfigError listing every problem; returns a
    frozen config otherwise. Never reads the cluster.
    """
    env = dict(os.environ if env is None else env)
    problems: list[Problem] = []

    for key, why in FORBIDDEN_STACK_KEYS.items():
        if key in values:
            problems.append(Problem(f"{source}: {key}", "is set", why))
    for key in values:
        if key.startswith(f"{PROJECT}:") and key not in (KEY_TARGET, KEY_REPLICAS):
            problems.append(Problem(f"{source}: {key}", "is not an InferCrane setting", f"use {KEY_TARGET} or {KEY_REPLICAS}"))
    if env.get(naming.PATCH_FORCE_ENV, "").strip().lower() not in ("", "false", "0"):
        problems.append(
            Problem(
                f"{naming.PATCH_FORCE_ENV} (environment)",
                "asks pulumi-kubernetes to force field-manager conflicts",
                f"unset {naming.PATCH_FORCE_ENV}; InferCrane never forces a conflict",
            )
        )

    target_raw = values.get(KEY_TARGET)
    if target_raw is None:
        target_raw = {}
    if not isinstance(target_raw, Mapping):
        problems.append(Problem(f"{source}: {KEY_TARGET}", "must be a map", "see stacks/Pulumi.dev.yaml for the shape"))
        target_raw = {}
    target = _deep_copy(target_raw)
    from_env: dict[tuple[str, ...], str] = {}
    for var, path in ENV_FIELDS.items():
        if var in env:
            _set_path(target, path, env[var])
            from_env[path] = var

    replicas_raw = values.get(KEY_REPLICAS)
    if replicas_raw is None:
        replicas_raw = []
    if not isinstance(replicas_raw, list):
        problems.append(
            Problem(f"{source}: {KEY_REPLICAS}", "must be a list of replica intents", "write one '- key: …' entry per replica")
        )
        replicas_raw = []

    extra_products = target.get("gpuProducts") if isinstance(target.get("gpuProducts"), list) else []
    data = {"kubernetes": target, "replicas": replicas_raw}
    config: InferCraneConfig | None = None
    try:
        config = InferCraneConfig.model_validate(data, context={"gpu_products": tuple(map(str, extra_products))})
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(_problem_from(err, source=source, replicas=replicas_raw, from_env=from_env))

    seen: dict[str, int] = {}
    for i, r in enumerate(replicas_raw):
        if isinstance(r, Mapping) and isinstance(r.get("key"), str):
            if r["key"] in seen:
                problems.append(
                    Problem(
                        f"{source}: {KEY_REPLICAS}[{i}].key",
                        f"duplicate replica key {r['key']!r} (also at [{seen[r['key']]}])",
                        "every replica needs its own durable key",
                    )
                )
            seen.setdefault(r["key"], i)

    if problems or config is None:
        raise ConfigError(problems, source)
    return config


def _problem_from(err: Any, *, source: str, replicas: list[Any], from_env: dict[tuple[str, ...], str]) -> Problem:
    loc: tuple[Any, ...] = tuple(err["loc"])
    # pydantic reports aliases in loc (alias generator); map the top-level name back to the stack key.
    top, rest = loc[0], loc[1:]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "is required"
    elif err["type"] == "extra_forbidden":
        msg = "is not a known setting"
    elif err["type"] == "literal_error":
        msg = f"{err.get('input')!r} is not allowed: {msg.removeprefix('Input should be ')}"
    elif "input" in err and err["type"] not in ("value_error",) and not isinstance(err.get("input"), (dict, list)):
        msg = f"{err['input']!r}: {msg}"
    fix = _fix_for(loc)
    if err["type"] == "extra_forbidden":
        fix = "remove it or check its spelling (keys are camelCase)"
    if top == "kubernetes":
        path = tuple(str(p) for p in rest)
        if path in from_env:
            var = from_env[path]
            if err["type"] == "missing":
                msg = "is required"
            return Problem(f"{var} (environment)", msg, fix)
        where = f"{source}: {KEY_TARGET}" + (f".{_loc_text(rest)}" if rest else "")
        if err["type"] == "missing" and len(path) == 1:
            env_var = next((v for v, p in ENV_FIELDS.items() if p == path), None)
            if env_var:
                fix = f"set {KEY_TARGET}.{path[0]} in {source} or {env_var}; " + fix
        return Problem(where, msg, fix)
    where = f"{source}: {KEY_REPLICAS}"
    if rest and isinstance(rest[0], int):
        where += f"[{rest[0]}]"
        tail = rest[1:]
        if tail:
            where += "." + _loc_text(tail)
        r = replicas[rest[0]] if rest[0] < len(replicas) else None
        if isinstance(r, Mapping) and isinstance(r.get("key"), str):
            where += f" (replica {r['key']!r})"
    return Problem(where, msg, fix)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


# Top-level keys of a Pulumi stack file; anything else is a typo (a misspelt `config:` would
# otherwise leave the stack silently empty).
STACK_FILE_KEYS: Final = ("config", "encryptionsalt", "secretsprovider", "encryptedkey", "environment")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (Pulumi refuses them too, with a raw error)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        try:
            first = seen.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:  # an unhashable key: let the constructor report it
            continue
        if first != key_node.start_mark.line + 1:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {first})", key_node.start_mark
            )
    return dict(loader.construct_mapping(node, deep=deep))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_stack_values(path: Path) -> dict[str, Any]:
    """The ``config:`` map of a stack file. Raises ConfigError -- never anything else -- when the
    file is missing, not YAML, has duplicate keys, unknown top-level keys or non-string config keys."""
    rel = display_path(path)
    if not path.is_file():
        raise ConfigError(
            [Problem(rel, "stack file not found", "create it (copy stacks/Pulumi.dev.yaml) or pick another --stack")],
            rel,
        )
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader) or {}  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{rel}:{mark.line + 1}" if mark is not None else rel
        raise ConfigError(
            [Problem(where, f"is not valid YAML ({getattr(exc, 'problem', exc)})", "fix the YAML syntax")], rel
        ) from None
    except (RecursionError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            [Problem(rel, f"cannot be read as a stack file ({exc.__class__.__name__})", "fix the file")], rel
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ConfigError([Problem(rel, "has no 'config:' map", "put settings under 'config:'")], rel)
    problems = [
        Problem(
            f"{rel}: {key!r}",
            "is not a stack file key",
            f"use one of: {', '.join(STACK_FILE_KEYS)} (settings go under 'config:')",
        )
        for key in doc
        if key not in STACK_FILE_KEYS
    ]
    config = dict(doc.get("config") or {})
    problems += [
        Problem(f"{rel}: config.{key!r}", "is not a string key", "config keys look like infercrane:kubernetes")
        for key in config
        if not isinstance(key, str)
    ]
    if problems:
        raise ConfigError(problems, rel)
    return config


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        try:
            return str(path.resolve().relative_to(project_root()))
        except ValueError:
            return str(path)


def check_stack_file(real: Path) -> Callable[[Path], InferCraneConfig]:
    """A ``stackfile.dump`` check: validate a candidate file as if it were ``real`` (messages name ``real``)."""
    return lambda candidate: load(read_stack_values(candidate), source=display_path(real))


def load_stack(stack: str, *, project_dir: Path | None = None, env: Mapping[str, str] | None = None) -> InferCraneConfig:
    """Read and validate ``stacks/Pulumi.<stack>.yaml`` merged with the environment."""
    path = stack_file(stack, project_dir)
    return load(read_stack_values(path), source=display_path(path), env=env)
