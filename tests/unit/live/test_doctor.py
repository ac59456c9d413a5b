"""What doctor says of a stack's own settings, without a cluster: the worker key SGLang exposes."""

from __future__ import annotations

from typing import Any

from infercrane.core.model.config import InferCraneConfig
from infercrane.live import image_volumes
from infercrane.live.client import failures
from infercrane.live.doctor import FAIL, PASS, UNVERIFIABLE, WARN, sglang_key
from infercrane.live.doctor.capacity import image_volumes_check

SGLANG = "lmsysorg/sglang@sha256:" + "b" * 64


def config(*engines: str) -> InferCraneConfig:
    replicas: list[dict[str, Any]] = [
        {"key": f"r{i}", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S", "engine": engine}
        | ({"image": SGLANG} if engine == "sglang" else {})
        for i, engine in enumerate(engines)
    ]
    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
    return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})


def test_doctor_warns_that_an_sglang_replicas_worker_key_is_in_its_command_line_on_the_node() -> None:
    check = sglang_key(config("vllm", "sglang", "sglang"))
    assert check is not None and check.status == WARN
    assert check.detail.startswith("2 replica(s) run SGLang (r1, r2), which takes the worker key only as --api-key")
    assert "readable by every user of that node (/proc/<pid>/cmdline, ps)" in check.detail
    assert "hidepid=2" in check.hint and "vLLM" in check.hint


def test_doctor_says_nothing_of_the_key_when_every_replica_runs_vllm() -> None:
    assert sglang_key(config("vllm", "vllm")) is None


MODEL = "oci://registry.example/models/m@sha256:" + "c" * 64


class Cluster:
    """A Live that answers /version and a LIST of nodes (or refuses it)."""

    def __init__(self, server: str, nodes: list[dict[str, Any]] | Exception) -> None:
        self.server, self.nodes = server, nodes

    def raw_get(self, path: str) -> dict[str, Any]:
        return {"gitVersion": self.server}

    def list(self, res: Any, **_: Any) -> list[dict[str, Any]]:
        if isinstance(self.nodes, Exception):
            raise self.nodes
        return self.nodes


def gpu_node(name: str, kubelet: str, runtime: str, product: str = "NVIDIA-L40S") -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": runtime}},
    }


def with_model_image() -> InferCraneConfig:
    c = config("vllm", "vllm")
    return c.model_copy(update={"replicas": (c.replicas[0].model_copy(update={"model_image": MODEL}), c.replicas[1])})


def test_doctor_checks_image_volumes_only_where_a_replica_mounts_a_model_image_and_names_each_node_that_cannot() -> None:
    c = with_model_image()
    assert image_volumes.uses(config("vllm")) == [] and image_volumes.uses(c) == ["r0"]
    nodes = [
        gpu_node("gpu-a", "v1.36.3", "containerd://2.4.2"),
        gpu_node("gpu-b", "v1.36.3", "containerd://1.7.28"),
        gpu_node("gpu-c", "v1.34.4", "cri-o://1.34.0"),
        gpu_node("cpu-0", "v1.30.0", "docker://24.0.0", product="none"),  # not of the replicas' GPUs: not asked
    ]
    found = image_volumes_check(Cluster("v1.36.3", nodes), c)  # type: ignore[arg-type]
    assert found.status == FAIL and found.detail.startswith("1 replica(s) mount a model image; node gpu-b: containerd://1.7.28")
    assert "image volumes need containerd 2.1 or later" in found.detail and "node gpu-c: kubelet v1.34.4" in found.detail
    assert "cpu-0" not in found.detail
    good = image_volumes_check(Cluster("v1.36.3", nodes[:1]), c)  # type: ignore[arg-type]
    assert good.status == PASS and "the 1 node(s) of their GPU products run a kubelet and runtime that mount them" in good.detail
    beta = image_volumes_check(Cluster("v1.34.4", nodes[:1]), c)  # type: ignore[arg-type]
    assert beta.status == WARN and "--feature-gates=ImageVolume=true" in beta.detail
    assert image_volumes_check(Cluster("v1.32.0", nodes[:1]), c).status == FAIL  # type: ignore[arg-type]
    unread = image_volumes_check(Cluster("v1.36.3", failures.Forbidden("list nodes")), c)  # type: ignore[arg-type]
    assert unread.status == UNVERIFIABLE and image_volumes.NODE_READER in unread.hint


def test_doctor_counts_no_gpu_of_a_cordoned_node_as_allocatable_and_says_how_many_it_holds() -> None:
    """A cordoned node takes no new pod: two replicas of one GPU each, 3 GPUs on a node that takes
    pods and 3 on a cordoned one, fit; four would not, whatever the cordoned node holds."""
    from infercrane.live.doctor.capacity import gpu_capacity

    def node(name: str, cordoned: bool) -> dict[str, Any]:
        n = gpu_node(name, "v1.36.3", "containerd://2.4.2")
        return n | {"spec": {"unschedulable": True} if cordoned else {}, "status": {"allocatable": {"nvidia.com/gpu": "3"}}}

    nodes = [node("gpu-a", False), node("gpu-b", True)]
    fits = gpu_capacity(Cluster("v1.36.3", nodes), config("vllm", "vllm"))  # type: ignore[arg-type]
    assert (fits.status, fits.detail) == (PASS, "NVIDIA-L40S: 2 requested / 3 allocatable (3 more on cordoned nodes)")
    short = gpu_capacity(Cluster("v1.36.3", nodes), config(*["vllm"] * 4))  # type: ignore[arg-type]
    assert (short.status, short.detail) == (WARN, "NVIDIA-L40S: 4 requested / 3 allocatable (3 more on cordoned nodes)")
    assert short.hint == "pods for the short GPU values will stay Pending: add nodes, uncordon a node or lower gpuCount"
    uncordoned = gpu_capacity(Cluster("v1.36.3", [node("gpu-a", False), node("gpu-b", False)]), config(*["vllm"] * 4))  # type: ignore[arg-type]
    assert (uncordoned.status, uncordoned.detail) == (PASS, "NVIDIA-L40S: 4 requested / 6 allocatable")
