"""Revision lifecycle over time, on a plane whose pods take a few seconds to become Ready (kwok's
pod-ready Stage delayed: simulated model load), so every window a rollout opens is visible.

Through ``infercrane deploy`` (a new process, as a user runs it) as the restricted identity: keys
are identities (kept replicas keep their uid and pods through a cutover, a reorder, a removal, an
endpoint rename); an endpoint rolls in waves under its policy, sampled every 0.5 s by a watcher
(ready pods, GPUs held); a failed wave stops with the old replicas serving and a rerun continues;
a stack deployed by the slot scheme of the previous release moves without a replacement.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Final

import httpx2
import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod, Service

from infercrane.core import naming
from infercrane.local.applying import admin_client
from infercrane.local.layout import DEPLOYER_USER
from infercrane.local.plane import Plane
from tests.integration.conftest import DIGEST, ROOT, Project, cli, get_or_none, kwok_plane

pytestmark = pytest.mark.integration
NS = "infercrane-system"
POD_READY_DELAY = 3.0
NEW_DIGEST = "vllm/vllm-openai@sha256:" + "d" * 64
# The slot scheme's last release (the landed main before key identity): the migration test runs it.
SLOT_SCHEME_COMMIT = "784722a"

NODES = {
    "nodes": [
        {"name": "kwok-l40s-0", "gpuProduct": "NVIDIA-L40S", "gpus": 4},  # 4 one-GPU replicas: no free GPU
        {"name": "kwok-h100-0", "gpuProduct": "NVIDIA-H100-80GB-HBM3", "gpus": 5},  # 4 replicas + one free set
        {"name": "kwok-a100-0", "gpuProduct": "NVIDIA-A100-SXM4-80GB", "gpus": 8},  # the identity tests
        # The label -> dra switch: the same product's devices, published in a ResourceSlice.
        {"name": "kwok-dra-a100-0", "gpuProduct": "NVIDIA-A100-SXM4-80GB", "gpus": 2, "gpuAllocation": "dra"},
    ]
}


@pytest.fixture(scope="module")
def slow_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from kwok_plane(tmp_path_factory, "slow-plane", NODES, pod_ready_delay=POD_READY_DELAY)


@pytest.fixture(scope="module")
def slow_admin(slow_plane: Plane) -> Client:
    return admin_client(slow_plane.kubeconfig)


@pytest.fixture
def slow(
    tmp_path: Path, slow_plane: Plane, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch, slow_admin: Client
) -> Iterator[Project]:
    p = Project(tmp_path, slow_plane, pulumi_home, monkeypatch)
    yield p
    p.cleanup(slow_admin)


#: An endpoint of 4 on the full L40S node (in place: one down at a time, 3 ready at the lowest), or
#: on the H100 node with one free GPU set (surge: one extra at a time, 4 ready throughout).
IN_PLACE_OR_SURGE = pytest.mark.parametrize(
    ("gpu", "rollout", "floor"),
    [("NVIDIA-L40S", None, 3), ("NVIDIA-H100-80GB-HBM3", {"maxUnavailable": 0, "maxSurge": 1}, 4)],
    ids=["in-place", "surge"],
)


def rep(key: str, name: str = "rev", gpu: str = "NVIDIA-A100-SXM4-80GB", **extra: Any) -> dict[str, Any]:
    return {"key": key, "model": "Qwen/Qwen3-8B", "name": name, "gpu": gpu, "startupBudgetSeconds": 60} | extra


def deploy(project: Project, stack: str, *extra: str) -> dict[str, Any]:
    r = cli(project, "deploy", "--stack", stack, "--json", *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout))


def assert_no_op_plan(project: Project, stack: str) -> None:
    r = cli(project, "plan", "--stack", stack, "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def live(admin: Client, keys: list[str]) -> dict[str, tuple[str, str]]:
    """key -> (Deployment uid, the name of its one pod)."""
    out = {}
    for key in keys:
        name = naming.object_name(key)
        dep = admin.get(Deployment, name, namespace=NS)
        pods = [
            p for p in admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name}) if not p.metadata.deletionTimestamp
        ]
        assert len(pods) == 1, (key, [p.metadata.name for p in pods])
        out[key] = (str(dep.metadata.uid), str(pods[0].metadata.name))
    return out


def unhardened(admin: Client, keys: list[str]) -> dict[str, tuple[str, Any]]:
    """key -> (Deployment uid, its pod template without the hardening, the drain and the intent
    annotations). The release before slot names became keys ran its pods without seccomp
    ``RuntimeDefault`` or dropped capabilities (docs/configure.md, "Pod Security") and without the drain (its
    preStop, vLLM's --shutdown-timeout, the grace period derived from both; docs/serving.md, "Drain on every
    stop"): the first deploy of this one rolls each pod once for those, and for nothing else --
    what this compares."""
    out = {}
    for key in keys:
        dep = admin.get(Deployment, naming.object_name(key), namespace=NS)
        template = dep.spec.template.to_dict()
        template["metadata"].pop("annotations", None)
        template["spec"].pop("securityContext", None)
        template["spec"].pop("terminationGracePeriodSeconds", None)
        for container in template["spec"]["containers"]:
            container.pop("securityContext", None)
            container.pop("lifecycle", None)
            args = container.get("args") or []
            if "--shutdown-timeout" in args:
                at = args.index("--shutdown-timeout")
                container["args"] = args[:at] + args[at + 2 :]
        out[key] = (str(dep.metadata.uid), template)
    return out


def hardened(admin: Client, key: str) -> bool:
    spec = admin.get(Deployment, naming.object_name(key), namespace=NS).spec.template.spec.to_dict()
    seccomp = (spec.get("securityContext") or {}).get("seccompProfile") or {}
    drops = [((c.get("securityContext") or {}).get("capabilities") or {}).get("drop") for c in spec["containers"]]
    return seccomp.get("type") == "RuntimeDefault" and drops == [["ALL"]] * len(drops)


def gone(admin: Client, keys: list[str]) -> bool:
    return all(
        get_or_none(admin, Deployment, naming.object_name(k)) is None
        and get_or_none(admin, Service, naming.object_name(k)) is None
        for k in keys
    )


def test_kept_keys_keep_their_objects_and_pods_through_cutover_reorder_removal_and_rename(
    slow: Project, slow_admin: Client
) -> None:
    stack = "rolid"
    old = ["a-rev-1-r0", "a-rev-1-r1"]
    new = ["a-rev-2-r0", "a-rev-2-r1"]
    slow.stack(stack, [rep(k) for k in old])
    deploy(slow, stack)
    first = live(slow_admin, old)

    slow.stack(stack, [rep(k) for k in old + new])  # blue/green: the new revision beside the old
    deploy(slow, stack)
    assert live(slow_admin, old) == first
    both = live(slow_admin, old + new)
    assert_no_op_plan(slow, stack)

    slow.stack(stack, [rep(k) for k in new])  # drop the old revision: only its objects go
    doc = deploy(slow, stack)
    assert {a["key"]: a["action"] for a in doc["replicas"]} == {
        new[0]: "same",
        new[1]: "same",
        old[0]: "delete",
        old[1]: "delete",
    }
    assert live(slow_admin, new) == {k: both[k] for k in new}
    assert gone(slow_admin, old)
    assert_no_op_plan(slow, stack)

    three = [*new, "a-rev-2-r2"]
    slow.stack(stack, [rep(k) for k in (new[0], three[2], new[1])])  # inserted in the middle: one create
    doc = deploy(slow, stack)
    assert {a["key"]: a["action"] for a in doc["replicas"]} == {new[0]: "same", three[2]: "create", new[1]: "same"}
    kept = live(slow_admin, three)
    assert {k: kept[k] for k in new} == {k: both[k] for k in new}
    r = cli(slow, "inspect", "--stack", stack, "--json")
    assert r.returncode == 0, r.stderr
    serving = json.loads(r.stdout)["endpoints"]["rev"]
    assert sorted(m["key"] for m in serving) == sorted(three) and all(m["intentHash"].startswith("sha256:") for m in serving)
    slow.stack(stack, [rep(k) for k in reversed(three)])  # a reorder changes nothing
    doc = deploy(slow, stack)
    assert {a["action"] for a in doc["replicas"]} == {"same"}
    assert live(slow_admin, three) == kept
    assert_no_op_plan(slow, stack)

    slow.stack(stack, [rep(three[0]), rep(three[2])])  # removing the middle one touches no other
    deploy(slow, stack)
    assert live(slow_admin, [three[0], three[2]]) == {k: kept[k] for k in (three[0], three[2])}
    assert gone(slow_admin, [three[1]])
    assert_no_op_plan(slow, stack)

    # A new endpoint name is a new served name (a pod change), rolled in waves; no object is replaced.
    slow.stack(stack, [rep(three[0], name="rev-next"), rep(three[2], name="rev-next")])
    doc = deploy(slow, stack)
    (e,) = doc["rollout"]["endpoints"]
    assert (e["endpoint"], len(e["waves"]), e["lowestReady"]) == ("rev-next", 2, 1)
    after = live(slow_admin, [three[0], three[2]])
    assert {k: uid for k, (uid, _) in after.items()} == {k: kept[k][0] for k in (three[0], three[2])}
    dep = slow_admin.get(Deployment, naming.object_name(three[0]), namespace=NS)
    assert dep.metadata.labels[naming.LABEL_ENDPOINT] == "rev-next"
    assert_no_op_plan(slow, stack)
    r = cli(slow, "destroy", "--stack", stack)
    assert r.returncode == 0, r.stderr


class Watcher:
    """Samples one endpoint's pods every 0.5 s: how many are Ready (and not terminating), how
    many GPUs its scheduled, not yet finished pods hold (a terminating pod still holds them), and
    how many pods it has that are not terminating (scheduled or not: each asks for a GPU set)."""

    def __init__(self, admin: Client, keys: list[str], gpu_resource: str = "nvidia.com/gpu", namespace: str = NS) -> None:
        self.admin, self.names, self.gpu, self.namespace = admin, {naming.object_name(k) for k in keys}, gpu_resource, namespace
        self.samples: list[tuple[int, int]] = []
        self.pods: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _claimed(self, pod: Pod) -> int:
        """The devices a scheduled pod's claims hold (gpuAllocation: dra): their allocations."""
        from lightkube.resources.resource_v1 import ResourceClaim

        held = 0
        for status in pod.status.resourceClaimStatuses or []:
            claim = self.admin.get(ResourceClaim, status.resourceClaimName, namespace=self.namespace)
            held += len(claim.status.allocation.devices.results) if claim.status and claim.status.allocation else 0
        return held

    def _sample(self) -> tuple[int, int]:
        ready = gpus = pods = 0
        for p in self.admin.list(Pod, namespace=self.namespace, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (p.metadata.labels or {}).get(naming.LABEL_INSTANCE) not in self.names:
                continue
            pods += not p.metadata.deletionTimestamp and (p.status.phase or "") not in ("Succeeded", "Failed")
            if p.spec.nodeName and (p.status.phase or "") not in ("Succeeded", "Failed"):
                gpus += sum(int((c.resources.requests or {}).get(self.gpu, 0)) for c in p.spec.containers)
                gpus += self._claimed(p)
            conditions = {c.type: c.status for c in (p.status.conditions or [])}
            if conditions.get("Ready") == "True" and not p.metadata.deletionTimestamp:
                ready += 1
        self.pods.append(pods)
        return ready, gpus

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._sample())
            time.sleep(0.5)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def lowest_ready(self) -> int:
        return min(r for r, _ in self.samples)

    @property
    def peak_gpus(self) -> int:
        return max(g for _, g in self.samples)


def intents(admin: Client, keys: list[str]) -> dict[str, str]:
    return {
        k: admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.annotations[naming.ANNOTATION_INTENT] for k in keys
    }


@pytest.mark.parametrize(
    ("gpu", "rollout", "floor", "gpu_cap"),
    [("NVIDIA-L40S", None, 3, 4), ("NVIDIA-H100-80GB-HBM3", {"maxUnavailable": 0, "maxSurge": 1}, 4, 5)],
    ids=["in-place-no-free-gpu", "surge-one-free-gpu-set"],
)
def test_an_endpoint_rolls_to_a_new_digest_in_waves_within_its_policy(
    slow: Project, slow_admin: Client, gpu: str, rollout: dict[str, int] | None, floor: int, gpu_cap: int
) -> None:
    stack = "rolwave" + ("surge" if rollout else "inplace")
    keys = [f"{stack}-r{i}" for i in range(4)]
    target = {"rollout": rollout} if rollout else {}
    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target)
    deploy(slow, stack)
    before = live(slow_admin, keys)
    old_intents = intents(slow_admin, keys)
    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target, imageDigest=NEW_DIGEST)
    plan = cli(slow, "plan", "--stack", stack)
    assert plan.returncode == 3, plan.stderr
    assert f"4 wave(s) {'surge' if rollout else 'in place'}" in plan.stdout and f"lowest ready {floor}" in plan.stdout, (
        plan.stdout
    )
    with Watcher(slow_admin, keys) as w:
        deploy(slow, stack)
    assert w.samples and w.lowest_ready >= floor, w.samples
    assert w.peak_gpus <= gpu_cap, w.samples
    assert min(r for r, _ in w.samples) < 4 or rollout, "an in-place roll must have taken a replica down at some sample"
    after = live(slow_admin, keys)
    assert {k: u for k, (u, _) in after.items()} == {k: u for k, (u, _) in before.items()}  # same objects
    assert all(after[k][1] != before[k][1] for k in keys)  # every pod replaced, one wave at a time
    new_intents = intents(slow_admin, keys)
    assert all(new_intents[k] != old_intents[k] for k in keys), (old_intents, new_intents)
    for k in keys:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.containers[0].image == NEW_DIGEST
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_two_endpoints_surging_on_one_product_take_turns_for_the_extra_gpus_the_ledger_lends(
    slow: Project, slow_admin: Client
) -> None:
    # The A100 node has 8 GPUs: room for both endpoints' surges at once. maxExtraGpus 1 lends one.
    stack = "rolledger"
    keys = [f"{stack}-{e}{i}" for e in "ab" for i in range(2)]
    gpu = "NVIDIA-A100-SXM4-80GB"
    policy = {"maxUnavailable": 0, "maxSurge": 1, "maxExtraGpus": 1}
    replicas = [rep(k, name=f"{stack}-{k[-2]}", gpu=gpu) for k in keys]
    slow.stack(stack, replicas, rollout=policy)
    deploy(slow, stack)
    slow.stack(stack, replicas, rollout=policy, imageDigest=NEW_DIGEST)
    plan = cli(slow, "plan", "--stack", stack)
    assert plan.returncode == 3, plan.stderr
    assert (
        "extra GPUs: at most 1 of each product at once, all endpoints together (rollout.maxExtraGpus); "
        "their surges want 2 of NVIDIA-A100-SXM4-80GB at once: they take turns" in plan.stdout
    ), plan.stdout
    with Watcher(slow_admin, keys) as w:
        r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert w.samples and w.peak_gpus == 5, w.samples  # the endpoints' own 4, and the one the ledger lends
    assert "waits to borrow 1 GPU(s) of NVIDIA-A100-SXM4-80GB (rollout.maxExtraGpus 1; lent now: " in r.stderr, r.stderr
    assert w.lowest_ready >= 4, w.samples  # surges: no replica down
    for k in keys:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.containers[0].image == NEW_DIGEST
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_rerun_after_a_surge_killed_mid_wave_never_lends_the_extra_gpu_twice(slow: Project, slow_admin: Client) -> None:
    """Issue #64, d: endpoint a's surge cutover (a0,a1 -> n0,n1) and b's surge update share one
    extra GPU (maxExtraGpus 1). The deploy is SIGKILLed once n0 is applied: a now holds 3 GPUs, its
    own 2. The stack's gpus mark says so; the rerun counts a's third GPU as lent already, so b's
    surge waits for a's deletions -- never own 4 + 1 held + 1 lent again."""
    from tests.integration.conftest import kill_as_ci, plain_pulumi, start_cli, wait_for

    stack = "rolledgerkill"
    gpu = "NVIDIA-A100-SXM4-80GB"
    policy = {"maxUnavailable": 0, "maxSurge": 1, "maxExtraGpus": 1}
    old = [rep(f"{stack}-a{i}", name=f"{stack}-a", gpu=gpu) for i in range(2)]
    new = [rep(f"{stack}-n{i}", name=f"{stack}-a", gpu=gpu) for i in range(2)]
    b = [rep(f"{stack}-b{i}", name=f"{stack}-b", gpu=gpu) for i in range(2)]
    slow.stack(stack, old + b, rollout=policy)
    deploy(slow, stack)
    slow.stack(stack, new + b, rollout=policy, imageDigest=NEW_DIGEST)
    proc = start_cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-1")
    try:
        first = naming.object_name(f"{stack}-n0")
        wait_for(lambda: get_or_none(slow_admin, Deployment, first), "n0 to be applied", timeout=240)
    finally:
        kill_as_ci(proc)
    tags = plain_pulumi(slow, stack)("stack", "tag", "ls", "--json")
    assert tags.returncode == 0, tags.stderr
    marks = {k: v for k, v in json.loads(tags.stdout).items() if k.startswith("infercrane:gpus:")}
    assert marks.get(f"infercrane:gpus:{stack}-a", "").startswith(f"{gpu}=2 since "), marks
    keys = [r["key"] for r in old + new + b]
    with Watcher(slow_admin, keys) as w:
        r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert w.samples and w.peak_gpus <= 5, w.samples  # the endpoints' own 4 and the one extra, never more
    tags = plain_pulumi(slow, stack)("stack", "tag", "ls", "--json")
    assert not [k for k in json.loads(tags.stdout or "{}") if k.startswith("infercrane:gpus:")], tags.stdout
    for k in [f"{stack}-a0", f"{stack}-a1"]:
        assert get_or_none(slow_admin, Deployment, naming.object_name(k)) is None
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_third_release_after_a_surge_killed_while_its_replica_loads_recreates_it_and_keeps_the_floor(
    slow: Project, slow_admin: Client
) -> None:
    """Issue #64: endpoint a's surge cutover (a0,a1 -> n0,n1) is SIGKILLed once n0 is applied; n0's
    pod loads (60 s). The config moves on to a third release. n0 is down and restarts: its rolling
    update would keep the loading pod, and its GPU, until the new one serves -- and the node has no
    GPU for it (endpoint b fills the rest). The rerun recreates n0 (its Deployment deleted, then made
    again), so a0 and a1 keep serving throughout; before, it retired a1 first for that GPU, one
    replica below the floor until n0 served."""
    from infercrane.local.kwok_stages import READY_DELAY_ANNOTATION
    from tests.integration.conftest import kill_as_ci, start_cli, wait_for

    stack = "rolthird"
    gpu = "NVIDIA-H100-80GB-HBM3"  # 5 GPUs: a's 2 + b's 2 + the one extra of a's surge
    policy = {"maxUnavailable": 0, "maxSurge": 1}
    old = [rep(f"{stack}-a{i}", name=f"{stack}-a", gpu=gpu) for i in range(2)]
    b = [rep(f"{stack}-b{i}", name=f"{stack}-b", gpu=gpu) for i in range(2)]
    slow_load = {"annotations": {READY_DELAY_ANNOTATION: "60s"}}
    second = [rep(f"{stack}-n{i}", name=f"{stack}-a", gpu=gpu, pod=slow_load, image=NEW_DIGEST) for i in range(2)]
    third = [rep(f"{stack}-n{i}", name=f"{stack}-a", gpu=gpu, image="vllm/vllm-openai@sha256:" + "e" * 64) for i in range(2)]
    slow.stack(stack, old + b, rollout=policy)
    deploy(slow, stack)
    slow.stack(stack, second + b, rollout=policy)
    proc = start_cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-1")
    n0 = naming.object_name(f"{stack}-n0")
    try:
        wait_for(lambda: get_or_none(slow_admin, Deployment, n0), "n0 to be applied", timeout=240)
    finally:
        kill_as_ci(proc)
    loading = str(slow_admin.get(Deployment, n0, namespace=NS).metadata.uid)
    slow.stack(stack, third + b, rollout=policy)  # b unchanged: only a's release moves on
    planned = cli(slow, "plan", "--stack", stack, "--read-only", "--json")  # what the deploy will do, said first
    assert planned.returncode == 3, planned.stderr[-3000:]  # changes pending
    actions = {r["key"]: r["action"] for r in json.loads(planned.stdout)["replicas"]}
    assert actions[f"{stack}-n0"] == "replace", actions
    with Watcher(slow_admin, [r["key"] for r in old + second]) as w:
        r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"recreate {stack}-n0" in r.stderr, r.stderr[-3000:]
    assert w.samples and w.lowest_ready >= 2, w.samples  # a's floor: never one below it
    assert str(slow_admin.get(Deployment, n0, namespace=NS).metadata.uid) != loading  # made again, not updated
    for k in (f"{stack}-a0", f"{stack}-a1"):
        assert get_or_none(slow_admin, Deployment, naming.object_name(k)) is None
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_recorded_replica_restarted_out_of_band_then_updated_under_a_surge_is_replaced_by_pulumi(
    slow: Project, slow_admin: Client
) -> None:
    """The other path of the recreate: the state records r0 (a deploy that ended), its pod restarts
    out of band and loads (30 s), and a new release comes: r0 is down, so it is recreated -- its
    Deployment deleted by exact ownership, then Pulumi's delete-before-replace finds it gone and
    creates it (an update would fail: the object is not there). The rerun finishes, r0's Deployment
    is a new object, and the next plan is a no-op."""
    from lightkube.resources.core_v1 import Pod as PodResource

    from infercrane.local.kwok_stages import READY_DELAY_ANNOTATION

    stack = "rolrecorded"
    policy = {"maxUnavailable": 0, "maxSurge": 1}
    slow_load = {"annotations": {READY_DELAY_ANNOTATION: "30s"}}
    keys = [f"{stack}-r{i}" for i in range(2)]
    slow.stack(stack, [rep(k, pod=slow_load) for k in keys], rollout=policy)
    deploy(slow, stack)
    r0 = naming.object_name(keys[0])
    before = str(slow_admin.get(Deployment, r0, namespace=NS).metadata.uid)
    for p in slow_admin.list(PodResource, namespace=NS, labels={naming.LABEL_INSTANCE: r0}):
        slow_admin.delete(PodResource, str(p.metadata.name), namespace=NS)  # restarted out of band: it loads again
    slow.stack(stack, [rep(k, pod=slow_load, image=NEW_DIGEST) for k in keys], rollout=policy)
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"recreate {keys[0]}" in r.stderr, r.stderr[-3000:]
    assert str(slow_admin.get(Deployment, r0, namespace=NS).metadata.uid) != before  # made again, not updated
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_failed_wave_stops_with_the_reason_keeps_the_old_replicas_serving_and_a_rerun_finishes(
    slow: Project, slow_admin: Client
) -> None:
    stack = "rolfail"
    keys = [f"{stack}-r{i}" for i in range(3)]
    slow.stack(stack, [rep(k) for k in keys])
    deploy(slow, stack)
    before = live(slow_admin, keys)
    slow.stack(stack, [rep(k, gpu="NVIDIA-B200") for k in keys])  # valid, but no node carries it
    began = time.monotonic()
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolfail-1")
    took = time.monotonic() - began
    assert r.returncode == 1
    assert "the rollout stopped for 1 of 1 endpoint(s)." in r.stderr, r.stderr[-3000:]
    assert "endpoint rev stopped at wave 1/3: " in r.stderr, r.stderr[-3000:]
    assert f"replica {keys[0]} (" in r.stderr and "FailedScheduling" in r.stderr, r.stderr[-3000:]
    assert took < 60 + 60 + 60, took  # budget + margin + the engine's own time
    # The first wave's replica is down (its pod cannot be placed); the others still serve, untouched.
    assert live(slow_admin, keys[1:]) == {k: before[k] for k in keys[1:]}
    for k in keys[1:]:
        assert slow_admin.get(Deployment, naming.object_name(k), namespace=NS).status.availableReplicas == 1
    # The broken replica carries the controller's timeout; it stays on the Deployment after the fix is
    # applied until the fixed rollout progresses, and must not fail the fix (seen in CI: failed in 6 s).
    # The controller sets it on its own clock: waited for (in CI on 2 cores it was once not there yet
    # when the failed deploy had ended), so that the fix below always meets it.
    from tests.integration.conftest import wait_for

    def timed_out() -> bool:
        broken = slow_admin.get(Deployment, naming.object_name(keys[0]), namespace=NS)
        return any(c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded" for c in broken.status.conditions or [])

    wait_for(
        timed_out, f"the controller's ProgressDeadlineExceeded on {keys[0]} (the deploy said: {r.stderr[-1500:]})", timeout=120
    )

    slow.stack(stack, [rep(k, gpu="NVIDIA-L40S") for k in keys])  # the fix: a product the nodes carry
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolfail-2", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    (e,) = json.loads(r.stdout)["rollout"]["endpoints"]
    # The broken replica is repaired at once (it serves nothing: no wave); the serving ones roll one
    # wave each. (A replica the plane's node lease marks unready under load counts as not serving,
    # so the count of waves is at most 2, not always 2.)
    assert 1 <= len(e["waves"]) <= 2 and all(len(w["up"]) == 1 and keys[0] not in w["up"] for w in e["waves"]), e
    for k in keys:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.nodeSelector["nvidia.com/gpu.product"] == "NVIDIA-L40S"
        assert dep.status.availableReplicas == 1
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_an_endpoint_whose_wave_cannot_become_ready_stops_alone_while_the_others_roll_to_the_end(
    slow: Project, slow_admin: Client
) -> None:
    """Two endpoints roll in one deploy; one's first wave cannot be placed (a valid product no node
    carries). The other rolls every wave to the end meanwhile; the command names the stopped
    endpoint, where and why, and exits 1; the stopped endpoint's replicas the rollout had not
    reached still serve, untouched; no deploy record is written; after the fix a rerun finishes."""
    stack = "rollanes"
    good = [f"{stack}-g{i}" for i in range(3)]
    bad = [f"{stack}-b{i}" for i in range(2)]
    slow.stack(stack, [rep(k, name="good") for k in good] + [rep(k, name="bad") for k in bad])
    deploy(slow, stack)
    before = live(slow_admin, good + bad)
    slow.stack(
        stack,
        [rep(k, name="good", args=["--max-model-len", "4096"]) for k in good]
        + [rep(k, name="bad", gpu="NVIDIA-B200") for k in bad],
    )
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rollanes-1")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "the rollout stopped for 1 of 2 endpoint(s); the other 1 rolled to the end." in r.stderr, r.stderr[-3000:]
    assert "endpoint bad stopped at wave 1/2: " in r.stderr and "FailedScheduling" in r.stderr, r.stderr[-3000:]
    assert "endpoint good stopped" not in r.stderr
    # The good endpoint rolled every wave: each replica restarted once, with the new args, serving.
    after = live(slow_admin, good)
    for k in good:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert "--max-model-len" in (dep.spec.template.spec.containers[0].args or []), k
        assert dep.status.availableReplicas == 1 and after[k][0] == before[k][0] and after[k][1] != before[k][1], k
    # The bad endpoint's second replica was never reached: same object, same pod, still serving.
    assert live(slow_admin, bad[1:]) == {bad[1]: before[bad[1]]}
    assert slow_admin.get(Deployment, naming.object_name(bad[1]), namespace=NS).status.availableReplicas == 1
    # No record of a deploy that did not finish: the same key applies its intent again, never replays.
    slow.stack(stack, [rep(k, name="good", args=["--max-model-len", "4096"]) for k in good] + [rep(k, name="bad") for k in bad])
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rollanes-2", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert live(slow_admin, good) == after  # finished endpoints cost nothing on the rerun
    assert all(slow_admin.get(Deployment, naming.object_name(k), namespace=NS).status.availableReplicas == 1 for k in bad)
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_an_object_that_becomes_anothers_while_the_lanes_roll_is_never_deleted_by_name_at_the_runs_end(
    slow: Project, slow_admin: Client
) -> None:
    """Pulumi deletes what a run no longer registers by name once the program returns. Endpoint
    ``cut`` replaces its key (its old objects deleted by the lane, exactly ours); endpoint ``long``
    rolls three waves meanwhile. While ``long`` rolls, someone creates a Service of their own under
    the old key's name: the run stops before Pulumi's deletions and says so; that Service stays.
    Once it is gone, the same deploy finishes."""
    stack = "rolforeign"
    longs = [f"{stack}-l{i}" for i in range(3)]
    slow.stack(stack, [rep(f"{stack}-old", name="cut")] + [rep(k, name="long") for k in longs])
    deploy(slow, stack)
    old = naming.object_name(f"{stack}-old")
    slow.stack(stack, [rep(f"{stack}-new", name="cut")] + [rep(k, name="long", args=["--max-model-len", "4096"]) for k in longs])
    planted = threading.Event()

    def plant() -> None:  # as soon as the lane has deleted the old key's Service
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and get_or_none(slow_admin, Service, old) is not None:
            time.sleep(0.05)
        foreign = Service(
            metadata=ObjectMeta(name=old, namespace=NS, labels={"team": "someone-else"}),
            spec=ServiceSpec(ports=[ServicePort(port=8000)], selector={"app": "someone-else"}),
        )
        slow_admin.create(foreign)
        planted.set()

    planter = threading.Thread(target=plant, daemon=True)
    planter.start()
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolforeign-1")
    planter.join(timeout=70)
    assert planted.is_set(), "the old key's Service was never deleted by its lane"
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    assert "every endpoint rolled and is ready, but the run stopped before Pulumi's deletions" in r.stderr, r.stderr[-3000:]
    assert f"Service {NS}/{old} (recorded for key '{stack}-old', which leaves) is no longer this stack's" in r.stderr
    assert "fix: InferCrane never deletes another's object: rename or delete it yourself" in r.stderr
    kept = slow_admin.get(Service, old, namespace=NS)
    assert (kept.metadata.labels or {}).get("team") == "someone-else"
    slow_admin.delete(Service, old, namespace=NS)
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolforeign-2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert gone(slow_admin, [f"{stack}-old"])
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


class SeatHolder:
    """Keeps the one request a zero-seat APF priority level admits busy, so that level rejects
    every other request (429): a validating webhook (HTTPS on loopback, the plane's webhook
    certificate) that holds each dry-run create of a labelled Service until told to stop, and a
    thread that sends the next as soon as one returns. API Priority and Fairness admits a request
    to a level with no seats only when none of its requests is executing."""

    LABEL: ClassVar[dict[str, str]] = {"it-apf-hold": "true"}

    def __init__(self, plane: Plane, admin: Client) -> None:
        import http.server
        import ssl

        self.admin, self.stop = admin, threading.Event()
        stop = self.stop

        class Hold(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stop.wait(20)
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": review["request"]["uid"], "allowed": True},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(plane.pki_dir / "kserve-webhook.crt", plane.pki_dir / "kserve-webhook.key")
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hold)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.ca = base64.b64encode((plane.pki_dir / "ca.crt").read_bytes()).decode()
        self.deployer = Client(  # a held request answers after up to 20 s
            KubeConfig.from_file(plane.kubeconfig).get(context_name="infercrane-local"), timeout=httpx2.Timeout(60.0)
        )
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True)]
        self.threads.append(threading.Thread(target=self._occupy, daemon=True))
        self.errors: list[str] = []

    def _occupy(self) -> None:
        from lightkube import codecs

        held = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "it-apf-hold", "namespace": NS, "labels": self.LABEL},
            "spec": {"ports": [{"port": 80}]},
        }
        while not self.stop.is_set():
            try:
                self.deployer.create(codecs.from_dict(held), dry_run=True)
            except ApiError as exc:  # 429: a request of the wait got the seat first; ask again at once
                if exc.status.code != 429:
                    self.errors.append(str(exc))
                    time.sleep(0.1)
            except httpx2.HTTPStatusError as exc:  # the same 429 with a body that is no Status (APF's plain text)
                if exc.response.status_code != 429:
                    self.errors.append(repr(exc))
                    time.sleep(0.1)
            except Exception as exc:  # noqa: BLE001 - reported by the test, never a dead thread
                self.errors.append(repr(exc))
                time.sleep(0.1)

    def webhook(self) -> dict[str, Any]:
        port = self.server.server_address[1]
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "it-apf-hold"},
            "webhooks": [
                {
                    "name": "hold.it-apf.infercrane.dev",
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/hold", "caBundle": self.ca},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["services"],
                            "scope": "Namespaced",
                        }
                    ],
                    "objectSelector": {"matchLabels": self.LABEL},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 25,
                    "failurePolicy": "Ignore",
                }
            ],
        }

    def __enter__(self) -> SeatHolder:
        from lightkube import codecs

        self.threads[0].start()
        self.admin.create(codecs.from_dict(self.webhook()))
        return self

    def throttle(self) -> None:
        """From now on every LIST of Deployments by the deploying identity in NS is rejected."""
        from lightkube import codecs
        from lightkube.resources.flowcontrol_apiserver_v1 import FlowSchema

        self.admin.create(codecs.from_dict(APF_LEVEL))
        self.admin.create(codecs.from_dict(APF_SCHEMA))
        deadline = time.monotonic() + 30
        while not any(  # the API server's flow control has taken the schema in (its status written)
            c.type == "Dangling" and c.status == "False"
            for c in self.admin.get(FlowSchema, APF_SCHEMA["metadata"]["name"]).status.conditions or []
        ):
            assert time.monotonic() < deadline, "API Priority and Fairness never took the FlowSchema in"
            time.sleep(0.05)
        self.threads[1].start()

    def __exit__(self, *exc: object) -> None:
        from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
        from lightkube.resources.flowcontrol_apiserver_v1 import FlowSchema, PriorityLevelConfiguration

        self.stop.set()
        for kind, name in (
            (FlowSchema, APF_SCHEMA["metadata"]["name"]),
            (PriorityLevelConfiguration, APF_LEVEL["metadata"]["name"]),
            (ValidatingWebhookConfiguration, "it-apf-hold"),
        ):
            try:
                self.admin.delete(kind, name)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
        if self.threads[1].is_alive() or self.threads[1].ident:
            self.threads[1].join(30)
        self.server.shutdown()
        self.server.server_close()


