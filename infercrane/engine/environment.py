"""Where the engine's processes run: the pinned Pulumi CLI and provider plugin, the file backend,
the passphrase of the local stacks, no downloads. Engine layer.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from infercrane.core.errors import EngineError
from infercrane.project.paths import LOCAL_STACKS
from infercrane.project.tools import find_tool, pinned_tool, tool_dirs

# The local stack's passphrase protects no secret (the stack has none); other stacks need
# PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) from the environment.
LOCAL_PASSPHRASE: Final = "infercrane-local"


def pulumi_root() -> Path:
    """The Pulumi CLI's installation root (``<root>/bin/pulumi``): the checkout's pinned build, else
    the ``pulumi`` on PATH."""
    pulumi = find_tool("pulumi").resolve()
    if pulumi.parent.name != "bin":
        raise EngineError(
            f"the Pulumi CLI at {pulumi} is not in a bin/ directory of an installation.",
            fix="install Pulumi with its installer (or put <root>/bin on PATH)",
        )
    return pulumi.parent.parent


PROVIDER_BINARY: Final = "pulumi-resource-kubernetes"


def install_provider_plugin(pulumi_home: Path) -> bool:
    """Install the pinned provider binary into PULUMI_HOME's plugin cache (once), so the engine
    uses it as a regular plugin of the SDK's version instead of an "ambient" one from PATH.
    Returns False (and the caller keeps the provider on PATH) if the install fails or this is not
    a checkout with the pinned build (an installed package uses the platform's own plugins).

    The plugin is a symbolic link to the tool cache's binary, in a directory made under a
    temporary name and renamed into place (Pulumi reads a plugin directory it did not install
    itself): ``pulumi plugin install --file`` would copy the whole binary on the first command of
    every fresh PULUMI_HOME (docs/benchmarks.md). Where links cannot be made, that copy."""
    import subprocess
    import tempfile
    from importlib.metadata import version

    provider = pinned_tool(PROVIDER_BINARY)
    if provider is None:
        return False
    sdk_version = version("pulumi-kubernetes")
    folder = pulumi_home / "plugins" / f"resource-kubernetes-v{sdk_version}"
    installed = folder / PROVIDER_BINARY
    if installed.is_file():
        return True
    staging: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        (staging / PROVIDER_BINARY).symlink_to(provider.resolve())
        if folder.exists():  # a broken install (its target gone): replaced as a whole
            shutil.rmtree(folder)
        staging.rename(folder)
    except OSError:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if installed.is_file():
            return True  # another command installed it meanwhile
    else:
        return installed.is_file()
    cmd = [
        str(find_tool("pulumi")),
        "plugin",
        "install",
        "resource",
        "kubernetes",
        f"v{sdk_version}",
        "--file",
        str(provider),
    ]
    env = dict(os.environ) | {"PULUMI_HOME": str(pulumi_home), "PULUMI_SKIP_UPDATE_CHECK": "true"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    return done.returncode == 0 and installed.is_file()


def engine_env(stack: str, project_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the Pulumi CLI and its plugins: pinned tools first, no downloads, file backend."""
    home = Path(os.environ.get("PULUMI_HOME") or project_dir / ".infercrane" / "pulumi-home")
    dirs = list(tool_dirs())
    if install_provider_plugin(home):
        dirs = [d for d in dirs if not (d / PROVIDER_BINARY).exists()]
    env = {
        "PATH": _path_with(tuple(str(d) for d in dirs), os.environ.get("PATH", "")),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "PULUMI_BACKEND_URL": os.environ.get("PULUMI_BACKEND_URL") or (project_dir / ".infercrane" / "pulumi-state").as_uri(),
        "PULUMI_HOME": str(home),
    }
    if not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
        if stack in LOCAL_STACKS:
            env["PULUMI_CONFIG_PASSPHRASE"] = LOCAL_PASSPHRASE
    env.update(extra or {})
    if env["PULUMI_BACKEND_URL"].startswith("file://"):
        Path(env["PULUMI_BACKEND_URL"].removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    return env


def _path_with(first: tuple[str, ...], path: str) -> str:
    """``first`` then the entries of ``path``, each once (in order): a shell that evals ``local
    env`` twice keeps one copy of every entry."""
    return os.pathsep.join(dict.fromkeys([*first, *(p for p in path.split(os.pathsep) if p)]))
