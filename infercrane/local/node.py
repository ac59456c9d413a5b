"""The local plane's real node: a kubelet on containerd and runc, beside the kwok nodes, that runs
the pod specs InferCrane renders -- images by exact digest, probes, the worker key from its
Secret, securityContext, volumes. A plane may run two (``local start --real-nodes 2``), each a
:class:`~infercrane.local.node_files.RealNode` of its own: its own image store, bridge, /24,
cgroup root, ports and certificates; the lock and the host's settings are the machine's, taken
and given back once for both.

It is labelled and tainted like a GPU node of a product of its own (:data:`GPU_PRODUCT`) and
advertises ``nvidia.com/gpu`` as an extended resource (written into the Node's status once it
registers: no device plugin, no device). Pods get a bridge of their own (:data:`BRIDGE`, a
private /24 with no route out of it: nothing a pod sends leaves the machine); the kubelet
listens on the bridge's address, its health endpoint on loopback. Its images are built by the
project (:mod:`infercrane.local.images`) and pulled from the plane's registry on loopback
(:mod:`infercrane.local.registry`), never from the internet.

It needs root (cgroups, mounts, network namespaces), runc and the CNI plugins (Debian's
``runc`` and ``containernetworking-plugins``) and the node's tools (``tools/build.sh node
node-images``); :func:`why_not` says which is missing, and the plane starts without it.
:func:`clean_up` leaves no process, mount, network namespace, interface or cgroup behind.
Local-plane layer.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from infercrane.core.errors import PlaneError
from infercrane.local import host, images, pki, private, registry
from infercrane.local.node_files import (
    BRIDGE,
    CGROUP_V1,
    CNI_BIN,
    CNI_PLUGINS,
    FIRST,
    GPU_PRODUCT,
    GPUS,
    LOCK,
    NODE_TOOLS,
    RUNC,
    STACK_FILE,
    RealNode,
    cni_config,
    containerd_config,
    first,
    kubelet_config,
)
from infercrane.local.node_teardown import alive, cgroup_dirs, clean_up, cmdline, ip
from infercrane.project.tools import find_tool


def why_not(state: Path) -> str | None:
    """Why this machine cannot run the real node of the plane at ``state`` (None: it can)."""
    if os.geteuid() != 0:
        return "the real node needs root (cgroups, mounts, network namespaces)"
    if not (CGROUP_V1 / "memory").is_dir() and not (CGROUP_V1 / "cgroup.controllers").is_file():
        return "no cgroup hierarchy at /sys/fs/cgroup"
    if first(RUNC) is None:
        return (
            "runc is not installed (" + " or ".join(RUNC) + "); fix: `apt-get install runc containernetworking-plugins` as root"
        )
    cni = first(CNI_BIN, "bridge")
    if cni is None or any(not (cni.parent / p).is_file() for p in CNI_PLUGINS):
        return (
            f"the CNI plugins {', '.join(CNI_PLUGINS)} are not installed (" + " or ".join(CNI_BIN) + "); "
            "fix: `apt-get install containernetworking-plugins` as root"
        )
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    for tool in NODE_TOOLS:
        try:
            find_tool(tool)
        except Exception:  # noqa: BLE001 - ToolNotFound: said as the reason
            return f"{tool} is not built; fix: `tools/build.sh node node-images`"
    return None


def claim(state: Path, lock: Path = LOCK) -> int | str:
    """Hold the machine's real nodes for the plane at ``state``, or say whose they are.

    An exclusive ``flock`` on :data:`LOCK`, taken before anything of the node is touched; its
    descriptor is returned for the node's processes to inherit (``Supervisor.launch(keep=…)``), so
    the lock lives exactly as long as the node does, however close together two planes start and
    whichever process started them exits. Only its holder cleans up what a killed plane's node left."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder, deadline = "", time.monotonic() + 2
        while not holder and time.monotonic() < deadline:  # a winner of a moment ago writes its name next
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            time.sleep(0 if holder else 0.01)
        os.close(fd)
        holder = holder or "another process"
        return (
            f"the real node of the plane at {holder} runs (one per machine: its bridge, addresses and cgroups are the machine's)"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(state).encode(), 0)
    owner = _owner()
    if owner is not None and owner != state:
        if _kubelet_runs(owner):  # a plane started before the lock existed
            os.close(fd)
            return f"the real node of the plane at {owner} runs (one per machine: its bridge and cgroups are the machine's)"
        clean_up(owner)  # what a killed plane left
    return fd


