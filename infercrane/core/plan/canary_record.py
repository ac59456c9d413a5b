"""A canary's record: every input of its verdict (:mod:`infercrane.core.plan.canary`) -- what each
replica's engine counted over the bake, the golden requests' answers as hashes, the thresholds --
in a canonical JSON form whose digest names it. Pure core.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

Side = Literal["canary", "baseline"]
INF: Final = math.inf


@dataclass(frozen=True)
class Measured:
    """What one replica's engine counted over the bake window (the difference of two scrapes)."""

    replica: str
    side: Side
    requests: int = 0  # completions answered, whatever their status
    errors: int = 0  # ... failed (vLLM: answered with a 5xx; SGLang: aborted)
    ttft: tuple[tuple[float, int], ...] = ()  # cumulative bucket counts (upper bound, count), +Inf last
    unreadable: str = ""  # why it has no figures ("" it has)
    e2e: tuple[tuple[float, int], ...] = ()  # its request latency histogram, as ttft ((): its engine has none)
    restarted: str = ""  # how its engine was seen to restart or stop serving during the bake ("" it was not)


@dataclass(frozen=True)
class Golden:
    """One golden request's answers, as SHA-256 hashes of their text ("" no answer, and why)."""

    index: int  # its place in the policy's list, from 1
    canary: str = ""
    baseline: str = ""
    pattern: str | None = None  # the policy's ``match``: every answer must match it
    canary_matches: bool | None = None  # the canary's answer against the pattern (None: no pattern or no answer)
    why: str = ""  # why an answer is missing

    @property
    def differs(self) -> bool:
        if not self.canary:
            return False
        if self.pattern is not None:
            return self.canary_matches is False
        return bool(self.baseline) and self.canary != self.baseline


@dataclass(frozen=True)
class Thresholds:
    min_requests: int
    max_ttft_p95_ratio: float
    max_error_ratio_increase: float
    required: bool
    max_e2e_p95_ratio: float | None = None  # None: not judged (a record from before it was)


@dataclass(frozen=True)
class Record:
    """Every input of a verdict: re-judged, it gives the same verdict."""

    endpoint: str
    thresholds: Thresholds
    measured: tuple[Measured, ...]
    golden: tuple[Golden, ...] = ()
    baked_seconds: int = 0  # how long the canary had served when this was taken
    final: bool = False  # taken at the end of the bake

    def as_json(self) -> dict[str, Any]:
        """Its JSON form, already canonical: a whole number is written as one (1, not 1.0), as it
        comes back from any JSON store (a Pulumi stack output turns 1.0 into 1)."""
        doc = asdict(self)
        for m in doc["measured"]:
            m["ttft"] = [["+Inf" if le == INF else le, n] for le, n in m["ttft"]]
            m["e2e"] = [["+Inf" if le == INF else le, n] for le, n in m["e2e"]]
            if not m["e2e"]:  # left out when empty: a record from before it re-judges byte for byte
                del m["e2e"]
            if not m["restarted"]:  # likewise
                del m["restarted"]
        if doc["thresholds"]["max_e2e_p95_ratio"] is None:
            del doc["thresholds"]["max_e2e_p95_ratio"]
        return dict(numbers(doc))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Record:
        measured = tuple(
            Measured(
                replica=m["replica"],
                side=m["side"],
                requests=int(m["requests"]),
                errors=int(m["errors"]),
                ttft=tuple((INF if le == "+Inf" else float(le), int(n)) for le, n in m["ttft"]),
                unreadable=m["unreadable"],
                e2e=tuple((INF if le == "+Inf" else float(le), int(n)) for le, n in m.get("e2e") or ()),
                restarted=str(m.get("restarted") or ""),
            )
            for m in doc["measured"]
        )
        t = doc["thresholds"]
        return cls(
            endpoint=doc["endpoint"],
            thresholds=Thresholds(
                min_requests=int(t["min_requests"]),
                max_ttft_p95_ratio=float(t["max_ttft_p95_ratio"]),
                max_error_ratio_increase=float(t["max_error_ratio_increase"]),
                required=bool(t["required"]),
                max_e2e_p95_ratio=None if t.get("max_e2e_p95_ratio") is None else float(t["max_e2e_p95_ratio"]),
            ),
            measured=measured,
            golden=tuple(Golden(**g) for g in doc["golden"]),
            baked_seconds=int(doc["baked_seconds"]),
            final=bool(doc["final"]),
        )

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(_canonical(self.as_json())).hexdigest()


def numbers(doc: Any) -> Any:
    """``doc`` with every whole float as an int: the one form JSON round trips keep."""
    if isinstance(doc, float) and doc.is_integer():
        return int(doc)
    if isinstance(doc, dict):
        return {k: numbers(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [numbers(v) for v in doc]
    return doc


def _canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
