"""How the local plane's bootstrap applies: server-side apply as ``infercrane-bootstrap`` with the
plane's admin client, a CRD as raw JSON, and the waits for a namespace and a CRD to be ready.
Local-plane layer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lightkube import Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace

from infercrane.local.layout import ADMIN_CONTEXT, BOOTSTRAP_MANAGER


def admin_client(kubeconfig: Path) -> Client:

    return Client(config=KubeConfig.from_file(kubeconfig).get(context_name=ADMIN_CONTEXT), trust_env=False)


def apply_all(client: Client, docs: list[dict[str, Any]]) -> None:

    for d in docs:
        client.apply(codecs.from_dict(d), field_manager=BOOTSTRAP_MANAGER)


def apply_crd(client: Client, crd: dict[str, Any]) -> None:
    """Server-side apply of one CRD as raw JSON: KServe's InferenceService CRD is 1 MB of schema,
    which lightkube's typed models take seconds to build and parse; the API server needs none."""

    gc = client._client
    url = f"{gc._client.base_url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    req = gc._client.build_request(
        "PATCH",
        url,
        content=json.dumps(crd),
        params={"fieldManager": BOOTSTRAP_MANAGER},
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    gc.raise_for_status(gc.send(req))  # type: ignore[no-untyped-call]


def wait_established(client: Client, name: str) -> None:
    for _ in range(100):
        status = client.get(CustomResourceDefinition, name).status
        if status and any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
            return
        time.sleep(0.1)


def wait_namespace(client: Client, name: str) -> None:
    for _ in range(50):
        ns = client.get(Namespace, name)
        if ns.status and ns.status.phase == "Active":
            return
        time.sleep(0.1)
