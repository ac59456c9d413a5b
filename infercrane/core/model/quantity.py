"""Kubernetes quantities, as much as InferCrane needs: memory in bytes and CPU in millicores,
parsed, added, scaled by a GPU count and written back in the largest exact unit. Pure core."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

MEMORY_RE: Final = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
CPU_RE: Final = re.compile(r"^([0-9]+(?:\.[0-9]{1,3})?)$|^([0-9]+)m$")
UNITS: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
BINARY: Final = ("Ti", "Gi", "Mi", "Ki")


QUANTITY_RE: Final = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
SUFFIXES: Final = {
    **{k: Decimal(v) for k, v in UNITS.items()},
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}


def value(q: object) -> Decimal | None:
    """Any Kubernetes quantity's exact value (``16Gi`` and ``16384Mi`` alike, ``0.5Gi``, ``500M``,
    ``1e3``, a bare number); None for what is not one."""
    if isinstance(q, bool) or not isinstance(q, (str, int, float)):
        return None
    m = QUANTITY_RE.match(str(q).strip())
    if not m:
        return None
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number.scaleb(int(suffix[1:]))
    return number * SUFFIXES.get(suffix, Decimal(1))


def memory_bytes(q: str) -> int:
    """``32Gi`` -> 34359738368. Raises ValueError for what is not a memory quantity."""
    m = MEMORY_RE.match(q)
    if not m:
        raise ValueError(f"{q!r} is not a memory quantity such as 32Gi")
    value = Decimal(m.group(1)) * UNITS.get(m.group(2) or "", 1)
    if value != value.to_integral_value():
        raise ValueError(f"{q!r} is not a whole number of bytes")
    return int(value)


def cpu_millis(q: str) -> int:
    """``4`` -> 4000, ``500m`` -> 500, ``1.5`` -> 1500. Raises ValueError otherwise."""
    m = CPU_RE.match(q)
    if not m:
        raise ValueError(f"{q!r} is not a CPU quantity such as 4 or 500m")
    return int(Decimal(m.group(1)) * 1000) if m.group(1) else int(m.group(2))


def memory_text(n: int) -> str:
    """Bytes in the largest binary unit that divides them exactly (``72Gi``, ``1536Mi``)."""
    for unit in BINARY:
        if n and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]}{unit}"
    return str(n)


def cpu_text(millis: int) -> str:
    """Millicores as Kubernetes writes them: ``8`` for whole cores, else ``8500m``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"
