"""GPU values: the ``nvidia.com/gpu.product`` label value a replica asks for, never substituted.

The built-in table holds the GPU Feature Discovery product values we know, each with the
``productName`` NVIDIA's DRA driver publishes for the same GPU (``gpuAllocation: dra`` selects on
it). The two spellings differ in more than spaces -- ``NVIDIA-A100-80GB-PCIe`` is ``NVIDIA A100 80GB
PCIe`` but ``NVIDIA-A100-SXM4-40GB`` is ``NVIDIA A100-SXM4-40GB`` -- so neither is derived from
the other: both are written here. A stack can extend the table (``infercrane:kubernetes.gpuProducts``
for label values, ``gpuProductNames`` for a label value with its productName). Time-slicing
(``-SHARED``) and MIG (``-MIG-<profile>``) variants of a known value are accepted as written in label
mode. Anything else is refused with the known list and, when the value differs only in case or
spelling, the closest known value as a hint. Pure core.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

#: Label value (GPU Feature Discovery's ``nvidia.com/gpu.product``) -> ``productName`` (NVIDIA's DRA
#: driver, NVML's device name).
PRODUCT_NAMES: Final[dict[str, str]] = {
    "NVIDIA-L4": "NVIDIA L4",
    "NVIDIA-L40S": "NVIDIA L40S",
    "NVIDIA-A10G": "NVIDIA A10G",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H100-PCIe": "NVIDIA H100 PCIe",
    "NVIDIA-H100-NVL": "NVIDIA H100 NVL",
    "NVIDIA-H200": "NVIDIA H200",
    "NVIDIA-B200": "NVIDIA B200",
}
KNOWN_PRODUCTS: Final[tuple[str, ...]] = tuple(PRODUCT_NAMES)
NO_NAMES: Final[Mapping[str, str]] = MappingProxyType({})
#: NVIDIA's DRA driver: the attribute domain of its devices, and the DeviceClass its chart installs.
DRA_DRIVER: Final = "gpu.nvidia.com"
DRA_PRODUCT_ATTRIBUTE: Final = "productName"
PRODUCT_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,62}$")
_SELECTOR_RE: Final = re.compile(r'^device\.attributes\["(?P<domain>[^"]+)"\]\.productName == "(?P<name>[^"\\]*)"$')
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
    spelled = [label for label, name in PRODUCT_NAMES.items() if name == value]
    if spelled:
        return (
            f"GPU {value!r} is the DRA productName spelling; write the label value {spelled[0]!r} "
            "(gpuAllocation dra selects on the productName for you)"
        )
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    lowered = [k for k in known if k.lower() == value.lower()]
    hint = lowered[0] if lowered else (close[0] if close else None)
    text = f"GPU {value!r} is not a known product-label value"
    if hint:
        text += f" (did you mean {hint!r}? it is never substituted for you)"
    return text


def known_list(extra: tuple[str, ...] = ()) -> str:
    return ", ".join(tuple(KNOWN_PRODUCTS) + tuple(extra))


def product_names(extra: Mapping[str, str] = NO_NAMES) -> dict[str, str]:
    """The table: label value -> productName, with a stack's ``gpuProductNames``."""
    return {**PRODUCT_NAMES, **extra}


def dra_problem(value: str, extra: Mapping[str, str] = NO_NAMES) -> str | None:
    """Why a (known) label value cannot be selected by DRA, or None: it needs a productName."""
    if value in product_names(extra):
        return None
    if _VARIANT_RE.match(value):
        return (
            f"GPU {value!r} is a time-slicing or MIG variant, which only the device plugin's label names; "
            "under gpuAllocation dra a replica claims whole GPUs"
        )
    return f"GPU {value!r} has no DRA productName in InferCrane's table"


def selector(product_name: str) -> str:
    """The CEL selector of a device of ``product_name`` (NVIDIA's DRA driver's attribute)."""
    return f'device.attributes["{DRA_DRIVER}"].{DRA_PRODUCT_ATTRIBUTE} == "{product_name}"'


def selected_product(expression: str) -> str | None:
    """The productName a CEL selector written like :func:`selector` names, else None."""
    m = _SELECTOR_RE.match(expression.strip())
    return m.group("name") if m and m.group("domain") == DRA_DRIVER else None


def label_of(product_name: str, extra: Mapping[str, str] = NO_NAMES) -> str | None:
    """The label value of a productName in the table, else None."""
    return next((label for label, name in product_names(extra).items() if name == product_name), None)


def requests_of(template: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The device requests of a ResourceClaimTemplate (``spec.spec.devices.requests``)."""
    spec = ((template or {}).get("spec") or {}).get("spec") or {}
    return list((spec.get("devices") or {}).get("requests") or [])


def device_requests(obj: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every exact device request of a ResourceClaimTemplate (``spec.spec.devices``) or ResourceClaim
    (``spec.devices``) of any ``resource.k8s.io`` version with device requests, as ``(where, request)``:
    v1's and v1beta2's ``exactly``; a v1beta1 (or v1alpha3) request, which is its own exact request;
    each subrequest of a ``firstAvailable`` list (any of them may be the one allocated)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") or {}
    out: list[tuple[str, Mapping[str, Any]]] = []
    for r in (spec.get("devices") or {}).get("requests") or []:
        where = f"request {r.get('name')!r}"
        if r.get("firstAvailable"):
            out += [(f"{where} subrequest {sub.get('name')!r}", sub) for sub in r["firstAvailable"]]
        else:
            out.append((where, r.get("exactly") or r))
    return out


def allocated(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The devices a ResourceClaim was allocated (``status.allocation.devices.results``: each
    with its ``driver``, ``pool`` and ``device``)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])
