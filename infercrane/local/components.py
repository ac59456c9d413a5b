"""The local plane's processes as one table: each component's name, command line, environment,
what must be done before it starts and what it is waited for. The table's order is the start
order; reversed, the stop order. Local-plane layer.

One module, past 300 lines: the table is the start order, and split it would be read in pieces.
"""

from __future__ import annotations

import re
import shutil
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from lightkube import ApiError

from infercrane.core import naming
from infercrane.core.errors import PlaneError
from infercrane.local import node, node_files, private, registry
from infercrane.local.layout import KSERVE_NAMESPACE, KWOK_NODE_ANNOTATION, SERVICE_CIDR
from infercrane.local.supervise import port_open

HERE: Final = Path(__file__).resolve().parent


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


def _etcd(x: Launch) -> list[str]:
    """etcd on loopback, over TLS, answering only a client with a certificate of its own CA (the API
    server's alone; every identity of the plane has one of the plane's CA): the store holds every
    Secret, the worker key among them."""
    client, peer, p = x.url("etcd", "https"), x.url("etcd_peer", "https"), x.pki / "etcd"
    return [
        "--name=infercrane-local",
        f"--data-dir={x.state / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=infercrane-local={peer}",
        f"--cert-file={p / 'server.crt'}",
        f"--key-file={p / 'server.key'}",
        f"--trusted-ca-file={p / 'ca.crt'}",
        "--client-cert-auth=true",
        f"--peer-cert-file={p / 'server.crt'}",
        f"--peer-key-file={p / 'server.key'}",
        f"--peer-trusted-ca-file={p / 'ca.crt'}",
        "--peer-client-cert-auth=true",
        "--unsafe-no-fsync=true",  # a disposable local plane: speed over durability
        "--log-level=warn",
    ]


#: The API server's audit policy: every request's metadata (who, which verb, which object), none
#: of its bodies -- what a test needs to prove an identity wrote nothing, and nothing secret.
AUDIT_POLICY: Final = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
AUDIT_LOG: Final = "audit.log"  # in the plane's state directory, JSON lines


def _apiserver_prepare(x: Launch) -> None:
    private.write(x.state / "audit-policy.yaml", yaml.safe_dump(AUDIT_POLICY, sort_keys=False))


def _apiserver(x: Launch) -> list[str]:
    p = x.pki
    return [
        f"--audit-policy-file={x.state / 'audit-policy.yaml'}",
        f"--audit-log-path={x.state / AUDIT_LOG}",
        "--audit-log-maxsize=100",  # MB: a long session's log rotates instead of filling the disk
        "--audit-log-maxbackup=1",
        f"--etcd-servers={x.url('etcd', 'https')}",
        f"--etcd-cafile={p / 'etcd' / 'ca.crt'}",
        f"--etcd-certfile={p / 'etcd' / 'apiserver-client.crt'}",
        f"--etcd-keyfile={p / 'etcd' / 'apiserver-client.key'}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={x.ports['apiserver']}",
        f"--cert-dir={x.state / 'apiserver'}",
        f"--tls-cert-file={p / 'apiserver.crt'}",
        f"--tls-private-key-file={p / 'apiserver.key'}",
        f"--client-ca-file={p / 'ca.crt'}",
        f"--service-account-key-file={p / 'sa.pub'}",
        f"--service-account-signing-key-file={p / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP",
        "--profiling=false",
        "--v=0",
        *version_flags(x.version),
    ]


def _controller_manager(x: Launch) -> list[str]:
    return [
        f"--kubeconfig={x.state / 'controller-manager.kubeconfig'}",
        "--leader-elect=false",
        "--secure-port=0",
        f"--service-account-private-key-file={x.pki / 'sa.key'}",
        f"--root-ca-file={x.pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        controllers(x.version),
        "--v=0",
    ]


def _scheduler(x: Launch) -> list[str]:
    return [f"--kubeconfig={x.state / 'scheduler.kubeconfig'}", "--leader-elect=false", "--secure-port=0", "--v=0"]


