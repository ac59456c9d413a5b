"""``make test-matrix``: the qualification scenarios of the integration tier on every pinned
Kubernetes (tools/versions.env KUBERNETES_VERSIONS), one table of version x scenario.

For each minor: build it if needed (``tools/build.sh kube@<minor>``), run ``pytest -m
qualification tests/integration`` on a plane of that version (INFERCRANE_TEST_KUBERNETES_VERSION),
and read the outcome of each scenario from pytest's JUnit report. Exit 1 when any scenario fails
on any version or a version does not build. ``make test`` runs the default version only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pinned_minors() -> list[str]:
    text = (ROOT / "tools" / "versions.env").read_text()
    m = re.search(r'^KUBERNETES_VERSIONS="([^"]+)"', text, re.M)
    assert m, "tools/versions.env has no KUBERNETES_VERSIONS"
    return [v.rsplit(".", 1)[0] for v in m.group(1).split()]


def run_version(minor: str, report: Path) -> tuple[dict[str, str], float, str]:
    """(scenario -> passed/failed/error, seconds, note) for one Kubernetes minor."""
    began = time.monotonic()
    build = subprocess.run(["bash", str(ROOT / "tools" / "build.sh"), f"kube@{minor}"], capture_output=True, text=True)
    if build.returncode != 0:
        tail = [line for line in build.stderr.splitlines() if line.strip()][-3:]
        return {}, time.monotonic() - began, "did not build: " + " | ".join(tail)
    built = time.monotonic() - began
    env = dict(os.environ) | {"INFERCRANE_TEST_KUBERNETES_VERSION": minor}
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "qualification", "tests/integration", f"--junitxml={report}"]
    subprocess.run(cmd, cwd=ROOT, env=env)
    outcomes: dict[str, str] = {}
    if report.is_file():
        for case in ET.parse(report).getroot().iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            outcomes[case.get("name", "?")] = (
                "FAILED" if failed else ("skipped" if case.find("skipped") is not None else "passed")
            )
    return outcomes, time.monotonic() - began, f"build {built:.0f} s" if built > 5 else ""


def main(argv: list[str]) -> int:
    minors = argv or pinned_minors()
    results: dict[str, tuple[dict[str, str], float, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for minor in minors:
            print(f"== Kubernetes {minor}", flush=True)
            results[minor] = run_version(minor, Path(tmp) / f"junit-{minor}.xml")
    scenarios = sorted({s for outcomes, _, _ in results.values() for s in outcomes})
    width = max([len(s) for s in scenarios] + [8])
    print("\n" + "scenario".ljust(width) + "".join(f" | {m:>7}" for m in minors))
    print("-" * width + "".join(" | -------" for _ in minors))
    for s in scenarios:
        print(s.ljust(width) + "".join(f" | {results[m][0].get(s, '-'):>7}" for m in minors))
    print("time".ljust(width) + "".join(f" | {results[m][1] / 60:>5.1f}min" for m in minors))
    for m in minors:
        if results[m][2]:
            print(f"Kubernetes {m}: {results[m][2]}")
    ok = all(outcomes and all(o == "passed" for o in outcomes.values()) for outcomes, _, _ in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
