"""A canary's bake: the engines' counts read every :data:`SAMPLE_SECONDS` (from each pod's
``/metrics`` or a Prometheus), its record judged each time -- REJECT ends it at once, otherwise
the verdict is the one at its end. Live-cluster layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Final

from infercrane.core.model import config as cfg
from infercrane.core.plan import canary as judging
from infercrane.core.plan.waves import EndpointRollout
from infercrane.live.evidence import canary as evidence
from infercrane.live.evidence import held as holding
from infercrane.live.evidence import prometheus, served

SAMPLE_SECONDS: Final = 5.0  # how often a bake reads the pods' counts (a regression is rejected within this)


def bake(
    config: cfg.InferCraneConfig,
    e: EndpointRollout,
    checker: served.Checker,
    note: Callable[[str], None],
    *,
    held: Collection[str] = (),
    current: Callable[[str], str | None] = lambda key: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> judging.CanaryVerdict:
    """Bake ``e``'s canary for its policy's ``bakeSeconds``, reading the engines' counts every
    :data:`SAMPLE_SECONDS`: REJECT ends it at once; otherwise the verdict is the one at its end.
    ``held``: canary keys whose old pods are held beside them (``current`` names each one's
    current ReplicaSet): their old pods bake as baseline (:func:`~infercrane.live.evidence.held.addresses`)."""
    policy = e.canary_policy
    assert policy is not None  # a stage bakes only under a canary policy

    addresses, olds = (
        holding.addresses(checker, {r.key: r for r in config.replicas}, held, current) if held else (checker.addresses, [])
    )
    baseline = [*e.baseline, *olds]
    note(
        f"rollout: {e.endpoint}: the canary {', '.join(e.canary)} bakes {policy.bake_seconds} s beside the baseline "
        f"{', '.join(baseline)} (at least {policy.min_requests} requests each"
        + (f", {len(policy.golden)} golden request(s)" if policy.golden else "")
        + (
            f"; counts from Prometheus at {config.kubernetes.canary_metrics.prometheus}"
            if config.kubernetes.canary_metrics.prometheus
            else ""
        )
        + ")"
    )
    source = config.kubernetes.canary_metrics.prometheus
    read = prometheus.reader(source) if source else evidence.read_page  # where the engines' counts come from
    baking = evidence.Bake(config, e.endpoint, policy, e.canary, baseline, addresses, checker.key, read=read, clock=clock)
    end = baking.started + policy.bake_seconds
    while True:
        final = clock() >= end
        verdict = judging.judge(baking.record(final=final))
        if verdict.outcome == "REJECT" or final:
            return verdict
        sleep(max(0.0, min(SAMPLE_SECONDS, end - clock())))
