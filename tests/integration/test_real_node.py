"""The local plane's real node: a kubelet on containerd and runc runs the pods InferCrane renders,
the engine double (a test double of the engines' interfaces, never an engine) in them, by the
exact digest the stack names. What happens inside a pod is tested here, not assumed: the worker
key reaching each engine, SGLang's argument expanded by the kubelet, the probes, a missing
Secret. Every deploy is `infercrane deploy` as the restricted identity; the admin identity only
reads the evidence (pods, their logs, the worker key) and asks each replica directly on its pod
address (the API server's proxy would strip the key)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, Pod, Secret

from infercrane.core import naming
from infercrane.local import images, node, node_files
from infercrane.local.plane import Plane
from infercrane.project.paths import code_root
from infercrane.project.tools import find_tool
from tests.integration.conftest import Project, kubectl, replica
from tests.integration.test_cli_ops import cli
from tests.workers import require_the_real_node

NS = "infercrane-system"


def double() -> str:
    """The engine double's reference, as the node imported it."""
    return images.engine_double(find_tool("engine-double")).reference


def test_the_shipped_real_node_stack_pins_the_engine_double_and_the_model_image_built_from_these_sources(
    plane: Plane,
) -> None:
    """``make demo`` deploys stacks/Pulumi.local-node.yaml onto the real node, which pulls from the
    plane's registry only the images built here: a pin left behind by a change of the double's
    sources (or of the model images) makes its pod wait for an image no registry serves."""
    require_the_real_node()
    assert node.pin_note(code_root(), plane.state) is None


def on_node(key: str, **extra: Any) -> dict[str, Any]:
    """A replica for the real node (its GPU product, the engine double's small model), found started
    within a second of its load (the startup probe every second; the double loads in seconds, not
    the minutes the default 10 s period is sized for)."""
    require_the_real_node()
    extra = {"startupProbePeriodSeconds": 1} | extra
    return replica(key, gpu=node.GPU_PRODUCT, model="Qwen/Qwen3-0.6B", name="qwen-small", **extra)


def pods_of(admin: Client, key: str) -> list[Any]:
    return list(admin.list(Pod, namespace=NS, labels=naming.selector(key)))


