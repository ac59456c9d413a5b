"""The local plane's processes as one table: start order, stop order, and each command line."""

from __future__ import annotations

from pathlib import Path

from infercrane.local.addons import prometheus_config
from infercrane.local.components import COMPONENTS, MORE_NODES, NAMES, NODE_COMPONENTS, PORTS, WITH_THE_NODE
from infercrane.local.launch import Launch, controllers, version_flags


def launch(version: str = "1.36.3") -> Launch:
    root = Path("/plane")
    return Launch(
        root, root / "pki", root / "logs", {p: 10000 + i for i, p in enumerate(PORTS)}, root / "stages.yaml", None, version
    )


def test_the_plane_starts_in_the_tables_order_and_each_waits_for_what_it_needs() -> None:
    assert NAMES == (
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "kserve-manager",
        "registry",
        "containerd",
        "kubelet",
        "containerd-1",
        "kubelet-1",
        "prometheus",
    )
    # after the bootstrap binds the nodes' role; the registry first: containerd pulls from it
    assert NODE_COMPONENTS == ("registry", "containerd", "kubelet")
    assert WITH_THE_NODE == ("prometheus",)  # last: it scrapes the node's pods
    waited = {c.name: c.ready_what for c in COMPONENTS if c.ready is not None}
    assert waited == {
        "etcd": "etcd",
        "kube-apiserver": "kube-apiserver /readyz",
        "kserve-manager": "the KServe manager",
        "registry": "the plane's registry",
        "containerd": "the real node's containerd",
        "kubelet": "the real node's kubelet /healthz",
        "containerd-1": "the real node node-l4-1's containerd",
        "kubelet-1": "the real node node-l4-1's kubelet /healthz",
        "prometheus": "Prometheus /-/ready",
    }
    assert MORE_NODES == (("containerd-1", "kubelet-1"),)  # started by `local start --real-nodes 2`, after the first
    apiserver, kserve, registry, containerd, _, _ = [c for c in COMPONENTS if c.before is not None]
    assert apiserver.name == "kube-apiserver"  # its audit policy written first
    assert kserve.name == "kserve-manager" and kserve.after is not None  # bootstrap before it, its webhooks after
    assert registry.name == "registry" and registry.after is not None  # its configuration, then the images pushed
    assert containerd.name == "containerd" and containerd.after is None  # the node prepared; it pulls as pods need


def test_every_component_gets_its_own_ports_and_the_plane_state() -> None:
    x = launch()
    args = {c.name: c.args(x) for c in COMPONENTS}
    assert "--listen-client-urls=https://127.0.0.1:10000" in args["etcd"]
    assert "--etcd-servers=https://127.0.0.1:10000" in args["kube-apiserver"]
    assert "--secure-port=10002" in args["kube-apiserver"] and "--authorization-mode=RBAC" in args["kube-apiserver"]
    assert "--config=/plane/stages.yaml" in args["kwok"]
    assert "--webhook-port=10004" in args["kserve-manager"]
    kserve = next(c for c in COMPONENTS if c.name == "kserve-manager")
    assert kserve.env is not None and kserve.env(x)["TMPDIR"] == "/plane/kserve"


def test_etcd_answers_only_a_client_with_a_certificate_of_the_planes_ca_over_tls() -> None:
    args = next(c for c in COMPONENTS if c.name == "etcd").args(launch())
    # its own CA, never the plane's: every identity of the plane has a certificate of that one
    assert {"--client-cert-auth=true", "--peer-client-cert-auth=true", "--trusted-ca-file=/plane/pki/etcd/ca.crt"} <= set(args)
    assert not [a for a in args if "http://" in a], args
    apiserver = next(c for c in COMPONENTS if c.name == "kube-apiserver").args(launch())
    assert "--etcd-certfile=/plane/pki/etcd/apiserver-client.crt" in apiserver
    assert "--etcd-cafile=/plane/pki/etcd/ca.crt" in apiserver


def test_kubernetes_137_runs_without_the_endpoint_reconciler_and_the_cloud_controllers_and_135_on_reports_mounted_digests() -> (
    None
):
    assert version_flags("1.34.4") == [] and version_flags("1.36.3") == ["--feature-gates=ImageVolumeWithDigest=true"]
    assert version_flags("1.37.2") == ["--endpoint-reconciler-type=none", "--feature-gates=ImageVolumeWithDigest=true"]
    assert "-cloud-node-lifecycle-controller" in controllers("1.36.3")
    assert controllers("1.37.2") == "--controllers=*,-nodeipam"
    assert "--endpoint-reconciler-type=none" in next(c for c in COMPONENTS if c.name == "kube-apiserver").args(launch("1.37.2"))


def test_the_planes_prometheus_listens_on_loopback_and_scrapes_only_the_managed_pods_as_a_reader_of_pods() -> None:
    from infercrane.local.bootstrap import PROMETHEUS_RBAC

    x = launch()
    (prometheus,) = [c for c in COMPONENTS if c.name == "prometheus"]
    assert f"--web.listen-address=127.0.0.1:{x.ports['prometheus']}" in prometheus.args(x)
    (job,) = prometheus_config(x)["scrape_configs"]  # type: ignore[index]
    (sd,) = job["kubernetes_sd_configs"]
    assert sd["role"] == "pod" and sd["tls_config"]["cert_file"] == "/plane/pki/prometheus.crt"
    keep = [(r["source_labels"], r["regex"]) for r in job["relabel_configs"] if r.get("action") == "keep"]
    assert keep == [
        (["__meta_kubernetes_pod_label_app_kubernetes_io_managed_by"], "infercrane"),
        (["__meta_kubernetes_pod_container_port_name"], "http"),
    ]
    role, binding = PROMETHEUS_RBAC
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert binding["subjects"][0]["name"] == "infercrane-local-prometheus"


def test_the_second_real_node_runs_its_own_containerd_and_kubelet_on_its_own_state_address_and_ports() -> None:
    x = launch()
    args = {c.name: c.args(x) for c in COMPONENTS}
    assert args["containerd"] == ["--config", "/plane/node/containerd.toml"]
    assert args["containerd-1"] == ["--config", "/plane/node-1/containerd.toml"]
    second = set(args["kubelet-1"])
    assert {"--hostname-override=node-l4-1", "--node-ip=10.88.1.1", "--root-dir=/plane/node-1/kubelet/root"} <= second
    assert "--hostname-override=node-l4-0" in args["kubelet"] and not second & set(args["kubelet"]) - {"--v=1"} - {
        a for a in second if a.startswith("--node-labels=")
    }
    assert len(set(PORTS)) == len(PORTS) and {"kubelet_1", "kubelet_healthz_1"} <= set(PORTS)
