"""The engine's reads of a stack's tags (infercrane.engine.workspace.Engine.tags) fail closed: a
stack not created yet has none, a backend that cannot answer raises. The Pulumi CLI is a double
(named so): a recorded answer per call."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infercrane.core.errors import EngineError
from infercrane.engine import stores
from infercrane.engine.workspace import Engine


def engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: int, out: str, err: str = "") -> Engine:
    monkeypatch.setattr(stores, "store_for", lambda url: None)  # a backend only the CLI reads
    e = Engine("prod", project_dir=tmp_path)
    monkeypatch.setattr(e, "_cli", lambda *a, check=True: subprocess.CompletedProcess(["pulumi"], code, out, err))
    return e


def test_a_stack_not_created_yet_has_no_tags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert engine(monkeypatch, tmp_path, 255, "", "error: no stack named 'prod' found").tags() == {}


def test_a_backend_that_cannot_say_the_tags_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(EngineError):
        engine(monkeypatch, tmp_path, 255, "", "error: could not reach the backend").tags()
    with pytest.raises(EngineError, match="answered what is not a JSON object"):
        engine(monkeypatch, tmp_path, 0, "[]").tags()
