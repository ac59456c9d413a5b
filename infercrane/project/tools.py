"""Where the real tools are: the pinned builds of this checkout first, then ``PATH``.

In a checkout, ``tools/build.sh`` builds the pinned Pulumi CLI, provider plugin, control plane
and kwok into a cache outside the repository and prints its entries (asked once per process).
An installed package has no ``tools/``: it uses what the platform team installed -- ``pulumi`` on
``PATH`` and the Kubernetes provider plugin in ``PULUMI_HOME`` (or on ``PATH``). Project-files layer.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

from infercrane.core.errors import ToolNotFound
from infercrane.project.paths import code_root


@functools.cache
def tool_dirs() -> tuple[Path, ...]:
    """The cache entries of this checkout's pinned tools; none for an installed package."""
    script = code_root() / "tools" / "build.sh"
    if not script.is_file():
        return ()
    out = subprocess.run(["bash", str(script), "--print-path"], capture_output=True, text=True, check=True).stdout
    return tuple(Path(line) for line in out.splitlines() if line)


def pinned_tool(name: str) -> Path | None:
    """``name`` from this checkout's pinned builds, if built."""
    return next((d / name for d in tool_dirs() if (d / name).is_file()), None)


def find_tool(name: str) -> Path:
    """``name``: the checkout's pinned build, else the first on ``PATH``."""
    found = pinned_tool(name) or shutil.which(name)
    if found:
        return Path(found)
    if (code_root() / "tools" / "build.sh").is_file():
        fix = "run `tools/build.sh` (or `make tools`); the first build takes tens of minutes"
    else:
        fix = f"install {name} and put it on PATH"
    raise ToolNotFound(f"{name} is not built or installed.", fix=f"{fix}")


KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def kubernetes_tools(minor: str) -> dict[str, Path]:
    """The control-plane binaries of Kubernetes ``minor`` (``1.34``) from this checkout's pinned
    builds (``tools/build.sh kube@1.34`` builds them), and its kubelet when built beside them (a
    release other than the default: the default's is in the node entry). ToolNotFound when not
    pinned or not built."""
    script = code_root() / "tools" / "build.sh"
    if not script.is_file():
        raise ToolNotFound(
            f"Kubernetes {minor} needs a checkout's pinned builds (tools/build.sh).", fix="omit --kubernetes-version"
        )
    run = subprocess.run(["bash", str(script), "--print-kube-path", minor], capture_output=True, text=True)
    if run.returncode != 0:
        raise ToolNotFound(run.stderr.strip() or f"Kubernetes {minor} is not pinned.", fix="use a minor of KUBERNETES_VERSIONS")
    bin_dir = Path(run.stdout.strip())
    missing = [b for b in KUBE_BINARIES if not (bin_dir / b).is_file()]
    if missing:
        raise ToolNotFound(f"Kubernetes {minor} is not built ({', '.join(missing)}).", fix=f"run `tools/build.sh kube@{minor}`")
    kubelet = {"kubelet": bin_dir / "kubelet"} if (bin_dir / "kubelet").is_file() else {}
    return {b: bin_dir / b for b in KUBE_BINARIES} | kubelet
