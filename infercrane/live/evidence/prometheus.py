"""A canary's engine counts from a Prometheus that already scrapes the pods
(``kubernetes.canaryMetrics.prometheus``), instead of each pod's ``/metrics`` read directly: the
same counts per pod address (:class:`~infercrane.live.evidence.canary.Page`), from one instant query per
pod -- the series of the engine's histograms and request counters whose ``instance`` is
the pod's address (what a ``kubernetes_sd_configs`` pod target is named unless relabelled). The
bake's window is the difference of two such reads, as for direct scraping; Prometheus answers with
the last sample it scraped (one scrape interval late at most, on both sides alike). Live-cluster layer.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Final

from infercrane.live.evidence import canary, edge

QUERY_TIMEOUT_SECONDS: Final = 5.0


def selector(address: canary.Address, engine: str) -> str:
    """The PromQL selector of one pod's series: its TTFT and latency buckets, its request counters."""
    names = "|".join(canary.NAMES[engine].series)
    return f'{{__name__=~"{names}",instance="{address[0]}:{address[1]}"}}'


def reader(url: str, *, timeout: float = QUERY_TIMEOUT_SECONDS) -> Callable[[canary.Address, str], canary.Page]:
    """A :class:`~infercrane.live.evidence.canary.Bake` ``read`` that asks the Prometheus at ``url``."""
    base = url.rstrip("/")

    def read(address: canary.Address, engine: str) -> canary.Page:
        query = urllib.parse.urlencode({"query": selector(address, engine)})
        try:
            doc = edge.get(f"{base}/api/v1/query?{query}", timeout=timeout).json()
        except edge.Refused as exc:
            raise edge.Unanswered(f"Prometheus answered HTTP {exc.status} for its series") from exc
        except edge.Unanswered as exc:
            raise edge.Unanswered(f"Prometheus did not answer for its series ({exc})") from exc
        if doc.get("status") != "success" or (doc.get("data") or {}).get("resultType") != "vector":
            raise ValueError(f"Prometheus refused the query: {doc.get('error') or doc.get('status')}")
        samples = [(str(s["metric"].get("__name__")), s["metric"], float(s["value"][1])) for s in doc["data"]["result"] or []]
        return canary.counts(samples, engine, f"Prometheus, for instance {address[0]}:{address[1]},")

    return read
