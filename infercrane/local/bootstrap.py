"""Bootstrap a fresh local plane from the repository's own manifests and KServe's.

Applies deploy/kubernetes (namespace, service accounts, RBAC for both workload APIs; the
optional read-only Roles bound to the viewer identity only), KServe's official CRDs, its
``inferenceservice-config`` ConfigMap (Standard mode, no Istio, no Ingress objects) and its own
ClusterRole bound to the manager's identity -- all taken from the pinned KServe module by
``tools/build.sh kserve`` -- the simulated GPU nodes, and the worker Secret with a random value
that is never printed. Once the KServe manager serves, its webhook configurations are registered
with the manager's loopback URL. Idempotent: server-side apply as ``infercrane-bootstrap``; an
existing Secret is left as it is. Local-plane layer.

KServe's part is :mod:`~infercrane.local.kserve`; the applying itself :mod:`~infercrane.local.applying`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml
from lightkube import ApiError, codecs
from lightkube.resources.core_v1 import Node, Secret

from infercrane.core.errors import PlaneError
from infercrane.local import dra, kserve, private
from infercrane.local.applying import admin_client, apply_all, wait_namespace
from infercrane.local.layout import (
    KUBELET_CLIENT_USER,
    NAMESPACE,
    PROMETHEUS_USER,
    VIEWER_USER,
    random_secret,
)
from infercrane.project.paths import code_root

MANIFESTS = (
    "deploy/kubernetes/base/namespace.yaml",
    "deploy/kubernetes/base/service-accounts.yaml",
    "deploy/kubernetes/base/provider-rbac.yaml",
    "deploy/kubernetes/kserve/provider-rbac.yaml",
    "deploy/kubernetes/dra/provider-rbac.yaml",
    "deploy/kubernetes/base/plan-viewer-rbac.yaml",
)
# The optional read-only Roles are installed, but bound to the plane's *viewer* identity only:
# the deploying identity keeps exactly the shipped Roles, so everything it does proves them.
OPTIONAL_ROLES = (
    "deploy/kubernetes/optional/pod-reader.yaml",
    "deploy/kubernetes/optional/node-reader.yaml",
    "deploy/kubernetes/optional/pvc-reader.yaml",
    "deploy/kubernetes/optional/endpointslice-reader.yaml",
    "deploy/kubernetes/optional/dra-reader.yaml",
)


# What a person looks at on the local plane with the viewer (the current-context of `local env`):
# read-only, never a write; the deploying identity keeps exactly the shipped Roles.
VIEWER_READS: Final = (
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["services", "events", "pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices"], "verbs": ["get", "list", "watch"]},
)


def viewer_bindings(user: str, namespace: str) -> list[dict[str, Any]]:
    """Bind every optional Role/ClusterRole to ``user`` (the plane's read-only evidence identity),
    and a local-only Role that lets it read what a person looks at (:data:`VIEWER_READS`)."""
    labels = {"app.kubernetes.io/managed-by": "infercrane-bootstrap"}
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    rbac = "rbac.authorization.k8s.io/v1"
    name = "infercrane-local-viewer"
    out: list[dict[str, Any]] = [
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "rules": list(VIEWER_READS),
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
    ]
    for rel in OPTIONAL_ROLES:
        for d in yaml.safe_load_all((code_root() / rel).read_text()):
            if d and d["kind"] in ("Role", "ClusterRole"):
                kind = "RoleBinding" if d["kind"] == "Role" else "ClusterRoleBinding"
                meta = {"name": f"{d['metadata']['name']}-viewer", "labels": labels}
                if kind == "RoleBinding":
                    meta["namespace"] = namespace
                out.append(
                    {
                        "apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": kind,
                        "metadata": meta,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": d["kind"], "name": d["metadata"]["name"]},
                        "subjects": subject,
                    }
                )
    return out


#: The plane's worker key, in its state directory (0600): what the worker Secret was made from.
WORKER_KEY_FILE: Final = "worker-api-key"

#: What a kubelet of the plane may do (the real node, :mod:`infercrane.local.node`): Kubernetes' own
#: ``system:node`` role, for the nodes' group its certificates name.
NODES_BINDING: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "infercrane-local-nodes"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
}
#: The real node's kubelet asks the API server who may do what (webhook authorization): the API
#: server's own kubelet client -- logs, exec, port-forward on a user's behalf -- may do all of it
#: (Kubernetes' ``system:kubelet-api-admin``); anyone else what RBAC grants on ``nodes/*``.
KUBELET_API_BINDING: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "infercrane-local-kubelet-api"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_CLIENT_USER}],
}


#: The plane's Prometheus finds the pods it scrapes by watching them (kubernetes_sd_configs, role pod):
#: it may get, list and watch pods -- no other object, no write.
PROMETHEUS_RBAC: Final = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "infercrane-local-prometheus"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "infercrane-local-prometheus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "infercrane-local-prometheus"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PROMETHEUS_USER}],
    },
]


def node_manifest(spec: dict[str, Any]) -> dict[str, Any]:
    """A kwok GPU node: labelled and advertising ``nvidia.com/gpu`` as GPU Feature Discovery and
    the device plugin do, or -- a DRA node -- neither: its GPUs are its ResourceSlice's devices."""
    gpus = str(spec["gpus"])
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": spec["name"], "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}
    if not dra.is_dra(spec):
        resources["nvidia.com/gpu"] = gpus
        labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": spec["gpuProduct"], "nvidia.com/gpu.count": gpus}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec["name"],
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": labels,
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"capacity": resources, "allocatable": resources, "phase": "Running"},
    }


