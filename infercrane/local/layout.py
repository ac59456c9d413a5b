"""Names of the local plane, shared by its start-up (:mod:`~infercrane.local.plane`) and its
bootstrap (:mod:`~infercrane.local.bootstrap`): contexts, identities, namespaces (the processes: :mod:`~infercrane.local.components`).
Local-plane layer.
"""

from __future__ import annotations

import secrets
from typing import Final

CONTEXT: Final = "infercrane-local"
ADMIN_CONTEXT: Final = "infercrane-local-admin"
# Read-only evidence identity: the optional pod and node readers, nothing else (demo placement).
VIEWER_CONTEXT: Final = "infercrane-local-viewer"
VIEWER_USER: Final = "infercrane-local-viewer"
CLUSTER: Final = "infercrane-local"
NAMESPACE: Final = "infercrane-system"
DEPLOYER_USER: Final = "system:serviceaccount:infercrane-system:infercrane-control-plane"
DEPLOYER_GROUPS: Final = ("system:serviceaccounts", "system:serviceaccounts:infercrane-system")
BOOTSTRAP_MANAGER: Final = "infercrane-bootstrap"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
SERVICE_CIDR: Final = "10.96.0.0/16"
START_TIMEOUT_SECONDS: Final = 90
# The KServe manager's own identity (client certificate), bound to KServe's own ClusterRole.
KSERVE_USER: Final = "kserve-controller-manager"
KSERVE_NAMESPACE: Final = "kserve"
# The API server's client certificate towards the real node's kubelet (logs, exec on a user's behalf).
KUBELET_CLIENT_USER: Final = "kube-apiserver-kubelet-client"
# The plane's Prometheus: it may list and watch pods (to find the ones it scrapes), nothing else.
PROMETHEUS_USER: Final = "infercrane-local-prometheus"


def random_secret() -> str:
    """A fresh worker key; written to the Secret, never printed or logged."""
    return secrets.token_urlsafe(32)
