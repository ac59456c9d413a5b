"""Serving evidence and drain, on the local plane's real node (the engine double: a test double
of the engines' interfaces, never an engine). A replica counts only when its own engine, asked
GET /v1/models with the worker key at its Service's ready address, serves the names its intent
renders; a pod leaves routing before its engine stops, so a rollout drops no request.

Each test has a namespace of its own, bootstrapped as the shipped files say, with the optional
EndpointSlice reader granted to the deploying identity there (the seed's Role has no such
right: in infercrane-system the evidence is "not verifiable", which one test shows)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, codecs
from lightkube.resources.core_v1 import Pod, Secret
from lightkube.resources.discovery_v1 import EndpointSlice

from infercrane.core import naming
from infercrane.live.evidence import slices, worker_key
from infercrane.local import images
from infercrane.project.paths import code_root
from infercrane.project.tools import find_tool
from tests.integration.conftest import Project, cli, plain_pulumi
from tests.integration.test_promotion import bootstrap_namespace
from tests.integration.test_real_node import ask, double, on_node

KEY = "not-a-real-key"  # the worker Secret bootstrap_namespace makes


def next_double() -> str:
    """The engine double's other release (another digest of the same image) the node holds."""
    return images.engine_double(find_tool("engine-double"), release=images.NEXT_RELEASE).reference


def namespace_with_evidence(admin: Client, ns: str) -> None:
    bootstrap_namespace(admin, ns)
    for d in yaml.safe_load_all((code_root() / slices.READER).read_text()):
        d["metadata"]["namespace"] = ns  # granted to the deploying identity (its subject stays)
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")


def key_file(tmp_path: Path, key: str = KEY) -> dict[str, str]:
    """The control plane's copy of the worker key, as the deploy's environment names it."""
    f = tmp_path / "worker-api-key"
    f.write_text(key)
    return {worker_key.KEY_FILE_ENV: str(f)}


def pods(admin: Client, ns: str, key: str) -> list[Any]:
    return list(admin.list(Pod, namespace=ns, labels=dict(naming.selector(key))))


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions if pod.status else None) or [])