APF_LEVEL: Final[dict[str, Any]] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "it-no-seats"},
    "spec": {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": 0,
            "lendablePercent": 0,
            "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"},
        },
    },
}
APF_SCHEMA: Final[dict[str, Any]] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "FlowSchema",
    "metadata": {"name": "it-throttle-deployer"},
    "spec": {
        "priorityLevelConfiguration": {"name": "it-no-seats"},
        "matchingPrecedence": 50,
        "rules": [
            {
                "subjects": [{"kind": "User", "user": {"name": DEPLOYER_USER}}],
                "resourceRules": [
                    {"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments"], "namespaces": [NS]},
                    {"verbs": ["create"], "apiGroups": [""], "resources": ["services"], "namespaces": [NS]},
                ],
            }
        ],
    },
}


def test_a_wait_whose_every_list_api_priority_and_fairness_rejects_ends_within_the_grace_and_a_rerun_converges(
    slow: Project, slow_plane: Plane, slow_admin: Client
) -> None:
    """Throttled, not lost: once the replica is applied (its pod Pending: its node cordoned), API
    Priority and Fairness rejects every LIST of Deployments by the deploying identity (429). The
    wait asks again each tick and gives up after the 30 s grace -- long before the replica's
    budget -- naming the answer; with the throttle lifted and the node back, the same command
    converges."""
    from lightkube.resources.core_v1 import Node

    from infercrane.live.status.readiness import API_GRACE_SECONDS
    from tests.integration.conftest import start_cli

    stack = "rolapf"
    key = f"{stack}-r0"
    name = naming.object_name(key)
    slow.stack(stack, [rep(key, startupBudgetSeconds=300)])
    node = "kwok-a100-0"
    slow_admin.patch(Node, node, {"spec": {"unschedulable": True}})
    try:
        with SeatHolder(slow_plane, slow_admin) as holder:
            proc = start_cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolapf-1", capture=True)
            try:
                deadline = time.monotonic() + 120
                while get_or_none(slow_admin, Deployment, name) is None:
                    assert proc.poll() is None and time.monotonic() < deadline, "the deploy never applied its Deployment"
                    time.sleep(0.1)
                holder.throttle()
                began = time.monotonic()
                _, err = proc.communicate(timeout=300)
                took = time.monotonic() - began
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, 9)
        assert not holder.errors, holder.errors[:3]
    finally:
        slow_admin.patch(Node, node, {"spec": {"unschedulable": None}})
    assert proc.returncode == 1, err[-3000:]
    assert "(HTTP 429)" in err and f"(for {API_GRACE_SECONDS:.0f} s while waiting for readiness)" in err, err[-3000:]
    assert took < API_GRACE_SECONDS + 30, took  # the grace ended it, not the replica's 300 s budget
    r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", "rolapf-1", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert slow_admin.get(Deployment, name, namespace=NS).status.availableReplicas == 1
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


