"""Validate a stack's values, once, at the edge, all-or-nothing.

:func:`load` merges the stack file's ``infercrane:*`` values with the ``INFERCRANE_KUBERNETES_*``
variables (passed in, field by field), validates everything, and either returns a frozen
:class:`~infercrane.core.config.InferCraneConfig` or raises one
:class:`~infercrane.core.errors.ConfigError` listing every problem with where it came from
(stack file + key path, or variable) and how to fix it (:mod:`~infercrane.core.problems`).
Pure core: values and environment are arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from infercrane.core import naming
from infercrane.core.config import (
    ARTIFACT_KEY_RE,
    ENV_FIELDS,
    JSON_ENV_FIELDS,
    KEY_ENDPOINTS,
    KEY_REPLICAS,
    KEY_TARGET,
    InferCraneConfig,
)
from infercrane.core.errors import ConfigError, Problem
from infercrane.core.problems import problem_from

FORBIDDEN_STACK_KEYS: Final = {
    "kubernetes:enablePatchForce": "InferCrane never forces a field-manager conflict; remove this key",
}


def load(
    values: Mapping[str, Any],
    *,
    source: str,
    env: Mapping[str, str],
) -> InferCraneConfig:
    """Validate a stack's config map (``infercrane:*`` keys) merged with the environment.

    ``source`` names the stack file in messages. Raises ConfigError listing every problem; returns a
    frozen config otherwise. Never reads the cluster.
    """
    env = dict(env)
    problems: list[Problem] = []

    for key, why in FORBIDDEN_STACK_KEYS.items():
        if key in values:
            problems.append(Problem(f"{source}: {key}", "is set", why))
    for key in values:
        if key.startswith(f"{naming.PROJECT}:") and key not in (KEY_TARGET, KEY_REPLICAS, KEY_ENDPOINTS):
            problems.append(
                Problem(
                    f"{source}: {key}", "is not an InferCrane setting", f"use {KEY_TARGET}, {KEY_REPLICAS} or {KEY_ENDPOINTS}"
                )
            )
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
            value: Any = env[var]
            if var in JSON_ENV_FIELDS:
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as exc:
                    problems.append(Problem(f"{var} (environment)", f"is not JSON ({exc.msg} at character {exc.pos})", JSON_FIX))
                    continue
            _set_path(target, path, value)
            from_env[path] = var

    replicas_raw = values.get(KEY_REPLICAS)
    if replicas_raw is None:
        replicas_raw = []
    if not isinstance(replicas_raw, list):
        problems.append(
            Problem(f"{source}: {KEY_REPLICAS}", "must be a list of replica intents", "write one '- key: …' entry per replica")
        )
        replicas_raw = []

    endpoints_raw = values.get(KEY_ENDPOINTS)
    if endpoints_raw is None:
        endpoints_raw = {}
    if not isinstance(endpoints_raw, Mapping):
        problems.append(
            Problem(
                f"{source}: {KEY_ENDPOINTS}", "must be a map of endpoint name -> settings", "e.g. qwen: {rollout: {maxSurge: 1}}"
            )
        )
        endpoints_raw = {}

    extra_products = target.get("gpuProducts") if isinstance(target.get("gpuProducts"), list) else []
    data = {"kubernetes": target, "replicas": replicas_raw, "endpoints": _deep_copy(endpoints_raw)}
    config: InferCraneConfig | None = None
    try:
        config = InferCraneConfig.model_validate(data, context={"gpu_products": tuple(map(str, extra_products))})
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(problem_from(err, source=source, replicas=replicas_raw, from_env=from_env))

    seen: dict[str, int] = {}
    for i, r in enumerate(replicas_raw):
        if isinstance(r, Mapping) and isinstance(r.get("key"), str):
            if r["key"] in seen:
                at = seen[r["key"]]
                first = replicas_raw[at]
                if first.get("name") != r.get("name"):
                    what = (
                        f"replica key {r['key']!r} is listed under endpoint {first.get('name')!r} (at [{at}]) "
                        f"and under endpoint {r.get('name')!r}"
                    )
                    fix = "a key is one replica of one endpoint: keep one entry (to move it, change its name)"
                else:
                    what, fix = f"duplicate replica key {r['key']!r} (also at [{at}])", "every replica needs its own durable key"
                problems.append(Problem(f"{source}: {KEY_REPLICAS}[{i}].key", what, fix))
            seen.setdefault(r["key"], i)
    if config is not None:
        problems += _endpoint_problems(config, source)
        problems += _scaling_problems(config, source)
        problems += _cache_problems(config, source)
        problems += _pod_problems(config, source)

    if problems or config is None:
        raise ConfigError(problems, source)
    return config


@dataclass(frozen=True)
class Override:
    """One ``INFERCRANE_KUBERNETES_*`` variable that sets a target field of a stack: which, to
    what, and what the stack file says (None: not set there). Never a secret: the fields hold
    names, references and paths only."""

    variable: str
    field: str  # ``infercrane:kubernetes.context``
    value: str
    file_value: Any

    def sentence(self, source: str) -> str:
        said = "not set there" if self.file_value is None else f"the file says {self.file_value!r}"
        return f"{self.variable} sets {self.field} of {source} to {self.value!r} ({said})"


def overrides(values: Mapping[str, Any], env: Mapping[str, str]) -> list[Override]:
    """What the environment overrides in a stack's target, in variable order (:data:`ENV_FIELDS`)."""
    target = values.get(KEY_TARGET) if isinstance(values.get(KEY_TARGET), Mapping) else {}
    out = []
    for var, path in ENV_FIELDS.items():
        if var not in env:
            continue
        node: Any = target
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        out.append(Override(var, f"{KEY_TARGET}." + ".".join(path), env[var], node))
    return out


