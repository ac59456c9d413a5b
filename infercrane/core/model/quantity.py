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


_DECIMAL_SUFFIX: Final = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX: Final = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


def canonical(q: object) -> str | None:
    """A quantity as the API server stores it (``resource.Quantity``'s canonical form, which keeps
    its format): ``16384Mi`` -> ``16Gi``, ``0.5Gi`` -> ``512Mi``, ``1500M`` -> ``1500M``,
    ``0.5`` -> ``500m``, ``17179869184`` stays (a decimal number of bytes is not ``16Gi``: the two
    are equal but stored apart); None for what is not one."""
    v = value(q)
    if v is None:
        return None
    text = str(q).strip()
    return text if _kept(text) else _canonical(text, v)


_BINARY_EXPONENT: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENT: Final = {suffix: exponent for exponent, suffix in _DECIMAL_SUFFIX.items()}
_INT64: Final = 2**63


def _kept(text: str) -> bool:
    """Whether the API server keeps ``text`` as it was sent: ``resource.ParseQuantity``'s fast path
    reuses the string it parsed when its digits look canonical ("1023Ki", "100m", "1024.125G",
    "+5", "1E3"), whatever the canonical form would print."""
    if text == "0":
        return True
    m = re.match(r"^[+-]?0*([0-9]*)(?:\.([0-9]*))?(.*)$", text)
    if not m:
        return False
    num, denom, suffix = m.group(1) or "0", m.group(2) or "", m.group(3)
    if suffix in _BINARY_EXPONENT:
        exponent = _BINARY_EXPONENT[suffix]
        if denom:
            return False
        mantissa, precision, scale = 1 << exponent, 15 - len(num) - int(exponent * 3 / 10) - 1, 0
    elif suffix in _DECIMAL_EXPONENT or re.fullmatch(r"[eE][+-]?[0-9]+", suffix):
        exponent = _DECIMAL_EXPONENT[suffix] if suffix in _DECIMAL_EXPONENT else int(suffix[1:])
        mantissa, precision, scale = 1, 18 - len(num) - len(denom), exponent
    else:
        return False
    scale -= len(denom)
    if precision < 0 or scale < -9:
        return False
    shifted = num + denom
    digits = int(shifted)
    if digits >= _INT64 or digits * mantissa >= _INT64:
        return False
    if suffix in _BINARY_EXPONENT:
        return exponent % 10 == 0 and digits & 7 != 0
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _canonical(text: str, v: Decimal) -> str:
    if v == 0:
        return "0"
    m = QUANTITY_RE.match(text)
    suffix = (m.group(2) if m else "") or ""
    exponent_form = suffix[:1] in ("e", "E")
    if suffix in _BINARY_SUFFIX.values() and suffix and not (-1024 < v < 1024) and v == v.to_integral_value():
        n, shift = int(v), 0
        while n % 1024 == 0 and shift < 60:
            n, shift = n // 1024, shift + 10
        return f"{n}{_BINARY_SUFFIX[shift]}"
    # Decimal: the largest exponent, a multiple of 3, that leaves a whole mantissa (nano at least;
    # finer is rounded away from zero, as the API server rounds).
    exponent = 18
    while exponent > -9 and v.scaleb(-exponent) != v.scaleb(-exponent).to_integral_value():
        exponent -= 3
    mantissa = int(v.scaleb(-exponent).to_integral_value(rounding="ROUND_UP"))
    if exponent_form:
        return f"{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