@IN_PLACE_OR_SURGE
def test_retrying_a_failed_rollout_never_takes_another_serving_replica_down_and_finishes_after_the_fix(
    slow: Project, slow_admin: Client, gpu: str, rollout: dict[str, int] | None, floor: int
) -> None:
    """The retry drill: r0's new intent cannot start; the deploy is run three times, as a CI retry
    would. A replica that is not serving already counts against the policy: no attempt takes a
    second one down (in place) or starts a second surge, and each names the replica and why."""
    stack = "rolretry" + ("surge" if rollout else "inplace")
    keys = [f"{stack}-r{i}" for i in range(4)]
    target = {"rollout": rollout} if rollout else {}
    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target)
    deploy(slow, stack)
    broken = [rep(keys[0], gpu="NVIDIA-B200")] + [rep(k, gpu=gpu) for k in keys[1:]]  # no node carries B200
    slow.stack(stack, broken, **target, imageDigest=NEW_DIGEST)
    with Watcher(slow_admin, keys) as w:
        for attempt in range(3):
            r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-{attempt}")
            assert r.returncode == 1, r.stderr[-3000:]
            assert f"replica {keys[0]} (" in r.stderr and "FailedScheduling" in r.stderr, (
                f"attempt {attempt}:\n{r.stderr[-3000:]}"
            )
            assert "old replicas that its rollout had not reached keep serving" in r.stderr, r.stderr[-3000:]
            if attempt:  # in place its pod is gone; with a surge its old pod still serves beside the Pending one
                first = "bring back " if not rollout else "let "
                assert first + keys[0] in r.stderr, r.stderr[-3000:]
    assert w.samples and w.lowest_ready >= floor, w.samples
    assert max(w.pods) <= 4 + (1 if rollout else 0), w.pods  # never a second surge
    for k in keys[1:]:  # never reached: the old intent, serving
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.containers[0].image == DIGEST and dep.status.availableReplicas == 1

    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target, imageDigest=NEW_DIGEST)  # the fix
    plan = cli(slow, "plan", "--stack", stack)
    assert plan.returncode == 3 and f"lowest ready {floor}" in plan.stdout, plan.stdout
    with Watcher(slow_admin, keys) as w:
        r = cli(slow, "deploy", "--stack", stack, "--json")
        assert r.returncode == 0, r.stderr[-3000:]
    assert w.lowest_ready == floor, w.samples  # what the plan said, no lower
    assert max(w.pods) <= 4 + (1 if rollout else 0), w.pods
    for k in keys:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.containers[0].image == NEW_DIGEST and dep.status.availableReplicas == 1
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


