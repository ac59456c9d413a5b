"""GPU values: the ``nvidia.com/gpu.product`` label value a replica asks for, never substituted.

The built-in table holds the GPU Feature Discovery product values we know; a stack can extend it
(``infercrane:kubernetes.gpuProducts``). Time-slicing (``-SHARED``) and MIG (``-MIG-<profile>``)
variants of a known value are accepted as written. Anything else is refused with the known list and,
when the value differs only in case or spelling, the closest known value as a hint. Pure core.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

KNOWN_PRODUCTS: Final[tuple[str, ...]] = (
    "NVIDIA-L4",
    "NVIDIA-L40S",
    "NVIDIA-A10G",
    "NVIDIA-A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB",
    "NVIDIA-A100-80GB-PCIe",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-H100-PCIe",
    "NVIDIA-H100-NVL",
    "NVIDIA-H200",
    "NVIDIA-B200",
)
_VARIANT_RE: Final = re.compile(r"^(?P<base>.+?)(?P<suffix>-SHARED|-MIG-[0-9]+g\.[0-9]+gb)$")
LABEL_VALUE_RE: Final = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def gpu_problem(value: str, extra: tuple[str, ...] = ()) -> str | None:
    """Why ``value`` is not an accepted product-label value, or None when it is."""
    known = tuple(KNOWN_PRODUCTS) + tuple(extra)
    if value in known:
        return None
    m = _VARIANT_RE.match(value)
    if m and m.group("base") in known:
        return None
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    lowered = [k for k in known if k.lower() == value.lower()]
    hint = lowered[0] if lowered else (close[0] if close else None)
    text = f"GPU {value!r} is not a known product-label value"
    if hint:
        text += f" (did you mean {hint!r}? it is never substituted for you)"
    return text


def known_list(extra: tuple[str, ...] = ()) -> str:
    return ", ".join(tuple(KNOWN_PRODUCTS) + tuple(extra))
