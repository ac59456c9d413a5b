"""A canary's verdict: ACCEPT, REJECT, WAIT or NOT VERIFIABLE, from a
:class:`~infercrane.core.plan.canary_record.Record` of the engines' own evidence and nothing else.
Pure core.

The record holds, per replica of the canary and of the baseline (the endpoint's replicas still on
the old release), what its engine counted over the bake window -- requests answered, failed ones
(5xx), its time-to-first-token histogram -- and the golden requests' answers as hashes. The rules,
in order (:func:`judge`):

1. a canary whose engine restarted or stopped serving during the bake (its counters went back, its
   process start time changed, its ready address left its EndpointSlices): REJECT, at once -- the
   requests a crash failed are counted by no engine, so no count can clear it; a golden answer
   that differs from the baseline's (or misses its pattern), or a golden request the canary
   failed to answer at all: REJECT, at once;
2. a replica whose figures could not be read (a baseline replica that restarted among them), a
   golden request the baseline could not answer, or
   fewer than ``minRequests`` answered by the canary or by the baseline: WAIT -- a missing
   measurement is never a pass;
3. the canary's error ratio above the baseline's by more than ``maxErrorRatioIncrease``: REJECT;
4. the canary's time-to-first-token p95 over the baseline's above ``maxTtftP95Ratio``: REJECT;
5. else ACCEPT -- but only at the end of the bake (``final``): before it, WAIT.

At the end of the bake a WAIT is NOT VERIFIABLE, which stops the release where the policy is
``required``. The verdict is a function of the record alone: re-judging a record gives the same
verdict, byte for byte, and the record's digest names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from infercrane.core.plan.canary_record import INF, Measured, Record, numbers

Outcome = Literal["ACCEPT", "REJECT", "WAIT", "NOT VERIFIABLE"]
QUANTILE: Final = 0.95


@dataclass(frozen=True)
class Figures:
    """One side's sums over its replicas."""

    requests: int
    errors: int
    ttft_p95: float | None  # seconds (None: no successful request)
    e2e_p95: float | None = None  # seconds (None: no request, or its engine counts no latency)

    @property
    def error_ratio(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def words(self) -> str:
        p95 = "no p95" if self.ttft_p95 is None else f"ttft p95 {self.ttft_p95:.3f} s"
        e2e = "" if self.e2e_p95 is None else f", e2e p95 {self.e2e_p95:.3f} s"
        return f"{self.requests} requests, {self.errors} failed ({self.error_ratio:.1%}), {p95}{e2e}"

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        if doc["e2e_p95"] is None:  # left out: a verdict from before it re-judges byte for byte
            del doc["e2e_p95"]
        return dict(numbers(doc))


@dataclass(frozen=True)
class CanaryVerdict:
    outcome: Outcome
    reasons: tuple[str, ...]
    canary: Figures
    baseline: Figures
    digest: str  # the record's
    record: Record = field(repr=False, compare=False)

    @property
    def stops(self) -> bool:
        """Whether the release goes no further: rejected, or not verifiable where a verdict is required."""
        return self.outcome == "REJECT" or (self.outcome == "NOT VERIFIABLE" and self.record.thresholds.required)

    def line(self) -> str:
        """``canary qwen: REJECT -- ttft p95 ... (record sha256:...)``: one line for a person."""
        return f"canary {self.record.endpoint}: {self.outcome} -- {'; '.join(self.reasons)} (record {self.digest})"

    def as_json(self) -> dict[str, Any]:
        """The stack output / ``--json`` form: the verdict, its figures, its record and digest."""
        return {
            "outcome": self.outcome,
            "reasons": list(self.reasons),
            "canary": self.canary.as_json(),
            "baseline": self.baseline.as_json(),
            "record": self.record.as_json(),
            "digest": self.digest,
        }


def quantile(q: float, buckets: Sequence[tuple[float, int]]) -> float | None:
    """Prometheus's ``histogram_quantile``: the ``q`` quantile of cumulative ``buckets`` (upper
    bound, count; +Inf last), linear within the bucket it falls in; in the +Inf bucket, the highest
    finite bound. None when the histogram counted nothing."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0
    for bound, count in buckets:
        if count >= rank:
            if bound == INF:
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def summed(buckets: Iterable[tuple[tuple[float, int], ...]]) -> tuple[tuple[float, int], ...]:
    """Histograms of several replicas as one (they share their bounds: one engine's)."""
    out: dict[float, int] = {}
    for hist in buckets:
        for bound, n in hist:
            out[bound] = out.get(bound, 0) + n
    return tuple(sorted(out.items()))


def figures(measured: Iterable[Measured]) -> Figures:
    ms = [m for m in measured if not m.unreadable]
    return Figures(
        requests=sum(m.requests for m in ms),
        errors=sum(m.errors for m in ms),
        ttft_p95=quantile(QUANTILE, summed(m.ttft for m in ms)),
        e2e_p95=quantile(QUANTILE, summed(m.e2e for m in ms)) if ms and all(m.e2e for m in ms) else None,
    )


def judge(record: Record) -> CanaryVerdict:
    """The verdict of ``record`` (the rules in this module's text)."""
    t = record.thresholds
    canary = figures(m for m in record.measured if m.side == "canary")
    baseline = figures(m for m in record.measured if m.side == "baseline")

    def verdict(outcome: Outcome, reasons: list[str]) -> CanaryVerdict:
        if outcome == "WAIT" and record.final:
            outcome = "NOT VERIFIABLE"
            reasons = [*reasons, f"the bake ended after {record.baked_seconds} s"]
        return CanaryVerdict(outcome, tuple(reasons), canary, baseline, record.digest(), record)

    changed = [g for g in record.golden if g.differs]
    unanswered = [g for g in record.golden if not g.canary]
    crashed = [m for m in record.measured if m.side == "canary" and m.restarted]
    if crashed:  # the requests a crash failed are counted by no engine: its counts cannot clear it
        return verdict("REJECT", [f"canary replica {m.replica}: {m.restarted}" for m in crashed])
    if changed or unanswered:
        said = [
            f"golden request {g.index}: the canary's answer "
            + (f"does not match {g.pattern!r}" if g.pattern is not None else "differs from the baseline's")
            for g in changed
        ]
        said += [f"golden request {g.index}: the canary did not answer ({g.why})" for g in unanswered]
        return verdict("REJECT", said)

    waits = [f"no figures from {m.side} replica {m.replica}: {m.unreadable}" for m in record.measured if m.unreadable]
    waits += [f"no figures from baseline replica {m.replica}: {m.restarted}" for m in record.measured if m.restarted]
    waits += [
        f"golden request {g.index}: the baseline did not answer ({g.why})"
        for g in record.golden
        if not g.baseline and g.pattern is None
    ]
    if not any(m.side == "baseline" for m in record.measured):
        waits.append("no baseline replica to compare with")
    for side, f in (("canary", canary), ("baseline", baseline)):
        if f.requests < t.min_requests:
            waits.append(f"the {side} answered {f.requests} of the {t.min_requests} requests the verdict needs")
    if waits:
        return verdict("WAIT", waits)

    shown = f"canary {canary.words()}; baseline {baseline.words()}"
    rejects = []
    increase = canary.error_ratio - baseline.error_ratio
    if increase > t.max_error_ratio_increase:
        rejects.append(
            f"error ratio {canary.error_ratio:.1%} vs baseline {baseline.error_ratio:.1%} "
            f"(+{increase:.1%} > maxErrorRatioIncrease {t.max_error_ratio_increase:.1%})"
        )
    if canary.ttft_p95 is None:
        rejects.append("the canary answered no request successfully")
    elif baseline.ttft_p95 is not None and baseline.ttft_p95 > 0:
        ratio = canary.ttft_p95 / baseline.ttft_p95
        if ratio > t.max_ttft_p95_ratio:
            rejects.append(
                f"ttft p95 {canary.ttft_p95:.3f} s vs baseline {baseline.ttft_p95:.3f} s "
                f"(x{ratio:.2f} > maxTtftP95Ratio {t.max_ttft_p95_ratio:g})"
            )
    if t.max_e2e_p95_ratio is not None and canary.e2e_p95 is not None and baseline.e2e_p95:
        ratio = canary.e2e_p95 / baseline.e2e_p95
        if ratio > t.max_e2e_p95_ratio:
            rejects.append(
                f"e2e p95 {canary.e2e_p95:.3f} s vs baseline {baseline.e2e_p95:.3f} s "
                f"(x{ratio:.2f} > maxE2eP95Ratio {t.max_e2e_p95_ratio:g})"
            )
    if rejects:
        return verdict("REJECT", [*rejects, shown])
    if not record.final:
        return verdict("WAIT", [f"within every threshold after {record.baked_seconds} s of the bake", shown])
    return verdict("ACCEPT", [f"within every threshold after {record.baked_seconds} s", shown])


def rejudge(doc: Mapping[str, Any]) -> CanaryVerdict:
    """The verdict of a recorded verdict's record (its ``record`` field): the same, byte for byte."""
    return judge(Record.from_json(doc["record"]))
