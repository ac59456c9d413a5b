"""The Pulumi program: read config once, validate, guard, preflight, build, export.

``__main__.py`` calls :func:`main`; the Automation API (``infercrane.engine.workspace``) runs the
same steps as :func:`run`, which yields to the SDK's event loop between registrations -- one
program, never an inline copy. Every user mistake becomes a ``pulumi.RunError`` with the full
message and no traceback; no object is registered before all checks pass (a run that starts
beside the caller's preflight registers its provider first -- a Pulumi resource, no cluster
write -- and waits: :mod:`infercrane.shell.gate`). Pulumi shell: the live preflight is imported
lazily and skipped only under Pulumi mocks.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import config as runtime_config

from infercrane.core import config as cfg
from infercrane.core import loading, naming
from infercrane.core.actions import Action
from infercrane.core.errors import InferCraneError, NotReady, RolloutRefused
from infercrane.core.events import Readiness
from infercrane.core.manifests import render_checked
from infercrane.core.render import RenderedReplica
from infercrane.core.urns import legacy_slots
from infercrane.core.workload import endpoint_of
from infercrane.shell.channel import Channel
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


def summary_of(r: RenderedReplica, config: cfg.InferCraneConfig) -> dict[str, Any]:
    """The facts one replica's component records as outputs (and the stack output ``replicas``)."""
    rep = r.replica
    return {
        "key": rep.key,
        "endpointName": rep.name,
        "model": rep.model,
        "modelRevision": rep.model_revision,
        "namespace": config.kubernetes.namespace,
        "objects": [{"kind": m["kind"], "name": m["metadata"]["name"]} for m in r.manifests],
        "endpoint": r.endpoint,
        "intentHash": r.intent,
        "gpu": rep.gpu,
        "gpuCount": rep.gpu_count,
        "image": config.image_for(rep),
    }