def test_a_replica_counts_only_when_it_serves_the_expected_model_and_a_wrong_one_stops_the_wave(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """Right model: the deploy says each replica serves its names, and inspect shows the evidence.
    Then one replica's engine is told (a pod env setting) to serve another name: its pod is Ready
    by its probe, yet the deploy fails naming expected and served, and the other replica --
    untouched by the wave -- still serves; routing membership leaves the wrong one out."""
    ns, keys = "it-serve", ["it-serve-r0", "it-serve-r1"]
    namespace_with_evidence(admin, ns)
    env = key_file(tmp_path)

    def stack(wrong: bool) -> None:
        serves = [{"name": "INFERCRANE_DOUBLE_SERVES", "value": "llama-other"}] if wrong else []
        replicas = [on_node(keys[0], pod={"env": serves}), on_node(keys[1])]
        project.stack("itserve", replicas, imageDigest=double(), namespace=ns)

    stack(wrong=False)
    done = cli(project, "deploy", "--stack", "itserve", env=env)
    assert done.returncode == 0, done.stderr
    for k in keys:
        assert f"evidence: replica {k}: serving qwen-small, Qwen/Qwen3-0.6B (EndpointSlice address 10.88.0." in done.stderr
    shown = cli(project, "inspect", "--stack", "itserve", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    for rec in doc["replicas"]:
        assert rec["evidence"]["state"] == "serving" and rec["evidence"]["served"] == ["qwen-small", "Qwen/Qwen3-0.6B"]
        assert rec["evidence"]["route"].startswith("EndpointSlice address 10.88.0.") and rec["evidence"]["checkedAt"]
    assert sorted(m["key"] for m in doc["endpoints"]["qwen-small"]) == keys
    # The key went only into the requests' header: not the state, the outputs, the logs, the output.
    copy = Path(env[worker_key.KEY_FILE_ENV])  # the control plane's own copy, and nothing else
    leaked = [f for f in project.root.rglob("*") if f.is_file() and f != copy and KEY.encode() in f.read_bytes()]
    assert leaked == [] and KEY not in done.stdout + done.stderr + shown.stdout, leaked
    (kept,) = pods(admin, ns, keys[1])

    stack(wrong=True)
    done = cli(project, "deploy", "--stack", "itserve", env=env)
    assert done.returncode == 1
    assert f"replica {keys[0]}" in done.stderr, done.stderr
    assert (
        "ready, but not serving: serves ['llama-other'], expected ['qwen-small', 'Qwen/Qwen3-0.6B'] "
        "(EndpointSlice address 10.88.0." in done.stderr
    ), done.stderr
    (wrong,) = pods(admin, ns, keys[0])
    assert ready(wrong), "Ready by its probe: only the evidence tells"
    (still,) = pods(admin, ns, keys[1])
    assert still.metadata.uid == kept.metadata.uid, "the other replica was not touched"
    status, body = ask(str(still.status.podIP if still.status else ""), "/v1/models", KEY)
    assert status == 200 and [m["id"] for m in body["data"]] == ["qwen-small", "Qwen/Qwen3-0.6B"]
    doc = json.loads(cli(project, "inspect", "--stack", "itserve", "--json", env=env).stdout)
    assert [m["key"] for m in doc["endpoints"]["qwen-small"]] == [keys[1]]
    assert {r["key"]: r["evidence"]["state"] for r in doc["replicas"]} == {keys[0]: "not serving", keys[1]: "serving"}
    assert cli(project, "destroy", "--stack", "itserve").returncode == 0


def test_a_worker_key_rotated_out_of_band_is_named_as_refused_and_nothing_is_restarted(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """The Secret and the control plane's copy get a new key, the running engine keeps the one it
    started with: its evidence is refused (401), said so; nothing is restarted to 'fix' it."""
    ns, key = "it-rotate", "it-rotate-r0"
    namespace_with_evidence(admin, ns)
    project.stack("itrotate", [on_node(key)], imageDigest=double(), namespace=ns)
    assert cli(project, "deploy", "--stack", "itrotate", env=key_file(tmp_path)).returncode == 0
    (before,) = pods(admin, ns, key)
    rotated = "rotated-" + "k" * 24
    admin.patch(Secret, "infercrane-worker", {"stringData": {"api-key": rotated}}, namespace=ns)
    shown = cli(project, "inspect", "--stack", "itrotate", "--json", env=key_file(tmp_path, rotated))
    assert shown.returncode == 0, shown.stderr
    (rec,) = json.loads(shown.stdout)["replicas"]
    assert rec["evidence"]["state"] == "refused" and "refused the worker key (401)" in rec["evidence"]["reason"]
    assert "restart the replicas after a rotation" in rec["evidence"]["fix"]
    assert rotated not in shown.stdout + shown.stderr and KEY not in shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["endpoints"] == {}, "a replica refusing the key is no member"
    (after,) = pods(admin, ns, key)
    assert after.metadata.uid == before.metadata.uid and after.status.containerStatuses[0].restartCount == 0
    assert cli(project, "destroy", "--stack", "itrotate").returncode == 0


def test_without_a_key_or_a_route_the_evidence_is_not_verifiable_and_require_fails_the_deploy(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """In infercrane-system the deploying identity has exactly the shipped Role: no EndpointSlice
    read, so no route -- reported with the optional Role to apply, and the deploy passes; with
    no key it is said too. Under servingEvidence: require the same replica fails the deploy."""
    project.stack("itnoroute", [on_node("it-noroute-r0")], imageDigest=double())
    done = cli(project, "deploy", "--stack", "itnoroute", env=key_file(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (
        "evidence: replica it-noroute-r0: not verifiable: this identity may not list endpointslices "
        f"(optional: apply {slices.READER})" in done.stderr
    ), done.stderr
    assert cli(project, "destroy", "--stack", "itnoroute").returncode == 0

    project.stack("itnokey", [on_node("it-nokey-r0")], imageDigest=double(), servingEvidence="require")
    done = cli(project, "deploy", "--stack", "itnokey")
    assert done.returncode == 1
    assert "ready, but not verifiable: no worker key for the check (INFERCRANE_WORKER_API_KEY_FILE or" in done.stderr
    assert f"fix: set {worker_key.KEY_FILE_ENV} to the file the worker Secret's key was made from" in done.stderr
    assert cli(project, "destroy", "--stack", "itnokey").returncode == 0


def test_plain_pulumi_up_takes_the_same_evidence_in_its_readiness_wait(project: Project, admin: Client, tmp_path: Path) -> None:
    """The evidence is the program's (its readiness wait), so plain `pulumi up` takes it too,
    with the key from its environment, and fails a replica serving another name."""
    ns, key = "it-plainserve", "it-plainserve-r0"
    namespace_with_evidence(admin, ns)
    env = key_file(tmp_path)
    wrong = [{"name": "INFERCRANE_DOUBLE_SERVES", "value": "llama-other"}]
    project.stack("itplainserve", [on_node(key, pod={"env": wrong})], imageDigest=double(), namespace=ns)
    pulumi = plain_pulumi(project, "itplainserve", env=env)
    assert pulumi("stack", "init").returncode == 0
    up = pulumi("up", "--yes", "--skip-preview")
    assert up.returncode != 0
    assert "ready, but not serving" in up.stdout + up.stderr and "serves ['llama-other']" in up.stdout + up.stderr
    assert pulumi("destroy", "--yes").returncode == 0


class Gateway:
    """A client that routes as a gateway does: by the ready, not terminating, addresses of the
    endpoint's Services' EndpointSlices (re-read every 0.2 s), sending completions continuously
    from several threads, each on a connection of its own; every answer is recorded."""

    def __init__(self, admin: Client, ns: str, services: list[str], workers: int = 4) -> None:
        self.admin, self.ns, self.services = admin, ns, services
        self.addresses: list[str] = []
        self.results: Counter[str] = Counter()
        self.by_address: Counter[str] = Counter()  # requests sent to each pod address
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._route, daemon=True)]
        self._threads += [threading.Thread(target=self._send, args=(i,), daemon=True) for i in range(workers)]

    def __enter__(self) -> Gateway:
        self._refresh()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _refresh(self) -> None:
        found = []
        for svc in self.services:
            for s in self.admin.list(EndpointSlice, namespace=self.ns, labels={slices.SERVICE_NAME_LABEL: svc}):
                for e in s.endpoints or []:
                    c = e.conditions
                    if c is not None and c.ready and not c.terminating:
                        found += e.addresses[:1]
        self.addresses = sorted(found)

    def _route(self) -> None:
        while not self._stop.wait(0.2):
            self._refresh()

    def _send(self, worker: int) -> None:
        n = worker
        while not self._stop.is_set():
            targets = self.addresses
            if not targets:
                self.failures.append("no ready address at all")
                time.sleep(0.2)
                continue
            address = targets[n % len(targets)]
            n += 1
            self.by_address[address] += 1
            body = json.dumps({"model": "qwen-small", "prompt": "hi"})
            conn = http.client.HTTPConnection(address, 8000, timeout=10)
            try:
                conn.request(
                    "POST", "/v1/completions", body, {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
                )
                status = conn.getresponse().status
                self.results[str(status)] += 1
                if status != 200:
                    self.failures.append(f"{address}: HTTP {status}")
            except OSError as exc:
                self.results[exc.__class__.__name__] += 1
                self.failures.append(f"{address}: {exc.__class__.__name__}: {exc}")
            finally:
                conn.close()


def roll_under_load(project: Project, admin: Client, tmp_path: Path, stack: str, drain: dict[str, int]) -> Gateway:
    """A 2-replica endpoint (maxUnavailable 1) rolled to the double's next release while the gateway sends."""
    ns, keys = f"it-{stack}", [f"it-{stack}-r0", f"it-{stack}-r1"]
    namespace_with_evidence(admin, ns)
    slow = {"env": [{"name": "INFERCRANE_DOUBLE_RESPONSE_SECONDS", "value": "0.2"}]}
    replicas = [on_node(k, pod=slow) for k in keys]
    project.stack(stack, replicas, imageDigest=double(), namespace=ns, drain=drain)
    env = key_file(tmp_path)
    assert cli(project, "deploy", "--stack", stack, env=env).returncode == 0
    with Gateway(admin, ns, [naming.object_name(k) for k in keys]) as gateway:
        time.sleep(2)
        project.stack(stack, replicas, imageDigest=next_double(), namespace=ns, drain=drain)
        done = cli(project, "deploy", "--stack", stack, env=env)
        time.sleep(2)
    assert done.returncode == 0, done.stderr
    for k in keys:
        (pod,) = pods(admin, ns, k)
        assert pod.spec.containers[0].image == next_double(), "both replicas rolled"
    assert cli(project, "destroy", "--stack", stack).returncode == 0
    print(f"{stack}: answers {dict(gateway.results)}; dropped {len(gateway.failures)}: {gateway.failures[:3]}")
    return gateway


def test_a_rollout_drops_no_request_when_every_pod_leaves_routing_before_its_engine_stops(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    gateway = roll_under_load(project, admin, tmp_path, "drained", {"preStopSeconds": 5, "shutdownSeconds": 10})
    assert gateway.results["200"] > 50, gateway.results
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"


def test_the_same_rollout_without_the_drain_drops_requests_which_proves_the_test_can_fail(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    gateway = roll_under_load(project, admin, tmp_path, "undrained", {"preStopSeconds": 0, "shutdownSeconds": 0})
    assert gateway.results["200"] > 50, gateway.results
    assert gateway.failures, f"no request was dropped without the drain ({gateway.results})"


class PodTimes:
    """Each key's pods as the API server dates them, sampled every 0.2 s: when its first pod was
    created, and when its pod's deletion began (``deletionTimestamp`` less the grace it was given)."""

    def __init__(self, admin: Client, ns: str, keys: list[str]) -> None:
        self.admin, self.ns, self.keys = admin, ns, keys
        self.created: dict[str, datetime] = {}
        self.deleting: dict[str, datetime] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> PodTimes:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            for key in self.keys:
                for pod in pods(self.admin, self.ns, key):
                    self.created.setdefault(key, pod.metadata.creationTimestamp)
                    if pod.metadata.deletionTimestamp is not None and key not in self.deleting:
                        grace = timedelta(seconds=pod.metadata.deletionGracePeriodSeconds or 0)
                        self.deleting[key] = pod.metadata.deletionTimestamp - grace


def test_an_in_place_cutover_starts_each_successor_only_once_its_predecessor_drained_and_drops_no_request(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """Two 1-GPU replicas in place on the 2-GPU real node, cut over to two new keys with a 20 s
    preStop. A stage's deletion is over only when the old pod is gone (the Deployment is deleted
    in the foreground), so each successor's pod is created no earlier than its predecessor's
    deletion + 20 s -- never beside a pod that still drains and holds its GPU -- and a gateway
    routing by EndpointSlices loses no request on the way."""
    stack = "cutdrain"
    ns = f"it-{stack}"
    old, new = [f"it-{stack}-o{i}" for i in range(2)], [f"it-{stack}-n{i}" for i in range(2)]
    namespace_with_evidence(admin, ns)
    slow = {"env": [{"name": "INFERCRANE_DOUBLE_RESPONSE_SECONDS", "value": "0.2"}]}
    drain = {"preStopSeconds": 20, "shutdownSeconds": 5}
    project.stack(stack, [on_node(k, pod=slow) for k in old], imageDigest=double(), namespace=ns, drain=drain)
    env = key_file(tmp_path)
    assert cli(project, "deploy", "--stack", stack, env=env).returncode == 0
    services = [naming.object_name(k) for k in old + new]
    with Gateway(admin, ns, services) as gateway, PodTimes(admin, ns, old + new) as times:
        time.sleep(2)
        project.stack(stack, [on_node(k, pod=slow) for k in new], imageDigest=double(), namespace=ns, drain=drain)
        done = cli(project, "deploy", "--stack", stack, env=env)
        time.sleep(2)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stop it-cutdrain-o0 first (in place: frees its GPUs)" in done.stderr, done.stderr[-3000:]
    for predecessor, successor in zip(old, new, strict=True):
        began, created = times.deleting[predecessor], times.created[successor]
        # (the API server's timestamps are whole seconds)
        assert created >= began + timedelta(seconds=19), (predecessor, began, successor, created)
    assert gateway.results["200"] > 50, gateway.results
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"
    assert cli(project, "destroy", "--stack", stack).returncode == 0
