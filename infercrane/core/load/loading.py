"""Validate a stack's values, once, at the edge, all-or-nothing.

:func:`load` merges the stack file's ``infercrane:*`` values with the ``INFERCRANE_KUBERNETES_*``
variables (passed in, field by field), validates everything, and either returns a frozen
:class:`~infercrane.core.model.config.InferCraneConfig` or raises one
:class:`~infercrane.core.errors.ConfigError` listing every problem with where it came from
(stack file + key path, or variable) and how to fix it (:mod:`~infercrane.core.load.problems`).
Pure core: values and environment are arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from infercrane.core import naming
from infercrane.core.errors import ConfigError, Problem
from infercrane.core.load.consistency import (
    cache_problems,
    compile_cache_problems,
    dra_problems,
    endpoint_problems,
    pod_problems,
    scaling_problems,
)
from infercrane.core.load.problems import problem_from
from infercrane.core.model.config import KEY_ENDPOINTS, KEY_REPLICAS, KEY_TARGET, InferCraneConfig
from infercrane.core.model.target import ENV_FIELDS, JSON_ENV_FIELDS

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
    problems = _keys_problems(values, source, env)
    target, from_env = _target(values, source, env, problems)
    replicas_raw = _section(values, KEY_REPLICAS, list, [], source, problems)
    endpoints_raw = _section(values, KEY_ENDPOINTS, Mapping, {}, source, problems)
    extra_products: list[Any] = target["gpuProducts"] if isinstance(target.get("gpuProducts"), list) else []
    if isinstance(target.get("gpuProductNames"), Mapping):
        extra_products = [*extra_products, *target["gpuProductNames"]]
    data = {"kubernetes": target, "replicas": replicas_raw, "endpoints": _deep_copy(endpoints_raw)}
    config: InferCraneConfig | None = None
    try:
        config = InferCraneConfig.model_validate(data, context={"gpu_products": tuple(map(str, extra_products))})
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(problem_from(err, source=source, replicas=replicas_raw, from_env=from_env))
    problems += _duplicate_keys(replicas_raw, source)
    if config is not None:
        problems += endpoint_problems(config, source)
        problems += scaling_problems(config, source)
        problems += cache_problems(config, source)
        problems += pod_problems(config, source)
        problems += dra_problems(config, source)
        problems += compile_cache_problems(config, source)

    if problems or config is None:
        raise ConfigError(problems, source)
    return config


def _keys_problems(values: Mapping[str, Any], source: str, env: Mapping[str, str]) -> list[Problem]:
    """Keys a stack may not set, keys of ours that are no setting, and a forced conflict asked for."""
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
    return problems


def _target(
    values: Mapping[str, Any], source: str, env: Mapping[str, str], problems: list[Problem]
) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """The target's map with the environment's variables set into it, and which path each set."""
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
    return target, from_env


_SHAPES: Final = {
    KEY_REPLICAS: ("must be a list of replica intents", "write one '- key: …' entry per replica"),
    KEY_ENDPOINTS: ("must be a map of endpoint name -> settings", "e.g. qwen: {rollout: {maxSurge: 1}}"),
}


def _section(values: Mapping[str, Any], key: str, shape: type, empty: Any, source: str, problems: list[Problem]) -> Any:
    """``values[key]`` when it has its shape (absent: ``empty``); another shape is a problem."""
    raw = values.get(key)
    if raw is None:
        return empty
    if not isinstance(raw, shape):
        what, fix = _SHAPES[key]
        problems.append(Problem(f"{source}: {key}", what, fix))
        return empty
    return raw


def _duplicate_keys(replicas_raw: list[Any], source: str) -> list[Problem]:
    """A replica key listed twice: under two endpoints, or twice under one."""
    problems: list[Problem] = []
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
    return problems


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
