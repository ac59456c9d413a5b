"""Where the real tools come from: a checkout's pinned builds, else PATH; a clear error otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infercrane.core.errors import EngineError, ToolNotFound
from infercrane.engine import environment
from infercrane.project import tools

ROOT = Path(__file__).resolve().parents[3]


def test_outside_a_checkout_a_tool_comes_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools.tool_dirs.cache_clear()
    monkeypatch.setattr(tools, "code_root", lambda: tmp_path)  # an installed package: no tools/
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "pulumi"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    try:
        assert tools.tool_dirs() == ()
        assert tools.find_tool("pulumi") == fake
        with pytest.raises(ToolNotFound) as exc:
            tools.find_tool("pulumi-resource-kubernetes")
        assert str(exc.value) == (
            "pulumi-resource-kubernetes is not built or installed.\n"
            "    fix: install pulumi-resource-kubernetes and put it on PATH"
        )
    finally:
        tools.tool_dirs.cache_clear()


def test_a_pulumi_outside_a_bin_directory_is_refused_with_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loose = tmp_path / "pulumi"
    loose.write_text("#!/bin/sh\n")
    monkeypatch.setattr(environment, "find_tool", lambda name: loose)
    with pytest.raises(EngineError, match=r"is not in a bin/ directory of an installation\.\n    fix: install Pulumi"):
        environment.pulumi_root()


def test_destroy_and_the_cli_do_not_import_the_pulumi_sdk() -> None:
    code = "import sys, infercrane.cli.commands, infercrane.engine.teardown; print(sorted(m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi.')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert r.stdout.strip() == "[]"


def test_the_provider_plugin_is_linked_into_a_fresh_pulumi_home_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infercrane.engine import environment

    binary = tmp_path / "cache" / "pulumi-resource-kubernetes"
    binary.parent.mkdir()
    binary.write_bytes(b"\x7fELF not really")
    monkeypatch.setattr(environment, "pinned_tool", lambda name: binary)
    home = tmp_path / "home"
    assert environment.install_provider_plugin(home)
    (folder,) = (home / "plugins").iterdir()  # one plugin directory, no staging left behind
    assert folder.name.startswith("resource-kubernetes-v")
    plugin = folder / "pulumi-resource-kubernetes"
    assert plugin.is_symlink() and plugin.resolve() == binary.resolve()
    assert environment.install_provider_plugin(home)  # already there: nothing to do
    other = tmp_path / "cache2" / "pulumi-resource-kubernetes"  # the cache moved: the dangling link is replaced
    other.parent.mkdir()
    other.write_bytes(b"x")
    binary.unlink()
    monkeypatch.setattr(environment, "pinned_tool", lambda name: other)
    assert environment.install_provider_plugin(home) and plugin.resolve() == other.resolve()


def test_the_engine_path_puts_the_pinned_tools_first_and_keeps_one_copy_of_every_entry() -> None:
    from infercrane.engine.environment import _path_with

    once = _path_with(("/tools/pulumi", "/tools/kube"), "/usr/bin:/tools/kube:/usr/bin:/bin:")
    assert once == "/tools/pulumi:/tools/kube:/usr/bin:/bin"
    assert _path_with(("/tools/pulumi", "/tools/kube"), once) == once, "evaluated twice: the same PATH"
