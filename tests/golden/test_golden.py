"""Rendered manifests equal the committed golden files (the review surface for infra changes)."""

from __future__ import annotations

import pytest

from tests.golden.cases import EXPECTED, case_files, render_case

CASES = case_files()


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_render_matches_golden(name: str) -> None:
    expected = EXPECTED / f"{name}.yaml"
    assert expected.is_file(), f"no golden file for {name}: run `python -m tests.golden.update` and review"
    assert render_case(name, CASES[name]) == expected.read_text(encoding="utf-8"), (
        f"render of {name} differs from {expected.name}; if intended, run `python -m tests.golden.update` and review the diff"
    )


def test_every_golden_file_has_a_case() -> None:
    assert sorted(p.stem for p in EXPECTED.glob("*.yaml")) == sorted(CASES)
