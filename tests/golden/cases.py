"""The golden cases: every shipped stack plus the edge cases under tests/golden/cases/."""

from __future__ import annotations

from pathlib import Path

from infercrane.core.load import loading
from infercrane.core.render.manifests import render_checked, to_yaml
from infercrane.project import stackfile

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXPECTED = HERE / "expected"


def case_files() -> dict[str, Path]:
    files = {p.name.removeprefix("Pulumi.").removesuffix(".yaml"): p for p in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))}
    files |= {p.stem: p for p in sorted((HERE / "cases").glob("*.yaml"))}
    return files


def render_case(name: str, path: Path) -> str:
    config = loading.load(stackfile.read_stack_values(path), source=path.name, env={})
    return to_yaml([m for r in render_checked(config, name) for m in r.manifests])
