"""A canary's evidence, taken by InferCrane itself by the route serving evidence takes (the ready
addresses of each replica's EndpointSlices, :class:`~infercrane.live.evidence.served.Checker`): each pod's
``/metrics`` read at the start of the bake and again as it goes, their difference per pod (the
engine's own counts over the window), and the golden requests sent to a canary and a baseline
replica with the worker key (temperature 0, a fixed seed). The verdict is the pure core's
(:mod:`infercrane.core.plan.canary`). Live-cluster layer.

The engines' names (:data:`NAMES`): vLLM's ``vllm:time_to_first_token_seconds`` and
``vllm:e2e_request_latency_seconds`` histograms and the ``http_requests_total`` its instrumentator
counts per handler and status class (requests, and 5xx its failed ones); SGLang's ``sglang:``
histograms of the same names (served with ``--enable-metrics``), ``sglang:num_requests_total``
(its finished requests) and ``sglang:num_aborted_requests_total`` (the requests its tokenizer
aborted: its failed ones, as far as its counters tell). A pod whose page lacks a name it needs has
no figures: the verdict waits, it never passes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.endpoints import CanaryPolicy, GoldenRequest
from infercrane.core.model.engines import ENGINES, Metrics
from infercrane.core.model.replica import Replica
from infercrane.core.plan import canary_record
from infercrane.core.render.command import served_names
from infercrane.live.evidence import edge

METRICS_TIMEOUT_SECONDS: Final = 3.0
GOLDEN_TIMEOUT_SECONDS: Final = 60.0  # an answer of max_tokens tokens
GOLDEN_TRIES: Final = 3  # a golden request that fails is asked again: one failure of a healthy engine is no verdict
GOLDEN_SEED: Final = 0
COMPLETIONS: Final = ("/v1/completions", "/v1/chat/completions")
#: prometheus_client's process collector: the engine process's start, where its page serves it
#: (vLLM's API server does; a multiprocess registry -- SGLang's -- does not).
START_TIME: Final = "process_start_time_seconds"

Address = tuple[str, int]


#: Each engine's metric names: its entry of the engines' table.
NAMES: Final = {name: spec.metrics for name, spec in ENGINES.items()}


def missing(names: Metrics) -> str:
    """What a page that answered without its request counter lacks."""
    if names.errors is None:
        return f"{names.requests} for {', '.join(COMPLETIONS)} (no count of failed requests)"
    return f"{names.requests} (no count of the requests it answered)"


@dataclass(frozen=True)
class Page:
    """One pod's counts at one moment: completions answered and failed, and its TTFT histogram."""

    requests: int
    errors: int
    ttft: tuple[tuple[float, int], ...]  # cumulative (upper bound, count), +Inf last
    e2e: tuple[tuple[float, int], ...] = ()  # its request latency histogram, as ttft (() none on its page)
    started: float | None = None  # its process's start (``process_start_time_seconds``; None: its page has none)

    def went_back_from(self, earlier: Page) -> str:
        """How this page shows its engine restarted since ``earlier`` ("" it does not)."""
        if self.started is not None and earlier.started is not None and self.started != earlier.started:
            return "its engine restarted during the bake: its process start time changed"
        old = dict(earlier.ttft)
        if self.requests < earlier.requests or self.errors < earlier.errors or any(n < old.get(b, 0) for b, n in self.ttft):
            return "its engine restarted during the bake: its counters went back"
        return ""


