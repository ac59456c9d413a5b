"""One line of ``doctor``'s report: a check's name, its verdict -- pass, warn, fail, optional or not
verifiable -- what it found and how to fix it. Live-cluster layer.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS, WARN, FAIL, OPTIONAL = "pass", "warn", "fail", "optional"
UNVERIFIABLE = "not verifiable"  # the shipped Role may not read it: not a warning on a healthy set-up


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    hint: str = ""
