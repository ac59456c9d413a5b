"""What one start of the local plane gives each of its components (:class:`Launch`), what a
component is (:class:`Component`), and what depends on the Kubernetes version the binaries are
(flags, feature gates, controllers). Local-plane layer.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Launch:
    """What one start of the plane gives every component: its state directory, certificates,
    logs, ports, kwok's stages, the nodes to create and the Kubernetes version the binaries are."""

    state: Path
    pki: Path
    logs: Path
    ports: dict[str, int]
    stages: Path
    nodes_file: Path | None = None
    version: str = ""
    real_node: bool = False  # the kubelet and containerd run (infercrane.local.node)

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def url(self, port: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.ports[port]}"


@dataclass(frozen=True)
class Component:
    """One process of the plane. ``ready``: what start waits for before the next component
    (None: nothing, it catches up), called ``ready_what`` in a timeout; ``before``: a step just
    before it starts; ``after``: a step once it is ready."""

    name: str
    args: Callable[[Launch], list[str]]
    env: Callable[[Launch], dict[str, str]] | None = None
    ready: Callable[[Launch], bool] | None = None
    ready_what: str = ""
    before: Callable[[Launch], None] | None = None
    after: Callable[[Launch], None] | None = None


def http_status(url: str, pki: Path, timeout: float) -> int:
    """The HTTP status of a GET as the plane's admin (its client certificate), 0 when no answer."""
    try:
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return int(resp.status)
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return 0


def minor(version: str) -> tuple[int, int]:
    """``1.37.2`` -> ``(1, 37)``; an unknown version (empty) sorts before every release."""
    parts = version.split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else (0, 0)


def version_flags(version: str) -> list[str]:
    """API server flags a Kubernetes release needs on a loopback-only plane: from 1.37 the
    endpoint reconciler refuses a loopback advertise address ("may not be in the loopback
    range"); nothing here reaches the API server through the ``kubernetes`` Service, so it
    reconciles nothing. The feature gates of :func:`feature_gates` (the API server keeps a
    field of a gate it has off out of the objects it stores)."""
    flags = ["--endpoint-reconciler-type=none"] if minor(version) >= (1, 37) else []
    gates = feature_gates(version)
    return flags + ([f"--feature-gates={','.join(f'{k}={str(v).lower()}' for k, v in gates.items())}"] if gates else [])


def feature_gates(version: str) -> dict[str, bool]:
    """The gates the plane turns on, the same on the API server and the kubelet: from 1.35 (alpha)
    ``ImageVolumeWithDigest``, so a pod's status says which digest each image volume mounted (the
    serving evidence's proof of the model image)."""
    return {"ImageVolumeWithDigest": True} if minor(version) >= (1, 35) else {}


def controllers(version: str) -> str:
    """The controller-manager's controllers: all but node IPAM and the cloud ones (no cloud
    here). From 1.37 the cloud controllers are no longer part of it, and naming one fails."""
    cloud = "" if minor(version) >= (1, 37) else ",-service-lb-controller,-cloud-node-lifecycle-controller,-node-route-controller"
    return f"--controllers=*,-nodeipam{cloud}"