def parse(text: str, engine: str) -> Page:
    """A ``/metrics`` page's counts (:func:`counts`); ValueError when it lacks the engine's names."""
    samples = ((s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples)
    return counts(samples, engine, "its /metrics")


def counts(samples: Iterable[tuple[str, Mapping[str, str], float]], engine: str, where: str) -> Page:
    """One pod's counts from its samples (name, labels, value), summed over their label sets (every
    model name it serves): the requests it answered and failed (:data:`NAMES`) and its latency
    histograms. ValueError naming ``where`` when they lack the engine's names. A counter of failed
    requests that is absent counts none (a labelled counter shows only once it counted one)."""
    names = NAMES[engine]
    requests = errors = 0
    buckets: dict[float, int] = {}
    latency: dict[float, int] = {}
    counted = False
    started: float | None = None
    for name, labels, value in samples:
        if name == START_TIME:
            started = value
        elif name == names.requests and (names.errors is not None or labels.get("handler") in COMPLETIONS):
            counted = True
            requests += int(value)
            if names.errors is None and str(labels.get("status", "")).startswith("5"):
                errors += int(value)
        elif name == names.errors:
            errors += int(value)
        elif name == names.ttft + "_bucket":
            bound = float(labels["le"])
            buckets[bound] = buckets.get(bound, 0) + int(value)
        elif name == names.e2e + "_bucket":
            bound = float(labels["le"])
            latency[bound] = latency.get(bound, 0) + int(value)
    if not buckets:
        raise ValueError(f"{where} has no {names.ttft}")
    if not counted and buckets.get(canary_record.INF, 0) > 0:  # it answered, but its requests are not counted
        raise ValueError(f"{where} has no {missing(names)}")
    return Page(requests, errors, tuple(sorted(buckets.items())), tuple(sorted(latency.items())), started)


def read_page(address: Address, engine: str, *, timeout: float = METRICS_TIMEOUT_SECONDS) -> Page:
    """``GET http://<address>/metrics`` (no key: the engines serve it without one), parsed."""
    try:
        answer = edge.get(edge.url(*address, "/metrics"), timeout=timeout)
    except edge.Refused as exc:
        hint = " (SGLang serves it only with --enable-metrics in the replica's args)" if engine == "sglang" else ""
        raise edge.Unanswered(f"its /metrics answered HTTP {exc.status}{hint}") from exc
    except edge.NoAnswer as exc:
        raise edge.Unanswered(f"its /metrics did not answer ({exc})") from exc
    return parse(answer.text(), engine)


def complete(
    address: Address, key: str | None, model: str, request: GoldenRequest, *, timeout: float = GOLDEN_TIMEOUT_SECONDS
) -> str:
    """One golden request's answer text: ``POST /v1/completions`` at temperature 0 with a fixed
    seed; ValueError with why when there is none."""
    body = {"model": model, "prompt": request.prompt, "max_tokens": request.max_tokens, "temperature": 0, "seed": GOLDEN_SEED}
    doc = edge.post(edge.url(*address, "/v1/completions"), body, headers=edge.bearer(key), timeout=timeout).json()
    try:
        return str(doc["choices"][0]["text"])
    except (KeyError, IndexError, TypeError) as exc:
        raise edge.Unanswered(f"{exc.__class__.__name__}: {exc}") from exc


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Bake:
    """One canary's bake: what each pod had counted when it began, and the record at any moment
    after (:meth:`record`). ``addresses`` gives a replica's ready pod addresses (the checker's)."""

    def __init__(
        self,
        config: InferCraneConfig,
        endpoint: str,
        policy: CanaryPolicy,
        canary_keys: Sequence[str],
        baseline_keys: Sequence[str],
        addresses: Callable[[Replica], list[Address]],
        key: str | None,
        *,
        read: Callable[[Address, str], Page] = read_page,
        ask: Callable[[Address, str | None, str, GoldenRequest], str] = complete,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        replicas = {r.key: r for r in config.replicas}
        self.endpoint, self.policy, self._read, self._ask, self._clock = endpoint, policy, read, ask, clock
        self.sides: list[tuple[canary_record.Side, Replica]] = [("canary", replicas[k]) for k in canary_keys]
        # A baseline replica leaving the config with this release (a cutover to new keys) is read
        # as a replica of its endpoint under its own key: the canary's config, whose names are the
        # endpoint's. Its engine is taken to be the canary's: a page of another engine lacks the
        # names read, and that side has no figures -- it waits, never passes.
        like = replicas[canary_keys[0]]
        self.sides += [("baseline", replicas.get(k) or like.model_copy(update={"key": k})) for k in baseline_keys]
        self._addresses, self._key = addresses, key
        self.started = clock()
        self.at_start: dict[str, dict[Address, Page] | str] = {r.key: self._pages(r) for _, r in self.sides}
        self.last = dict(self.at_start)  # each replica's previous read: a restart between two reads is seen
        self.restarted: dict[str, str] = {}  # replica key -> how its engine was seen to restart (kept once seen)
        self.golden = self._golden()

    def _pages(self, replica: Replica) -> dict[Address, Page] | str:
        """Each ready pod address's page, or why the replica has none."""
        found = self._addresses(replica)
        if not found:
            return "no ready address in its EndpointSlices"
        try:
            return {a: self._read(a, replica.engine) for a in found}
        except ValueError as exc:
            return str(exc)

    def _golden(self) -> tuple[canary_record.Golden, ...]:
        """Each golden request, asked of the first canary and the first baseline replica."""
        if not self.policy.golden:
            return ()
        first = {side: next((r for s, r in self.sides if s == side), None) for side in ("canary", "baseline")}
        out = []
        for i, request in enumerate(self.policy.golden, 1):
            answers: dict[str, str] = {}
            why = ""
            for side, replica in first.items():
                if replica is None or (side == "baseline" and request.match is not None):
                    continue
                text, said = self._answer(replica, request)
                if text is None:
                    why = why or f"{side} {replica.key}: {said}"
                else:
                    answers[side] = text
            matches = (
                None if request.match is None or "canary" not in answers else bool(re.search(request.match, answers["canary"]))
            )
            out.append(
                canary_record.Golden(
                    index=i,
                    canary=digest(answers["canary"]) if "canary" in answers else "",
                    baseline=digest(answers["baseline"]) if "baseline" in answers else "",
                    pattern=request.match,
                    canary_matches=matches,
                    why=why,
                )
            )
        return tuple(out)

    def _answer(self, replica: Replica, request: GoldenRequest) -> tuple[str | None, str]:
        found = self._addresses(replica)
        if not found:
            return None, "no ready address in its EndpointSlices"
        said = ""
        for _ in range(GOLDEN_TRIES):
            try:
                return self._ask(found[0], self._key, served_names(replica)[0], request), ""
            except ValueError as exc:
                said = str(exc)
        return None, f"{said} ({GOLDEN_TRIES} tries)"

    def record(self, *, final: bool) -> canary_record.Record:
        """The evidence now: each replica's counts since the bake began."""
        measured = []
        for side, replica in self.sides:
            before, now = self.at_start[replica.key], self._pages(replica)
            if isinstance(before, str) and not isinstance(now, str):
                # Unreadable when the bake began (a Prometheus that had not scraped it yet, a page
                # that did not answer): its window begins at its first read that is.
                self.at_start[replica.key] = now
                before = f"{before} when the bake began; its window begins now"
            self._watch(replica.key, now)
            window = _window(replica.key, side, before, now)
            measured.append(dataclasses.replace(window, restarted=self.restarted.get(replica.key, "")))
        t = canary_record.Thresholds(
            min_requests=self.policy.min_requests,
            max_ttft_p95_ratio=float(self.policy.max_ttft_p95_ratio),
            max_error_ratio_increase=float(self.policy.max_error_ratio_increase),
            required=self.policy.required,
            max_e2e_p95_ratio=float(self.policy.max_e2e_p95_ratio),
        )
        baked = int(self._clock() - self.started)
        return canary_record.Record(self.endpoint, t, tuple(measured), self.golden, baked, final)

    def _watch(self, key: str, now: dict[Address, Page] | str) -> None:
        """Compare ``key``'s read with its previous one: an engine that restarted between two reads
        (counters that went back, a new process start time) or a replica that lost its ready
        address is remembered for the rest of the bake -- a later read that climbed past the old
        counts does not clear it."""
        last = self.last.get(key)
        if isinstance(last, dict) and isinstance(now, str):
            self.restarted.setdefault(key, f"it stopped serving during the bake ({now})")
        elif isinstance(last, dict) and isinstance(now, dict):
            for address, page in now.items():
                if address in last and (why := page.went_back_from(last[address])):
                    self.restarted.setdefault(key, f"{why} ({address[0]})")
        if isinstance(now, dict):
            self.last[key] = now


def _window(
    key: str, side: canary_record.Side, before: Mapping[Address, Page] | str, now: Mapping[Address, Page] | str
) -> canary_record.Measured:
    """One replica's counts over the window: per pod address, now minus at the start."""
    if isinstance(before, str) or isinstance(now, str):
        return canary_record.Measured(key, side, unreadable=before if isinstance(before, str) else str(now))
    if set(before) != set(now):
        return canary_record.Measured(key, side, unreadable="its pods changed during the bake")
    requests = errors = 0
    ttft: dict[float, int] = {}
    e2e: dict[float, int] = {}
    counted = all(page.e2e for page in now.values())  # every pod counts its latency, or none is judged
    for address, page in now.items():
        old = before[address]
        old_buckets, old_e2e = dict(old.ttft), dict(old.e2e)
        if why := page.went_back_from(old):
            return canary_record.Measured(key, side, unreadable=f"{why} ({address[0]})")
        requests += page.requests - old.requests
        errors += page.errors - old.errors
        for bound, n in page.ttft:
            ttft[bound] = ttft.get(bound, 0) + n - old_buckets.get(bound, 0)
        for bound, n in page.e2e if counted else ():
            e2e[bound] = e2e.get(bound, 0) + n - old_e2e.get(bound, 0)
    return canary_record.Measured(key, side, requests, errors, tuple(sorted(ttft.items())), e2e=tuple(sorted(e2e.items())))
