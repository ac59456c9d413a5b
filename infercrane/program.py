"""The Pulumi program: read config once, validate, guard, preflight, build, export.

``__main__.py`` calls :func:`main`; so does the Automation API (``infercrane.stack``) -- one
program, never an inline copy. Every user mistake becomes a ``pulumi.RunError`` with the full
message and no traceback; nothing is registered before all checks pass. Pulumi shell: the live
preflight is imported lazily and skipped only under Pulumi mocks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from infercrane import config as cfg
from infercrane import guards, naming
from infercrane.components import ReplicaComponent
from infercrane.errors import GuardError, InferCraneError
from infercrane.provider import make_provider
from infercrane.render import RenderedReplica, render_all


def running_under_mocks() -> bool:
    """True only in the Pulumi-mocks test tier (the monitor is the SDK's MockMonitor)."""
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.settings import get_monitor

    try:
        return isinstance(get_monitor(), MockMonitor)
    except Exception:  # noqa: BLE001 - no monitor at all: not mocks
        return False


def stack_values() -> dict[str, Any]:
    """Every ``infercrane:*`` and ``kubernetes:*`` stack config value, parsed (the one place config is read)."""
    import json

    # The SDK keeps the stack's config in one map (set by the language host, the Automation API or
    # mocks), with PULUMI_CONFIG as the fallback; Pulumi has no public call that lists keys.
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values: dict[str, Any] = {}
    for key, raw in merged.items():
        if key.startswith(("infercrane:", "kubernetes:")):
            try:
                values[key] = json.loads(raw)
            except (TypeError, ValueError):
                values[key] = raw
    return values


def slots(rendered: list[RenderedReplica]) -> list[str]:
    """Logical name per replica: ``<endpoint name>-<ordinal within that endpoint>``, in config order."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for r in rendered:
        out.append(f"{r.replica.name}-{seen[r.replica.name]}")
        seen[r.replica.name] += 1
    return out


def build(config: cfg.InferCraneConfig, stack_id: str, *, preflight: bool) -> list[ReplicaComponent]:
    rendered = render_all(config, stack_id)
    manifests = [m for r in rendered for m in r.manifests]
    t = config.kubernetes
    violations = guards.check_all(manifests, gpu_resource=t.gpu_resource, gpu_label=t.gpu_product_label)
    if violations:
        raise GuardError(violations)
    if preflight:
        from infercrane import preflight as live

        live.run(config, manifests, stack_id)
    provider = make_provider(t)
    return [ReplicaComponent(slot, r, config, provider) for slot, r in zip(slots(rendered), rendered, strict=True)]


def export(components: list[ReplicaComponent], config: cfg.InferCraneConfig) -> None:
    endpoints: dict[str, list[str]] = defaultdict(list)
    for c in components:
        endpoints[c.summary["endpointName"]].append(c.summary["key"])
    pulumi.export("namespace", config.kubernetes.namespace)
    pulumi.export("workloadApi", config.kubernetes.workload_api)
    pulumi.export("replicas", {c.summary["key"]: c.summary for c in components})
    pulumi.export("endpoints", dict(endpoints))


# The last user-facing failure of main(), for the Automation API caller in the same process
# (infercrane.stack): it re-raises the typed error instead of parsing the engine's output.
last_error: InferCraneError | None = None


def main() -> None:
    global last_error
    last_error = None
    project, stack = pulumi.get_project(), pulumi.get_stack()
    source = f"stacks/Pulumi.{stack}.yaml"
    try:
        config = cfg.load(stack_values(), source=source)
        components = build(config, naming.stack_identity(project, stack), preflight=not running_under_mocks())
    except InferCraneError as exc:
        last_error = exc
        raise pulumi.RunError(str(exc)) from None
    export(components, config)