def read_nodes(nodes_file: Path) -> list[dict[str, Any]]:
    """The simulated nodes of ``nodes_file`` (``nodes: [{name: …, …}, …]``), or PlaneError saying
    what is wrong with it -- before the plane starts anything."""
    fix = "write `nodes:` as a list of nodes, each with a `name` (see infercrane/local/nodes.yaml)"
    try:
        doc = yaml.safe_load(nodes_file.read_text())
    except OSError as exc:
        raise PlaneError(
            f"the nodes file {nodes_file} cannot be read: {exc.strerror}", fix="pass an existing file to --nodes"
        ) from exc
    except yaml.YAMLError as exc:
        raise PlaneError(f"the nodes file {nodes_file} is not YAML: {str(exc).splitlines()[0]}", fix=fix) from exc
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and n.get("name") for n in nodes):
        raise PlaneError(f"the nodes file {nodes_file} has no `nodes` list of named nodes", fix=fix)
    return nodes


def worker_key_file(state: Path) -> Path:
    """The file the worker Secret is made from, as the seed's bootstrap does: the plane's own
    credential, which the demo's serving evidence reads -- never the Secret, never printed. Made
    once (0600 from its first byte), then kept."""
    key_file = state / WORKER_KEY_FILE
    if not key_file.is_file():
        private.write(key_file, random_secret())
    return key_file


def run(kubeconfig: Path, nodes_file: Path) -> None:

    client = admin_client(kubeconfig)
    root = code_root()
    docs = [d for rel in MANIFESTS for d in yaml.safe_load_all((root / rel).read_text()) if d]
    apply_all(client, [docs[0]])
    kserve.install(client)
    wait_namespace(client, NAMESPACE)
    apply_all(client, docs[1:])
    roles = [
        d
        for rel in OPTIONAL_ROLES
        for d in yaml.safe_load_all((root / rel).read_text())
        if d and "Role" in d["kind"] and "Binding" not in d["kind"]
    ]
    apply_all(client, roles + viewer_bindings(VIEWER_USER, NAMESPACE) + [NODES_BINDING, KUBELET_API_BINDING, *PROMETHEUS_RBAC])
    nodes = read_nodes(nodes_file)
    for n in nodes:
        try:
            client.get(Node, n["name"])
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            client.create(codecs.from_dict(node_manifest(n)))
    if any(dra.is_dra(n) for n in nodes):
        apply_all(client, [dra.device_class(), *(dra.resource_slice(n) for n in nodes if dra.is_dra(n))])
    try:
        client.get(Secret, "infercrane-worker", namespace=NAMESPACE)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        key_file = worker_key_file(kubeconfig.parent)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "infercrane-worker",
                "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/managed-by": "infercrane-bootstrap"},
            },
            "type": "Opaque",
            "stringData": {"api-key": key_file.read_text()},
        }
        client.create(codecs.from_dict(secret))
