"""The local plane's registry: distribution (the CNCF registry's reference implementation, built
from its Go module like the other tools), on loopback, that the real node pulls every image from --
the sandbox, the engine double's releases and the model images -- so a pull is real bytes over a
socket: its time is in the kubelet's Events (the startup ledger) and its bytes in the registry's
own access log (:func:`served`).

The node's containerd resolves the name every local image carries (:data:`images.HOST`) to this
registry over plain HTTP (its ``hosts.toml``); nothing else is mirrored, and nothing listens
beyond loopback. Images are pushed by digest once the registry is up (:func:`push`): a blob the
registry has is not sent again. Local-plane layer.
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infercrane.core.errors import PlaneError
from infercrane.local import images, node_files
from infercrane.project.tools import find_tool

TIMEOUT: Final = 120.0
# An access-log line (Apache's combined format, gorilla/handlers): method, path, status, bytes sent.
_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[0-9.]+" (?P<status>\d{3}) (?P<size>\d+|-)')


def config(storage: Path, port: int) -> dict[str, Any]:
    """The registry's configuration: its blobs under ``storage``, HTTP on loopback at ``port``,
    every request in its access log (standard output: the plane's log of it)."""
    return {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": False}},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": False}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
    }


#: The registry's environment: no trace export (distribution's OpenTelemetry would send to localhost:4318).
ENV: Final = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}


def hosts_toml(port: int) -> str:
    """containerd's host configuration for :data:`images.HOST`: this registry, plain HTTP, pull only."""
    url = f"http://127.0.0.1:{port}"
    return f'server = "{url}"\n\n[host."{url}"]\n  capabilities = ["pull", "resolve"]\n'


def _request(
    method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            resp.read()
            return int(resp.status), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        if method == "HEAD" and exc.code == 404:
            return 404, {}
        body = exc.read().decode(errors="replace")[:300]
        raise PlaneError(f"the local registry refused {method} {url}: HTTP {exc.code} {body}") from exc
    except OSError as exc:
        raise PlaneError(f"the local registry did not answer {method} {url}: {exc}") from exc


def push(base: str, image: images.Image) -> int:
    """``image`` into the registry at ``base`` (``http://127.0.0.1:<port>``) under its digest:
    each blob it lacks (a monolithic upload), then the manifest. Returns the bytes sent."""
    repo = image.repo.removeprefix(images.HOST + "/")
    sent = 0
    for digest, blob in image.blobs.items():
        if _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}")[0] == 200:
            continue
        _, headers = _request("POST", f"{base}/v2/{repo}/blobs/uploads/")
        location = headers.get("Location", "")
        if not location:
            raise PlaneError(f"the local registry gave no upload location for {repo}")
        location = location if location.startswith("http") else base + location
        sep = "&" if "?" in location else "?"
        _request("PUT", f"{location}{sep}digest={digest}", blob, {"Content-Type": "application/octet-stream"})
        sent += len(blob)
    _request("PUT", f"{base}/v2/{repo}/manifests/{image.digest}", image.manifest, {"Content-Type": images.OCI_MANIFEST})
    return sent + len(image.manifest)


def has(base: str, reference: str) -> bool:
    """Whether the registry holds the manifest ``reference`` (``HOST/repo@sha256:…``) names."""
    repo, digest = reference.removeprefix(images.HOST + "/").split("@", 1)
    return _request("HEAD", f"{base}/v2/{repo}/manifests/{digest}", headers={"Accept": images.OCI_MANIFEST})[0] == 200


@dataclass(frozen=True)
class Served:
    """What the registry sent, from its access log: blob GETs and their bytes, per repository."""

    blobs: int
    bytes: int
    by_repo: dict[str, int]


def served(lines: Iterable[str]) -> Served:
    """The blob downloads in the registry's access log ``lines`` (HEADs and manifests not counted)."""
    blobs, total, by_repo = 0, 0, dict[str, int]()
    for line in lines:
        m = _ACCESS.search(line)
        if not m or m["method"] != "GET" or m["status"] not in ("200", "206") or "/blobs/sha256:" not in m["path"]:
            continue
        size = 0 if m["size"] == "-" else int(m["size"])
        repo = m["path"].removeprefix("/v2/").split("/blobs/", 1)[0]
        blobs, total = blobs + 1, total + size
        by_repo[repo] = by_repo.get(repo, 0) + size
    return Served(blobs, total, by_repo)


def served_since(log: Path, offset: int) -> Served:
    """:func:`served` for what the log at ``log`` gained after byte ``offset`` (its size before)."""
    with log.open("rb") as f:
        f.seek(offset)
        return served(f.read().decode(errors="replace").splitlines())


def node_images() -> list[images.Image]:
    """What the node pulls from the plane's registry: the sandbox, the engine double's releases and the model images."""
    double = find_tool("engine-double")
    return [
        images.pause(find_tool("pause")),
        images.engine_double(double),
        images.engine_double(double, release=images.NEXT_RELEASE),
    ]


def push_images(state: Path, port: int) -> None:
    """Every image the node may pull into the plane's registry at ``port`` (:func:`node_images`,
    then the model images -- built only when the registry lacks them: a plane started again has them)."""
    base = f"http://127.0.0.1:{port}"
    for image in node_images():
        push(base, image)
    known = node_files.home(state) / "model-images.json"  # name -> reference, as built last
    built = json.loads(known.read_text()) if known.is_file() else {}
    if set(built) != set(images.MODELS) or not all(has(base, ref) for ref in built.values()):
        models = images.models()
        for image in models.values():
            push(base, image)
        known.write_text(json.dumps({name: m.reference for name, m in models.items()}, indent=1))


def model_images(state: Path) -> dict[str, str]:
    """The model images the plane's registry holds: name -> ``repo@sha256:…`` (empty: no real node)."""
    known = node_files.home(state) / "model-images.json"
    return dict(json.loads(known.read_text())) if known.is_file() else {}