def advice(config: InferCraneConfig) -> list[str]:
    """What is valid but worth saying before a deploy: replicas without CPU/memory requests."""
    bare = [r.key for r in config.replicas if config.resources_for(r) is None]
    if not bare:
        return []
    return [
        f"{len(bare)} replica(s) request no CPU or memory (BestEffort pods, evicted first under node pressure): set "
        f"{KEY_TARGET}.resources: {{}} for the defaults (4 CPUs, 32Gi per GPU); the next deploy restarts each "
        "replica once, in waves"
    ]


def _endpoint_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """Endpoint settings that name no endpoint, or whose merged rollout policy can never progress."""
    problems = []
    names = {r.name for r in config.replicas}
    for name in config.endpoints:
        where = f"{source}: {KEY_ENDPOINTS}.{name}"
        if name not in names:
            problems.append(
                Problem(
                    where,
                    f"no replica is named {name!r}",
                    f"use an endpoint name of {KEY_REPLICAS} ({', '.join(sorted(names)) or 'none'})",
                )
            )
            continue
        try:
            config.rollout_for(name)
        except ValueError:
            problems.append(
                Problem(
                    f"{where}.rollout",
                    "maxUnavailable 0 with maxSurge 0 (with the target's defaults) can never replace a replica",
                    "allow one replica down (maxUnavailable: 1) or one extra (maxSurge: 1)",
                )
            )
    return problems


def _scaling_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """``scaling: external`` is a Deployment's field left to an HPA; KServe scales by itself."""
    if config.kubernetes.workload_api != "kserve":
        return []
    return [
        Problem(
            f"{source}: {KEY_REPLICAS}[{i}].scaling (replica {r.key!r})",
            "external scaling leaves a Deployment's spec.replicas to an HPA; an InferenceService is scaled by KServe",
            "leave scaling out (fixed) under workloadApi kserve, or use workloadApi deployment",
        )
        for i, r in enumerate(config.replicas)
        if r.scaling == "external"
    ]


def _pod_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """The GPU product label is the replica's ``gpu``, never a pod setting (it is never substituted)."""
    label = config.kubernetes.gpu_product_label
    fix = f"set the GPU with {KEY_REPLICAS}[].gpu; remove {label} from nodeSelector"
    what = f"sets the GPU product label {label}, which comes from each replica's gpu"
    problems = []
    if label in config.kubernetes.pod.node_selector:
        problems.append(Problem(f"{source}: {KEY_TARGET}.pod.nodeSelector", what, fix))
    for i, r in enumerate(config.replicas):
        if label in r.pod.node_selector:
            problems.append(Problem(f"{source}: {KEY_REPLICAS}[{i}].pod.nodeSelector (replica {r.key!r})", what, fix))
    return problems


def _cache_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """Under ``artifactCache.policy: required`` every replica loads from a mapped claim: its
    revision is pinned (a commit: a cache entry never changes) and its ``model@revision`` mapped."""
    cache = config.kubernetes.artifact_cache
    if cache.policy != "required":
        return []
    problems = []
    for i, r in enumerate(config.replicas):
        where = f"{source}: {KEY_REPLICAS}[{i}].modelRevision (replica {r.key!r})"
        if not r.model_revision:
            problems.append(
                Problem(
                    where,
                    "has no pinned revision, but infercrane:kubernetes.artifactCache.policy is required",
                    'pin the model\'s 40-hex commit (modelRevision: "<commit>") and map <model>@<commit> to its PVC',
                )
            )
        elif not ARTIFACT_KEY_RE.match(f"{r.model}@{r.model_revision}"):
            problems.append(
                Problem(
                    where,
                    f"{r.model_revision!r} is not a commit, but artifactCache.policy is required (a cache entry never changes)",
                    'pin the model\'s 40-hex commit: modelRevision: "<commit>"',
                )
            )
        elif cache.claim_for(r.model, r.model_revision) is None:
            problems.append(
                Problem(
                    where,
                    f"no model cache is mapped for {r.model}@{r.model_revision} (artifactCache.policy is required)",
                    f'add "{r.model}@{r.model_revision}": <pvc> to infercrane:kubernetes.artifactCache.pvcs, '
                    "or use policy prefer to download what has no cache",
                )
            )
    return problems


JSON_FIX: Final = 'use a JSON object, e.g. \'{"Qwen/Qwen3-8B@<40-hex commit>": "qwen3-8b-weights"}\''


def _set_path(target: dict[str, Any], path: tuple[str, ...], value: str) -> None:
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
