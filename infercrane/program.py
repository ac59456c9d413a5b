"""The Pulumi program: read config once, validate, guard, preflight, build, export.

``__main__.py`` calls :func:`main`; so does the Automation API (``infercrane.stack``) -- one
program, never an inline copy. Every user mistake becomes a ``pulumi.RunError`` with the full
message and no traceback; nothing is registered before all checks pass. Pulumi shell: the live
preflight is imported lazily and skipped only under Pulumi mocks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

import pulumi
from pulumi.runtime import config as runtime_config

from infercrane import config as cfg
from infercrane import guards, naming
from infercrane.components import ReplicaComponent
from infercrane.errors import GuardError, InferCraneError, NotReady
from infercrane.provider import make_provider
from infercrane.render import render_all
from infercrane.urns import slots


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


def build(config: cfg.InferCraneConfig, stack_id: str, *, preflight: bool) -> list[ReplicaComponent]:
    rendered = render_all(config, stack_id)
    manifests = [m for r in rendered for m in r.manifests]
    t = config.kubernetes
    violations = guards.check_all(manifests, gpu_resource=t.gpu_resource, gpu_label=t.gpu_product_label)
    if violations:
        raise GuardError(violations)
    if preflight:
        from infercrane import preflight as live

        report = live.run(config, manifests, stack_id)
        drift = [ref for ref in report.drift if report.actions[ref] == "configure"]
        if drift and pulumi.runtime.is_dry_run():
            pulumi.log.info(
                f"preflight: applying would change {len(drift)} live object(s): {', '.join(drift[:5])}"
                + (" …" if len(drift) > 5 else "")
            )
    provider = make_provider(t)
    return [ReplicaComponent(slot, r, config, provider) for slot, r in zip(slots(rendered), rendered, strict=True)]


# Set by ``infercrane deploy`` (same process, Automation API) for the duration of one ``up``: the
# idempotency history read from the stack's outputs and this deploy's entry. The program exports
# them as ``deploys``, so the record is written by the update it describes, only if it succeeds.
deploy_record: dict[str, Any] | None = None
DEPLOY_HISTORY: Final = 20


def export(components: list[ReplicaComponent], config: cfg.InferCraneConfig) -> None:
    endpoints: dict[str, list[str]] = defaultdict(list)
    for c in components:
        endpoints[c.summary["endpointName"]].append(c.summary["key"])
    pulumi.export("namespace", config.kubernetes.namespace)
    pulumi.export("workloadApi", config.kubernetes.workload_api)
    pulumi.export("replicas", {c.summary["key"]: c.summary for c in components})
    pulumi.export("endpoints", dict(endpoints))
    if deploy_record is not None and not pulumi.runtime.is_dry_run():
        pulumi.export("deploys", [*deploy_record["history"], deploy_record["entry"]][-DEPLOY_HISTORY:])


def await_readiness(components: list[ReplicaComponent], config: cfg.InferCraneConfig) -> pulumi.Output[None] | None:
    """On ``up``: wait until every replica's workload (Deployment, or InferenceService in KServe
    mode) is ready, for the whole stack with one poller.

    Each replica's wait starts when its workload is applied (its output resolves) and ends
    ready or failed within its startup budget + margin; all failures are raised together as one
    :class:`NotReady`, so ``pulumi up`` fails with every reason. Not on preview, not under mocks.
    """
    t = config.kubernetes
    if pulumi.runtime.is_dry_run() or running_under_mocks() or not components:
        return None
    from infercrane import cluster, readiness

    def report(p: readiness.Progress) -> None:
        why = p.summary()
        pulumi.log.info(
            f"readiness: {p.ready}/{p.total} ready after {p.elapsed:.0f}s; waiting on {len(p.waiting)}"
            + (f" ({why})" if why else "")
        )

    waiter = readiness.FleetWaiter(cluster.client(t), t, t.object_kinds[0], report=report)

    def wait(c: ReplicaComponent) -> pulumi.Output[readiness.Verdict]:
        budget = c.rendered.replica.startup_budget_seconds + readiness.AWAIT_MARGIN_SECONDS
        return c.workload.metadata.apply(  # type: ignore[attr-defined,no-any-return]
            lambda meta: waiter.wait(c.rendered.name, int(getattr(meta, "generation", None) or 0), budget)
        )

    def check(verdicts: list[readiness.Verdict]) -> None:
        global last_error
        failures = [
            (c.rendered.replica.key, c.rendered.name, v.reason)
            for c, v in zip(components, verdicts, strict=True)
            if v.state != "ready"
        ]
        if failures:
            lost = all(v.api_lost for v in verdicts if v.state != "ready")
            last_error = NotReady(failures, len(components), api_lost=lost)
            raise pulumi.RunError(str(last_error))
        pulumi.log.info(f"readiness: {len(components)}/{len(components)} ready")

    return pulumi.Output.all(*[wait(c) for c in components]).apply(check)


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
    await_readiness(components, config)
