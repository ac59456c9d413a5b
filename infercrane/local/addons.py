"""The local plane's steps beyond Kubernetes' own processes, as :mod:`~infercrane.local.components`
runs them: KServe's manager (its objects bootstrapped, its webhook certificate and registration),
the registry's config, the real node's preparation and health, Prometheus' config. Local-plane
layer.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Final

import yaml
from lightkube import ApiError

from infercrane.core import naming
from infercrane.core.errors import PlaneError
from infercrane.local import node, node_files, private, registry
from infercrane.local.launch import Launch, feature_gates, http_status
from infercrane.local.layout import KSERVE_NAMESPACE
from infercrane.local.node_files import RealNode

HERE: Final = Path(__file__).resolve().parent


def kserve_manager(x: Launch) -> list[str]:
    return [
        "--metrics-addr=0",
        f"--health-probe-addr=127.0.0.1:{x.ports['kserve_probe']}",
        f"--webhook-port={x.ports['kserve_webhook']}",
        "--leader-elect=false",
    ]


def kserve_env(x: Launch) -> dict[str, str]:
    return {
        "KUBECONFIG": str(x.state / "kserve-manager.kubeconfig"),
        "TMPDIR": str(x.state / "kserve"),
        "POD_NAMESPACE": KSERVE_NAMESPACE,
    }


def bootstrap_objects(x: Launch) -> None:
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


def kserve_webhooks(x: Launch) -> None:
    from infercrane.local import kserve

    try:
        kserve.register_webhooks(x.kubeconfig, x.pki / "ca.crt", x.ports["kserve_webhook"])
    except ApiError as exc:
        raise PlaneError(f"registering KServe's webhooks failed: {exc.status.message} (HTTP {exc.status.code})") from exc


def node_prepare(x: Launch, n: RealNode) -> None:
    kubelet, healthz = n.ports
    node.prepare(
        x.state, x.pki, x.ports["apiserver"], x.ports[kubelet], x.ports[healthz], x.ports["registry"], feature_gates(x.version), n
    )


def registry_prepare(x: Launch) -> None:
    storage = node_files.home(x.state) / "registry"
    storage.mkdir(parents=True, exist_ok=True)
    private.write(x.state / "registry.yml", yaml.safe_dump(registry.config(storage, x.ports["registry"]), sort_keys=False))


def kubelet_ready(x: Launch, n: RealNode) -> bool:
    return http_status(f"{x.url(n.ports[1])}/healthz", x.pki, 1.0) == 200


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


def prometheus_prepare(x: Launch) -> None:
    private.write(x.state / "prometheus.yml", yaml.safe_dump(prometheus_config(x), sort_keys=False))
    private.directory(x.state / "prometheus")


def prometheus(x: Launch) -> list[str]:
    return [
        f"--config.file={x.state / 'prometheus.yml'}",
        f"--storage.tsdb.path={x.state / 'prometheus'}",
        "--storage.tsdb.retention.time=2h",
        f"--web.listen-address=127.0.0.1:{x.ports['prometheus']}",  # loopback only: no door to the host's network
    ]
