"""Fleet benchmark: kubectl SSA, a plain pulumi-kubernetes program and infercrane, side by side.

One run, one local plane (its own state directory, enough simulated 4-GPU L40S nodes), the same
rendered manifests for every tool (each tool gets its own replica keys so nothing is shared), the
same restricted identity (context ``infercrane-local``, bound to exactly the shipped Role) except
where a tool needs more:

- kubectl: ``apply --server-side`` then readiness polled with one LIST every 0.25 s (``kubectl wait``
  and ``rollout status`` need ``watch``, which the shipped Role does not grant); ``diff
  --server-side`` on the unchanged manifests; one replica changed (the directory applied again,
  until that pod rolled); ``delete --wait=false`` then LIST until zero.
- plain pulumi-kubernetes: the same manifests as ``Deployment``/``Service`` resources with the
  provider's default awaits (pulumi.com/skipAwait removed). Its Deployment await watches Pods and
  ReplicaSets, so it runs as the admin identity: the shipped Role cannot run it at all.
- infercrane: ``deploy`` (to ready), ``plan`` (no-op; also ``--read-only``), ``inspect``, one
  replica changed, ``destroy`` (to zero, proven), as CLI processes, exactly as a user runs them; on
  the file backend and, with ``--backends file,postgres``, on Pulumi's PostgreSQL backend (a
  throwaway server on loopback, :mod:`tests.postgres`); the state's size after the deploy.

Usage: ``.venv/bin/python bench/fleet.py [--replicas 100] [--backends file,postgres]`` (``make bench-fleet
N=100 BACKENDS=file,postgres``); progress on stderr while it runs.
Prints one table with the ratios; docs/benchmarks.md records a run and the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, KubeConfig, codecs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infercrane.core import naming  # noqa: E402
from infercrane.core.render.manifests import render_checked, to_yaml  # noqa: E402
from infercrane.engine.environment import engine_env  # noqa: E402
from infercrane.live.client.cluster import client as make_client  # noqa: E402
from infercrane.live.evidence import slices, worker_key  # noqa: E402
from infercrane.local.bootstrap import WORKER_KEY_FILE  # noqa: E402
from infercrane.local.layout import ADMIN_CONTEXT, CONTEXT  # noqa: E402
from infercrane.local.plane import Plane  # noqa: E402
from infercrane.project.stackfile import load_stack  # noqa: E402
from infercrane.project.tools import find_tool  # noqa: E402
from tests.postgres import throwaway as throwaway_postgres  # noqa: E402

DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
NS = "infercrane-system"


BEGAN = time.monotonic()


def say(message: str) -> None:
    """Progress on stderr while the run goes (the tables come at the end of each size)."""
    elapsed = int(time.monotonic() - BEGAN)
    print(f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True)


PROGRESS_EVERY = 15.0  # seconds between two progress lines of one step


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def nodes_file(path: Path, replicas: int) -> Path:
    count = math.ceil(replicas / 4) + 2
    nodes = [{"name": f"kwok-l40s-{i}", "gpuProduct": "NVIDIA-L40S", "gpus": 4} for i in range(count)]
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def write_stack(
    project: Path, stack: str, prefix: str, replicas: int, kubeconfig: Path, context: str = CONTEXT, changed: bool = False
) -> None:
    """The stack file of ``replicas`` replicas; ``changed``: its first replica with one engine flag
    more (the one-replica change: one pod template, so one pod rolled)."""
    doc = {
        "config": {
            "infercrane:kubernetes": {"context": context, "namespace": NS, "imageDigest": DIGEST, "kubeconfig": str(kubeconfig)},
            "infercrane:replicas": [
                {"key": f"{prefix}-r{i}", "model": "Qwen/Qwen3-8B", "name": f"{prefix}-{i}", "gpu": "NVIDIA-L40S"}
                | ({"args": list(CHANGED_ARGS)} if changed and i == 0 else {})
                for i in range(replicas)
            ],
        }
    }
    (project / "stacks").mkdir(exist_ok=True)
    (project / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


CHANGED_ARGS = ("--max-model-len", "8192")


def manifests(project: Path, stack: str) -> list[dict[str, Any]]:
    config = load_stack(stack, project_dir=project, env={})
    return [m for r in render_checked(config, stack) for m in r.manifests]


class Lister:
    """Counts our objects and ready Deployments with one LIST per kind (as the restricted identity)."""

    def __init__(self, project: Path, stack: str) -> None:
        self.config = load_stack(stack, project_dir=project, env={})
        self.client = make_client(self.config.kubernetes)
        self.names = {naming.object_name(r.key) for r in self.config.replicas}

    def _ours(self, kind: str) -> list[Any]:
        from infercrane.live.client.cluster import resource_for

        items = self.client.list(resource_for({"kind": kind}), namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY})
        return [o for o in items if o.metadata.name in self.names]

    def ready(self) -> int:
        from infercrane.live.status.verdicts import deployment_verdict

        return sum(deployment_verdict(o.to_dict(), 1).state == "ready" for o in self._ours("Deployment"))

    def count(self) -> int:
        return len(self._ours("Deployment")) + len(self._ours("Service"))

    def rolled(self, name: str) -> bool:
        """Deployment ``name`` has rolled its new template: observed, updated and ready."""
        from lightkube.resources.apps_v1 import Deployment

        from infercrane.live.status.verdicts import deployment_verdict

        d = self.client.get(Deployment, name, namespace=NS).to_dict()
        status = d.get("status") or {}
        return (
            status.get("observedGeneration") == d["metadata"]["generation"]
            and status.get("updatedReplicas") == 1
            and deployment_verdict(d, 1).state == "ready"
        )

    def until(self, check: Callable[[], bool], what: str, timeout: float = 1800) -> None:
        began = time.monotonic()
        shown = began
        while not check():
            now = time.monotonic()
            if now > began + timeout:
                raise SystemExit(f"benchmark step timed out: {what}")
            if now - shown >= PROGRESS_EVERY:
                say(f"{what}: {self.ready()} ready, {self.count()} objects ({now - began:.0f} s)")
                shown = now
            time.sleep(0.25)


def settle(plane: Plane, timeout: float = 600) -> None:
    """Wait (as the admin) until the namespace has no ReplicaSet or Pod left: the previous tool's
    destroy returns when its Deployments and Services are gone, while the garbage collector is
    still deleting their ReplicaSets and Pods -- at the controller-manager's client rate limit,
    which the next deploy's ReplicaSets and Pods share. Without this, the second tool in a run
    deploys against the first one's teardown (at 100 replicas, seconds of it)."""
    from lightkube import Client, KubeConfig
    from lightkube.resources.apps_v1 import ReplicaSet
    from lightkube.resources.core_v1 import Pod

    admin = Client(KubeConfig.from_file(plane.kubeconfig).get(context_name=ADMIN_CONTEXT), namespace=NS)
    deadline = time.monotonic() + timeout
    while any(True for _ in admin.list(ReplicaSet)) or any(True for _ in admin.list(Pod)):
        if time.monotonic() > deadline:
            raise SystemExit("benchmark: the plane did not settle (ReplicaSets or Pods left)")
        time.sleep(0.5)