def clean_up_if_free(state: Path, lock: Path = LOCK) -> list[str] | None:
    """What the plane at ``state``'s node left, cleaned (:func:`clean_up`) -- only while no other
    plane's node runs: under the node lock, taken without waiting, or held in this plane's name
    (its own pods' shims hold it until they are killed). None when another plane holds it (its
    node runs now: its pods, its bridge and the host's settings are its own, never ours to touch)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Held: by another plane's node, or by what this plane's own node left running (its
            # pods' runtime shims inherit the descriptor) -- the holder's name tells them apart.
            if os.pread(fd, 4096, 0).decode(errors="replace").strip() != str(state):
                return None
        owner = _owner()
        if owner is not None and owner != state and _kubelet_runs(owner):  # a plane from before the lock
            return None
        return clean_up(state)
    finally:
        os.close(fd)


def _owner() -> Path | None:
    """The state directory of the plane whose node made the bridge (its alias), if there is one."""
    shown = ip("-o", "link", "show", BRIDGE, check=False)
    alias = shown.stdout.split(" alias ", 1)[1].split()[0] if " alias " in shown.stdout else ""
    return Path(alias) if shown.returncode == 0 and alias else None


def _kubelet_runs(state: Path) -> bool:
    try:
        record = json.loads((state / "plane.json").read_text())
    except (OSError, ValueError):
        return False
    kubelet = (record.get("processes") or {}).get("kubelet") or {}
    return bool(kubelet) and alive(int(kubelet["pid"])) and "kubelet" in cmdline(int(kubelet["pid"]))


def prepare(
    state: Path,
    pki_dir: Path,
    apiserver_port: int,
    kubelet_port: int,
    healthz_port: int,
    registry_port: int,
    gates: dict[str, bool] | None = None,
    n: RealNode = FIRST,
) -> None:
    """Everything node ``n``'s processes need before they start: its bridge and cgroup root, the
    configuration of containerd (its images from the plane's registry at ``registry_port``), CNI and
    the kubelet, and the kubelet's certificates."""
    h = n.home(state)
    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pki", "pod-logs", f"certs.d/{images.HOST}"):
        (h / sub).mkdir(parents=True, exist_ok=True)
    host.take_over(state)  # the host as found, then the kubelet's tunables (protectKernelDefaults)
    if ip("link", "show", n.bridge, check=False).returncode != 0:
        ip("link", "add", n.bridge, "type", "bridge")
        ip("addr", "add", f"{n.ip}/24", "dev", n.bridge)
    ip("link", "set", n.bridge, "alias", str(state), "up")  # whose node it is (why_not)
    for cgroup in cgroup_dirs(n):
        cgroup.mkdir(exist_ok=True)
        if cgroup.parent.name == "cpuset":  # a v1 cpuset takes no task until it has CPUs and memory nodes
            for f in ("cpuset.cpus", "cpuset.mems"):
                if not (cgroup / f).read_text().strip():
                    (cgroup / f).write_text((cgroup.parent / f).read_text())
    ca = pki.CA.load_or_create(pki_dir)
    ca.issue(f"{n.certs}-client", f"system:node:{n.name}", orgs=("system:nodes",))
    ca.issue(f"{n.certs}-serving", n.name, dns=(n.name,), ips=(n.ip,), server=True)
    runc = first(RUNC)
    cni = first(CNI_BIN, "bridge")
    assert runc is not None and cni is not None  # why_not() said so
    pause = images.pause(find_tool("pause"))
    (h / "certs.d" / images.HOST / "hosts.toml").write_text(registry.hosts_toml(registry_port))
    (h / "containerd.toml").write_text(containerd_config(h, runc, cni.parent, pause.reference))
    (h / "cni/net.d/10-infercrane.conflist").write_text(json.dumps(cni_config(n, h), indent=1))
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "plane",
                "cluster": {"server": f"https://127.0.0.1:{apiserver_port}", "certificate-authority": str(pki_dir / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": n.name,
                "user": {
                    "client-certificate": str(pki_dir / f"{n.certs}-client.crt"),
                    "client-key": str(pki_dir / f"{n.certs}-client.key"),
                },
            }
        ],
        "contexts": [{"name": n.name, "context": {"cluster": "plane", "user": n.name}}],
        "current-context": n.name,
    }
    private.write(h / "kubelet/kubeconfig", yaml.safe_dump(kubeconfig))
    kubelet = kubelet_config(n, h, pki_dir, kubelet_port, healthz_port) | ({"featureGates": gates} if gates else {})
    (h / "kubelet/config.yaml").write_text(yaml.safe_dump(kubelet))