def held_summary(key: str, manifests: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    """The facts of a replica held as the state records it (a rollout has not reached it yet)."""
    meta = manifests[0]["metadata"]
    annotations = meta.get("annotations") or {}
    return {
        "key": key,
        "endpointName": endpoint_of(manifests[0]),
        "namespace": namespace,
        "objects": [{"kind": m["kind"], "name": m["metadata"]["name"]} for m in manifests],
        "intentHash": annotations.get(naming.ANNOTATION_INTENT),
        "held": True,
    }


def check_rollout(config: cfg.InferCraneConfig, stack: str, rendered: list[RenderedReplica], report: Any) -> None:
    """Plain ``pulumi up`` does a change in one run: refuse one that would breach an endpoint's
    rollout policy (preview only warns), naming the command that rolls it in waves."""
    from infercrane.live import membership

    plan = membership.plan_rollout(config, rendered, report, naming.stack_id(stack))
    breaches = [
        f"endpoint {e.endpoint} rolls in {len(e.waves)} wave(s) under maxUnavailable {e.max_unavailable}, "
        f"maxSurge {e.max_surge}; at once {e.all_at_once()}"
        for e in plan.beyond_one_step()
    ]
    if breaches:
        refusal = RolloutRefused(stack, breaches)
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(f"`pulumi up` will refuse: {refusal}")
        else:
            raise refusal


def build(config: cfg.InferCraneConfig, stack: str, *, preflight: bool, channel: Channel | None = None) -> list[ReplicaComponent]:
    """Render and guard (the one pipeline, :func:`infercrane.core.manifests.render_checked`), run
    the live preflight, then register one component per replica -- for a rollout step, the
    step's replicas as rendered and the held ones as the state records them."""
    return list(registrations(config, stack, preflight=preflight, channel=channel))


def registrations(
    config: cfg.InferCraneConfig,
    stack: str,
    *,
    preflight: bool,
    channel: Channel | None = None,
    provider: k8s.Provider | None = None,
) -> Iterator[ReplicaComponent]:
    """:func:`build`, one component at a time: every check runs before the first is yielded (the
    provider is created with it, unless ``provider`` was registered already), so a caller can
    hand the SDK's event loop each registration while it builds the next (:func:`run`)."""
    channel = channel or Channel()
    prepared = channel.prepared
    if prepared is not None:  # the caller verified the caches, rendered and ran the preflight for this run
        rendered = list(prepared.rendered)
    else:
        if preflight:
            from infercrane.live import preflight as live

            verdict = live.verify_cache(config)
            for warning in verdict.warnings:
                pulumi.log.warn(f"preflight: {warning}")
            config = verdict.config
        rendered = render_checked(config, stack)
    t = config.kubernetes
    if preflight:
        from infercrane.live import preflight as live

        manifests = [m for r in rendered for m in r.manifests]
        report = prepared.report if prepared is not None else live.run(config, manifests, naming.stack_id(stack))
        for warning in report.warnings:  # podSecurityWarnings: report
            pulumi.log.warn(f"preflight: {warning}")
        drift = [ref for ref in report.drift if report.actions[ref] is Action.UPDATE]
        if drift and pulumi.runtime.is_dry_run():
            pulumi.log.info(
                f"preflight: applying would change {len(drift)} live object(s): {', '.join(drift[:5])}"
                + (" …" if len(drift) > 5 else "")
            )
        if not channel.driven:
            check_rollout(config, stack, rendered, report)
    provider = provider or make_provider(t)
    legacy = (
        channel.legacy
        if channel.legacy is not None
        else dict(zip([r.replica.key for r in rendered], legacy_slots(rendered), strict=True))
    )
    step = channel.step
    for r in rendered:
        key = r.replica.key
        if step is None or key in step.apply:
            yield ReplicaComponent(r.name, r.manifests, summary_of(r, config), provider, legacy=legacy.get(key))
    if step is not None:
        for key in sorted(step.hold):
            recorded = channel.held.get(key)
            if recorded:  # not in the state: Pulumi does not know it, nothing to hold
                name = naming.object_name(key)
                summary = held_summary(key, recorded, t.namespace)
                yield ReplicaComponent(name, recorded, summary, provider, legacy=legacy.get(key))


DEPLOY_HISTORY: Final = 20


def export(components: list[ReplicaComponent], config: cfg.InferCraneConfig, deploy_record: dict[str, Any] | None) -> None:
    """Stack outputs: the replicas, and per endpoint its members (routing membership: key,
    model revision, intent hash) -- every replica this run leaves registered."""
    endpoints: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in components:
        s = c.summary
        endpoints[str(s["endpointName"])].append(
            {"key": s["key"], "modelRevision": s.get("modelRevision"), "intentHash": s.get("intentHash")}
        )
    pulumi.export("namespace", config.kubernetes.namespace)
    pulumi.export("workloadApi", config.kubernetes.workload_api)
    pulumi.export("replicas", {c.summary["key"]: c.summary for c in components})
    pulumi.export("endpoints", dict(endpoints))
    if deploy_record is not None and not pulumi.runtime.is_dry_run():
        entries = [*deploy_record["history"], *([deploy_record["entry"]] if deploy_record.get("entry") else [])]
        pulumi.export("deploys", entries[-DEPLOY_HISTORY:])


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
    from infercrane.live import cluster, readiness, verdicts

    publish = readiness_progress(channel)
    report = functools.partial(publish_snapshot, publish)
    waiter = readiness.FleetWaiter(cluster.client(t), t, t.object_kinds[0], report=report)

    budgets = {r.key: r.startup_budget_seconds + readiness.AWAIT_MARGIN_SECONDS for r in config.replicas}
    components = [c for c in components if not c.summary.get("held")]  # held ones are not rolled by this run
    if not components:
        return None

    def wait(c: ReplicaComponent) -> pulumi.Output[verdicts.Verdict]:
        return c.workload.metadata.apply(  # type: ignore[attr-defined,no-any-return]
            lambda meta: waiter.wait(c.name, int(getattr(meta, "generation", None) or 0), budgets[c.summary["key"]])
        )

    def check(results: list[verdicts.Verdict]) -> None:
        failures = [(c.summary["key"], c.name, v.reason) for c, v in zip(components, results, strict=True) if v.state != "ready"]
        if failures:
            lost = all(v.api_lost for v in results if v.state != "ready")
            channel.error = NotReady(failures, len(components), api_lost=lost)
            raise pulumi.RunError(str(channel.error))
        publish(Readiness(len(components), len(components)), None)

    return pulumi.Output.all(*[wait(c) for c in components]).apply(check)


def readiness_line(event: Readiness, elapsed: float | None = None) -> str:
    """The readiness wait as one log line, for a person reading plain ``pulumi up``'s output."""
    if event.ready == event.total and not event.waiting:
        return f"readiness: {event.ready}/{event.total} ready"
    return f"readiness: {event.ready}/{event.total} ready after {elapsed or 0:.0f}s; waiting on {event.waiting}" + (
        f" ({event.why})" if event.why else ""
    )


def readiness_progress(channel: Channel) -> Callable[[Readiness, float | None], None]:
    """Where the readiness wait's snapshots go: the caller's sink (typed events, the
    :class:`Channel`'s ``progress``), else Pulumi's log as a line (plain ``pulumi``)."""
    sink = channel.progress

    def publish(event: Readiness, elapsed: float | None = None) -> None:
        if sink is not None:
            sink(event)
        else:
            pulumi.log.info(readiness_line(event, elapsed))

    return publish


def publish_snapshot(publish: Callable[[Readiness, float | None], None], p: Any) -> None:
    """One :class:`infercrane.live.readiness.Progress` snapshot, published."""
    publish(Readiness(p.ready, p.total, len(p.waiting), p.summary()), p.elapsed)


def main(channel: Channel | None = None) -> None:
    """The program, as ``__main__.py`` runs it (plain ``pulumi``)."""
    for _ in _program(channel):
        pass


async def run(channel: Channel) -> None:
    """The program, as the Automation API runs it (:mod:`infercrane.engine.workspace`): the same
    steps, yielding to the SDK's event loop after each component, so each registration leaves
    for the engine while the next is built -- the provider's plugin starts and the first object
    is applied while the program is still building the rest (a plain ``pulumi`` program sends
    nothing until it returns: at 100 replicas, a second before the first apply). With a
    ``gate``, the provider is registered first and the rest waits for the caller's inputs."""
    provider = None
    if channel.gate is not None and channel.config is not None:
        provider = make_provider(channel.config.kubernetes)  # its plugin starts and is configured meanwhile
        try:
            inputs = await asyncio.get_running_loop().run_in_executor(None, channel.gate.wait)
        except InferCraneError as exc:
            channel.error = exc
            raise pulumi.RunError(str(exc)) from None
        for name, value in inputs.items():
            setattr(channel, name, value)
    for _ in _program(channel, provider):
        await asyncio.sleep(0)


def _program(channel: Channel | None, provider: k8s.Provider | None = None) -> Iterator[None]:
    """Read the config once, check and build (yielding after each component), export, await."""
    channel = channel or Channel()
    channel.error = None
    stack = pulumi.get_stack()
    source = f"stacks/Pulumi.{stack}.yaml"
    components: list[ReplicaComponent] = []
    try:
        config = channel.config or loading.load(stack_values(), source=source, env=os.environ)
        checked = registrations(config, stack, preflight=not running_under_mocks(), channel=channel, provider=provider)
        for component in checked:
            components.append(component)
            yield
    except InferCraneError as exc:
        channel.error = exc
        raise pulumi.RunError(str(exc)) from None
    export(components, config, channel.deploy_record)
    await_readiness(components, config, channel)
