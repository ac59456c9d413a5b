"""What one progress report's Events LIST costs at fleet size: a namespace holding the Events of a
1,000-replica deploy (``--events``, default 6,000: a Scheduled, Pulling, Pulled, Created and
Started per pod and a SuccessfulCreate per ReplicaSet, 1 % Warnings), listed three ways, each
``--runs`` times on one local plane (kwok nodes only):

- the Warnings only, as typed objects (what the report listed before issue #67);
- every type from the API server's cache as plain JSON (what it lists now: warnings and stages);
- every type as typed objects, as the API server's quorum read (what a failure's explanation listed).

Usage: ``.venv/bin/python bench/events_list.py`` (``make bench-events``). docs/benchmarks.md
records a run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightkube import Client, KubeConfig  # noqa: E402
from lightkube.models.core_v1 import EventSource, ObjectReference  # noqa: E402
from lightkube.models.meta_v1 import ObjectMeta  # noqa: E402
from lightkube.resources.core_v1 import Event  # noqa: E402

from infercrane.core.model.target import KubernetesTarget  # noqa: E402
from infercrane.live.client.api import Live  # noqa: E402
from infercrane.local.layout import ADMIN_CONTEXT  # noqa: E402
from infercrane.local.plane import Plane  # noqa: E402

NS = "infercrane-system"
REASONS = ("Scheduled", "Pulling", "Pulled", "Created", "Started", "SuccessfulCreate")


def fill(client: Client, count: int) -> None:
    def one(i: int) -> None:
        warning = i % 100 == 0
        reason = "BackOff" if warning else REASONS[i % len(REASONS)]
        client.create(
            Event(
                metadata=ObjectMeta(name=f"bench-{i}", namespace=NS),
                involvedObject=ObjectReference(kind="Pod", name=f"infercrane-r{i // 6}-5d8f9c7b6-x2x4q", namespace=NS),
                reason=reason,
                message=f"{reason} of pod {i // 6}: " + "x" * 60,
                type="Warning" if warning else "Normal",
                source=EventSource(component="kubelet", host="kwok-l40s-0"),
                firstTimestamp="2026-12-07T10:00:00Z",
                lastTimestamp="2026-12-07T10:00:00Z",
                count=1,
            )
        )

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, range(count)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=6000)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="infercrane-bench-events-"))
    plane = Plane(work / "plane")
    nodes = work / "nodes.yaml"
    nodes.write_text("nodes:\n  - {name: kwok-l40s-0, gpuProduct: NVIDIA-L40S, gpus: 4}\n")
    try:
        plane.start(nodes_file=nodes, progress=lambda m: None, real_node=False)
        admin = Client(KubeConfig.from_file(plane.kubeconfig).get(context_name=ADMIN_CONTEXT))
        began = time.perf_counter()
        fill(admin, args.events)
        print(f"{args.events} Events created in {time.perf_counter() - began:.1f} s", flush=True)
        target = KubernetesTarget.model_validate(
            {"context": ADMIN_CONTEXT, "kubeconfig": str(plane.kubeconfig), "imageDigest": "x@sha256:" + "0" * 64}
        )
        live = Live(admin, target)
        ways = {
            "Warnings only, typed (before)": lambda: live.list(Event, fields={"type": "Warning"}, action="list events"),
            "every type, cached JSON (now)": lambda: live.list_cached("events", action="list events"),
            "every type, typed": lambda: live.list(Event, action="list events"),
        }
        for name, way in ways.items():
            took, size = [], 0
            for _ in range(args.runs):
                t = time.perf_counter()
                size = len(way())
                took.append(time.perf_counter() - t)
            print(f"| {name} | {size} | {statistics.median(took) * 1000:.0f} ms | {max(took) * 1000:.0f} ms |", flush=True)
    finally:
        plane.stop(quiet=True)


if __name__ == "__main__":
    main()