def containerd_args(state: Path, n: RealNode = FIRST) -> list[str]:
    return ["--config", str(n.home(state) / "containerd.toml")]


def kubelet_args(state: Path, n: RealNode = FIRST) -> list[str]:
    h = n.home(state)
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPU_PRODUCT, "nvidia.com/gpu.count": str(GPUS)}
    return [
        f"--config={h / 'kubelet/config.yaml'}",
        f"--kubeconfig={h / 'kubelet/kubeconfig'}",
        f"--root-dir={h / 'kubelet/root'}",
        f"--cert-dir={h / 'kubelet/pki'}",
        f"--hostname-override={n.name}",
        f"--node-ip={n.ip}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()),
        "--v=1",
    ]


def env(state: Path) -> dict[str, str]:
    """containerd finds its shim on PATH."""
    return {"PATH": os.pathsep.join([str(find_tool("containerd-shim-runc-v2").parent), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])}


def containerd_ready(state: Path, n: RealNode = FIRST) -> bool:
    return (n.home(state) / "containerd.sock").exists()


def advertise(kubeconfig: Path, n: RealNode = FIRST, timeout: float = 30.0) -> None:
    """Once the kubelet has registered its Node and it is Ready, write its GPUs into the Node's
    status as an extended resource (the kubelet keeps a capacity it does not manage itself)."""
    from lightkube import ApiError
    from lightkube.resources.core_v1 import Node
    from lightkube.types import PatchType

    from infercrane.local.applying import admin_client

    client = admin_client(kubeconfig)
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = client.get(Node, n.name)
        except ApiError as exc:
            if exc.status.code != 404 or time.monotonic() > deadline:
                raise PlaneError(f"the real node {n.name} did not register: {exc.status.message}") from exc
            time.sleep(0.2)
            continue
        conditions = (found.status.conditions if found.status else None) or []
        if any(c.type == "Ready" and c.status == "True" for c in conditions):
            break
        if time.monotonic() > deadline:
            raise PlaneError(f"the real node {n.name} registered but is not Ready after {timeout:.0f} s; see the kubelet's log")
        time.sleep(0.2)
    gpus = {"nvidia.com/gpu": str(GPUS)}
    # Allocatable too: the kubelet would derive it from the capacity only at its next status update.
    client.patch(Node.Status, n.name, {"status": {"capacity": gpus, "allocatable": gpus}}, patch_type=PatchType.MERGE)


def pin_note(project_dir: Path, state: Path | None = None) -> str | None:
    """A note when the engine double built here is not the digest :data:`STACK_FILE` pins (a
    build is reproducible only with the same Go and sources: the stack then names an image the
    node does not have), or -- given the plane's ``state`` -- a model image it pins is not one
    the plane's registry holds."""
    path = project_dir / STACK_FILE
    if not path.is_file():
        return None
    target = ((yaml.safe_load(path.read_text()) or {}).get("config") or {}).get("infercrane:kubernetes", {})
    pinned = target.get("imageDigest")
    built = images.engine_double(find_tool("engine-double")).reference
    if pinned != built:
        return (
            f"note: the engine double built here is {built}, but {STACK_FILE} pins {pinned}: its pods would wait "
            "for an image the node does not have; set imageDigest to the built reference (a different Go or double source)"
        )
    held = set(registry.model_images(state).values()) if state is not None else set()
    for model, ref in (target.get("modelImages") or {}).items():
        if state is not None and str(ref).removeprefix("oci://") not in held:
            return (
                f"note: {STACK_FILE} pins the model image {ref} for {model}, which the plane's registry does not hold "
                f"({', '.join(sorted(held)) or 'none'}): its pods would wait for it; set it to one of those"
            )
    return None
