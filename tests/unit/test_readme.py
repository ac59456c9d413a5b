"""The README is a front door: short, and every command, page and example in it works."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infercrane.cli.parser import build_parser
from infercrane.project.stackfile import load_stack

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_LINES = 200


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.M | re.S)


def cli_lines() -> list[list[str]]:
    """Each ``infercrane`` command line of the README's shell blocks, as its arguments."""
    out = []
    for block in blocks("bash"):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            inner = re.fullmatch(r'eval "\$\((.*)\)"', line)
            words = shlex.split(inner.group(1) if inner else line) if line else []
            for prefix in (["infercrane"], [".venv/bin/python", "-m", "infercrane"]):
                if words[: len(prefix)] == prefix:
                    out.append(words[len(prefix) :])
    return out


def test_the_readme_is_a_front_door_of_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= MAX_LINES, "move the detail into docs/ and link it"


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make ([a-z][a-z-]*)", README))
    named |= {m for b in blocks("bash") for m in re.findall(r"^make ([a-z][a-z-]*)", b, re.M)}
    assert named and named <= targets, f"not in the Makefile: {sorted(named - targets)}"


@pytest.mark.parametrize("args", cli_lines(), ids=lambda a: " ".join(a))
def test_every_infercrane_command_in_the_readme_parses(args: list[str]) -> None:
    parsed = build_parser().parse_args(args)
    assert parsed.command == args[0]


def test_the_readme_shows_commands_for_plan_deploy_inspect_and_promote() -> None:
    assert {"plan", "deploy", "inspect", "promote"} <= {a[0] for a in cli_lines()}


def test_every_page_the_readme_names_exists_and_every_page_is_named() -> None:
    named = set(re.findall(r"\bdocs/([a-z-]+\.md)", README))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert named <= pages, f"missing: {sorted(named - pages)}"
    assert pages <= named, f"not on the README's map: {sorted(pages - named)}"


def test_the_readmes_configuration_example_is_a_valid_stack(tmp_path: Path) -> None:
    """The one example, with a real digest where it says ``<64 lowercase hex>``."""
    (example,) = [b for b in blocks("yaml") if "infercrane:replicas" in b]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(example.replace("<64 lowercase hex>", "a" * 64))
    config = load_stack("dev", project_dir=tmp_path, env={})
    assert [r.key for r in config.replicas] == ["qwen-r0", "qwen-r1"]
    assert config.rollout_for("qwen").max_surge == 1
