"""Which kubeconfig files a target names, merged as kubectl and the Pulumi provider merge them.
Live-cluster layer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from infercrane.core.model.target import KubernetesTarget
from infercrane.project.paths import project_root


def paths(target: KubernetesTarget, env: Mapping[str, str] | None = None) -> list[Path]:
    """The kubeconfig files: the stack's setting, else every $KUBECONFIG entry, else ~/.kube/config."""
    env = os.environ if env is None else env
    if target.kubeconfig:
        path = Path(target.kubeconfig).expanduser()
        # A relative path is relative to the project directory (where Pulumi runs the provider).
        return [path if path.is_absolute() else project_root() / path]
    listed = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [Path.home() / ".kube" / "config"]


_FILE_FIELDS: Final = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def merged(paths: list[Path]) -> dict[str, Any]:
    """Merge kubeconfig files the way kubectl and the Pulumi provider do: for each cluster, user
    and context name, the first file that defines it wins; missing files are skipped; relative
    certificate paths are resolved against the file that names them."""
    import yaml

    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for path in paths:
        if not path.is_file():
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(doc, dict):
            raise ValueError(f"{path} is not a kubeconfig map")
        for section, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            seen = {item["name"] for item in merged[section]}
            for item in doc.get(section) or []:
                if item.get("name") in seen:
                    continue
                body = dict(item.get(inner) or {})
                for key in _FILE_FIELDS.get(inner, ()):
                    if body.get(key) and not Path(body[key]).expanduser().is_absolute():
                        body[key] = str(path.parent / body[key])
                merged[section].append({"name": item.get("name"), inner: body})
    return merged