@IN_PLACE_OR_SURGE
def test_a_deploy_killed_while_a_waves_replica_loads_is_rerun_without_taking_another_replica_down(
    slow: Project, slow_admin: Client, gpu: str, rollout: dict[str, int] | None, floor: int
) -> None:
    """A CI job killed mid-wave: the replica it had just rolled is still loading. The rerun (same
    key) counts that replica against the policy -- it waits for it before the next wave, never
    taking a second one down in place nor starting a second surge -- and finishes."""
    from tests.integration.conftest import kill_as_ci, start_cli

    stack = "rolkill" + ("surge" if rollout else "inplace")
    keys = [f"{stack}-r{i}" for i in range(4)]
    target = {"rollout": rollout} if rollout else {}
    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target)
    deploy(slow, stack)
    slow.stack(stack, [rep(k, gpu=gpu) for k in keys], **target, imageDigest=NEW_DIGEST)

    def rolled() -> list[str]:
        return [
            k
            for k in keys
            if slow_admin.get(Deployment, naming.object_name(k), namespace=NS).spec.template.spec.containers[0].image
            == NEW_DIGEST
        ]

    with Watcher(slow_admin, keys) as w:
        proc = start_cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-1")
        try:
            deadline = time.monotonic() + 120
            while not rolled():  # the first wave's replica is applied: its new pod loads (3 s)
                assert proc.poll() is None and time.monotonic() < deadline, "the deploy never rolled a replica"
                time.sleep(0.1)
        finally:
            kill_as_ci(proc)
        loading = rolled()
        r = cli(slow, "deploy", "--stack", stack, "--idempotency-key", f"{stack}-1", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
    assert len(loading) == 1, loading  # killed inside the first wave
    # the rerun plans within the 3 s its pod loads (the window this tests): in place it saw it down,
    # with a surge its old pod still serving beside the loading one
    first = (
        f"let {loading[0]} settle first (available, its own rollout under way: the waves wait for it)"
        if rollout
        else f"bring back {loading[0]} first (not available: the waves wait for it)"
    )
    assert first in r.stderr, r.stderr[-3000:]
    assert w.samples and w.lowest_ready >= floor, w.samples
    assert max(w.pods) <= 4 + (1 if rollout else 0), w.pods  # never a second surge
    for k in keys:
        dep = slow_admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.spec.template.spec.containers[0].image == NEW_DIGEST and dep.status.availableReplicas == 1
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_kserve_rollout_after_an_out_of_band_predictor_restart_waits_for_the_new_pods(
    slow: Project, slow_admin: Client
) -> None:
    """KServe copies the predictor Deployment's observedGeneration into the InferenceService: after
    `kubectl rollout restart` of the predictors it runs ahead of the next generation, and a stale
    Ready=True must not pass a wave while its new pod still loads."""
    from lightkube.types import PatchType

    stack = "rolkserve"
    keys = [f"{stack}-r0", f"{stack}-r1"]
    slow.stack(stack, [rep(k) for k in keys], workloadApi="kserve")
    deploy(slow, stack)
    predictors = [naming.object_name(k) + "-predictor" for k in keys]
    for round_ in range(2):  # twice: the predictors' generation runs two ahead of the InferenceServices'
        for p in predictors:
            restarted = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": f"r{round_}"}}}}}
            slow_admin.patch(Deployment, p, restarted, namespace=NS, patch_type=PatchType.MERGE)
        for p in predictors:
            wait_ready = lambda p=p: (  # noqa: E731
                (d := slow_admin.get(Deployment, p, namespace=NS)).status.observedGeneration == d.metadata.generation
                and d.status.updatedReplicas == d.status.availableReplicas == 1
                and (d.status.replicas or 0) == 1
            )
            deadline = time.monotonic() + 60
            while not wait_ready() and time.monotonic() < deadline:
                time.sleep(0.5)
    slow.stack(stack, [rep(k) for k in keys], workloadApi="kserve", imageDigest=NEW_DIGEST)
    with Watcher(slow_admin, keys) as w:
        deploy(slow, stack)
        returned = [slow_admin.get(Deployment, p, namespace=NS) for p in predictors]
    for d in returned:  # when deploy returned, every predictor ran the new pods, ready
        assert d.spec.template.spec.containers[0].image == NEW_DIGEST
        assert (d.status.updatedReplicas, d.status.availableReplicas, d.status.replicas) == (1, 1, 1), d.status
    assert w.lowest_ready >= 1, w.samples  # never both replicas down
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def switch_two_replicas(project: Project, stack: str, keys: list[str], peak: str = "peak 2 (0 extra)", **target: Any) -> None:
    """Deploy one endpoint of two one-GPU replicas, then change ``target`` so that each moves:
    plan shows two waves in place, never below one ready, never an extra GPU (``peak``: the plan's
    words for the peak, per pool when the move changes the GPUs' pool)."""
    project.stack(stack, [rep(k) for k in keys])
    deploy(project, stack)
    project.stack(stack, [rep(k) for k in keys], **target)
    plan = cli(project, "plan", "--stack", stack)
    assert plan.returncode == 3, plan.stderr[-2000:]
    assert "2 wave(s) in place" in plan.stdout and f"lowest ready 1; GPUs 2 -> 2, {peak}" in plan.stdout, plan.stdout


def roll_two_in_waves(
    project: Project, admin: Client, stack: str, keys: list[str], namespace: str = NS, planned_peak: int = 2
) -> Watcher:
    """Deploy the switch of :func:`switch_two_replicas` under a watcher: two waves, one ready at
    the lowest, two GPUs at the peak -- by the deploy's own account (``planned_peak``: summed over
    the pools a move spans) and as the watcher counts the GPUs held."""
    with Watcher(admin, keys, namespace=namespace) as w:
        doc = deploy(project, stack)
    (e,) = doc["rollout"]["endpoints"]
    assert (len(e["waves"]), e["lowestReady"], e["peakGpus"]) == (2, 1, planned_peak), e
    assert w.lowest_ready >= 1 and w.peak_gpus <= 2, w.samples
    return w


def test_a_workload_api_switch_moves_each_replica_in_waves_within_its_policy(slow: Project, slow_admin: Client) -> None:
    """Deployment -> InferenceService: in place, each key's old form goes before its new form
    starts -- never more GPUs than the endpoint holds, never more than maxUnavailable down; plain
    `pulumi up` refuses the switch it would do at once."""
    from infercrane.live.client.cluster import InferenceService
    from tests.integration.conftest import plain_pulumi

    stack = "rolmove"
    keys = [f"{stack}-r{i}" for i in range(2)]
    switch_two_replicas(slow, stack, keys, workloadApi="kserve")
    r = plain_pulumi(slow, stack)("up", "--yes", "--skip-preview")
    assert r.returncode != 0 and "2 replica(s) would move to the new workload API together" in r.stdout + r.stderr, (
        r.stdout[-2000:] + r.stderr[-2000:]
    )
    roll_two_in_waves(slow, slow_admin, stack, keys)
    for k in keys:
        assert get_or_none(slow_admin, InferenceService, naming.object_name(k)) is not None
        assert get_or_none(slow_admin, Service, naming.object_name(k)) is None  # the old form's Service went too
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


@pytest.mark.qualification
def test_a_switch_from_label_to_dra_rolls_each_replica_in_waves_within_its_policy(slow: Project, slow_admin: Client) -> None:
    """gpuAllocation label -> dra is an intent change like any other: in place, each replica's pod
    goes before its successor claims a device (never more GPUs than the endpoint holds, never more
    than maxUnavailable down); plan shows the waves first."""
    from lightkube.resources.resource_v1 import ResourceClaimTemplate

    stack = "roldra"
    keys = [f"{stack}-r{i}" for i in range(2)]
    # A move between two pools: the device plugin's A100s and the DRA node's A100 devices, each counted.
    pools = "peak 4 (0 extra); per product NVIDIA-A100-SXM4-80GB 2, NVIDIA-A100-SXM4-80GB (DRA) 2"
    switch_two_replicas(slow, stack, keys, peak=pools, gpuAllocation="dra")
    w = roll_two_in_waves(slow, slow_admin, stack, keys, planned_peak=4)
    assert max(g for _, g in w.samples[-3:]) == 2, "both replicas hold a claimed device at the end"
    for k in keys:
        name = naming.object_name(k)
        assert get_or_none(slow_admin, ResourceClaimTemplate, name) is not None
        (pod,) = slow_admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name})
        assert pod.spec.nodeName == "kwok-dra-a100-0", "its device is on the DRA node"
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0
    assert all(get_or_none(slow_admin, ResourceClaimTemplate, naming.object_name(k)) is None for k in keys)