def ask(ip: str, path: str, key: str | None) -> tuple[int, Any]:
    """GET ``path`` of the replica at ``ip`` (port 8000), with the worker key or without."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://{ip}:8000{path}", headers=headers), timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


def worker_key(admin: Client) -> str:
    secret = admin.get(Secret, "infercrane-worker", namespace=NS)
    return base64.b64decode((secret.data or {})["api-key"]).decode()


def test_the_plane_runs_a_real_node_with_gpus_of_its_own_product(admin: Client) -> None:
    from lightkube.resources.core_v1 import Node

    n = admin.get(Node, node_files.NAME)
    labels = (n.metadata.labels if n.metadata else None) or {}
    assert labels.get("nvidia.com/gpu.product") == node.GPU_PRODUCT
    assert n.status is not None and (n.status.allocatable or {}).get("nvidia.com/gpu") == str(node.GPUS)
    assert n.status.nodeInfo is not None and n.status.nodeInfo.containerRuntimeVersion.startswith("containerd://2.")
    assert any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []), "Ready when the plane is"
    assert "nvidia.com/gpu" in [t.key for t in (n.spec.taints if n.spec else None) or []]


def test_the_worker_key_reaches_vllm_and_sglang_and_guards_their_api(project: Project, admin: Client) -> None:
    """vLLM reads VLLM_API_KEY from the Secret-backed environment; SGLang gets --api-key
    $(INFERCRANE_WORKER_API_KEY), which the kubelet expands: both answer /v1/models with the key
    and 401 without it, and serve the names InferCrane renders."""
    keys = {"vllm": "it-node-vllm", "sglang": "it-node-sglang"}
    project.stack("itnodekey", [on_node(keys["vllm"]), on_node(keys["sglang"], engine="sglang")], imageDigest=double())
    done = cli(project, "deploy", "--stack", "itnodekey")
    assert done.returncode == 0, done.stderr
    key = worker_key(admin)
    served = {}
    for engine, k in keys.items():
        (pod,) = pods_of(admin, k)
        assert pod.spec is not None and pod.spec.nodeName == node_files.NAME
        assert pod.spec.containers[0].image == double()
        ip = str(pod.status.podIP if pod.status else "")
        assert ask(ip, "/v1/models", None)[0] == 401, engine
        status, body = ask(ip, "/v1/models", key)
        assert status == 200, engine
        served[engine] = [m["id"] for m in body["data"]]
        assert ask(ip, "/v1/models", key + "x")[0] == 401, engine
    assert served == {"vllm": ["qwen-small", "Qwen/Qwen3-0.6B"], "sglang": ["qwen-small"]}
    (sglang,) = pods_of(admin, keys["sglang"])
    args = sglang.spec.containers[0].args if sglang.spec else []
    assert "$(INFERCRANE_WORKER_API_KEY)" in (args or []) and key not in json.dumps(sglang.to_dict())
    assert cli(project, "destroy", "--stack", "itnodekey").returncode == 0


def test_a_missing_hugging_face_secret_fails_the_replica_in_the_kubelets_words(project: Project, admin: Client) -> None:
    """The Secret is referenced, never read by InferCrane: the kubelet cannot make the container
    (CreateContainerConfigError) and says which Secret; the deploy fails at once with those words
    and the fix -- no wait cures it, so none is spent on it."""
    project.stack(
        "itnodehf",
        [on_node("it-node-hf", startupBudgetSeconds=60)],
        imageDigest=double(),
        huggingFaceToken={"name": "hf-token-missing", "key": "token"},
    )
    began = time.monotonic()
    done = cli(project, "deploy", "--stack", "itnodehf")
    took = time.monotonic() - began
    assert done.returncode == 1
    assert (
        'CreateContainerConfigError: the kubelet cannot create its container: Failed: Error: secret "hf-token-missing" not found'
        in done.stderr
    ), done.stderr
    assert "fix: create the Secret or ConfigMap the kubelet names" in done.stderr, done.stderr
    assert "stalled creating its container" in done.stderr, done.stderr  # its stage (issue #67)
    assert took < 60, f"failed at once, not at the end of its 60 s startup budget: {took:.0f} s"
    (pod,) = pods_of(admin, "it-node-hf")
    waiting = pod.status.containerStatuses[0].state.waiting if pod.status and pod.status.containerStatuses else None
    assert waiting is not None and waiting.reason == "CreateContainerConfigError"
    events = [e.message for e in admin.list(Event, namespace=NS) if e.involvedObject.name == pod.metadata.name]
    assert any('secret "hf-token-missing" not found' in (m or "") for m in events), events

    # The fix: the Secret is created, the same deploy again. The kubelet's Event of before still
    # lives (an hour); the rerun waits for the kubelet's next try instead of failing on it.
    secret = Secret(metadata=ObjectMeta(name="hf-token-missing", namespace=NS), stringData={"token": "not-a-real-token"})
    admin.create(secret)
    try:
        again = cli(project, "deploy", "--stack", "itnodehf")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "CreateContainerConfigError" not in again.stderr, again.stderr[-3000:]
    finally:
        assert cli(project, "destroy", "--stack", "itnodehf").returncode == 0
        admin.delete(Secret, "hf-token-missing", namespace=NS)


def test_the_engine_runs_as_the_configured_user_with_the_configured_shared_memory(project: Project, admin: Client) -> None:
    """securityContext's uid and gid are the engine's own, and /dev/shm is the size shmSize sets:
    read from what the engine double prints at its start (its pod's log, through the kubelet)."""
    identity = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    project.stack("itnodeuid", [on_node("it-node-uid", shmSize="1Gi")], imageDigest=double(), securityContext=identity)
    done = cli(project, "deploy", "--stack", "itnodeuid")
    assert done.returncode == 0, done.stderr
    (pod,) = pods_of(admin, "it-node-uid")
    first = next(iter(admin.log(pod.metadata.name, namespace=NS)))
    assert "a test double, not an engine" in first and "uid=1000 gid=1000" in first, first
    assert f"shm_bytes={1024**3}" in first, first
    assert cli(project, "destroy", "--stack", "itnodeuid").returncode == 0


def test_a_model_cache_claim_is_mounted_read_only_and_the_engine_finds_its_snapshot_or_fails_visibly(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    """A claim of the Hugging Face cache layout (a local volume on the node) is mounted at
    HF_HUB_CACHE with HF_HUB_OFFLINE=1: the engine reads the pinned revision's snapshot from it.
    A revision the claim does not hold fails the replica as the engine fails, in its words."""
    from lightkube import codecs
    from lightkube.resources.core_v1 import PersistentVolumeClaim

    from tests.integration.test_promotion import bootstrap_namespace

    ns, held, absent = "it-nodecache", "c" * 40, "d" * 40
    bootstrap_namespace(admin, ns)
    for d in yaml.safe_load_all((code_root() / "deploy/kubernetes/optional/pvc-reader.yaml").read_text()):
        d["metadata"]["namespace"] = ns
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / held
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-weights"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "hostPath": {"path": str(tmp_path / "hub"), "type": "Directory"},
            "claimRef": {"namespace": ns, "name": "weights"},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "weights", "namespace": ns},
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}},
    }
    for d in (volume, claim):
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")
    deadline = time.monotonic() + 60
    while admin.get(PersistentVolumeClaim, "weights", namespace=ns).status.phase != "Bound":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the PV controller did not bind the claim"
        time.sleep(0.5)

    def stack(revision: str) -> None:
        cache = {"policy": "required", "pvcs": {f"Qwen/Qwen3-0.6B@{revision}": "weights"}}
        replicas = [on_node("it-node-cache", modelRevision=revision, startupBudgetSeconds=60)]
        project.stack("itnodecache", replicas, imageDigest=double(), namespace=ns, artifactCache=cache)

    stack(held)
    done = cli(project, "deploy", "--stack", "itnodecache")
    assert done.returncode == 0, done.stderr
    (pod,) = admin.list(Pod, namespace=ns, labels=naming.selector("it-node-cache"))
    logged = "\n".join(admin.log(pod.metadata.name, namespace=ns))  # type: ignore[union-attr]
    assert f"weights: /var/cache/infercrane/huggingface/models--Qwen--Qwen3-0.6B/snapshots/{held}" in logged, logged
    # Its start in stages (the double's, issue #67): it read every byte of the snapshot and hashed it.
    assert "stage weights: read " in logged and "stage warm-up: " in logged, logged

    stack(absent)
    done = cli(project, "deploy", "--stack", "itnodecache")
    assert done.returncode == 1 and "not ready" in done.stderr, done.stderr
    failed = [
        p for p in admin.list(Pod, namespace=ns, labels=naming.selector("it-node-cache")) if absent in json.dumps(p.to_dict())
    ]
    assert failed, "the new revision's pod was made"
    logged = "\n".join(admin.log(failed[0].metadata.name, namespace=ns))  # type: ignore[union-attr]
    assert "couldn't find them in the cached files" in logged and f"no snapshot {absent}" in logged, logged
    assert cli(project, "destroy", "--stack", "itnodecache").returncode == 0


