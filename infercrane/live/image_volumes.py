"""What a model image needs from the cluster, checked by ``doctor`` when a replica names one: image
volumes in the API server (Kubernetes' ``ImageVolume``: beta from 1.33 but off by default, on by
default from 1.35, GA from 1.36) and, on the nodes of the replicas' GPU products, a kubelet of 1.35
or later on a runtime that mounts them (containerd 2.1, CRI-O 1.31 and later). The nodes are
read with the optional node reader; without it the nodes' part is not verifiable. Live-cluster
layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from infercrane.core.model.config import InferCraneConfig

NAME: Final = "image volumes"
#: The first release of each runtime that mounts an OCI image as a volume (KEP-4639).
RUNTIMES: Final = {"containerd": (2, 1), "cri-o": (1, 31)}
API_DEFAULT_ON: Final = (1, 35)  # on by default (beta); GA and locked on from 1.36
API_BETA: Final = (1, 33)
NODE_READER: Final = "deploy/kubernetes/optional/node-reader.yaml"


def version(text: str) -> tuple[int, int]:
    """``v1.36.3`` / ``containerd://2.4.2`` / ``1.31.0`` -> (major, minor); (0, 0) when unreadable."""
    found = re.search(r"(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def api_problem(server: str) -> tuple[str, str] | None:
    """(status, what) when the API server ``server`` (its gitVersion) may not take an image volume."""
    v = version(server)
    if v >= API_DEFAULT_ON:
        return None
    if v >= API_BETA:
        return (
            "warn",
            f"Kubernetes {server} has image volumes in beta, off by default: pods with one are refused unless the "
            "API server and the kubelets run with --feature-gates=ImageVolume=true",
        )
    return ("fail", f"Kubernetes {server} has no image volumes by default (beta from 1.33, on by default from 1.35)")


def node_problems(nodes: Iterable[Mapping[str, Any]], label: str, products: set[str]) -> tuple[int, list[str]]:
    """How many nodes of ``products`` (their ``label`` value) were checked, and why each that cannot
    mount an image volume cannot: its kubelet before 1.35 or a runtime that mounts none."""
    checked, problems = 0, []
    for n in nodes:
        if ((n.get("metadata") or {}).get("labels") or {}).get(label) not in products:
            continue
        checked += 1
        info = (n.get("status") or {}).get("nodeInfo") or {}
        name = (n.get("metadata") or {}).get("name", "?")
        kubelet, runtime = str(info.get("kubeletVersion") or ""), str(info.get("containerRuntimeVersion") or "")
        kind = runtime.split("://", 1)[0]
        if version(kubelet) < API_DEFAULT_ON:
            problems.append(f"node {name}: kubelet {kubelet or '?'} (1.35 or later mounts image volumes by default)")
        elif kind not in RUNTIMES:
            problems.append(f"node {name}: runtime {runtime or '?'} is not known to mount image volumes")
        elif version(runtime) < RUNTIMES[kind]:
            first = ".".join(map(str, RUNTIMES[kind]))
            problems.append(f"node {name}: {runtime} (image volumes need {kind} {first} or later)")
    return checked, problems


def uses(config: InferCraneConfig) -> list[str]:
    """The keys of the replicas that mount a model image."""
    return [r.key for r in config.replicas if config.model_image_for(r) is not None]
