"""Where the project is: its root (``Pulumi.yaml``, ``stacks/``), the checkout this package runs
from, stack file paths and how paths are shown to people. Project-files layer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

#: The stacks of the embedded local plane: the demo's (``local``, ``local-kserve``) and the one that
#: deploys onto its real node; ``local reset`` forgets their state.
LOCAL_STACK: Final = "local"
LOCAL_KSERVE_STACK: Final = "local-kserve"
LOCAL_NODE_STACK: Final = "local-node"
LOCAL_STACKS: Final = (LOCAL_STACK, LOCAL_KSERVE_STACK, LOCAL_NODE_STACK)


def stack_file(stack: str, project_dir: Path | None = None) -> Path:
    return (project_dir or project_root()) / "stacks" / f"Pulumi.{stack}.yaml"


def code_root() -> Path:
    """The checkout this package runs from (tools/, deploy/ live there)."""
    return Path(__file__).resolve().parents[2]


def project_root() -> Path:
    """The Pulumi project directory: $INFERCRANE_PROJECT_DIR, else the current directory when it
    holds this project's Pulumi.yaml, else the directory this package was installed from."""
    if os.environ.get("INFERCRANE_PROJECT_DIR"):
        return Path(os.environ["INFERCRANE_PROJECT_DIR"]).resolve()
    cwd = Path.cwd()
    pulumi_yaml = cwd / "Pulumi.yaml"
    if pulumi_yaml.is_file() and re.search(r"(?m)^name:\s*infercrane\s*$", pulumi_yaml.read_text(encoding="utf-8")):
        return cwd
    return Path(__file__).resolve().parents[2]


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        try:
            return str(path.resolve().relative_to(project_root()))
        except ValueError:
            return str(path)
