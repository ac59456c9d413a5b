"""What a replica's engine says it serves: ``GET /v1/models`` asked of the replica itself, on its
pod address -- the API server's proxy would strip the ``Authorization`` header the engine needs
(kube-apiserver removes it from every request it authenticates). The key is the caller's, sent
only in that header: never logged, never in a message. Live-cluster layer.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.live.api import Live


@dataclass(frozen=True)
class Served:
    status: int  # the HTTP status (0: no answer)
    names: tuple[str, ...] = ()  # the model ids it serves, when it answered 200
    error: str = ""  # why there is no answer


def models(address: str, port: int, key: str | None, *, timeout: float = 5.0) -> Served:
    """``GET http://<address>:<port>/v1/models``, with the worker key or without."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(f"http://{address}:{port}/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - http to a pod address
            body = json.loads(answer.read())
            return Served(answer.status, tuple(str(m.get("id")) for m in body.get("data") or []))
    except urllib.error.HTTPError as exc:
        return Served(exc.code)
    except (OSError, ValueError) as exc:
        return Served(0, error=f"{exc.__class__.__name__}: {exc}")


@dataclass(frozen=True)
class Answer:
    """One replica asked on its pod address: with the worker key, and without it."""

    key: str
    node: str
    address: str
    port: int
    with_key: Served
    without: Served


def answers(reader: Live, config: InferCraneConfig, key: str | None) -> dict[str, Answer | None]:
    """Each replica's first pod with an address (read as ``reader``: a pod reader), asked for its
    models with ``key`` and without; None for a replica with no such pod."""
    from lightkube.resources.core_v1 import Pod

    out: dict[str, Answer | None] = {}
    for r in config.replicas:
        pods = [
            p for p in reader.list(Pod, labels=naming.selector(r.key), action="list pods") if (p.get("status") or {}).get("podIP")
        ]
        if not pods:
            out[r.key] = None
            continue
        ip, node = str(pods[0]["status"]["podIP"]), str((pods[0].get("spec") or {}).get("nodeName") or "")
        out[r.key] = Answer(r.key, node, ip, r.port, models(ip, r.port, key), models(ip, r.port, None))
    return out
