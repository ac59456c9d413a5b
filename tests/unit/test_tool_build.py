"""tools/build.sh with a stand-in ``go`` on PATH (it records each build and writes its binary): the
missing tools build in lanes side by side, a failed build names its tool and shows its go output,
and the cache keeps every tool that built and no half-built entry."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for `go build -o OUT ... PACKAGE`: records start and end, sleeps, writes OUT; fails for
# a package containing $FAIL_PACKAGE, printing a line as the compiler would.
FAKE_GO = """#!/bin/bash
out="" pkg=""
while [[ $# -gt 0 ]]; do
  case "$1" in -o) out="$2"; shift 2 ;; -ldflags) shift 2 ;; *) pkg="$1"; shift ;; esac
done
echo "start $pkg $(date +%s.%N)" >>"$RECORD"
sleep "${SLEEP:-0.5}"
if [[ -n "${FAIL_PACKAGE:-}" && "$pkg" == *"$FAIL_PACKAGE"* ]]; then
  echo "$pkg: undefined: theThingThatBroke" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")" && echo binary >"$out"
echo "end $pkg $(date +%s.%N)" >>"$RECORD"
"""


def _build(tmp_path: Path, *tools: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    environ = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "INFERCRANE_TOOLS_DIR": str(tmp_path / "cache"),
        "RECORD": str(tmp_path / "record"),
        **env,
    }
    return subprocess.run(
        ["bash", str(ROOT / "tools" / "build.sh"), *tools], capture_output=True, text=True, env=environ, timeout=60
    )


def _intervals(tmp_path: Path) -> dict[str, tuple[float, float]]:
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in (tmp_path / "record").read_text().splitlines():
        what, pkg, at = line.split()
        (starts if what == "start" else ends)[pkg] = float(at)
    return {pkg: (starts[pkg], ends[pkg]) for pkg in ends}


def test_two_lanes_build_two_tools_side_by_side(tmp_path: Path) -> None:
    done = _build(tmp_path, "etcd", "registry", SLEEP="1.5", INFERCRANE_BUILD_JOBS="2")
    assert done.returncode == 0, done.stderr
    spans = sorted(_intervals(tmp_path).values())
    assert len(spans) == 2
    assert spans[1][0] < spans[0][1], f"the two builds ran one after the other: {spans}"
    assert "2 lanes side by side" in done.stderr
    assert "etcd: built in" in done.stderr and "registry: built in" in done.stderr


def test_the_node_builds_right_after_kubernetes_in_its_lane_and_node_images_stays_itself(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "build-times").write_text("node 500\nkube 10\n")  # recorded here: the node dealt first
    done = _build(tmp_path, "node-images", "node", "etcd", "kube", SLEEP="0.05", INFERCRANE_BUILD_JOBS="2")
    assert done.returncode == 0, done.stderr
    began = [line.split()[1] for line in (tmp_path / "record").read_text().splitlines() if line.startswith("start ")]
    kube = [i for i, pkg in enumerate(began) if pkg.startswith("k8s.io/kubernetes/cmd/kube") and not pkg.endswith("kubelet")]
    kubelet = began.index("k8s.io/kubernetes/cmd/kubelet")
    assert kubelet > max(kube), began  # the node's kubelet reuses what Kubernetes' build compiled
    assert "./cmd/engine-double" in began and "node-images: built in" in done.stderr


def test_one_lane_builds_one_after_the_other(tmp_path: Path) -> None:
    done = _build(tmp_path, "etcd", "registry", SLEEP="1", INFERCRANE_BUILD_JOBS="1")
    assert done.returncode == 0, done.stderr
    spans = sorted(_intervals(tmp_path).values())
    assert spans[1][0] >= spans[0][1]


def test_a_failed_tool_is_named_with_its_go_output_and_the_others_stay_cached(tmp_path: Path) -> None:
    done = _build(tmp_path, "etcd", "registry", "actionlint", FAIL_PACKAGE="distribution", INFERCRANE_BUILD_JOBS="2")
    assert done.returncode == 1
    assert "registry: BUILD FAILED after" in done.stderr
    assert "undefined: theThingThatBroke" in done.stderr
    assert "a tool did not build (named above); the others are in the cache" in done.stderr
    cache = tmp_path / "cache"
    assert (cache / next(p.name for p in cache.iterdir() if p.name.startswith("etcd-")) / "bin" / "etcd").is_file()
    assert any(p.name.startswith("actionlint-") for p in cache.iterdir())
    assert not any(p.name.startswith(("registry-", ".building-")) for p in cache.iterdir()), sorted(os.listdir(cache))
    again = _build(tmp_path, "etcd", "registry", "actionlint")
    assert again.returncode == 0, again.stderr
    assert "etcd: cached at" in again.stderr and "registry: built in" in again.stderr


def test_the_compiler_collects_garbage_less_often_unless_the_caller_says(tmp_path: Path) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "go").write_text('#!/bin/bash\necho "$GOGC" >>"$RECORD.gogc"\n' + FAKE_GO.split("\n", 1)[1])
    (fake / "go").chmod(0o755)
    environ = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path), "RECORD": str(tmp_path / "record")}
    for gogc, cache in ((None, "a"), ("150", "b")):
        env = environ | {"INFERCRANE_TOOLS_DIR": str(tmp_path / cache)} | ({"GOGC": gogc} if gogc else {})
        done = subprocess.run(["bash", str(ROOT / "tools" / "build.sh"), "etcd"], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "record.gogc").read_text().split() == ["400", "150"]


def test_a_lane_count_that_is_not_a_whole_number_is_refused_before_building(tmp_path: Path) -> None:
    done = _build(tmp_path, "etcd", INFERCRANE_BUILD_JOBS="two")
    assert done.returncode == 2
    assert "INFERCRANE_BUILD_JOBS must be a whole number of lanes, 1 or more (it is 'two')" in done.stderr
    assert not (tmp_path / "record").exists()
