"""The Pulumi program: read config once, validate, guard, preflight, build, export.

``__main__.py`` calls :func:`main`; so does the Automation API (``infercrane.engine.workspace``) -- one
program, never an inline copy. Every user mistake becomes a ``pulumi.RunError`` with the full
message and no traceback; nothing is registered before all checks pass. Pulumi shell: the live
preflight is imported lazily and skipped only under Pulumi mocks.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Final

import pulumi
from pulumi.runtime import config as runtime_config

from infercrane.core import config as cfg
from infercrane.core import loading, naming
from infercrane.core.errors import InferCraneError, NotReady
from infercrane.core.manifests import render_checked
from infercrane.core.urns import slots
from infercrane.shell.components import ReplicaComponent
from infercrane.shell.provider import make_provider


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


def build(config: cfg.InferCraneConfig, stack: str, *, preflight: bool) -> list[ReplicaComponent]:
    """Render and guard (the one pipeline, :func:`infercrane.core.manifests.render_checked`), run
    the live preflight, then register one component per replica slot."""
    rendered = render_checked(config, stack)
    t = config.kubernetes
    if preflight:
        from infercrane.live import preflight as live

        manifests = [m for r in rendered for m in r.manifests]
        report = live.run(config, manifests, naming.stack_identity(cfg.PROJECT, stack))
        drift = [ref for ref in report.drift if report.actions[ref] == "configure"]
        if drift and pulumi.runtime.is_dry_run():
            pulumi.log.info(
                f"preflight: applying would change {len(drift)} live object(s): {', '.join(drift[:5])}"
                + (" …" if len(drift) > 5 else "")
            )
    provider = make_provider(t)
    return [ReplicaComponent(slot, r, config, provider) for slot, r in zip(slots(rendered), rendered, strict=True)]


DEPLOY_HISTORY: Final = 20


@dataclass
class Channel:
    """What one in-process caller (the Automation API, :mod:`infercrane.engine.workspace`) and one
    run of the program pass each other -- explicitly, instead of module globals.

    In: ``deploy_record`` -- set by ``infercrane deploy`` for one ``up``: the idempotency history
    read from the stack's outputs and this deploy's entry. The program exports them as ``deploys``,
    so the record is written by the update it describes, only if it succeeds.
    Out: ``error`` -- the program's typed, user-facing failure, re-raised by the caller instead of
    parsing the engine's output."""

    deploy_record: dict[str, Any] | None = None
    error: InferCraneError | None = None


def export(components: list[ReplicaComponent], config: cfg.InferCraneConfig, deploy_record: dict[str, Any] | None) -> None:
    endpoints: dict[str, list[str]] = defaultdict(list)
    for c in components:
        endpoints[c.summary["endpointName"]].append(c.summary["key"])
    pulumi.export("namespace", config.kubernetes.namespace)
    pulumi.export("workloadApi", config.kubernetes.workload_api)
    pulumi.export("replicas", {c.summary["key"]: c.summary for c in components})
    pulumi.export("endpoints", dict(endpoints))
    if deploy_record is not None and not pulumi.runtime.is_dry_run():
        pulumi.export("deploys", [*deploy_record["history"], deploy_record["entry"]][-DEPLOY_HISTORY:])


def await_readiness(
    components: list[ReplicaComponent], config: cfg.InferCraneConfig, channel: Channel
) -> pulumi.Output[None] | None:
    """On ``up``: wait until every replica's workload (Deployment, or InferenceService in KServe
    mode) is ready, for the whole stack with one poller.

    Each replica's wait starts when its workload is applied (its output resolves) and ends
    ready or failed within its startup budget + margin; all failures are raised together as one
    :class:`NotReady`, so ``pulumi up`` fails with every reason. Not on preview, not under mocks.
    """
    t = config.kubernetes
    if pulumi.runtime.is_dry_run() or running_under_mocks() or not components:
        return None
    from infercrane.live import cluster, readiness

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
        failures = [
            (c.rendered.replica.key, c.rendered.name, v.reason)
            for c, v in zip(components, verdicts, strict=True)
            if v.state != "ready"
        ]
        if failures:
            lost = all(v.api_lost for v in verdicts if v.state != "ready")
            channel.error = NotReady(failures, len(components), api_lost=lost)
            raise pulumi.RunError(str(channel.error))
        pulumi.log.info(f"readiness: {len(components)}/{len(components)} ready")

    return pulumi.Output.all(*[wait(c) for c in components]).apply(check)


def main(channel: Channel | None = None) -> None:
    """The program. ``__main__.py`` calls it without a channel; the Automation API with one."""
    channel = channel or Channel()
    channel.error = None
    stack = pulumi.get_stack()
    source = f"stacks/Pulumi.{stack}.yaml"
    try:
        config = loading.load(stack_values(), source=source, env=os.environ)
        components = build(config, stack, preflight=not running_under_mocks())
    except InferCraneError as exc:
        channel.error = exc
        raise pulumi.RunError(str(exc)) from None
    export(components, config, channel.deploy_record)
    await_readiness(components, config, channel)
