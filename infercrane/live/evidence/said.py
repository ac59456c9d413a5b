"""Serving evidence in words: one replica's evidence as a line, and a command's evidence as few
lines -- one per replica seen serving, one per reason for the others. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Evidence(Protocol):
    """What a line is made of: a replica's evidence (:class:`~infercrane.live.evidence.served.Evidence`)."""

    @property
    def state(self) -> str: ...

    def line(self) -> str: ...

    def as_output(self) -> dict[str, Any]: ...


def line(evidence: Mapping[str, Any], *, route: bool = True) -> str:
    """Evidence in its output form (a stack output, ``inspect --json``) as one line; ``route``:
    with where the replica was asked (it differs per replica: lines grouped by reason leave it out)."""
    if evidence["state"] == "serving":
        weights = evidence.get("modelImage")
        if weights is None:
            proof = ""
        elif weights["state"] == "proven":
            proof = f"; its pods mounted the pinned model image {weights['pinned'][:19]}…"
        else:
            proof = f"; model image mount not proven: {weights.get('reason', '')}"
        return f"serving {', '.join(evidence['served'])} ({evidence['route']}, {evidence['checkedAt']}){proof}"
    where = f" ({evidence['route']})" if route and evidence.get("route") else ""
    fix = f"; fix: {evidence['fix']}" if evidence.get("fix") else ""
    return f"{evidence['state']}: {evidence.get('reason', '')}{where}{fix}"


def lines(taken: Mapping[str, Evidence]) -> list[str]:
    """A command's evidence lines (key -> evidence): one per replica seen serving (its names and
    route), one per reason for the others -- at 100 replicas without a key, one line, not a hundred."""
    out = [f"evidence: replica {key}: {e.line()}" for key, e in taken.items() if e.state == "serving"]
    same: dict[str, list[str]] = {}
    for key, e in taken.items():
        if e.state != "serving":
            same.setdefault(line(e.as_output(), route=False), []).append(key)
    for said, keys in same.items():
        if len(keys) == 1:
            out.append(f"evidence: replica {keys[0]}: {taken[keys[0]].line()}")
            continue
        shown = ", ".join(keys[:3]) + (", …" if len(keys) > 3 else "")
        out.append(f"evidence: {len(keys)} replicas ({shown}): {said}")
    return out
