"""Benchmark: `infercrane doctor --kubernetes` against one `kubectl auth can-i` process per check.

Both sides ask the same API server (the local plane) the same access questions as the same
restricted identity, in one run, side by side. doctor also checks the API version, namespace,
service account and GPU capacity, so the comparison is conservative. Usage:

    .venv/bin/python bench/doctor_vs_kubectl.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from infercrane.live import doctor
from infercrane.live.doctor import rights
from infercrane.local.layout import CONTEXT
from infercrane.local.plane import Plane
from infercrane.project import stackfile
from infercrane.project.tools import find_tool


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    plane = Plane.default()
    plane.start(progress=lambda m: None)
    config = stackfile.load_stack("local", env={"INFERCRANE_KUBERNETES_KUBECONFIG": str(plane.kubeconfig)})
    checks = [c[:3] for c in rights.access_checks(config) if c[3] != "optional"]
    kubectl = str(find_tool("kubectl"))
    ns = config.kubernetes.namespace

    doctor_times, kubectl_times = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        results = doctor.run(config)
        doctor_times.append(time.perf_counter() - t0)
        assert not [c for c in results if c.status == doctor.FAIL], results

        t0 = time.perf_counter()
        for verb, group, resource in checks:
            res = f"{resource}.{group}" if group else resource
            out = subprocess.run(
                [kubectl, f"--kubeconfig={plane.kubeconfig}", f"--context={CONTEXT}", "auth", "can-i", verb, res, "-n", ns],
                capture_output=True,
                text=True,
            )
            assert out.stdout.strip() == "yes", (verb, res, out.stdout, out.stderr)
        kubectl_times.append(time.perf_counter() - t0)

    d, k = statistics.median(doctor_times), statistics.median(kubectl_times)
    print(f"access checks per run: {len(checks)} (doctor runs {len(results)} checks in all)")
    print(f"doctor --kubernetes (in process, concurrent): median {d * 1000:.0f} ms over {args.rounds} rounds")
    print(f"kubectl auth can-i, one process per check:    median {k * 1000:.0f} ms over {args.rounds} rounds")
    print(f"ratio kubectl / doctor: {k / d:.1f}x")


if __name__ == "__main__":
    main()
