"""The local plane's processes as one table: each component's name, command line, environment,
what must be done before it starts and what it is waited for. The table's order is the start
order; reversed, the stop order. Kubernetes' own processes are here; what one start gives them
is :mod:`~infercrane.local.launch`, the steps of KServe, the registry, the real node and
Prometheus :mod:`~infercrane.local.addons`. Local-plane layer.
"""

from __future__ import annotations

from typing import Final

import yaml

from infercrane.local import addons, node, private, registry
from infercrane.local.launch import Component, Launch, controllers, http_status, version_flags
from infercrane.local.layout import KWOK_NODE_ANNOTATION, SERVICE_CIDR
from infercrane.local.node_files import NODES, RealNode
from infercrane.local.supervise import port_open


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


def api_ready(x: Launch, timeout: float = 2.0) -> bool:
    return http_status(f"{x.url('apiserver', 'https')}/readyz", x.pki, timeout) == 200


def _real_node(n: RealNode) -> tuple[Component, Component]:
    """Real node ``n``'s containerd and kubelet (the first's are called the real node's)."""
    whose = "the real node's" if not n.index else f"the real node {n.name}'s"
    containerd, kubelet = n.components
    return (
        Component(
            containerd,
            lambda x: node.containerd_args(x.state, n),
            env=lambda x: node.env(x.state),
            before=lambda x: addons.node_prepare(x, n),
            ready=lambda x: node.containerd_ready(x.state, n),
            ready_what=f"{whose} containerd",
        ),
        Component(
            kubelet,
            lambda x: node.kubelet_args(x.state, n),
            ready=lambda x: addons.kubelet_ready(x, n),
            ready_what=f"{whose} kubelet /healthz",
            after=lambda x: node.advertise(x.kubeconfig, n),
        ),
    )


#: The plane, in start order (reversed: the stop order).
COMPONENTS: Final = (
    Component("etcd", _etcd, ready=lambda x: port_open(x.ports["etcd"]), ready_what="etcd"),
    Component("kube-apiserver", _apiserver, ready=api_ready, ready_what="kube-apiserver /readyz", before=_apiserver_prepare),
    Component("kube-controller-manager", _controller_manager),
    Component("kube-scheduler", _scheduler),
    Component("kwok", _kwok),
    Component(
        "kserve-manager",
        addons.kserve_manager,
        env=addons.kserve_env,
        before=addons.bootstrap_objects,
        ready=lambda x: http_status(f"{x.url('kserve_probe')}/readyz", x.pki, 1.0) == 200,
        ready_what="the KServe manager",
        after=addons.kserve_webhooks,
    ),
    Component(
        "registry",
        lambda x: ["serve", str(x.state / "registry.yml")],
        env=lambda x: dict(registry.ENV),
        before=addons.registry_prepare,
        ready=lambda x: port_open(x.ports["registry"]),
        ready_what="the plane's registry",
        after=lambda x: registry.push_images(x.state, x.ports["registry"]),
    ),
    *(c for n in NODES for c in _real_node(n)),
    Component(
        "prometheus",
        addons.prometheus,
        before=addons.prometheus_prepare,
        ready=lambda x: http_status(f"{x.url('prometheus')}/-/ready", x.pki, 1.0) == 200,
        ready_what="Prometheus /-/ready",
    ),
)
NAMES: Final = tuple(c.name for c in COMPONENTS)
#: The real node's processes: started only when the machine can (infercrane.local.node.why_not).
NODE_COMPONENTS: Final = ("registry", *NODES[0].components)
#: The processes of the real nodes after the first, by node (``local start --real-nodes N``):
#: the same binaries as the first's containerd and kubelet.
MORE_NODES: Final = tuple(n.components for n in NODES[1:])
#: Every real node's process, the registry's included: what holds the real nodes' lock.
OF_THE_NODES: Final = NODE_COMPONENTS + tuple(name for names in MORE_NODES for name in names)
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
    *(port for n in NODES for port in n.ports),
    "prometheus",
    "registry",
)
