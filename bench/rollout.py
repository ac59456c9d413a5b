"""Rollout benchmark: a fleet rolled to a new image digest by the Deployment controller itself, and
by ``infercrane deploy``, side by side in one run on one local plane.

The plane (its own state directory, kwok nodes only) has enough simulated 4-GPU L40S nodes, and
every pod becomes Ready ``--load`` seconds after it starts (``local start --pod-ready-delay``: the
simulated model load). E endpoints of 4 one-GPU replicas each, ``maxUnavailable: 1, maxSurge: 0``:

- **the anchor**: E Deployments of 4 replicas with our rendered pod template, ``RollingUpdate
  {maxUnavailable: 1, maxSurge: 0}``, applied by ``kubectl apply --server-side`` as the admin,
  then applied again with the new digest; timed from that apply until every Deployment has rolled
  out (``kubectl rollout status``'s rule, one LIST every 0.25 s);
- **infercrane**: the same 4·E replicas as E endpoints of a stack (one Deployment per replica),
  deployed, then the stack's ``imageDigest`` changed and ``infercrane deploy`` timed as a CLI
  process, exactly as a user runs it (the restricted identity).

The floor is what the loads alone take: 4 waves × ``--load``. A watcher (the admin, one LIST of
Deployments every 0.25 s) records each endpoint's lowest count of available replicas during each
roll; the policy allows 3 of 4. Usage: ``.venv/bin/python bench/rollout.py --endpoints 20,100``
(``make bench-rollout``). docs/benchmarks.md records a run and the machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, KubeConfig
from lightkube import operators as op
from lightkube.resources.apps_v1 import Deployment

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infercrane.core import naming  # noqa: E402
from infercrane.core.render.manifests import render_checked, to_yaml  # noqa: E402
from infercrane.live.status.verdicts import deployment_verdict  # noqa: E402
from infercrane.local.layout import ADMIN_CONTEXT, CONTEXT  # noqa: E402
from infercrane.local.plane import Plane  # noqa: E402
from infercrane.project.stackfile import load_stack  # noqa: E402
from infercrane.project.tools import find_tool  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from fleet import cli_env  # noqa: E402

NS = "infercrane-system"
PER_ENDPOINT = 4
OLD = "vllm/vllm-openai@sha256:" + "c" * 64
NEW = "vllm/vllm-openai@sha256:" + "d" * 64
ENDPOINT_LABEL = "infercrane.bench/endpoint"


def nodes_file(path: Path, gpus: int) -> Path:
    count = -(-gpus // 4) + 2
    nodes = [{"name": f"kwok-l40s-{i}", "gpuProduct": "NVIDIA-L40S", "gpus": 4} for i in range(count)]
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def write_stack(project: Path, endpoints: int, digest: str, kubeconfig: Path) -> None:
    doc = {
        "config": {
            "infercrane:kubernetes": {
                "context": CONTEXT,
                "namespace": NS,
                "imageDigest": digest,
                "kubeconfig": str(kubeconfig),
                # kwok runs no preStop hook and deletes a pod at once: no drain to estimate either
                "drain": {"preStopSeconds": 0},
            },
            "infercrane:replicas": [
                {"key": f"e{e}-r{i}", "model": "Qwen/Qwen3-8B", "name": f"e{e}", "gpu": "NVIDIA-L40S"}
                for e in range(endpoints)
                for i in range(PER_ENDPOINT)
            ],
        }
    }
    (project / "stacks").mkdir(exist_ok=True)
    (project / "stacks" / "Pulumi.roll.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def run(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if r.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


class Watcher:
    """Samples every Deployment of a namespace (as the admin) and keeps, per endpoint, the lowest
    number of replicas available (pods Ready, counted by the Deployments' status)."""

    def __init__(
        self, admin: Client, namespace: str, endpoint_of: Callable[[Any], str | None], available: Callable[[Any], int]
    ) -> None:
        self.admin, self.namespace, self.endpoint_of, self.available = admin, namespace, endpoint_of, available
        self.lowest: dict[str, int] = {}
        self.t0 = time.perf_counter()
        self.generation: dict[str, int] = {}  # each Deployment's generation when first seen
        self.changed: dict[str, float] = {}  # when each was first seen at a newer generation (applied)
        self.rolled: dict[str, float] = {}  # when each was first seen rolled out at that generation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            counts: dict[str, int] = defaultdict(int)
            for d in self.admin.list(Deployment, namespace=self.namespace):
                endpoint = self.endpoint_of(d)
                if endpoint is not None:
                    counts[endpoint] += self.available(d)
                    self._times(d)
            for endpoint, n in counts.items():
                self.lowest[endpoint] = min(self.lowest.get(endpoint, n), n)
            self._stop.wait(0.25)

    def _times(self, d: Any) -> None:
        name, now = d.metadata.name, time.perf_counter() - self.t0
        first = self.generation.setdefault(name, d.metadata.generation or 0)
        if (d.metadata.generation or 0) > first:
            self.changed.setdefault(name, now)
            if name not in self.rolled and rolled_out(d, d.spec.replicas or 0):
                self.rolled[name] = now

    def __enter__(self) -> Watcher:
        self.t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def minimum(self) -> int:
        return min(self.lowest.values()) if self.lowest else -1


def rolled_out(d: Any, replicas: int) -> bool:
    """``kubectl rollout status``'s rule."""
    s = d.status
    if s is None or (s.observedGeneration or 0) < (d.metadata.generation or 0):
        return False
    return (s.updatedReplicas or 0) == replicas and (s.replicas or 0) == replicas and (s.availableReplicas or 0) == replicas


def until(check: Callable[[], bool], timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("benchmark step timed out")
        time.sleep(0.25)


def settle(admin: Client, namespace: str) -> None:
    from lightkube.resources.core_v1 import Pod

    until(lambda: not any(True for _ in admin.list(Pod, namespace=namespace)), timeout=900)


def anchor(plane: Plane, project: Path, endpoints: int, admin: Client) -> dict[str, float]:
    """The Deployment controller's own rolling update of the same pods."""
    config = load_stack("roll", project_dir=project, env={})
    template = next(m for m in render_checked(config, "roll")[0].manifests if m["kind"] == "Deployment")

    def manifests(digest: str) -> list[dict[str, Any]]:
        out = []
        for e in range(endpoints):
            d = copy.deepcopy(template)
            name = f"anchor-e{e}"
            labels = {ENDPOINT_LABEL: f"e{e}", "app": name}
            d["metadata"] = {"name": name, "namespace": NS, "labels": labels}
            pod = d["spec"]["template"]
            pod["metadata"] = {"labels": labels}
            pod["spec"]["containers"][0]["image"] = digest
            d["spec"]["replicas"] = PER_ENDPOINT
            d["spec"]["selector"] = {"matchLabels": labels}
            d["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
            out.append(d)
        return out

    kubectl = [str(find_tool("kubectl")), f"--kubeconfig={plane.kubeconfig}", f"--context={ADMIN_CONTEXT}", "-n", NS]
    path = project / "anchor.yaml"

    def apply(digest: str) -> None:
        path.write_text(to_yaml(manifests(digest)))
        run([*kubectl, "apply", "--server-side", "--field-manager=bench", "-f", str(path)])

    def all_rolled() -> bool:
        listed = list(admin.list(Deployment, namespace=NS, labels={ENDPOINT_LABEL: op.exists()}))
        return len(listed) == endpoints and all(rolled_out(d, PER_ENDPOINT) for d in listed)

    apply(OLD)
    until(all_rolled)
    watcher = Watcher(
        admin,
        NS,
        lambda d: (d.metadata.labels or {}).get(ENDPOINT_LABEL),
        lambda d: (d.status.availableReplicas or 0) if d.status else 0,
    )
    with watcher:
        t0 = time.perf_counter()
        apply(NEW)
        until(all_rolled)
        seconds = time.perf_counter() - t0
    run([*kubectl, "delete", "deployments", "-l", ENDPOINT_LABEL, "--wait=false"])
    settle(admin, NS)
    return {"time": seconds, "lowest": watcher.minimum()}


def infercrane(plane: Plane, project: Path, endpoints: int, admin: Client, load: float) -> dict[str, float]:
    env = cli_env(project)
    cli = [sys.executable, "-m", "infercrane"]
    run([*cli, "deploy", "--stack", "roll", "--json"], env=env, cwd=project)  # records each replica's start
    write_stack(project, endpoints, NEW, plane.kubeconfig)
    planned = json.loads(run([*cli, "plan", "--stack", "roll", "--json"], env=env, cwd=project, ok=(0, 3)).stdout)
    predicted = float((planned.get("estimate") or {}).get("seconds") or 0.0)

    def endpoint_of(d: Any) -> str | None:
        labels = d.metadata.labels or {}
        if labels.get(naming.LABEL_MANAGED_BY) != naming.MANAGED_BY:
            return None
        return labels.get(naming.LABEL_ENDPOINT)

    def available(d: Any) -> int:
        return 1 if d.status is not None and (d.status.availableReplicas or 0) >= 1 else 0

    stamped: list[tuple[float, str]] = []  # (seconds since the command began, stderr line)
    with Watcher(admin, NS, endpoint_of, available) as watcher:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*cli, "deploy", "--stack", "roll", "--json"],
            env=env,
            cwd=project,
            text=True,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            stamped.append((time.perf_counter() - t0, line))
        seconds = time.perf_counter() - t0
        if os.environ.get("INFERCRANE_BENCH_EVENTS"):  # where the deploy's time went, line by line
            Path(os.environ["INFERCRANE_BENCH_EVENTS"]).write_text("".join(f"{at:8.3f} {line}" for at, line in stamped))
        if proc.wait() != 0:
            raise SystemExit("infercrane deploy failed:\n" + "".join(line for _, line in stamped[-40:]))
    config = load_stack("roll", project_dir=project, env={})
    deployed = {d.metadata.name: d for d in admin.list(Deployment, namespace=NS)}
    for r in config.replicas:
        d = deployed[naming.object_name(r.key)]
        assert deployment_verdict(d.to_dict(), 1).state == "ready", f"{r.key} is not ready after the deploy"
        assert d.spec.template.spec.containers[0].image.endswith(NEW.split("@")[1]), f"{r.key} did not roll"
    run([*cli, "destroy", "--stack", "roll", "--json"], env=env, cwd=project)  # the next size needs the GPUs
    settle(admin, NS)
    return (
        {"time": seconds, "predicted": predicted, "lowest": watcher.minimum()}
        | pace(stamped, seconds, load)
        | wave_parts(stamped, watcher, load)
    )


WAVE_NOTE = re.compile(r"rollout: (\S+) wave (\d+)/\d+ \(down [^;]*; up ([^)]*)\)")


def wave_notes(stamped: list[tuple[float, str]]) -> list[tuple[float, str, int, list[str]]]:
    """Each ``rollout: eN wave k/4 (down …; up …)`` note of a ``deploy --json`` run: (when, the
    endpoint, its wave number, the keys it brings up)."""
    out = []
    for at, line in stamped:
        try:
            text = json.loads(line).get("text", "")
        except ValueError:
            continue
        if found := WAVE_NOTE.match(text):
            out.append((at, found[1], int(found[2]), found[3].split(", ")))
    return out


def wave_parts(stamped: list[tuple[float, str]], watcher: Watcher, load: float) -> dict[str, float]:
    """A wave's overhead in its three parts (means over every wave of every endpoint, sampled every
    0.25 s): from its ``rollout:`` note to its Deployment seen at the new generation (registration,
    the engine and the provider's apply), from there to that Deployment rolled out, beyond the
    load (the controllers, the scheduler, kwok), and from there to the endpoint's next wave's note
    (the readiness wait's poll and the serving evidence)."""
    import statistics

    notes: dict[str, float] = {}  # object name -> when its wave's note came
    nxt: dict[str, float] = {}  # object name -> when the next wave of its endpoint began
    by_endpoint: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for at, endpoint, _, keys in wave_notes(stamped):
        for key in keys:
            notes[naming.object_name(key)] = at
            by_endpoint[endpoint].append((at, naming.object_name(key)))
    for waves in by_endpoint.values():
        for (_, name), (at, _) in zip(waves, waves[1:], strict=False):
            nxt[name] = at
    apply = [watcher.changed[n] - notes[n] for n in notes if n in watcher.changed]
    roll = [watcher.rolled[n] - watcher.changed[n] - load for n in notes if n in watcher.rolled and n in watcher.changed]
    seen = [nxt[n] - watcher.rolled[n] for n in nxt if n in watcher.rolled]
    if not (apply and roll and seen):
        return {}
    return {
        "note to applied": statistics.mean(apply),
        "applied to rolled, beyond the load": statistics.mean(roll),
        "rolled to next wave": statistics.mean(seen),
    }


def pace(stamped: list[tuple[float, str]], total: float, load: float) -> dict[str, float]:
    """Where the deploy's time went, from when each endpoint's wave began (its ``rollout: eN wave
    k/4`` note): to the first wave, each wave beyond its pods' load (the per-wave overhead), and
    from the last wave's pods ready to the command's end."""
    import statistics

    starts: dict[str, dict[int, float]] = defaultdict(dict)
    for at, endpoint, wave, _ in wave_notes(stamped):
        starts[endpoint][wave] = at
    if not starts:
        return {}
    gaps = [w[k + 1] - w[k] - load for w in starts.values() for k in sorted(w)[:-1]]
    last = max(max(w.values()) for w in starts.values())
    return {
        "to first wave": min(min(w.values()) for w in starts.values()),
        "per-wave overhead": statistics.mean(gaps) if gaps else 0.0,
        "per-wave overhead max": max(gaps) if gaps else 0.0,
        "last wave ready to done": total - last - load,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", default="20,100", help="fleet sizes in endpoints of 4 replicas, comma-separated")
    ap.add_argument("--load", type=float, default=10.0, help="seconds from a pod's start to Ready (the simulated model load)")
    ap.add_argument("--keep", action="store_true", help="keep the plane and scratch projects")
    args = ap.parse_args()
    sizes = [int(x) for x in args.endpoints.split(",")]
    work = Path(tempfile.mkdtemp(prefix="infercrane-bench-rollout-"))
    plane = Plane(work / "plane")
    print(
        f"rollout benchmark: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{PER_ENDPOINT} one-GPU replicas per endpoint, maxUnavailable 1, maxSurge 0, every pod Ready {args.load:g} s after it starts",
        flush=True,
    )
    rows = []
    try:
        gpus = max(sizes) * PER_ENDPOINT
        plane.start(
            nodes_file=nodes_file(work / "nodes.yaml", gpus), progress=lambda m: None, real_node=False, pod_ready_delay=args.load
        )
        admin = Client(KubeConfig.from_file(plane.kubeconfig).get(context_name=ADMIN_CONTEXT))
        for e in sizes:
            project = work / f"project-{e}"
            project.mkdir()
            shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
            shutil.copy(ROOT / "__main__.py", project / "__main__.py")
            write_stack(project, e, OLD, plane.kubeconfig)
            a = anchor(plane, project, e, admin)
            settle(admin, NS)
            i = infercrane(plane, project, e, admin, args.load)
            floor = PER_ENDPOINT * args.load
            rows.append((e, floor, a, i))
            print(json.dumps({"endpoints": e, "floor": floor, "controller": a, "infercrane": i}), flush=True)
    finally:
        plane.stop(quiet=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        "| endpoints × replicas | floor (4 loads) | Deployment controller | infercrane deploy | ours / controller | per-wave overhead (ours, controller) | lowest available per endpoint (ours, controller; policy ≥ 3) |"
    )
    print("|---|---|---|---|---|---|---|")
    for e, floor, a, i in rows:

        def over(t: float, floor: float = floor) -> float:
            return (t - floor) / PER_ENDPOINT

        print(
            f"| {e} × {PER_ENDPOINT} | {floor:.0f} s | {a['time']:.1f} s ({a['time'] / floor:.2f}× floor) | "
            f"{i['time']:.1f} s ({i['time'] / floor:.2f}× floor) | {i['time'] / a['time']:.2f}× | "
            f"{over(i['time']):.1f} s, {over(a['time']):.1f} s | {i['lowest']:.0f}, {a['lowest']:.0f} |"
        )
    print()
    print(
        "| endpoints | infercrane: command start to first wave | each wave beyond its load (mean, max) | last wave ready to done |"
    )
    print("|---|---|---|---|")
    for e, _, _, i in rows:
        if "to first wave" in i:
            print(
                f"| {e} | {i['to first wave']:.1f} s | {i['per-wave overhead']:.1f} s, {i['per-wave overhead max']:.1f} s | "
                f"{i['last wave ready to done']:.1f} s |"
            )
    for e, _, _, i in rows:
        if i.get("predicted"):
            print(
                f"{e} endpoints: `plan` predicted {i['predicted']:.1f} s from the first deploy's recorded starts; "
                f"measured {i['time']:.1f} s ({(i['time'] - i['predicted']) / i['predicted']:+.0%})"
            )
    for e, _, _, i in rows:
        if "note to applied" in i:
            print(
                f"{e} endpoints, a wave's overhead in parts (means): its note to its Deployment applied {i['note to applied']:.2f} s; "
                f"applied to rolled out, beyond the load, {i['applied to rolled, beyond the load']:.2f} s; rolled out to the "
                f"endpoint's next wave {i['rolled to next wave']:.2f} s"
            )


if __name__ == "__main__":
    main()
