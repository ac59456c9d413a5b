"""The program's wait on ``up``: every replica's workload ready, for the whole stack with one
poller, its progress published as typed events on the caller's sink (the Channel) or, under plain
``pulumi``, as log lines. Pulumi shell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pulumi

from infercrane.core.errors import NotReady
from infercrane.core.events import Readiness
from infercrane.core.model import config as cfg
from infercrane.shell.channel import Channel
from infercrane.shell.components import ReplicaComponent


def running_under_mocks() -> bool:
    """True only in the Pulumi-mocks test tier (the monitor is the SDK's MockMonitor)."""
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.settings import get_monitor

    try:
        return isinstance(get_monitor(), MockMonitor)
    except Exception:  # noqa: BLE001 - no monitor at all: not mocks
        return False


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
    from infercrane.live import readiness, verdicts
    from infercrane.live.api import Live

    publish = readiness_progress(channel)
    report = functools.partial(publish_snapshot, publish)
    waiter = readiness.FleetWaiter(channel.live or Live.connect(t), t.object_kinds[0], report=report)

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
        publish(Readiness(len(components), len(components)))

    return pulumi.Output.all(*[wait(c) for c in components]).apply(check)


def readiness_line(event: Readiness) -> str:
    """The readiness wait as one log line, for a person reading plain ``pulumi up``'s output."""
    if event.ready == event.total and not event.waiting:
        return f"readiness: {event.ready}/{event.total} ready"
    why = f" ({event.why})" if event.why else ""
    return f"readiness: {event.ready}/{event.total} ready after {event.elapsed:.0f}s; waiting on {event.waiting}{why}"


def readiness_progress(channel: Channel) -> Callable[[Readiness], None]:
    """Where the readiness wait's snapshots go: the caller's sink (typed events, the
    :class:`Channel`'s ``progress``), else Pulumi's log as a line (plain ``pulumi``)."""
    sink = channel.progress

    def publish(event: Readiness) -> None:
        if sink is not None:
            sink(event)
        else:
            pulumi.log.info(readiness_line(event))

    return publish


def publish_snapshot(publish: Callable[[Readiness], None], p: Any) -> None:
    """One :class:`infercrane.live.readiness.Progress` snapshot, published."""
    publish(Readiness(p.ready, p.total, len(p.waiting), p.summary(), p.elapsed))
