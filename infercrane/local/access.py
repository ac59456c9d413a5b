"""Who may reach the local plane: its CA and each identity's client certificate (the deployer bound
to the shipped Roles, the read-only viewer, the admin, the components, identities added for
tests) and the kubeconfigs that name them. Local-plane layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from infercrane.local import pki, private
from infercrane.local.layout import (
    ADMIN_CONTEXT,
    CLUSTER,
    CONTEXT,
    DEPLOYER_GROUPS,
    DEPLOYER_USER,
    KSERVE_USER,
    KUBELET_CLIENT_USER,
    NAMESPACE,
    PROMETHEUS_USER,
    VIEWER_CONTEXT,
    VIEWER_USER,
)


def write_pki(p: Path) -> None:
    """The plane's CA and every identity's certificate (kept: issued once, also those a plane made
    before an identity existed)."""
    ca = pki.CA.load_or_create(p)
    if not (p / "etcd" / "apiserver-client.crt").is_file():  # also a plane created before etcd asked for one
        # etcd's own CA: every identity of the plane has a certificate of the plane's CA, and etcd
        # must take only the API server's.
        etcd = pki.CA.load_or_create(p / "etcd")
        etcd.issue("server", "etcd", ips=("127.0.0.1",), dns=("localhost",), peer=True)
        etcd.issue("apiserver-client", "kube-apiserver-etcd-client")
    if (p / "apiserver.crt").is_file():
        return
    ca.issue(
        "apiserver",
        "kube-apiserver",
        dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        ips=("127.0.0.1", "10.96.0.1"),
        server=True,
    )
    ca.issue("admin", "infercrane-admin", orgs=("system:masters",))
    ca.issue("deployer", DEPLOYER_USER, orgs=DEPLOYER_GROUPS)
    ca.issue("viewer", VIEWER_USER)
    ca.issue("controller-manager", "system:kube-controller-manager")
    ca.issue("apiserver-kubelet-client", KUBELET_CLIENT_USER)
    ca.issue("scheduler", "system:kube-scheduler")
    pki.service_account_keys(p)
    _write_kserve_pki(ca)


def _write_kserve_pki(ca: pki.CA) -> None:
    ca.issue("kserve-manager", KSERVE_USER)
    ca.issue("kserve-webhook", "kserve-webhook-server", dns=("localhost",), ips=("127.0.0.1",), server=True)


def write_kubeconfigs(state: Path, p: Path, port: int) -> None:
    """The kubeconfig of every context (the deployer, the admin, the viewer and identities added)
    and each component's own, for the API server at ``port``."""
    server = f"https://127.0.0.1:{port}"

    def doc(users: dict[str, str], contexts: dict[str, str], current: str | None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CLUSTER, "cluster": {"server": server, "certificate-authority": str(p / "ca.crt")}}],
            "users": [
                {"name": u, "user": {"client-certificate": str(p / f"{stem}.crt"), "client-key": str(p / f"{stem}.key")}}
                for u, stem in users.items()
            ],
            "contexts": [
                {"name": c, "context": {"cluster": CLUSTER, "user": u, "namespace": NAMESPACE}} for c, u in contexts.items()
            ],
        }
        if current:
            d["current-context"] = current
        return d

    if not (p / "viewer.crt").is_file():  # a plane created before the viewer identity existed
        pki.CA.load_or_create(p).issue("viewer", VIEWER_USER)
    if not (p / "apiserver-kubelet-client.crt").is_file():  # a plane created before its real node
        pki.CA.load_or_create(p).issue("apiserver-kubelet-client", KUBELET_CLIENT_USER)
    if not (p / "kserve-webhook.crt").is_file():  # a plane created before KServe ran on it
        _write_kserve_pki(pki.CA.load_or_create(p))
    if not (p / "prometheus.crt").is_file():  # a plane created before its Prometheus
        pki.CA.load_or_create(p).issue("prometheus", PROMETHEUS_USER)
    users = {"infercrane-deployer": "deployer", "infercrane-admin": "admin", "infercrane-viewer": "viewer"}
    contexts = {CONTEXT: "infercrane-deployer", ADMIN_CONTEXT: "infercrane-admin", VIEWER_CONTEXT: "infercrane-viewer"}
    extra = _read_identities(state)
    users |= {f"identity-{c}": f"identity-{c}" for c in extra}
    contexts |= {c: f"identity-{c}" for c in extra}
    # InferCrane never uses a current-context (every stack names its context); a person's
    # kubectl does: the read-only viewer, so `kubectl get pods -n infercrane-system` just works.
    _write_yaml(state / "kubeconfig", doc(users, contexts, VIEWER_CONTEXT))
    for stem in ("admin", "controller-manager", "scheduler", "kserve-manager"):
        _write_yaml(state / f"{stem}.kubeconfig", doc({stem: stem}, {stem: stem}, stem))


def _read_identities(state: Path) -> list[str]:
    path = state / "identities.json"
    return list(json.loads(path.read_text())) if path.is_file() else []


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    private.write(path, yaml.safe_dump(data, sort_keys=False))


def add_identity(state: Path, p: Path, context: str, user: str, groups: tuple[str, ...] = ()) -> None:
    """A client certificate for ``user``, recorded as context ``context`` (written into the
    kubeconfig by the next :func:`write_kubeconfigs`)."""
    pki.CA.load_or_create(p).issue(f"identity-{context}", user, orgs=groups)
    names = sorted(set(_read_identities(state)) | {context})
    (state / "identities.json").write_text(json.dumps(names))