def run_both(
    cmd: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ok: tuple[int, ...] = (0,),
    watch: Callable[[], str] | None = None,
) -> tuple[str, str]:
    """Run ``cmd`` to its end; with ``watch``, say what it shows every PROGRESS_EVERY seconds meanwhile."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
        began = time.monotonic()
        while True:
            try:
                code = proc.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                if watch is not None:
                    say(f"{watch()} ({time.monotonic() - began:.0f} s)")
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code not in ok:
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({code}):\n{stdout[-2000:]}\n{stderr[-3000:]}")
    return stdout, stderr


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> str:
    return run_both(cmd, env, cwd, ok)[0]


def deploy_phases(stderr: str, total: float) -> dict[str, float]:
    """Where a ``deploy --json`` run's time went, from its progress events (seconds since the
    command began): to the first object applied (CLI start, state, preflight, engine start, the
    first apply), the apply phase (first to last object applied), and last applied to done
    (the readiness wait and the engine's end)."""
    events = []
    for line in stderr.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            events.append(e)
    applied = [e for e in events if e.get("event") == "applied" and (e.get("applied") or 0) >= 1]
    done = next((e["elapsed"] for e in events if e.get("event") == "done"), total)
    if not applied:
        return {"to first apply": done, "apply phase": 0.0, "last apply to ready": 0.0}
    first = applied[0]["elapsed"]
    last = next((e["elapsed"] for e in applied if e["applied"] >= e["total"]), applied[-1]["elapsed"])
    return {"to first apply": first, "apply phase": last - first, "last apply to ready": done - last}


def bench_kubectl(plane: Plane, project: Path, n: int) -> dict[str, float]:
    write_stack(project, "kubectl", "bk", n, plane.kubeconfig)
    d = project / "kubectl-manifests"
    d.mkdir(exist_ok=True)
    (d / "all.yaml").write_text(to_yaml(manifests(project, "kubectl")))
    kubectl = [str(find_tool("kubectl")), f"--kubeconfig={plane.kubeconfig}", f"--context={CONTEXT}", "-n", NS]
    apply = [*kubectl, "apply", "--server-side", f"--field-manager={naming.FIELD_MANAGER}", "-f", str(d)]
    lister = Lister(project, "kubectl")
    out: dict[str, float] = {}

    def deploy() -> None:
        run(apply)
        lister.until(lambda: lister.ready() == n, f"kubectl, {n}: deploy")

    say(f"kubectl, {n} replicas: apply --server-side, then LIST until all are ready")
    out["deploy"], _ = timed(deploy)
    say(f"kubectl, {n}: diff --server-side (no change)")
    out["plan"], _ = timed(
        lambda: run([*kubectl, "diff", "--server-side", f"--field-manager={naming.FIELD_MANAGER}", "-f", str(d)])
    )
    # One replica changed: the whole directory applied again, as a user would; until its pod rolled.
    write_stack(project, "kubectl", "bk", n, plane.kubeconfig, changed=True)
    (d / "all.yaml").write_text(to_yaml(manifests(project, "kubectl")))
    first = naming.object_name("bk-r0")

    def change() -> None:
        run(apply)
        lister.until(lambda: lister.rolled(first), f"kubectl, {n}: one replica changed")

    say(f"kubectl, {n}: one replica changed, the directory applied again")
    out["change"], _ = timed(change)

    def destroy() -> None:
        run([*kubectl, "delete", "--wait=false", "-f", str(d)])
        lister.until(lambda: lister.count() == 0, f"kubectl, {n}: destroy")

    say(f"kubectl, {n}: delete --wait=false, then LIST until none is left")
    out["destroy"], _ = timed(destroy)
    return out


PLAIN_PROGRAM = """
import yaml, pulumi, pulumi_kubernetes as k8s
docs = list(yaml.safe_load_all(open("manifests.yaml")))
cfg = pulumi.Config("bench")
provider = k8s.Provider("plain", context=cfg.require("context"), kubeconfig=cfg.require("kubeconfig"),
                        namespace="{ns}", enable_server_side_apply=True)
for m in docs:
    m["metadata"]["annotations"].pop("pulumi.com/skipAwait", None)
    cls = {{"Deployment": k8s.apps.v1.Deployment, "Service": k8s.core.v1.Service}}[m["kind"]]
    cls(m["metadata"]["name"] + "-" + m["kind"].lower(), metadata=m["metadata"], spec=m["spec"],
        opts=pulumi.ResourceOptions(provider=provider))
"""


def bench_plain(plane: Plane, project: Path, n: int) -> dict[str, float]:
    from pulumi import automation as auto

    write_stack(project, "plain", "bp", n, plane.kubeconfig)
    plain = project / "plain"
    plain.mkdir(exist_ok=True)
    (plain / "manifests.yaml").write_text(to_yaml(manifests(project, "plain")))
    (plain / "Pulumi.yaml").write_text("name: plainbench\nruntime: python\n")
    code = PLAIN_PROGRAM.format(ns=NS)

    def program() -> None:
        cwd = os.getcwd()
        os.chdir(plain)
        try:
            exec(compile(code, "plain.py", "exec"), {})
        finally:
            os.chdir(cwd)

    env = engine_env("plain", plain) | {"PULUMI_CONFIG_PASSPHRASE": "bench"}
    from infercrane.engine.environment import pulumi_root

    stack = auto.create_or_select_stack(
        stack_name="plain",
        project_name="plainbench",
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(plain), env_vars=env, pulumi_command=auto.PulumiCommand(root=str(pulumi_root()), skip_version_check=True)
        ),
    )
    stack.set_config("bench:context", auto.ConfigValue(ADMIN_CONTEXT))
    stack.set_config("bench:kubeconfig", auto.ConfigValue(str(plane.kubeconfig)))
    lister = Lister(project, "plain")
    out: dict[str, float] = {}
    say(f"plain pulumi-kubernetes, {n}: pulumi up (the provider's awaits)")
    out["deploy"], _ = timed(lambda: stack.up(color="never"))
    assert lister.ready() == n
    say(f"plain pulumi-kubernetes, {n}: pulumi preview (no change)")
    out["plan"], _ = timed(lambda: stack.preview(color="never"))

    def destroy() -> None:
        stack.destroy(color="never")
        lister.until(lambda: lister.count() == 0, f"plain pulumi-kubernetes, {n}: destroy")

    say(f"plain pulumi-kubernetes, {n}: pulumi destroy")

    out["destroy"], _ = timed(destroy)
    return out


