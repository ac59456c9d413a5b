"""Bench, not a test (``make bench-warm`` runs it; ``make test`` collects only ``test_*.py``):
warm-first waves against cold ones and against the Deployment controller's own rolling update, on
the plane's two real nodes, in a realistic profile.

The profile: each node's pulls from the plane's registry through a throttle of its own of
``INFERCRANE_BENCH_MIBPS`` MiB/s (default 32: each node's link; the 256 MiB model image takes
about 8 s, as a few GB take minutes from a real registry), the engine double warming up
``INFERCRANE_BENCH_LOAD`` s (default 8), no preStop. Two replicas, one on each real node (2 of a
node's 3 GPUs each: in place a successor fits only where its predecessor ran), rolled in place
(maxUnavailable 1) to a release neither node holds (its images removed from both nodes'
containerd first): without warm-first, with it, and by a plain Deployment of the same pod
template, 2 replicas, ``maxUnavailable: 1`` (it pulls when it starts a pod). Per roll: the whole
roll; each wave's downtime and the capacity lost (the replica-seconds not serving), from the roll's
pods sampled every 0.1 s (a stretch with fewer Ready than 2 is a wave's downtime); and, from the
ledger, each new pod's creation to healthy (in place the old pod is gone when it is created, no
preStop), read from whole seconds. Asserts only that each roll ran.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

from infercrane.core import naming
from infercrane.core.render import prefetch
from infercrane.core.state import urns
from infercrane.local import images, node_files
from tests.integration.conftest import Project, cli
from tests.integration.test_model_images import forget, grant, model_image
from tests.integration.test_real_node import double, on_node
from tests.integration.test_serving import namespace_with_evidence, next_double

pytestmark = pytest.mark.integration
MIBPS = float(os.environ.get("INFERCRANE_BENCH_MIBPS", "32"))
LOAD = os.environ.get("INFERCRANE_BENCH_LOAD", "8")
NS = "bench-warm"


@contextmanager
def throttled_registry(state: Path, mibps: float) -> Iterator[None]:
    """Each real node's pulls through a proxy of its own (its link) that sends the registry's
    answers at ``mibps`` MiB/s, all its connections together."""
    with ExitStack() as stack:
        for n in node_files.NODES:
            stack.enter_context(throttled_node(n.home(state), mibps))
        yield


@contextmanager
def throttled_node(home: Path, mibps: float) -> Iterator[None]:
    """One node's pulls through a proxy that sends the registry's answers at ``mibps`` MiB/s, all
    connections together (containerd reads its hosts.toml at each pull)."""
    hosts = home / "certs.d" / images.HOST / "hosts.toml"
    original = hosts.read_text()
    upstream = int(original.split("127.0.0.1:", 1)[1].split('"', 1)[0])
    loop = asyncio.new_event_loop()
    rate = mibps * (1 << 20)
    bucket = {"at": time.monotonic(), "tokens": 0.0}

    async def take(n: int) -> None:
        while True:
            now = time.monotonic()
            bucket["tokens"] = min(rate, bucket["tokens"] + (now - bucket["at"]) * rate)
            bucket["at"] = now
            if bucket["tokens"] >= n:
                bucket["tokens"] -= n
                return
            await asyncio.sleep((n - bucket["tokens"]) / rate)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slow: bool) -> None:
        try:
            while chunk := await reader.read(64 << 10):
                if slow:
                    await take(len(chunk))
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
        await asyncio.gather(pipe(client_r, up_w, False), pipe(up_r, client_w, True), return_exceptions=True)

    server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hosts.write_text(original.replace(f"127.0.0.1:{upstream}", f"127.0.0.1:{port}"))
    try:
        yield
    finally:
        hosts.write_text(original)

        async def shutdown() -> None:
            server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def instance(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(naming.LABEL_INSTANCE, ""))


def wave_downtimes(starts: dict[str, Any], keys: list[str]) -> list[float]:
    return [float(starts[k]["healthy"]) for k in keys]


class ReadySampler:
    """How many of a roll's pods are Ready (and not terminating), sampled every ``PERIOD`` s: the
    ledger's downtime is read from whole seconds (the pod's creationTimestamp, its Ready
    condition's lastTransitionTime), this one to the sampling period. ``pick`` says which pods."""

    PERIOD = 0.1

    def __init__(self, admin: Client, labels: dict[str, str], pick: Any = lambda p: True, replicas: int = 2) -> None:
        self.admin, self.labels, self.pick, self.replicas = admin, labels, pick, replicas
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _ready(self) -> int:
        ready = 0
        for p in self.admin.list(Pod, namespace=NS, labels=self.labels):
            if not self.pick(p) or p.metadata.deletionTimestamp:
                continue
            ready += any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions if p.status else None) or [])
        return ready

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self._ready()))
            self._stop.wait(self.PERIOD)

    def __enter__(self) -> ReadySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def downtimes(self) -> list[float]:
        """Each stretch with fewer than ``replicas`` Ready, in order (in place, one a wave)."""
        out: list[float] = []
        began: float | None = None
        for t, ready in self.samples:
            if ready < self.replicas and began is None:
                began = t
            elif ready >= self.replicas and began is not None:
                out.append(t - began)
                began = None
        return out

    def lost(self) -> float:
        """The replica-seconds not Ready."""
        return sum((self.replicas - r) * (t2 - t1) for (t1, r), (t2, _) in zip(self.samples, self.samples[1:], strict=False))


