"""The images the local plane's real node runs, built here -- no Docker: the sandbox (pause) image,
the engine-double image (a test double of the engines' interfaces, never an engine;
tools/go/node-images) and model images (weights of a given size in KServe's modelcar layout, for
image volumes). Each is pushed to the plane's registry (:mod:`infercrane.local.registry`) under
the exact ``repo@sha256:<digest>`` reference a stack names, and the node pulls it from there, so
the kubelet runs and mounts exactly that digest.

Builds are reproducible: one layer per image, its entries sorted, owned by root, every time
zero, gzip without a name or time, the config and manifest serialized with sorted keys. The same
binaries give the same digests on every machine (the binaries themselves are built with
``-trimpath`` from the pinned Go module). Local-plane layer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

OCI_MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG: Final = "application/vnd.oci.image.config.v1+json"
OCI_LAYER: Final = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_PLAIN: Final = "application/vnd.oci.image.layer.v1.tar"  # weights do not compress: not gzipped
HOST: Final = "infercrane.local"  # the name every local image carries; the node resolves it to the plane's registry
PAUSE_REPO: Final = f"{HOST}/pause"
ENGINE_DOUBLE_REPO: Final = f"{HOST}/engine-double"
MODEL_REPO: Final = f"{HOST}/models/double"


@dataclass(frozen=True)
class Image:
    repo: str
    digest: str  # sha256:<hex> of the manifest
    manifest: bytes
    blobs: dict[str, bytes]  # digest -> blob: its layer(s) and config

    @property
    def reference(self) -> str:
        return f"{self.repo}@{self.digest}"

    @property
    def size(self) -> int:
        """Bytes a pull moves: its blobs and manifest."""
        return sum(len(b) for b in self.blobs.values()) + len(self.manifest)

    @property
    def archive(self) -> bytes:
        """The image as an OCI image-layout tar whose index names it ``repo@<digest>``."""
        index = _json(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": OCI_MANIFEST,
                        "digest": self.digest,
                        "size": len(self.manifest),
                        "annotations": {"org.opencontainers.image.ref.name": self.reference},
                        "platform": {"architecture": "amd64", "os": "linux"},
                    }
                ],
            }
        )
        blobs = {f"blobs/sha256/{d[7:]}": b for d, b in (self.blobs | {self.digest: self.manifest}).items()}
        files = {"oci-layout": (_json({"imageLayoutVersion": "1.0.0"}), 0o644), "index.json": (index, 0o644)}
        files |= {path: (blob, 0o644) for path, blob in blobs.items()}
        return layer(files)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def layer(files: Mapping[str, tuple[bytes, int]], dirs: Mapping[str, int] = {}) -> bytes:  # noqa: B006 - read only
    """An uncompressed layer tar: ``dirs`` (path -> mode), then ``files`` (path -> (content,
    mode)), every parent directory present, in name order, root-owned, time zero."""
    out = io.BytesIO()
    every_dir = dict(dirs)
    for path in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            every_dir.setdefault("/".join(parts[:i]), 0o755)
    entries: list[tuple[str, tarfile.TarInfo, bytes | None]] = []  # path, header, content (None: a directory)
    for path, mode in every_dir.items():
        info = tarfile.TarInfo(path + "/")
        info.type, info.mode = tarfile.DIRTYPE, mode
        entries.append((path, info, None))
    for path, (data, mode) in files.items():
        info = tarfile.TarInfo(path)
        info.size, info.mode = len(data), mode
        entries.append((path, info, data))
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for _, info, content in sorted(entries, key=lambda e: e[0]):
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return out.getvalue()


def image(repo: str, raw_layer: bytes, config: Mapping[str, Any], *, compress: bool = True) -> Image:
    """The OCI image of one layer (gzipped unless ``compress`` is false) and the runtime ``config``
    (Entrypoint, Env, ...)."""
    if compress:
        gz = io.BytesIO()
        with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, filename="") as f:
            f.write(raw_layer)
        blob, media = gz.getvalue(), OCI_LAYER
    else:
        blob, media = raw_layer, OCI_LAYER_PLAIN
    config_blob = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": dict(config),
            "rootfs": {"type": "layers", "diff_ids": [_digest(raw_layer)]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": _digest(config_blob), "size": len(config_blob)},
            "layers": [{"mediaType": media, "digest": _digest(blob), "size": len(blob)}],
        }
    )
    return Image(repo, _digest(manifest), manifest, {_digest(blob): blob, _digest(config_blob): config_blob})


def pause(binary: Path) -> Image:
    """The sandbox image: ``/pause`` (tools/go/node-images/cmd/pause) and nothing else."""
    return image(PAUSE_REPO, layer({"pause": (binary.read_bytes(), 0o755)}), {"Entrypoint": ["/pause"]})


def engine_double(binary: Path, *, release: str | None = None) -> Image:
    """The engine-double image: the double installed as ``python3`` (so the command lines
    InferCrane renders start it), a world-writable ``/tmp`` and a home for any uid. ``release``
    (e.g. ``next``): the same double as another release of the image -- another digest to roll
    to, told apart by INFERCRANE_DOUBLE_RELEASE in its environment."""
    files = {"usr/local/bin/python3": (binary.read_bytes(), 0o755)}
    env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"] + ([f"INFERCRANE_DOUBLE_RELEASE={release}"] if release else [])
    return image(ENGINE_DOUBLE_REPO, layer(files, {"tmp": 0o1777}), {"Env": env, "WorkingDir": "/"})


#: The engine double's releases the real node holds: the one stacks pin, and one to roll to.
NEXT_RELEASE: Final = "next"


#: The model images the plane's registry holds: name -> (MiB of weights, release). Two releases of
#: a model of a few hundred MB: a pull of one is a real download, a roll between them a new digest.
MODELS: Final = {"double-7b": (256, "a"), f"double-7b-{NEXT_RELEASE}": (256, "b")}
SHARD_MIB: Final = 64


def model(name: str, mib: int, release: str) -> Image:
    """A model image in KServe's modelcar layout: ``/models/config.json`` and safetensors-named
    shards of ``mib`` MiB of bytes drawn from a seed of (``name``, ``release``) -- the same image,
    byte for byte, on every machine; uncompressed (weights do not compress)."""
    import random

    rng = random.Random(f"{name}@{release}")
    files = {"models/config.json": (_json({"model_type": "engine-double", "name": name, "release": release}), 0o644)}
    shards = max(1, -(-mib // SHARD_MIB))
    for i in range(shards):
        size = min(SHARD_MIB, mib - i * SHARD_MIB) << 20
        files[f"models/model-{i + 1:05d}-of-{shards:05d}.safetensors"] = (rng.randbytes(size), 0o644)
    return image(MODEL_REPO, layer(files), {}, compress=False)


def models() -> dict[str, Image]:
    """Every model image of :data:`MODELS`, by name."""
    return {name: model(name, mib, release) for name, (mib, release) in MODELS.items()}