def cli_env(project: Path, backend: str | None = None) -> dict[str, str]:
    """The environment of an ``infercrane`` CLI process on a scratch project: its Pulumi home and
    passphrase, this checkout's package, and ``backend`` (a PostgreSQL URL; default: the
    project's own file backend)."""
    env = dict(os.environ) | {
        "INFERCRANE_PROJECT_DIR": str(project),
        "PULUMI_CONFIG_PASSPHRASE": "bench",
        "PYTHONPATH": str(ROOT),
        "PULUMI_HOME": str(project / "pulumi-home"),
    }
    env.pop("PULUMI_BACKEND_URL", None)
    if backend:
        env["PULUMI_BACKEND_URL"] = backend
    return env


def state_megabytes(project: Path, stack: str, env: dict[str, str]) -> float:
    """The stack's state as the backend holds it (``pulumi stack export``), in MB."""
    pinned = engine_env(stack, project, extra={k: env[k] for k in ("PULUMI_HOME", "PULUMI_BACKEND_URL") if k in env})
    exported = run(["pulumi", "stack", "export", "--stack", stack], env=env | pinned, cwd=project)
    return len(exported.encode()) / 1e6


def bench_infercrane(plane: Plane, project: Path, n: int, backend: str | None = None) -> dict[str, float]:
    """Every phase of ``infercrane`` on the file backend, or on ``backend`` (PostgreSQL)."""
    side = f"infercrane ({'PostgreSQL' if backend else 'file'} backend), {n}"
    prefix = "bg" if backend else "bi"
    write_stack(project, "ours", prefix, n, plane.kubeconfig)
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copy(ROOT / "__main__.py", project / "__main__.py")
    env = cli_env(project, backend)
    # Serving evidence is taken of every replica: the deploying identity gets the optional
    # EndpointSlice read in the namespace, the deploy the plane's worker key file. kwok's pods run
    # nothing; here a pod address is answered 404 by the sandbox's egress within milliseconds, so
    # each replica's check ends "not verifiable" at about the cost of a real engine's answer.
    admin = Client(KubeConfig.from_file(plane.kubeconfig).get(context_name=ADMIN_CONTEXT), namespace=NS)
    for d in yaml.safe_load_all((ROOT / slices.READER).read_text()):
        admin.apply(codecs.from_dict(d), field_manager="infercrane-bench")
    cli = [sys.executable, "-m", "infercrane"]
    lister = Lister(project, "ours")
    ready = lambda: f"{side}: deploy: {lister.ready()} of {n} ready"  # noqa: E731
    out: dict[str, float] = {}
    # The evidence's own cost: the same deploy without the key (no LIST, no request), then destroyed.
    say(f"{side}: deploy without serving evidence")
    out["deploy without evidence"], _ = timed(
        lambda: run_both([*cli, "deploy", "--stack", "ours", "--json"], env=env, cwd=project, watch=ready)
    )
    assert lister.ready() == n
    say(f"{side}: destroy, before the measured deploy")
    run_both([*cli, "destroy", "--stack", "ours", "--json"], env=env, cwd=project)
    settle(plane)
    env[worker_key.KEY_FILE_ENV] = str(plane.state / WORKER_KEY_FILE)
    # Fixed cost of a CLI command outside the engine and the cluster: interpreter start-up, imports,
    # reading and validating the stack file.
    out["startup"], _ = timed(lambda: run([*cli, "validate", "--stack", "ours"], env=env, cwd=project))
    say(f"{side}: deploy to all ready, with serving evidence")
    out["deploy"], (_, stderr) = timed(
        lambda: run_both([*cli, "deploy", "--stack", "ours", "--json"], env=env, cwd=project, watch=ready)
    )
    assert lister.ready() == n, "deploy returned before every replica was ready"
    out |= deploy_phases(stderr, out["deploy"])
    # One line per serving replica, one per reason for the others ("evidence: 100 replicas (...): ...").
    grouped = re.findall(r"evidence: (\d+) replicas ", stderr)
    out["evidence taken"] = stderr.count("evidence: replica ") + sum(int(n) for n in grouped)
    out["state MB"] = state_megabytes(project, "ours", env)
    say(f"{side}: plan (no change)")
    out["plan"], doc = timed(lambda: json.loads(run([*cli, "plan", "--stack", "ours", "--json"], env=env, cwd=project)))
    assert doc["basis"] == "state+live" and not doc["changesPending"], doc.get("basis")
    # The read-only plan (get and list, no dry run: what a pull request's job runs), against
    # kubectl diff --server-side (which needs patch).
    say(f"{side}: plan --read-only (no change)")
    out["plan-read-only"], doc = timed(
        lambda: json.loads(run([*cli, "plan", "--stack", "ours", "--json", "--read-only"], env=env, cwd=project))
    )
    assert doc["basis"] == "read-only" and not doc["changesPending"], doc.get("basis")
    say(f"{side}: plan --full-preview (no change)")
    out["plan-full"], _ = timed(lambda: run([*cli, "plan", "--stack", "ours", "--json", "--full-preview"], env=env, cwd=project))
    # The same preview with the policy pack (policy/): its cost is the pack's process start and one
    # Analyze call per resource.
    pack = str(ROOT / "policy")
    say(f"{side}: plan --policy-pack policy (no change)")
    out["plan-policy"], _ = timed(
        lambda: run([*cli, "plan", "--stack", "ours", "--json", "--policy-pack", pack], env=env, cwd=project)
    )
    say(f"{side}: inspect")
    out["inspect"], doc = timed(lambda: json.loads(run([*cli, "inspect", "--stack", "ours", "--json"], env=env, cwd=project)))
    assert sum(r["state"] == "ready" for r in doc["replicas"]) == n
    # One replica changed: the deploy rolls its one pod and leaves the others untouched.
    write_stack(project, "ours", prefix, n, plane.kubeconfig, changed=True)
    say(f"{side}: deploy of one replica changed")
    out["change"], _ = timed(lambda: run_both([*cli, "deploy", "--stack", "ours", "--json"], env=env, cwd=project))
    assert lister.rolled(naming.object_name(f"{prefix}-r0")), "deploy returned before the changed replica rolled"
    counted = lambda: f"{side}: destroy: {lister.count()} objects left"  # noqa: E731
    say(f"{side}: destroy to zero objects")
    out["destroy"], _ = timed(
        lambda: run_both([*cli, "destroy", "--stack", "ours", "--json"], env=env, cwd=project, watch=counted)
    )
    assert lister.count() == 0
    return out


