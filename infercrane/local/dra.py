"""The local plane as a DRA cluster: what NVIDIA's DRA driver publishes for a GPU node.

For each node of the nodes file with ``gpuAllocation: dra``, one ResourceSlice in the driver's
shape (driver ``gpu.nvidia.com``, one pool per node, one device ``gpu-<i>`` per GPU with its
``type``, ``productName``, ``architecture``, ``cudaComputeCapability`` and ``uuid`` attributes
and its ``memory`` capacity), and the DeviceClass the driver's chart installs. The real scheduler
allocates claims against them; kwok stands in for the kubelet's side (NodePrepareResources: the
driver's plugin preparing the device for the container), which nothing here runs. Such a node
carries no ``nvidia.com/gpu.product`` label and no ``nvidia.com/gpu`` resource: a DRA-only node.
Local-plane layer.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from infercrane.core.model import gpu
from infercrane.core.model.kinds import GPU_ALLOCATIONS, LABEL_ALLOCATION

#: What the driver reports beside the productName, for the products a nodes file may use; others
#: publish their productName and type only.
DETAILS: Final[dict[str, tuple[str, str, str]]] = {  # label value -> (architecture, compute capability, memory)
    "NVIDIA-L4": ("Ada Lovelace", "8.9.0", "23034Mi"),
    "NVIDIA-L40S": ("Ada Lovelace", "8.9.0", "46068Mi"),
    "NVIDIA-A10G": ("Ampere", "8.6.0", "23028Mi"),
    "NVIDIA-A100-SXM4-40GB": ("Ampere", "8.0.0", "40960Mi"),
    "NVIDIA-A100-SXM4-80GB": ("Ampere", "8.0.0", "81920Mi"),
    "NVIDIA-A100-80GB-PCIe": ("Ampere", "8.0.0", "81920Mi"),
    "NVIDIA-H100-80GB-HBM3": ("Hopper", "9.0.0", "81559Mi"),
}


def is_dra(spec: dict[str, Any]) -> bool:
    """Whether a nodes-file entry is a DRA node."""
    return GPU_ALLOCATIONS[spec.get("gpuAllocation") or LABEL_ALLOCATION.name].claims


def device_class() -> dict[str, Any]:
    """The DeviceClass NVIDIA's chart installs: every whole GPU of its driver."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": gpu.DRA_DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{gpu.DRA_DRIVER}' && device.attributes['{gpu.DRA_DRIVER}'].type == 'gpu'"
                    }
                }
            ]
        },
    }


def _device(node: str, index: int, product: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "type": {"string": "gpu"},
        "productName": {"string": gpu.PRODUCT_NAMES.get(product, product)},
        "uuid": {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{index}')}"},
        "index": {"int": index},
    }
    capacity: dict[str, Any] = {}
    if product in DETAILS:
        architecture, compute, memory = DETAILS[product]
        attributes["architecture"] = {"string": architecture}
        attributes["cudaComputeCapability"] = {"version": compute}
        capacity["memory"] = {"value": memory}
    return {"name": f"gpu-{index}", "attributes": attributes, **({"capacity": capacity} if capacity else {})}


def resource_slice(spec: dict[str, Any]) -> dict[str, Any]:
    """The slice the driver's kubelet plugin would publish for a DRA node of the nodes file."""
    node = str(spec["name"])
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{gpu.DRA_DRIVER}"},
        "spec": {
            "driver": gpu.DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [_device(node, i, str(spec["gpuProduct"])) for i in range(int(spec["gpus"]))],
        },
    }
