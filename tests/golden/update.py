"""Rewrite the golden manifests: ``python -m tests.golden.update`` (review the diff, then commit)."""

from __future__ import annotations

from tests.golden.cases import EXPECTED, case_files, render_case


def main() -> None:
    EXPECTED.mkdir(exist_ok=True)
    for name, path in case_files().items():
        (EXPECTED / f"{name}.yaml").write_text(render_case(name, path), encoding="utf-8")
        print(f"updated tests/golden/expected/{name}.yaml")


if __name__ == "__main__":
    main()
