"""Releases with a verdict, on the local plane's real node (the engine double: a test double of the
engines' interfaces, never an engine -- it serves /metrics with vLLM's names and honest counts, and
is told by its pod environment to answer slower, fail every Nth request or answer other text).

A two-replica endpoint rolls in place (maxUnavailable 1) under a canary policy while a client
routing as a gateway does (by the ready addresses of the EndpointSlices) sends completions: the
first replica is the canary, the second the baseline. A healthy release is accepted and rolls on;
a slower one, one failing 5 % of its requests and one whose golden answers changed are each
rejected at the canary and rolled back by the same command (the canary back on the old release,
the baseline untouched, no request dropped by the rollback), and the same config again is refused
(the stack remembers the rejection); the previous config then has nothing left to do; with too
few requests a required verdict is not verifiable at the end of the bake, and rejects; retried
explicitly (`--retry-rejected`), the same release gets another canary and, accepted, is no longer
refused. A deploy killed during its canary's bake leaves the release unjudged: neither plain
`pulumi up` nor the rerun takes the canary's serving for a verdict -- the rerun bakes it again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

from infercrane.core import naming
from infercrane.core.plan import canary
from infercrane.local import node_files
from infercrane.local.plane import Plane
from tests.integration.conftest import Project, cli, kill_as_ci, plain_pulumi, start_cli, wait_for
from tests.integration.test_real_node import double, on_node
from tests.integration.test_serving import Gateway, key_file, namespace_with_evidence, next_double, pods

DRAIN = {"preStopSeconds": 5, "shutdownSeconds": 10}
POLICY = {"bakeSeconds": 15, "minRequests": 30, "required": True, "golden": [{"prompt": "Say hi", "maxTokens": 8}]}


def draining_on_node(admin: Client) -> list[str]:
    """The pods on the real node that are terminating (their GPUs still held)."""
    on_node = admin.list(Pod, namespace="*", fields={"spec.nodeName": node_files.NAME})
    return [str(p.metadata.name) for p in on_node if p.metadata.deletionTimestamp is not None]


class Endpoint:
    """The two replicas of one stack, each release written as the stack file a person edits."""

    def __init__(self, project: Project, admin: Client, tmp_path: Path, stack: str) -> None:
        self.project, self.admin, self.stack = project, admin, stack
        self.ns, self.keys = f"it-{stack}", [f"it-{stack}-r0", f"it-{stack}-r1"]
        self.env = key_file(tmp_path)
        namespace_with_evidence(admin, self.ns)

    def release(self, image: str, seconds: float = 0.03, *, surge: bool = False, **knobs: str) -> None:
        env = [{"name": "INFERCRANE_DOUBLE_RESPONSE_SECONDS", "value": str(seconds)}]
        env += [{"name": f"INFERCRANE_DOUBLE_{k.upper()}", "value": v} for k, v in knobs.items()]
        replicas = [on_node(k, pod={"env": env}) for k in self.keys]
        rollout = {"maxUnavailable": 0, "maxSurge": 1} if surge else {"maxUnavailable": 1, "maxSurge": 0}
        rollout |= {"canary": POLICY}
        self.pulumi = self.project.stack(self.stack, replicas, imageDigest=image, namespace=self.ns, drain=DRAIN, rollout=rollout)

    def deploy(self, *flags: str) -> Any:
        return cli(self.project, "deploy", "--stack", self.stack, *flags, env=self.env)

    def pod(self, i: int) -> Any:
        (found,) = [p for p in pods(self.admin, self.ns, self.keys[i]) if p.metadata.deletionTimestamp is None]
        return found

    def gateway(self) -> Gateway:
        return Gateway(self.admin, self.ns, [naming.object_name(k) for k in self.keys])

    def stack_outputs(self) -> dict[str, Any]:
        return dict(self.pulumi.outputs())


def test_a_healthy_release_is_accepted_a_slower_one_rejected_at_its_canary_and_rolled_back_by_the_same_command(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    e = Endpoint(project, admin, tmp_path, "canary")
    e.release(double())
    assert e.deploy().returncode == 0  # created: no release of a running endpoint, no canary
    with e.gateway() as gateway:
        time.sleep(2)
        e.release(next_double())
        accepted = e.deploy()
        assert accepted.returncode == 0, accepted.stderr
        assert "rollout: qwen-small: the canary it-canary-r0 bakes 15 s beside the baseline it-canary-r1" in accepted.stderr
        assert "rollout: canary qwen-small: ACCEPT -- within every threshold after 15 s; canary " in accepted.stderr
        for i in (0, 1):
            assert e.pod(i).spec.containers[0].image == next_double(), "the rest of the release rolled on"
        # N model loads: the accepted canary's pod is the one it baked in, started before the rest
        # of the release (the bake lies between them), never restarted after its verdict.
        canary_pod, rest = e.pod(0), e.pod(1)
        assert canary_pod.metadata.creationTimestamp < rest.metadata.creationTimestamp
        assert all(c.restartCount == 0 for c in canary_pod.status.containerStatuses or [])
        # The verdict rides in the stack output with its record; re-judged, it is the same, byte for byte.
        outputs = e.stack_outputs()
        recorded = dict(outputs["canaries"]["qwen-small"])
        accepted_at = recorded.pop("at")
        # Its canary's start rides beside the record (issue #67), never in it: the pod it baked in.
        started = recorded.pop("starts")
        assert list(started) == [e.keys[0]] and started[e.keys[0]]["pod"] == canary_pod.metadata.name, started
        assert started[e.keys[0]]["healthy"] >= started[e.keys[0]]["started"] >= 0, started
        assert recorded["outcome"] == "ACCEPT" and recorded["record"]["measured"][0]["requests"] >= 30
        assert json.dumps(canary.rejudge(recorded).as_json(), sort_keys=True) == json.dumps(recorded, sort_keys=True)
        # Each member carries its release: a gateway weighing a canary tells them apart by it.
        releases = {m["key"]: m["release"] for m in outputs["endpoints"]["qwen-small"]}
        assert releases[e.keys[0]] == releases[e.keys[1]] and releases[e.keys[0]].startswith("sha256:"), releases
        shown = cli(project, "inspect", "--stack", e.stack, env=e.env)
        assert f"endpoint qwen-small: last canary verdict: ACCEPT at {accepted_at}, record sha256:" in shown.stdout, shown.stdout
        baseline = e.pod(1).metadata.uid

        e.release(double(), seconds=0.07)  # the same engine, answering more than twice as slowly
        rejected = e.deploy()
        assert rejected.returncode == 1
        assert (
            "endpoint qwen-small stopped at wave 1/2 (the canary): canary qwen-small: REJECT -- ttft p95 0.0" in rejected.stderr
        )
        assert (
            "> maxTtftP95Ratio 1.5)" in rejected.stderr and "no other replica of the endpoint was moved to it" in rejected.stderr
        )
        assert "rollback: qwen-small: it-canary-r0 back to the release recorded before this deploy (in place)" in rejected.stderr
        assert "rolled back: it serves the release it served before." in rejected.stderr, rejected.stderr
        assert "rolled back: qwen-small: it-canary-r0 back to the release recorded before this deploy" in rejected.stderr
        assert e.pod(1).metadata.uid == baseline, "the baseline never moved"
        assert e.pod(0).spec.containers[0].image == next_double(), "the canary is back on the old release"
        shown = cli(project, "inspect", "--stack", e.stack, env=e.env)
        assert "endpoint qwen-small: last canary verdict: REJECT at " in shown.stdout, shown.stdout
        assert "that release is refused unless deploy --retry-rejected" in shown.stdout
        # The same config again -- a rerun, a re-run CI job -- would start the rejected release
        # again: the rejection is remembered by the stack, and it is refused.
        again = e.deploy()
        assert again.returncode == 1
        assert "the release of endpoint qwen-small was rejected by its canary before (REJECT at " in again.stderr, again.stderr
        assert "nothing was applied" in again.stderr and "--retry-rejected" in again.stderr
        assert e.pod(1).metadata.uid == baseline
        planned = cli(project, "plan", "--stack", e.stack, env=e.env)
        assert planned.returncode == 3, planned.stderr  # changes pending
        assert "  rejected before: endpoint qwen-small's release (REJECT at " in planned.stdout, planned.stdout

        restored = e.pod(0).metadata.uid
        e.release(next_double())  # the previous config: what runs already, nothing to do
        previous = e.deploy()
        assert previous.returncode == 0, previous.stderr
        time.sleep(2)
    assert e.pod(0).metadata.uid == restored and e.pod(1).metadata.uid == baseline
    assert gateway.results["200"] > 300, gateway.results
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0


def test_a_release_failing_five_percent_or_answering_otherwise_is_rejected_and_too_few_requests_is_no_pass(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    e = Endpoint(project, admin, tmp_path, "canaryfail")
    e.release(double())
    assert e.deploy().returncode == 0
    with e.gateway() as gateway:
        time.sleep(2)
        e.release(next_double(), fail_every="20")
        failing = e.deploy()
        assert failing.returncode == 1
        assert "canary qwen-small: REJECT -- error ratio " in failing.stderr, failing.stderr
        assert "> maxErrorRatioIncrease 1.0%)" in failing.stderr
        baseline_address = str(e.pod(1).status.podIP)
        e.release(next_double(), answer="a broken chat template")
        changed = e.deploy()
        assert changed.returncode == 1
        assert "canary qwen-small: REJECT -- golden request 1: the canary's answer differs from the baseline's" in changed.stderr
    assert gateway.failures, "the failing canary's 500s reached the client: its share, no more"
    # Every failure is the failing canary's own 500 (the rollbacks dropped none), its share and no more.
    failed_at = {f.split(":")[0] for f in gateway.failures}
    assert baseline_address not in failed_at and all(": HTTP 500" in f for f in gateway.failures), gateway.failures[:5]
    canary_answered = sum(n for a, n in gateway.by_address.items() if a in failed_at)
    assert len(gateway.failures) <= canary_answered // 20 + 1, (len(gateway.failures), gateway.by_address)
    for i in (0, 1):
        assert e.pod(i).spec.containers[0].image == double(), "each rejected canary went back to the old release"
    # No traffic at all: the verdict waits, and at the end of the bake a required verdict rejects.
    e.release(next_double())
    idle = e.deploy()
    assert idle.returncode == 1
    assert "canary qwen-small: NOT VERIFIABLE -- the canary answered " in idle.stderr, idle.stderr
    assert "of the 30 requests the verdict needs" in idle.stderr and "the bake ended after 15 s" in idle.stderr
    # The retry: asked explicitly, the release gets another canary, now with traffic: accepted, the
    # rest rolls, and the stack forgets the rejection (the same config again is no longer refused).
    with e.gateway():
        time.sleep(2)
        retried = e.deploy("--retry-rejected")
    assert retried.returncode == 0, retried.stderr
    assert "note: retrying the release a canary rejected for qwen-small (--retry-rejected)" in retried.stderr
    assert "rollout: canary qwen-small: ACCEPT" in retried.stderr, retried.stderr
    for i in (0, 1):
        assert e.pod(i).spec.containers[0].image == next_double(), "the release rolled on to every replica"
    again = e.deploy()
    assert again.returncode == 0, again.stderr
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0


def test_a_canary_judged_from_the_planes_prometheus_is_rejected_when_slower_and_accepted_when_healthy(
    project: Project, admin: Client, plane: Plane, tmp_path: Path
) -> None:
    """The same verdict from a Prometheus that scrapes the pods (the plane's own: built from its Go
    module, finding the node's pods by watching them) instead of each pod's /metrics."""
    url = plane.status()["prometheus"]
    assert url, "the plane runs its Prometheus beside its real node"
    e = Endpoint(project, admin, tmp_path, "canaryprom")
    e.env |= {"INFERCRANE_KUBERNETES_CANARY_PROMETHEUS": url}
    e.release(double())
    assert e.deploy().returncode == 0
    with e.gateway() as gateway:
        time.sleep(2)
        e.release(next_double(), seconds=0.07)  # more than twice as slow
        slow = e.deploy()
        assert slow.returncode == 1, slow.stderr
        assert f"counts from Prometheus at {url}" in slow.stderr, slow.stderr
        assert "canary qwen-small: REJECT -- ttft p95 " in slow.stderr and "> maxTtftP95Ratio 1.5)" in slow.stderr
        assert "rolled back: qwen-small: it-canaryprom-r0 back to the release recorded before this deploy" in slow.stderr
        e.release(next_double())
        healthy = e.deploy()
        assert healthy.returncode == 0, healthy.stderr
        assert "rollout: canary qwen-small: ACCEPT -- within every threshold after 15 s" in healthy.stderr, healthy.stderr
        time.sleep(2)
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0


def test_an_sglang_canary_surging_beside_its_two_replicas_is_judged_by_sglangs_own_counters(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """A 2 + 1 endpoint on the real node's three GPUs: two SGLang replicas (with --enable-metrics)
    cut over to two new keys under maxSurge 1, so the canary is a third replica baking beside both
    old ones. A release failing 5 % of its requests is rejected by SGLang's counters (its aborted
    requests against its finished ones) and rolled back -- the canary removed, the old replicas
    never touched; the healthy release is accepted and the rest rolls: each new replica started
    once, and no pod ever waited for a GPU (the surge borrowed one, the ledger gave it back)."""
    stack, ns = "canarysgl", "it-canarysgl"
    old, new = [f"it-canarysgl-a{i}" for i in range(2)], [f"it-canarysgl-b{i}" for i in range(2)]
    env = key_file(tmp_path)
    namespace_with_evidence(admin, ns)
    surge = {"maxUnavailable": 0, "maxSurge": 1, "canary": POLICY}

    def release(keys: list[str], image: str, **knobs: str) -> None:
        pod_env = [{"name": "INFERCRANE_DOUBLE_RESPONSE_SECONDS", "value": "0.03"}]
        pod_env += [{"name": f"INFERCRANE_DOUBLE_{k.upper()}", "value": v} for k, v in knobs.items()]
        replicas = [on_node(k, engine="sglang", args=["--enable-metrics"], pod={"env": pod_env}) for k in keys]
        project.stack(stack, replicas, imageDigest=image, namespace=ns, drain=DRAIN, rollout=surge)

    def deploy() -> Any:
        return cli(project, "deploy", "--stack", stack, env=env)

    def uid(key: str) -> str:
        (pod,) = [p for p in pods(admin, ns, key) if p.metadata.deletionTimestamp is None]
        return str(pod.metadata.uid)

    # A previous test's pods drain for their grace period after its destroy, holding their GPUs:
    # this endpoint starts on a node whose three GPUs are free.
    wait_for(lambda: not draining_on_node(admin), "the real node's draining pods gone", timeout=120)
    release(old, double())
    assert deploy().returncode == 0
    before = [uid(k) for k in old]
    with Gateway(admin, ns, [naming.object_name(k) for k in old + new]) as gateway:
        time.sleep(2)
        release(new, next_double(), fail_every="20")
        failing = deploy()
        assert failing.returncode == 1, failing.stderr
        assert f"the canary {new[0]} bakes 15 s beside the baseline {old[0]}, {old[1]}" in failing.stderr, failing.stderr
        assert "canary qwen-small: REJECT -- error ratio " in failing.stderr, failing.stderr
        assert "> maxErrorRatioIncrease 1.0%)" in failing.stderr
        assert f"rolled back: qwen-small: remove {new[0]} (brought by this deploy) (surge); ready and serving again" in (
            failing.stderr
        ), failing.stderr
        assert pods(admin, ns, new[0]) == [] and [uid(k) for k in old] == before, "the canary gone, the baseline untouched"
        release(new, next_double())
        healthy = deploy()
        assert healthy.returncode == 0, healthy.stderr
        assert "rollout: canary qwen-small: ACCEPT -- within every threshold after 15 s" in healthy.stderr, healthy.stderr
        time.sleep(2)
    assert all(pods(admin, ns, k) == [] for k in old), "the old replicas left once their successors served"
    first, second = (next(iter(pods(admin, ns, k))) for k in new)
    assert first.metadata.creationTimestamp < second.metadata.creationTimestamp, "the canary first, then the rest"
    assert all(c.restartCount == 0 for p in (first, second) for c in p.status.containerStatuses or [])
    successors = tuple(naming.object_name(k) for k in new)
    waited = [
        e
        for e in admin.list(Event, namespace=ns)
        if e.reason == "FailedScheduling" and e.involvedObject.name.startswith(successors)
    ]
    assert waited == [], [e.message for e in waited]
    # The failing canary's 500s reached the client, its share and no more; the rollback dropped none.
    failed_at = {f.split(":")[0] for f in gateway.failures}
    assert all(": HTTP 500" in f for f in gateway.failures), gateway.failures[:5]
    assert len(failed_at) <= 1 and gateway.results["200"] > 300, (failed_at, gateway.results)
    assert cli(project, "destroy", "--stack", stack).returncode == 0


def test_a_deploy_killed_during_its_canarys_bake_leaves_the_release_unjudged_and_the_rerun_bakes_it_again(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """Killed (SIGKILL to its process group, as a CI runner's timeout) while r0 bakes on the new
    release: r0 serves it, r1 the old one. Before the judging mark, the rerun saw the release
    "already serving" on r0 and rolled it to r1 with no verdict (issue #64); now plain `pulumi up`
    refuses (the canary needs a bake of its own) and the rerun bakes r0 again, in the pod it
    already runs (no restart), before r1 moves."""
    e = Endpoint(project, admin, tmp_path, "canarykill")
    e.release(double())
    assert e.deploy().returncode == 0
    with e.gateway() as gateway:
        time.sleep(2)
        e.release(next_double())
        run = start_cli(project, "deploy", "--stack", e.stack, capture=True, env=e.env)
        assert run.stderr is not None
        for line in run.stderr:
            if f"the canary {e.keys[0]} bakes 15 s" in line:
                break
        else:
            raise AssertionError("the deploy ended before its canary baked")
        time.sleep(4)
        assert kill_as_ci(run), "the deploy was still baking"
        canary_pod, old = e.pod(0), e.pod(1)
        assert canary_pod.spec.containers[0].image == next_double() and old.spec.containers[0].image == double()
        shown = cli(project, "inspect", "--stack", e.stack, env=e.env)
        assert "last canary verdict: none yet for release sha256:" in shown.stdout, shown.stdout

        pulumi = plain_pulumi(project, e.stack, env=e.env)
        assert pulumi("cancel", "--yes").returncode == 0  # the killed run's lock, as a person clears it for plain pulumi
        plain = pulumi("up", "--yes", "--skip-preview")
        text = plain.stdout + plain.stderr
        assert plain.returncode != 0, text[-2000:]
        assert f"the canary {e.keys[0]} would not bake nor be judged before the rest" in text, text[-3000:]
        assert e.pod(1).metadata.uid == old.metadata.uid, "plain pulumi up moved nothing"

        rerun = e.deploy()
        assert rerun.returncode == 0, rerun.stderr
        assert "note: the canary of qwen-small was never judged" in rerun.stderr, rerun.stderr
        assert f"the canary {e.keys[0]} bakes 15 s beside the baseline {e.keys[1]}" in rerun.stderr, rerun.stderr
        assert "rollout: canary qwen-small: ACCEPT -- within every threshold after 15 s" in rerun.stderr
        assert e.pod(0).metadata.uid == canary_pod.metadata.uid, "judged in the pod it ran: no second load"
        assert e.pod(1).spec.containers[0].image == next_double(), "the rest rolled once the canary was accepted"
        time.sleep(2)
    shown = cli(project, "inspect", "--stack", e.stack, env=e.env)
    assert "last canary verdict: ACCEPT at " in shown.stdout, shown.stdout  # the judging mark is gone
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0


def test_a_same_key_surge_canary_keeps_its_old_pod_serving_until_the_verdict_so_a_reject_restarts_nothing(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """Issue #64: under maxUnavailable 0 / maxSurge 1 the canary is r0's own rolling update. Its old
    pod is held serving beside it (the Deployment's minReadySeconds, by a field manager of its own)
    and bakes as baseline; a slower release is rejected and rolled back without a model load (the
    old pod is the one that ran before: same uid, never restarted) and the canary's pod is gone; a
    healthy release is accepted with the old pod's own figures in its record, and the release
    costs N loads -- each replica's pod started once."""
    e = Endpoint(project, admin, tmp_path, "canaryhold")
    wait_for(lambda: not draining_on_node(admin), "the real node's draining pods gone", timeout=120)
    e.release(double(), surge=True)
    assert e.deploy().returncode == 0
    before = [e.pod(i).metadata.uid for i in (0, 1)]
    with e.gateway() as gateway:
        time.sleep(2)
        e.release(double(), seconds=0.07, surge=True)  # the same engine, answering more than twice as slowly
        rejected = e.deploy()
        assert rejected.returncode == 1, rejected.stderr
        said = rejected.stderr
        assert f"rollout: qwen-small: {e.keys[0]}'s old pod is held serving beside its canary until the verdict" in said, said
        assert f"the canary {e.keys[0]} bakes 15 s beside the baseline {e.keys[1]}, {e.keys[0]} (old pod)" in said, said
        assert "canary qwen-small: REJECT -- ttft p95 " in said, said
        assert f"rolled back: qwen-small: {e.keys[0]} back to the release recorded before this deploy" in said, said
        assert [e.pod(i).metadata.uid for i in (0, 1)] == before, "the old pods never restarted: no second load"
        assert all(c.restartCount == 0 for c in e.pod(0).status.containerStatuses or [])
        wait_for(lambda: len(pods(admin, e.ns, e.keys[0])) == 1, "the rejected canary's pod gone", timeout=60)

        e.release(next_double(), surge=True)
        accepted = e.deploy()
        assert accepted.returncode == 0, accepted.stderr
        assert "rollout: canary qwen-small: ACCEPT -- within every threshold after 15 s" in accepted.stderr, accepted.stderr
        time.sleep(2)
    record = dict(e.stack_outputs()["canaries"]["qwen-small"])["record"]
    (old_side,) = [m for m in record["measured"] if m["replica"] == f"{e.keys[0]} (old pod)"]
    assert old_side["side"] == "baseline" and not old_side["unreadable"] and old_side["requests"] > 0, old_side
    # N loads: one pod of the release per replica, the canary's first, neither restarted.
    canary_pod, rest = e.pod(0), e.pod(1)
    assert [len(pods(admin, e.ns, k)) for k in e.keys] == [1, 1]
    assert canary_pod.spec.containers[0].image == next_double() == rest.spec.containers[0].image
    assert canary_pod.metadata.creationTimestamp < rest.metadata.creationTimestamp
    assert all(c.restartCount == 0 for p in (canary_pod, rest) for c in p.status.containerStatuses or [])
    assert gateway.failures == [], f"{len(gateway.failures)} dropped: {gateway.failures[:5]} ({gateway.results})"
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0


def kill_engine(project: Project, pod: Any) -> None:
    """SIGKILL a pod's engine container on the real node (as the kernel's OOM killer does): the
    kubelet starts it again, and its counters begin again near 0."""
    import subprocess

    from infercrane.local.node_files import home
    from infercrane.project.tools import find_tool

    (status,) = pod.status.containerStatuses
    container = str(status.containerID).split("://", 1)[1]
    address = str(home(project.plane.state) / "containerd.sock")
    killed = subprocess.run(
        [str(find_tool("ctr")), "--address", address, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert killed.returncode == 0, killed.stderr


def test_a_canary_whose_engine_restarts_during_its_bake_is_rejected_never_accepted(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """Issue #64, 5, on the real node: the canary's engine is killed 4 s into its 15 s bake while the
    gateway's traffic runs. The kubelet restarts it and its counters start again near 0, which
    once read as a healthy canary (ACCEPT with 1,057 requests). The bake sees the restart and
    rejects the release; the same command rolls the canary back, and the baseline never moved."""
    e = Endpoint(project, admin, tmp_path, "canarycrash")
    wait_for(lambda: not draining_on_node(admin), "the real node's draining pods gone", timeout=120)
    e.release(double())
    assert e.deploy().returncode == 0
    baseline = e.pod(1).metadata.uid
    with e.gateway():
        time.sleep(2)
        e.release(next_double())
        run = start_cli(project, "deploy", "--stack", e.stack, capture=True, env=e.env)
        assert run.stderr is not None
        said = []
        for line in run.stderr:
            said.append(line)
            if f"the canary {e.keys[0]} bakes 15 s" in line:
                break
        else:
            raise AssertionError("the deploy ended before its canary baked:\n" + "".join(said[-20:]))
        time.sleep(4)
        canary_pod = e.pod(0)
        assert canary_pod.spec.containers[0].image == next_double()
        kill_engine(project, canary_pod)
        rest = run.stderr.read()
        run.wait(timeout=300)
    text = "".join(said) + rest
    assert run.returncode == 1, text[-3000:]
    assert "canary qwen-small: REJECT" in text and "during the bake" in text, text[-3000:]
    assert "ACCEPT" not in text, text[-3000:]
    assert f"rolled back: qwen-small: {e.keys[0]} back to the release recorded before this deploy" in text, text[-3000:]
    assert e.pod(1).metadata.uid == baseline, "the baseline never moved"
    running = lambda: [p for p in pods(admin, e.ns, e.keys[0]) if p.metadata.deletionTimestamp is None]  # noqa: E731
    wait_for(lambda: [p.spec.containers[0].image for p in running()] == [double()], "the canary back on its release", timeout=120)
    assert cli(project, "destroy", "--stack", e.stack).returncode == 0
