"""A plan's rollout as the CLI prints it: each endpoint's waves, floor and GPUs in lines, its
canary in words, the estimate of how long it takes, and the same facts as the ``--json``
document. CLI layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infercrane.cli.documents import as_json
from infercrane.core.render import prefetch

if TYPE_CHECKING:
    from infercrane.core.model.endpoints import CanaryPolicy
    from infercrane.core.plan.duration import Estimate
    from infercrane.core.plan.waves import EndpointRollout, Rollout


def rollout_lines(rollout: Rollout | None) -> list[str]:
    """Per endpoint that changes: its policy, its waves in order, the lowest ready count, the GPUs."""
    if rollout is None:
        return []
    lines = [line for e in rollout.endpoints for line in endpoint_lines(e)]
    if lines:
        lines.insert(
            0,
            f"rollout: up to {rollout.stages} stage(s) per endpoint, each endpoint at its own pace (`infercrane deploy` "
            "runs them in one `pulumi up`; plain `pulumi up` does one)",
        )
        wanted = rollout.borrowed_at_once()
        if rollout.max_extra_gpus is not None and wanted:
            want = ", ".join(f"{n} of {p or 'their product'}" for p, n in sorted(wanted.items()))
            lines.append(
                f"  extra GPUs: at most {rollout.max_extra_gpus} of each product at once, all endpoints together "
                f"(rollout.maxExtraGpus); their surges want {want}"
                + (" at once: they take turns" if any(n > rollout.max_extra_gpus for n in wanted.values()) else "")
            )
    return lines


def changes(e: EndpointRollout) -> bool:
    """Whether the endpoint's rollout does anything."""
    return bool(e.waves or e.deleted_idle or e.deleted_last or e.retired_first or e.recreated or e.ready_before != e.ready_after)


def endpoint_lines(e: EndpointRollout) -> list[str]:
    """One endpoint's rollout as the plan says it ([] when it does nothing)."""
    lines: list[str] = []
    if changes(e):
        head = (
            f"  endpoint {e.endpoint}: {e.ready_before} -> {e.ready_after} replica(s), {len(e.waves)} wave(s) {e.mode} "
            f"(maxUnavailable {e.max_unavailable}, maxSurge {e.max_surge}); lowest ready {e.lowest_ready}; "
            f"GPUs {e.gpus_before} -> {e.gpus_after}, peak {e.peak_gpus} ({e.extra_gpus} extra)"
            + (f"; per product {', '.join(f'{p} {n}' for p, n in e.peak_by_product)}" if e.peak_by_product else "")
        )
        lines.append(head)
        if e.deleted_idle:
            lines.append(f"    first: delete {', '.join(e.deleted_idle)} (not available)")
        if e.repaired_first:
            lines.append(f"    first: bring back {', '.join(e.repaired_first)} (not available; already counts as unavailable)")
        if e.recreated:
            lines.append(
                f"    first: recreate {', '.join(e.recreated)} (not available: deleted, then made again -- "
                "its old pod goes before its new one starts, no GPU more)"
            )
            if e.canary_first and e.canary_policy is not None:
                lines.append(
                    f"      the canary {', '.join(e.canary)} (left on the new release by a killed run): "
                    f"{canary_words(e.canary_policy)}; beside the baseline {', '.join(e.baseline)}"
                )
        if e.settling_first:
            lines.append(f"    first: let {', '.join(e.settling_first)} settle (available, its own rollout under way)")
        if e.retired_first:
            lines.append(
                f"    first: delete {', '.join(e.retired_first)} (no successor; within the GPU budget only before the waves)"
            )
        for i, w in enumerate(e.waves, 1):
            order = "down, then up" if e.mode == "in place" else "up, then down"
            lines.append(f"    wave {i}: down {', '.join(w.down) or '-'}; up {', '.join(w.up) or '-'} ({order})")
            if e.canary_wave == i - 1 and e.canary_policy is not None:
                lines.append(f"      the canary: {canary_words(e.canary_policy)}; beside the baseline {', '.join(e.baseline)}")
        if e.warm_first and e.waves:
            lines.append(
                "    warm-first: before each wave, its release is pulled onto its replicas' nodes while they serve "
                f"(needs the pod reader and {prefetch.ROLE_FILE}; without them the waves pull cold)"
            )
        if e.canary_unneeded:
            lines.append(f"    no canary: {e.canary_unneeded} (the release is proven beside the others)")
        if e.no_canary:
            lines.append(f"    no canary: {e.no_canary} (canary.required is false: the release rolls without a verdict)")
        if e.deleted_last:
            lines.append(f"    last: delete {', '.join(e.deleted_last)} (no successor)")
    return lines


def span(seconds: float) -> str:
    """``95`` -> ``1 min 35 s``; ``40`` -> ``40 s``; ``4000`` -> ``1 h 6 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def estimate_lines(estimate: Estimate) -> list[str]:
    """What the rollout costs, as the plan says it: its expected duration, per endpoint when there
    are several, the GPU-hours beyond steady state, and what the starts were taken from."""
    longest = max(estimate.lanes, key=lambda lane: lane.seconds, default=None)
    head = f"  expected: about {span(estimate.seconds)}"
    if longest is not None and len(estimate.lanes) > 1:
        head += f" (the longest lane: endpoint {longest.endpoint}, {span(longest.seconds)})"
    lines = [head + f"; {estimate.gpu_hours:.2f} GPU-hours beyond steady state"]
    if len(estimate.lanes) > 1:
        lines += [
            f"    {lane.endpoint}: {span(lane.seconds)}, {lane.gpu_hours:.2f} GPU-hours" for lane in estimate.lanes[:MAX_LISTED]
        ]
        if len(estimate.lanes) > MAX_LISTED:
            lines.append(f"    and {len(estimate.lanes) - MAX_LISTED} more endpoint(s) (plan --json has each)")
    lines += [f"    starts from: {basis}" for basis in estimate.bases]
    return lines


MAX_LISTED = 20  # endpoints named one per line in a plan's estimate


def canary_words(policy: CanaryPolicy) -> str:
    """A canary policy as the plan says it: its bake, its minimum and its thresholds."""
    golden = f", {len(policy.golden)} golden request(s) answered as the baseline's" if policy.golden else ""
    return (
        f"bakes {policy.bake_seconds} s, judged on at least {policy.min_requests} requests each: ttft p95 at most "
        f"x{policy.max_ttft_p95_ratio:g} the baseline's, error ratio at most +{policy.max_error_ratio_increase:.1%}{golden}"
        + ("; required: no verdict, no release" if policy.required else "")
    )


def rollout_doc(rollout: Rollout | None) -> Any:
    if rollout is None:
        return None
    return {
        "stages": rollout.stages,
        "maxExtraGpus": rollout.max_extra_gpus,
        "extraGpusWanted": rollout.borrowed_at_once(),
        "endpoints": [
            {**as_json(e), "waves": [as_json(w) for w in e.waves], "extraGpus": e.extra_gpus, "stagesNeeded": e.stages_needed}
            for e in rollout.endpoints
        ],
    }