def test_a_model_that_loads_longer_than_its_startup_budget_fails_by_its_startup_probe_and_is_restarted_by_it(
    project: Project, admin: Client
) -> None:
    """The startup probe is sized from startupBudgetSeconds (failureThreshold x period): an engine
    that takes longer to load is restarted by the kubelet before it ever serves, and the deploy
    says so -- the probe's own words, the restart, and the setting that sizes it."""
    load = {"name": "INFERCRANE_DOUBLE_LOAD_SECONDS", "value": "600"}  # the double's load time (a pod env setting)
    project.stack("itnodeslow", [on_node("it-node-slow", startupBudgetSeconds=60, pod={"env": [load]})], imageDigest=double())
    began = time.monotonic()
    done = cli(project, "deploy", "--stack", "itnodeslow")
    took = time.monotonic() - began
    assert done.returncode == 1, done.stdout
    assert "Unhealthy: Startup probe failed" in done.stderr, done.stderr
    assert "its startup probe kept failing (its engine did not answer within its startup budget" in done.stderr, done.stderr
    assert "fix: raise startupBudgetSeconds of each replica whose startup probe kept failing" in done.stderr, done.stderr
    # Where the time went (issue #67): the start's stage, from the kubelet's Events -- pulled (the
    # node had the image), started, and loading since.
    assert "stalled loading (its engine's /health not 200 yet) for " in done.stderr, done.stderr
    assert took < 60 + 60, f"failed by the progress deadline (the startup budget), not the margin after it: {took:.0f} s"
    # The kubelet kills it once the probe has failed failureThreshold x period (the budget) after
    # the container started -- which can be a little after the Deployment's deadline ends the wait.
    deadline = time.monotonic() + 60
    while True:
        (pod,) = pods_of(admin, "it-node-slow")
        status = pod.status.containerStatuses[0] if pod.status and pod.status.containerStatuses else None
        if (status is not None and status.restartCount >= 1) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert status is not None and status.restartCount >= 1 and not status.started, status
    killed = [e.message or "" for e in admin.list(Event, namespace=NS) if e.involvedObject.name == pod.metadata.name]
    assert any("failed startup probe, will be restarted" in m for m in killed), killed
    assert cli(project, "destroy", "--stack", "itnodeslow").returncode == 0