def test_warm_first_against_cold_waves_and_the_deployment_controller(project: Project, admin: Client, second_node: str) -> None:
    keys = ["bench-warm-r0", "bench-warm-r1"]
    namespace_with_evidence(admin, NS)
    grant(admin, NS)
    grant(admin, NS, prefetch.ROLE_FILE)
    state = project.plane.state
    a = (double(), model_image(state))
    b = (next_double(), model_image(state, "double-7b-next"))

    def stack(release: tuple[str, str], warm: bool) -> Any:
        env = [{"name": "INFERCRANE_DOUBLE_LOAD_SECONDS", "value": LOAD}]
        drain = {"preStopSeconds": 0}
        replicas = [on_node(k, modelImage=release[1], gpuCount=2, pod={"env": env}, drain=drain) for k in keys]
        rollout = {"maxUnavailable": 1, "maxSurge": 0, "warmFirst": warm}
        return project.stack("benchwarm", replicas, imageDigest=release[0], namespace=NS, rollout=rollout)

    rows = []
    ours = {naming.object_name(k) for k in keys}
    stack(a, False)
    assert cli(project, "deploy", "--stack", "benchwarm").returncode == 0
    with throttled_registry(state, MIBPS):
        for name, release, warm in (("cold waves", b, False), ("warm-first waves", a, True)):
            for n in node_files.NODES:
                forget(state, release[0], release[1].removeprefix("oci://"), on=n)
            engine = stack(release, warm)
            with ReadySampler(admin, {naming.LABEL_MANAGED_BY: naming.MANAGED_BY}, lambda p: instance(p) in ours) as s:
                began = time.monotonic()
                done = cli(project, "deploy", "--stack", "benchwarm")
                took = time.monotonic() - began
            assert done.returncode == 0, done.stderr
            starts = urns.stack_outputs(engine.state())["starts"]
            down = wave_downtimes(starts, keys)
            rows.append((name, took, s.downtimes(), s.lost(), down, [starts[k].get("pullSeconds") for k in keys]))
        assert cli(project, "destroy", "--stack", "benchwarm").returncode == 0

        # The Deployment controller: the same pod template, 2 replicas, maxUnavailable 1, rolled to b.
        manifest = controller_deployment(admin, project, a)
        admin.apply(codecs.from_dict(manifest), field_manager="bench")
        wait_rolled(admin, manifest["metadata"]["name"], 2)
        for n in node_files.NODES:
            forget(state, b[0], b[1].removeprefix("oci://"), on=n)
        template = manifest["spec"]["template"]["spec"]
        template["containers"][0]["image"] = b[0]
        for v in template.get("volumes") or []:
            if v.get("image"):
                v["image"]["reference"] = b[1].removeprefix("oci://")
        with ReadySampler(admin, {"app": "bench-controller"}) as s:
            began = time.monotonic()
            admin.apply(codecs.from_dict(manifest), field_manager="bench")
            pods = wait_rolled(admin, manifest["metadata"]["name"], 2, image=b[0])
            took = time.monotonic() - began
        down = [ready_after_creation(p) for p in pods]
        rows.append(("Deployment controller", took, s.downtimes(), s.lost(), down, []))
        admin.delete(Deployment, manifest["metadata"]["name"], namespace=NS)
    print(
        f"\n2 replicas in place, one on each real node; each node's pulls at {MIBPS:g} MiB/s, the 256 MiB model image "
        f"and the double; warm-up {LOAD} s"
    )
    print(
        "| roll | whole roll | each wave's downtime (fewer Ready, sampled every 0.1 s) | capacity lost (sampled) "
        "| each new pod created -> healthy (whole seconds) | pulls (kubelet) |"
    )
    print("|---|---|---|---|---|---|")
    for name, took, sampled, lost, down, pulls in rows:
        waves = ", ".join(f"{d:.2f} s" for d in sampled)
        print(f"| {name} | {took:.1f} s | {waves} | {lost:.1f} replica-s | {', '.join(f'{d:.1f} s' for d in down)} | {pulls} |")


def controller_deployment(admin: Client, project: Project, release: tuple[str, str]) -> dict[str, Any]:
    """A plain Deployment of the pod template InferCrane renders (its first replica's), 2 replicas."""
    import yaml

    from infercrane.core.load import loading
    from infercrane.core.render import render_all

    values = yaml.safe_load((project.root / "stacks/Pulumi.benchwarm.yaml").read_text())["config"]
    config = loading.load(values, source="bench", env={})
    dep = next(m for m in render_all(config, "infercrane/bench")[0].manifests if m["kind"] == "Deployment")
    labels = {"app": "bench-controller"}
    template = dep["spec"]["template"]
    template["metadata"] = {"labels": labels}
    template["spec"]["containers"][0]["image"] = release[0]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bench-controller", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": template,
        },
    }


def wait_rolled(admin: Client, name: str, replicas: int, image: str | None = None, timeout: float = 600) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = [
            p
            for p in admin.list(Pod, namespace=NS, labels={"app": "bench-controller"})
            if p.metadata and not p.metadata.deletionTimestamp
        ]
        ready = [
            p
            for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions if p.status else None) or [])
            and (image is None or (p.spec and p.spec.containers[0].image == image))
        ]
        if len(ready) == replicas and len(pods) == replicas:
            return ready
        time.sleep(0.5)
    raise AssertionError(f"{name} did not roll within {timeout:.0f} s")


def ready_after_creation(pod: Any) -> float:
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    return (ready.lastTransitionTime - pod.metadata.creationTimestamp).total_seconds()