def _kwok(x: Launch) -> list[str]:
    return [
        f"--kubeconfig={x.state / 'admin.kubeconfig'}",
        f"--config={x.stages}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
        f"--server-address=127.0.0.1:{x.ports['kwok']}",
        "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16",
    ]


def _kserve_manager(x: Launch) -> list[str]:
    return [
        "--metrics-addr=0",
        f"--health-probe-addr=127.0.0.1:{x.ports['kserve_probe']}",
        f"--webhook-port={x.ports['kserve_webhook']}",
        "--leader-elect=false",
    ]


def _kserve_env(x: Launch) -> dict[str, str]:
    return {
        "KUBECONFIG": str(x.state / "kserve-manager.kubeconfig"),
        "TMPDIR": str(x.state / "kserve"),
        "POD_NAMESPACE": KSERVE_NAMESPACE,
    }


def _bootstrap(x: Launch) -> None:
    """The plane's objects (RBAC, namespaces, KServe's CRDs, ConfigMap and ClusterRole, the
    nodes, the worker Secret), then the certificate the KServe manager serves its admission
    webhooks with (from ``$TMPDIR/k8s-webhook-server``)."""
    from infercrane.local import bootstrap

    try:
        bootstrap.run(x.kubeconfig, x.nodes_file or HERE / "nodes.yaml")
    except ApiError as exc:
        raise PlaneError(
            f"bootstrapping the local plane failed: {exc.status.message} (HTTP {exc.status.code}).",
            fix=f"see {x.logs}; `infercrane local reset` then `local start` starts from scratch",
        ) from exc
    except (OSError, yaml.YAMLError) as exc:
        raise PlaneError(
            f"bootstrapping the local plane failed: {exc}", fix="check the nodes file and deploy/ manifests"
        ) from exc
    except PlaneError as exc:  # its own words (a nodes file without nodes, KServe's CRDs missing)
        raise PlaneError(f"bootstrapping the local plane failed: {exc.message}", fix=exc.fix) from exc
    webhook_certs(x)


def webhook_certs(x: Launch) -> Path:
    """The certificate and key the KServe manager serves its admission webhooks with, where it
    reads them (``$TMPDIR/k8s-webhook-server/serving-certs``); the key 0600 from its first byte."""
    certs = x.state / "kserve" / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(x.pki / "kserve-webhook.crt", certs / "tls.crt")
    private.write(certs / "tls.key", (x.pki / "kserve-webhook.key").read_bytes())
    return certs


def _kserve_webhooks(x: Launch) -> None:
    from infercrane.local import bootstrap

    try:
        bootstrap.register_kserve_webhooks(x.kubeconfig, x.pki / "ca.crt", x.ports["kserve_webhook"])
    except ApiError as exc:
        raise PlaneError(f"registering KServe's webhooks failed: {exc.status.message} (HTTP {exc.status.code})") from exc


def _node_prepare(x: Launch) -> None:
    node.prepare(
        x.state,
        x.pki,
        x.ports["apiserver"],
        x.ports["kubelet"],
        x.ports["kubelet_healthz"],
        x.ports["registry"],
        feature_gates(x.version),
    )


def _registry_prepare(x: Launch) -> None:
    storage = node_files.home(x.state) / "registry"
    storage.mkdir(parents=True, exist_ok=True)
    private.write(x.state / "registry.yml", yaml.safe_dump(registry.config(storage, x.ports["registry"]), sort_keys=False))


def _kubelet_ready(x: Launch) -> bool:
    return http_status(f"{x.url('kubelet_healthz')}/healthz", x.pki, 1.0) == 200