def test_an_image_the_node_cannot_pull_fails_naming_the_pull_as_where_its_start_stalled(project: Project) -> None:
    """Issue #67's fault drill: a digest no registry the node reaches serves -- the kubelet pulls,
    fails and backs off; the deploy fails at the end of the startup budget naming the stage
    (pulling its image, and for how long) with that stage's fix, beside the kubelet's words."""
    missing = "vllm/vllm-openai@sha256:" + "e" * 64
    project.stack("itnodepull", [on_node("it-node-pull", startupBudgetSeconds=60)], imageDigest=missing)
    done = cli(project, "deploy", "--stack", "itnodepull")
    assert done.returncode == 1, done.stdout
    assert "stalled pulling its image for " in done.stderr, done.stderr
    assert "fix: check that the nodes can pull imageDigest" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert cli(project, "destroy", "--stack", "itnodepull").returncode == 0


def test_inspect_shows_each_pod_on_the_real_node_when_the_identity_may_read_pods(project: Project, admin: Client) -> None:
    """With the optional pod reader (deploy/kubernetes/optional/pod-reader.yaml) in its namespace,
    the restricted identity's `inspect` shows the replica's pod running on the real node."""
    from lightkube import codecs

    from tests.integration.test_promotion import bootstrap_namespace

    ns = "it-nodeinspect"
    bootstrap_namespace(admin, ns)
    for d in yaml.safe_load_all((code_root() / "deploy/kubernetes/optional/pod-reader.yaml").read_text()):
        d["metadata"]["namespace"] = ns  # granted to the deploying identity (its subject stays)
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")
    project.stack("itnodeinspect", [on_node("it-node-inspect")], imageDigest=double(), namespace=ns)
    done = cli(project, "deploy", "--stack", "itnodeinspect")
    assert done.returncode == 0, done.stderr
    shown = cli(project, "inspect", "--stack", "itnodeinspect", "--json")
    assert shown.returncode == 0, shown.stderr
    (rec,) = json.loads(shown.stdout)["replicas"]
    (pod,) = rec["pods"]
    assert pod["node"] == node_files.NAME and pod["phase"] == "Running", pod
    # Its start, stage by stage (issue #67): the node had the image; it started, then its engine
    # answered /health (Ready) -- each in seconds from the pod's creation, in that order.
    start = pod["start"]
    assert start["stage"] == "healthy" and start["imagePresent"] is True and start["restarts"] == 0, start
    assert 0 <= start["scheduled"] <= start["started"] <= start["healthy"], start
    text = cli(project, "inspect", "--stack", "itnodeinspect")
    assert "start: scheduled " in text.stdout and ", image present, started " in text.stdout, text.stdout
    (running,) = admin.list(Pod, namespace=ns, labels=naming.selector("it-node-inspect"))
    assert running.metadata is not None and pod["name"] == running.metadata.name
    assert cli(project, "destroy", "--stack", "itnodeinspect").returncode == 0


def test_a_vllm_older_than_0_18_refuses_the_shutdown_flag_and_shutdown_seconds_zero_renders_none(
    project: Project, admin: Client
) -> None:
    """vLLM has --shutdown-timeout since 0.18.0 and an older release exits at argument parsing: the
    double, told it is vLLM 0.17.1, does the same. The drain's default renders the flag, and the
    replica never starts (argparse's words in its log); shutdownSeconds: 0 renders none, and it serves."""
    older = {"name": "INFERCRANE_DOUBLE_VLLM_VERSION", "value": "0.17.1"}
    key = "it-node-vllm017"
    project.stack("itnodeold", [on_node(key, startupBudgetSeconds=60, pod={"env": [older]})], imageDigest=double())
    done = cli(project, "deploy", "--stack", "itnodeold")
    assert done.returncode == 1, done.stdout
    (pod,) = pods_of(admin, key)
    shown = kubectl(project.plane, "logs", "-n", NS, pod.metadata.name, "--previous")  # the exited container's
    logged = shown.stdout + shown.stderr
    assert "error: unrecognized arguments: --shutdown-timeout 30" in logged, logged
    project.stack(
        "itnodeold",
        [on_node(key, startupBudgetSeconds=60, pod={"env": [older]}, drain={"shutdownSeconds": 0})],
        imageDigest=double(),
    )
    done = cli(project, "deploy", "--stack", "itnodeold")
    assert done.returncode == 0, done.stderr[-3000:]
    (pod,) = [p for p in pods_of(admin, key) if not p.metadata.deletionTimestamp]
    args = pod.spec.containers[0].args or []
    assert not [a for a in args if a.startswith("--shutdown-timeout")], args
    assert cli(project, "destroy", "--stack", "itnodeold").returncode == 0
