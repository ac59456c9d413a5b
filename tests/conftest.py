"""Fixtures every tier may use: the in-process CLI runner and a scratch copy of the project."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


CliRunner = Callable[..., CliResult]


@contextlib.contextmanager
def _environment(cwd: Path, env: Mapping[str, str]) -> Iterator[None]:
    """The process as a fresh shell would have it: no INFERCRANE_* or patch-force variables
    except ``env``, working directory ``cwd``; everything put back afterwards."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    for k in [k for k in os.environ if k.startswith("INFERCRANE_") or k == "PULUMI_K8S_ENABLE_PATCH_FORCE"]:
        del os.environ[k]
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_cli(*args: str, cwd: Path = ROOT, env: Mapping[str, str] | None = None) -> CliResult:
    """``infercrane ARGS`` in this process (``main(argv)``): exit code, stdout, stderr -- for the
    tests of parsing, messages and offline commands (no interpreter start per call)."""
    from infercrane.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _environment(cwd, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test`'s workers: see :mod:`tests.workers`."""
    from tests.workers import PlaneScheduling

    return PlaneScheduling(config, log)  # type: ignore[arg-type]


@pytest.fixture
def cli() -> CliRunner:
    """The CLI runner (in-process); see :func:`run_cli`."""
    return run_cli


@pytest.fixture
def scratch_project(tmp_path: Path) -> Path:
    """A scratch copy of the project's Pulumi.yaml and stacks/, to break on purpose."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    return tmp_path
