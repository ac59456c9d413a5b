"""KServe on the local plane, from the files ``tools/build.sh kserve`` took from the pinned module:
its CRDs, its ClusterRole bound to the manager's identity, its ``inferenceservice-config`` in the
Standard (raw Deployment) mode, and its webhooks pointed at the manager's loopback URL.
Local-plane layer.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client

from infercrane.core.errors import PlaneError
from infercrane.local.applying import admin_client, apply_all, apply_crd, wait_established, wait_namespace
from infercrane.local.layout import KSERVE_NAMESPACE, KSERVE_USER


def share_dir() -> Path:
    """The KServe files ``tools/build.sh kserve`` took from the module zip, beside the manager."""
    from infercrane.project.tools import find_tool

    share = find_tool("kserve-manager").parent.parent / "share"
    if not (share / "crds").is_dir():
        raise PlaneError(f"KServe's CRDs are missing from {share}.", fix="run `tools/build.sh kserve`")
    return share


def config(share: Path) -> dict[str, Any]:
    """KServe's default ``inferenceservice-config``, set to the Standard (raw Deployment) mode
    without Istio virtual hosts or Ingress objects (the plane has neither Istio nor an ingress)."""
    cm: dict[str, Any] = yaml.safe_load((share / "inferenceservice-config.yaml").read_text())
    ingress = json.loads(cm["data"]["ingress"])
    ingress |= {"disableIstioVirtualHost": True, "disableIngressCreation": True}
    cm["data"] |= {"ingress": json.dumps(ingress), "deploy": json.dumps({"defaultDeploymentMode": "Standard"})}
    return cm


def install(client: Client) -> None:

    share = share_dir()
    crds = [yaml.safe_load(f.read_text()) for f in sorted((share / "crds").glob("*.yaml"))]
    role = yaml.safe_load((share / "manager-role.yaml").read_text())
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "kserve-manager-rolebinding", "labels": {"app.kubernetes.io/managed-by": "infercrane-bootstrap"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KSERVE_USER}],
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KSERVE_NAMESPACE}}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(crds)) as pool:
        list(pool.map(lambda crd: apply_crd(client, crd), crds))
    apply_all(client, [namespace, role, binding])
    wait_namespace(client, KSERVE_NAMESPACE)
    apply_all(client, [config(share)])
    for crd in crds:  # the manager's informers need every kind served before it starts
        wait_established(client, crd["metadata"]["name"])


def register_webhooks(kubeconfig: Path, ca_file: Path, port: int) -> None:
    """KServe's own webhook configurations, each pointed at the manager's loopback URL (the
    plane's API server runs outside any cluster network, so a Service reference cannot reach it),
    trusting the plane's CA. Re-applied at every start: the port changes."""
    ca = base64.b64encode(ca_file.read_bytes()).decode()
    docs = [d for d in yaml.safe_load_all((share_dir() / "webhooks.yaml").read_text()) if d]
    for d in docs:
        d["metadata"].pop("creationTimestamp", None)
        for hook in d["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
    apply_all(admin_client(kubeconfig), docs)