def bench_render(project: Path, kubeconfig: Path) -> dict[int, float]:
    """Per-replica render + guard cost (µs) at 100 and 1,000 replicas: it must stay flat (linear)."""
    out = {}
    write_stack(project, "render-warm", "brw", 10, kubeconfig)
    manifests(project, "render-warm")  # first-call costs (imports, compiled patterns) out of the figures
    for n in (100, 1000):
        write_stack(project, f"render{n}", f"br{n}", n, kubeconfig)
        seconds, _ = timed(lambda n=n: manifests(project, f"render{n}"))
        out[n] = seconds / n * 1e6
    return out


TOOLS = ("kubectl", "plain", "infercrane")
BACKENDS = ("file", "postgres")
#: Each side of a run: kubectl, plain Pulumi (file backend), infercrane on each backend.
SIDES = {
    "kubectl": "kubectl",
    "plain": "plain pulumi-kubernetes",
    "infercrane": "infercrane",
    "postgres": "infercrane (PostgreSQL)",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", default="100", help="fleet sizes, comma-separated (e.g. 100,300,500,1000)")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"which to run, comma-separated (of {', '.join(TOOLS)})")
    ap.add_argument("--backends", default="file", help=f"infercrane's state backends, comma-separated (of {', '.join(BACKENDS)})")
    ap.add_argument("--keep", action="store_true", help="keep the plane and scratch project")
    args = ap.parse_args()
    sizes = [int(x) for x in args.replicas.split(",")]
    tools = [t for t in args.tools.split(",") if t]
    backends = [b for b in args.backends.split(",") if b]
    if unknown := sorted(set(tools) - set(TOOLS)):
        raise SystemExit(f"--tools: unknown {', '.join(unknown)} (choose from {', '.join(TOOLS)})")
    if unknown := sorted(set(backends) - set(BACKENDS)):
        raise SystemExit(f"--backends: unknown {', '.join(unknown)} (choose from {', '.join(BACKENDS)})")
    sides = [t for t in TOOLS if t in tools and t != "infercrane"]
    if "infercrane" in tools:
        sides += [{"file": "infercrane", "postgres": "postgres"}[b] for b in backends]
    work = Path(tempfile.mkdtemp(prefix="infercrane-bench-"))
    plane = Plane(work / "plane")
    results: dict[int, dict[str, dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        postgres = stack.enter_context(throwaway_postgres()) if "postgres" in sides else None
        try:
            # kwok nodes only: the fleet is simulated (the real node is one per machine, for the tests)
            say(f"local plane: starting, with {math.ceil(max(sizes) / 4) + 2} simulated 4-GPU nodes")
            plane.start(nodes_file=nodes_file(work / "nodes.yaml", max(sizes)), progress=lambda m: None, real_node=False)
            for n in sizes:
                results[n] = {}
                for side in sides:
                    project = work / f"project-{n}-{side}"
                    project.mkdir()
                    settle(plane)  # every side starts on a quiet plane
                    if side == "kubectl":
                        results[n][side] = bench_kubectl(plane, project, n)
                    elif side == "plain":
                        results[n][side] = bench_plain(plane, project, n)
                    else:
                        results[n][side] = bench_infercrane(plane, project, n, postgres if side == "postgres" else None)
                report(n, results[n])
            render = bench_render(work / f"project-{sizes[0]}-{sides[0]}", plane.kubeconfig)
        finally:
            plane.stop(quiet=True)
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    if len(sizes) > 1:
        growth(results)
    print(f"render + guards per replica: {render[100]:.0f} µs at 100, {render[1000]:.0f} µs at 1,000 replicas")


def _ratio(a: dict[str, float], b: dict[str, float], phase: str) -> str:
    return f"{a[phase] / b[phase]:.2f}x" if phase in a and phase in b else ""


def _cell(r: dict[str, float], phase: str) -> str:
    return f"{r[phase]:.1f} s" if phase in r else ""


def report(n: int, r: dict[str, dict[str, float]]) -> None:
    """One table of a size: each phase on each side, and each infercrane side against kubectl."""
    print(
        f"fleet benchmark: {n} replicas = {2 * n} objects; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    ours = [s for s in ("infercrane", "postgres") if s in r]
    k = r.get("kubectl", {})
    print("| phase | " + " | ".join(SIDES[s] for s in r) + " | " + " | ".join(f"{SIDES[s]} / kubectl" for s in ours) + " |")
    print("|---" * (1 + len(r) + len(ours)) + "|")
    rows = (
        ("deploy", "deploy to all ready"),
        ("plan", "no-op plan (kubectl diff --server-side)"),
        ("plan-read-only", "no-op plan --read-only (get and list; vs kubectl diff)"),
        ("change", "one replica changed, to its pod rolled"),
        ("destroy", "destroy to zero objects"),
        ("plan-full", "no-op plan --full-preview (pulumi preview)"),
        ("plan-policy", "the same preview with --policy-pack policy"),
        ("inspect", "inspect"),
        ("startup", "CLI start-up + stack file (validate)"),
    )
    for phase, label in rows:
        if not any(phase in r[s] for s in r):
            continue
        versus = "plan" if phase == "plan-read-only" else phase
        ratios = [f"{r[s][phase] / k[versus]:.2f}x" if k and versus in k and phase in r[s] else "" for s in ours]
        print(f"| {label} | " + " | ".join(_cell(r[s], phase) for s in r) + " | " + " | ".join(ratios) + " |")
    for s in ours:
        i = r[s]
        phases = ", ".join(f"{ph} {i[ph]:.1f} s" for ph in ("to first apply", "apply phase", "last apply to ready"))
        print(f"{SIDES[s]} deploy: {phases}; the state after it {i['state MB']:.1f} MB")
        print(
            f"  serving evidence taken of {i['evidence taken']:.0f} replica(s) during that deploy; the same deploy "
            f"without the key (no evidence) earlier in the run: {i['deploy without evidence']:.1f} s"
        )
    print(flush=True)


def growth(results: dict[int, dict[str, dict[str, float]]]) -> None:
    """Each phase's cost per replica at each size, and each size's against the smallest's."""
    sizes = sorted(results)
    base = sizes[0]
    sides = list(results[base])
    for phase in ("deploy", "plan", "destroy"):
        print(f"{phase}: cost per replica (ms), and against {base} replicas")
        print("| replicas | " + " | ".join(f"{SIDES[s]} | at {base}" for s in sides) + " |")
        print("|---" * (1 + 2 * len(sides)) + "|")
        for n in sizes:
            cells = []
            for s in sides:
                per = results[n][s][phase] / n * 1000
                cells += [f"{per:.1f}", f"{per / (results[base][s][phase] / base * 1000):.2f}x"]
            print(f"| {n} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