def prometheus_config(x: Launch) -> dict[str, object]:
    """The plane's Prometheus: every second, each pod InferCrane manages, at its port named ``http``
    (its engine's ``/metrics``), found by watching the pods as its own identity (it may read pods,
    nothing else); each series' ``instance`` is the pod's address, as a canary's query asks."""
    managed = "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", naming.LABEL_MANAGED_BY)
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": "infercrane-pods",
                "kubernetes_sd_configs": [
                    {
                        "role": "pod",
                        "api_server": x.url("apiserver", "https"),
                        "tls_config": {
                            "ca_file": str(x.pki / "ca.crt"),
                            "cert_file": str(x.pki / "prometheus.crt"),
                            "key_file": str(x.pki / "prometheus.key"),
                        },
                    }
                ],
                "relabel_configs": [
                    {"source_labels": [managed], "regex": naming.MANAGED_BY, "action": "keep"},
                    {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": "http", "action": "keep"},
                    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                ],
            }
        ],
    }


def _prometheus_prepare(x: Launch) -> None:
    private.write(x.state / "prometheus.yml", yaml.safe_dump(prometheus_config(x), sort_keys=False))
    private.directory(x.state / "prometheus")


def _prometheus(x: Launch) -> list[str]:
    return [
        f"--config.file={x.state / 'prometheus.yml'}",
        f"--storage.tsdb.path={x.state / 'prometheus'}",
        "--storage.tsdb.retention.time=2h",
        f"--web.listen-address=127.0.0.1:{x.ports['prometheus']}",  # loopback only: no door to the host's network
    ]


def api_ready(x: Launch, timeout: float = 2.0) -> bool:
    return http_status(f"{x.url('apiserver', 'https')}/readyz", x.pki, timeout) == 200


#: The plane, in start order (reversed: the stop order).
COMPONENTS: Final = (
    Component("etcd", _etcd, ready=lambda x: port_open(x.ports["etcd"]), ready_what="etcd"),
    Component("kube-apiserver", _apiserver, ready=api_ready, ready_what="kube-apiserver /readyz", before=_apiserver_prepare),
    Component("kube-controller-manager", _controller_manager),
    Component("kube-scheduler", _scheduler),
    Component("kwok", _kwok),
    Component(
        "kserve-manager",
        _kserve_manager,
        env=_kserve_env,
        before=_bootstrap,
        ready=lambda x: http_status(f"{x.url('kserve_probe')}/readyz", x.pki, 1.0) == 200,
        ready_what="the KServe manager",
        after=_kserve_webhooks,
    ),
    Component(
        "registry",
        lambda x: ["serve", str(x.state / "registry.yml")],
        env=lambda x: dict(registry.ENV),
        before=_registry_prepare,
        ready=lambda x: port_open(x.ports["registry"]),
        ready_what="the plane's registry",
        after=lambda x: node.push_images(x.state, x.ports["registry"]),
    ),
    Component(
        "containerd",
        lambda x: node.containerd_args(x.state),
        env=lambda x: node.env(x.state),
        before=_node_prepare,
        ready=lambda x: node.containerd_ready(x.state),
        ready_what="the real node's containerd",
    ),
    Component(
        "kubelet",
        lambda x: node.kubelet_args(x.state),
        ready=_kubelet_ready,
        ready_what="the real node's kubelet /healthz",
        after=lambda x: node.advertise(x.kubeconfig),
    ),
    Component(
        "prometheus",
        _prometheus,
        before=_prometheus_prepare,
        ready=lambda x: http_status(f"{x.url('prometheus')}/-/ready", x.pki, 1.0) == 200,
        ready_what="Prometheus /-/ready",
    ),
)
NAMES: Final = tuple(c.name for c in COMPONENTS)
#: The real node's processes: started only when the machine can (infercrane.local.node.why_not).
NODE_COMPONENTS: Final = ("registry", "containerd", "kubelet")
#: Started with the real node, when built (``tools/build.sh prometheus``): it scrapes the node's pods.
WITH_THE_NODE: Final = ("prometheus",)
#: Every port a start allocates.
PORTS: Final = (
    "etcd",
    "etcd_peer",
    "apiserver",
    "kwok",
    "kserve_webhook",
    "kserve_probe",
    "kubelet",
    "kubelet_healthz",
    "prometheus",
    "registry",
)