def test_a_namespace_switch_moves_each_replica_in_waves_within_its_policy(slow: Project, slow_admin: Client) -> None:
    """The state records the replicas in the old namespace; the rollout counts them there: in
    place, each key's old objects go before its new ones start in the new namespace."""
    from lightkube import ALL_NS

    from tests.integration.test_promotion import bootstrap_namespace

    bootstrap_namespace(slow_admin, "it-moved")
    stack = "rolns"
    keys = [f"{stack}-r{i}" for i in range(2)]
    switch_two_replicas(slow, stack, keys, namespace="it-moved")
    roll_two_in_waves(slow, slow_admin, stack, keys, namespace=ALL_NS)
    for k in keys:
        assert slow_admin.get(Deployment, naming.object_name(k), namespace="it-moved").status.availableReplicas == 1
    assert gone(slow_admin, keys)  # nothing left in the old namespace
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_a_cutover_after_lost_state_on_a_full_node_deletes_each_old_key_before_its_successor_needs_the_gpus(
    slow: Project, slow_admin: Client
) -> None:
    """The state is gone; the old keys run, unknown to Pulumi, on a node with no free GPU. Each
    stage deletes the old key it planned to (by exact ownership), so each new key finds its GPU."""
    stack = "rollost"
    old = [f"{stack}-a{i}" for i in range(4)]
    new = [f"{stack}-b{i}" for i in range(4)]
    slow.stack(stack, [rep(k, gpu="NVIDIA-L40S") for k in old])  # 4 one-GPU replicas: the L40S node is full
    deploy(slow, stack)
    shutil.rmtree(slow.root / ".infercrane" / "pulumi-state")
    slow.stack(stack, [rep(k, gpu="NVIDIA-L40S") for k in new])
    with Watcher(slow_admin, old + new) as w:
        r = cli(slow, "deploy", "--stack", stack, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "(not in the state) as the rollout planned" in r.stderr, r.stderr[-3000:]
    assert w.lowest_ready >= 3 and w.peak_gpus <= 4, w.samples
    assert gone(slow_admin, old)
    assert all(slow_admin.get(Deployment, naming.object_name(k), namespace=NS).status.availableReplicas == 1 for k in new)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def slot_scheme_release(tmp: Path) -> Path:
    """The package and its tool pins as the slot scheme's release had them (git archive of that
    commit; the same pins, so the same cached tools)."""
    out = tmp / "slot-release"
    out.mkdir()
    archive = tmp / "slot-release.tar"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), SLOT_SCHEME_COMMIT, "infercrane", "tools"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"the migration test needs the history of main (commit {SLOT_SCHEME_COMMIT}): {done.stderr}"
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    return out


def deploy_with_slot_scheme_release(project: Project, stack: str, tmp: Path) -> None:
    """``infercrane deploy`` of the slot scheme's release. Its ``TMPDIR`` is the test's own: that
    release predates the run's own temporary directory, and its provider leaves a kubeconfig copy
    there (docs/faults.md, "What a run leaves on the machine")."""
    release = slot_scheme_release(tmp)
    scratch = tmp / "slot-release-tmp"
    scratch.mkdir(mode=0o700)
    env = dict(os.environ) | {"INFERCRANE_PROJECT_DIR": str(project.root), "PYTHONPATH": str(release), "TMPDIR": str(scratch)}
    old = subprocess.run(
        [sys.executable, "-m", "infercrane", "deploy", "--stack", stack],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert old.returncode == 0, old.stderr[-3000:]


def test_a_stack_deployed_under_slot_names_moves_to_key_identity_without_a_replacement_even_reordered(
    slow: Project, slow_admin: Client, tmp_path: Path
) -> None:
    stack = "rolmigrate"
    keys = [f"{stack}-r0", f"{stack}-r1", f"{stack}-r2"]
    slow.stack(stack, [rep(k) for k in keys])
    deploy_with_slot_scheme_release(slow, stack, tmp_path)
    assert not hardened(slow_admin, keys[0])
    before = unhardened(slow_admin, keys)
    # The first deploy of this release, with the list reordered at the same time: every object kept.
    slow.stack(stack, [rep(k) for k in (keys[2], keys[0], keys[1])])
    doc = deploy(slow, stack)
    assert {a["action"] for a in doc["replicas"]} <= {"same", "update"}, doc["replicas"]
    assert unhardened(slow_admin, keys) == before  # same objects; the pods changed by the hardening only
    assert all(hardened(slow_admin, k) for k in keys)
    dep = slow_admin.get(Deployment, naming.object_name(keys[0]), namespace=NS)
    assert dep.metadata.labels[naming.LABEL_ENDPOINT] == "rev"  # the metadata-only update
    assert_no_op_plan(slow, stack)
    exported = slow.stack(stack, [rep(k) for k in (keys[2], keys[0], keys[1])]).export()
    components = sorted(r["urn"].rsplit("::", 1)[1] for r in exported["resources"] if r["type"] == "infercrane:index:Replica")
    assert components == sorted(naming.object_name(k) for k in keys)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_plain_pulumi_up_on_a_stack_still_named_by_slot_keeps_each_kept_keys_objects_when_one_leaves(
    slow: Project, slow_admin: Client, tmp_path: Path
) -> None:
    """The slot names come from the stack's state, never from the current config: removing r0 of
    [r0, r1] under plain `pulumi up` gives r1 its own slot's alias (rev-1), not r0's (rev-0)."""
    from tests.integration.conftest import plain_pulumi

    stack = "rolslotplain"
    keys = [f"{stack}-r0", f"{stack}-r1"]
    slow.stack(stack, [rep(k) for k in keys])
    deploy_with_slot_scheme_release(slow, stack, tmp_path)
    kept = unhardened(slow_admin, keys[1:])
    slow.stack(stack, [rep(keys[1])])
    r = plain_pulumi(slow, stack)("up", "--yes", "--skip-preview")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert unhardened(slow_admin, keys[1:]) == kept  # same Deployment, same pod but for the hardening
    assert gone(slow_admin, keys[:1])
    assert_no_op_plan(slow, stack)
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_plain_pulumi_up_refuses_a_change_that_needs_waves_and_applies_nothing(slow: Project, slow_admin: Client) -> None:
    from tests.integration.conftest import plain_pulumi

    stack = "rolplain"
    keys = [f"{stack}-r0", f"{stack}-r1"]
    slow.stack(stack, [rep(k) for k in keys])
    deploy(slow, stack)
    before = {k: slow_admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.generation for k in keys}
    slow.stack(stack, [rep(k) for k in keys], imageDigest=NEW_DIGEST)
    pulumi = plain_pulumi(slow, stack)
    r = pulumi("up", "--yes", "--skip-preview")
    text = r.stdout + r.stderr
    assert r.returncode != 0, text[-2000:]
    assert "this change must roll in waves, which one `pulumi up` cannot do; nothing was applied" in text, text[-3000:]
    assert "2 available replica(s) would restart together" in text
    assert f"run `infercrane deploy --stack {stack}`" in text
    after = {k: slow_admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.generation for k in keys}
    assert after == before
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_plain_pulumi_up_refuses_surges_that_would_borrow_more_than_max_extra_gpus_at_once(
    slow: Project, slow_admin: Client
) -> None:
    # Each endpoint's change is one surge wave (one plain `pulumi up` may do it); two at once
    # borrow 2 GPUs, and the ledger lends 1: only `infercrane deploy` can make them take turns.
    from tests.integration.conftest import plain_pulumi

    stack = "rolplainledger"
    keys = [f"{stack}-a0", f"{stack}-b0"]
    policy = {"maxUnavailable": 0, "maxSurge": 1, "maxExtraGpus": 1}
    replicas = [rep(k, name=f"{stack}-{k[-2]}") for k in keys]
    slow.stack(stack, replicas, rollout=policy)
    deploy(slow, stack)
    before = {k: slow_admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.generation for k in keys}
    slow.stack(stack, replicas, rollout=policy, imageDigest=NEW_DIGEST)
    r = plain_pulumi(slow, stack)("up", "--yes", "--skip-preview")
    text = r.stdout + r.stderr
    assert r.returncode != 0, text[-2000:]
    assert "this change must roll in waves, which one `pulumi up` cannot do; nothing was applied" in text, text[-3000:]
    assert (
        "the endpoints' surges would borrow 2 GPU(s) of NVIDIA-A100-SXM4-80GB at once; rollout.maxExtraGpus 1 lends "
        "them in turns" in text
    ), text[-3000:]
    after = {k: slow_admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.generation for k in keys}
    assert after == before
    assert cli(slow, "destroy", "--stack", stack).returncode == 0


def test_plan_model_on_a_deployed_stack_with_a_relative_kubeconfig_shows_one_create_and_leaves_the_file(
    slow: Project, slow_admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = "rolmodel"
    local = slow.root / ".infercrane" / "local"
    local.mkdir(parents=True)
    shutil.copy(slow.plane.kubeconfig, local / "kubeconfig")
    monkeypatch.delenv("INFERCRANE_KUBERNETES_KUBECONFIG")
    slow.stack(stack, [rep(f"{stack}-r0"), rep(f"{stack}-r1")], kubeconfig=".infercrane/local/kubeconfig")
    deploy(slow, stack)
    path = slow.root / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    r = cli(
        slow,
        "plan",
        "Qwen/Qwen3-8B",
        "--name",
        "qwen-kubernetes",
        "--cloud",
        "kubernetes",
        "--gpu",
        "NVIDIA-A100-SXM4-80GB",
        "--stack",
        stack,
        "--json",
    )
    assert r.returncode == 3, r.stderr[-3000:]
    actions = {a["key"]: a["action"] for a in json.loads(r.stdout)["replicas"]}
    assert actions == {f"{stack}-r0": "same", f"{stack}-r1": "same", "qwen-kubernetes-r0": "create"}
    assert path.read_text() == text
    assert get_or_none(slow_admin, Deployment, naming.object_name("qwen-kubernetes-r0")) is None
    assert cli(slow, "destroy", "--stack", stack).returncode == 0
