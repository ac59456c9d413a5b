"""The local plane's real node: a kubelet on containerd and runc, beside the kwok nodes, that runs
the pod specs InferCrane renders -- images by exact digest, probes, the worker key from its
Secret, securityContext, volumes.

It is labelled and tainted like a GPU node of a product of its own (:data:`GPU_PRODUCT`) and
advertises ``nvidia.com/gpu`` as an extended resource (written into the Node's status once it
registers: no device plugin, no device). Pods get a bridge of their own (:data:`BRIDGE`, a
private /24 with no route out of it: nothing a pod sends leaves the machine); the kubelet
listens on the bridge's address, its health endpoint on loopback. Its images come from the
project (:mod:`infercrane.local.images`), never from a registry.

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
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Final

import yaml

from infercrane.core.errors import PlaneError
from infercrane.local import host, images, pki, private
from infercrane.project.tools import find_tool

NAME: Final = "node-l4-0"
GPU_PRODUCT: Final = "NVIDIA-L4"
GPUS: Final = 3
BRIDGE: Final = "icbr0"
SUBNET: Final = "10.88.0.0/24"
NODE_IP: Final = "10.88.0.1"
CGROUP_ROOT: Final = "infercrane-node"
CGROUP_V1: Final = Path("/sys/fs/cgroup")
RUNC: Final = ("/usr/sbin/runc", "/usr/bin/runc")
CNI_BIN: Final = ("/usr/lib/cni", "/opt/cni/bin")
CNI_PLUGINS: Final = ("bridge", "host-local", "loopback")
NODE_TOOLS: Final = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "pause", "engine-double")
#: The machine's one real node: held (flock) by its processes for their life (:func:`claim`).
LOCK: Final = Path("/run/infercrane-node.lock")


def home(state: Path) -> Path:
    """Where the node keeps its state, inside the plane's."""
    return state / "node"


def _first(paths: tuple[str, ...], name: str = "") -> Path | None:
    return next((Path(p) / name for p in paths if (Path(p) / name).exists()), None)


def why_not(state: Path) -> str | None:
    """Why this machine cannot run the real node of the plane at ``state`` (None: it can)."""
    if os.geteuid() != 0:
        return "the real node needs root (cgroups, mounts, network namespaces)"
    if not (CGROUP_V1 / "memory").is_dir() and not (CGROUP_V1 / "cgroup.controllers").is_file():
        return "no cgroup hierarchy at /sys/fs/cgroup"
    if _first(RUNC) is None:
        return (
            "runc is not installed (" + " or ".join(RUNC) + "); fix: `apt-get install runc containernetworking-plugins` as root"
        )
    cni = _first(CNI_BIN, "bridge")
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
    """Hold the machine's one real node for the plane at ``state``, or say whose it is.

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


def _owner() -> Path | None:
    """The state directory of the plane whose node made the bridge (its alias), if there is one."""
    shown = _ip("-o", "link", "show", BRIDGE, check=False)
    alias = shown.stdout.split(" alias ", 1)[1].split()[0] if " alias " in shown.stdout else ""
    return Path(alias) if shown.returncode == 0 and alias else None


def _kubelet_runs(state: Path) -> bool:
    try:
        record = json.loads((state / "plane.json").read_text())
    except (OSError, ValueError):
        return False
    kubelet = (record.get("processes") or {}).get("kubelet") or {}
    return bool(kubelet) and _alive(int(kubelet["pid"])) and "kubelet" in _cmdline(int(kubelet["pid"]))


def _cgroup_dirs() -> list[Path]:
    """The node's cgroup root in every hierarchy (cgroup v1: one per controller; v2: one)."""
    if (CGROUP_V1 / "cgroup.controllers").is_file():
        return [CGROUP_V1 / CGROUP_ROOT]
    return [d / CGROUP_ROOT for d in sorted(CGROUP_V1.iterdir()) if d.is_dir() and not d.is_symlink() and d.name != "unified"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


def prepare(state: Path, pki_dir: Path, apiserver_port: int, kubelet_port: int, healthz_port: int) -> None:
    """Everything the node's processes need before they start: its bridge and cgroup root, the
    configuration of containerd, CNI and the kubelet, the kubelet's certificates and its images."""
    h = home(state)
    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pki", "images", "pod-logs"):
        (h / sub).mkdir(parents=True, exist_ok=True)
    host.take_over(state)  # the host as found, then the kubelet's tunables (protectKernelDefaults)
    if _ip("link", "show", BRIDGE, check=False).returncode != 0:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "alias", str(state), "up")  # whose node it is (why_not)
    for cgroup in _cgroup_dirs():
        cgroup.mkdir(exist_ok=True)
        if cgroup.parent.name == "cpuset":  # a v1 cpuset takes no task until it has CPUs and memory nodes
            for f in ("cpuset.cpus", "cpuset.mems"):
                if not (cgroup / f).read_text().strip():
                    (cgroup / f).write_text((cgroup.parent / f).read_text())
    ca = pki.CA.load_or_create(pki_dir)
    ca.issue("node-client", f"system:node:{NAME}", orgs=("system:nodes",))
    ca.issue("node-serving", NAME, dns=(NAME,), ips=(NODE_IP,), server=True)
    runc = _first(RUNC)
    cni = _first(CNI_BIN, "bridge")
    assert runc is not None and cni is not None  # why_not() said so
    pause = images.pause(find_tool("pause"))
    double = find_tool("engine-double")
    archives = {
        "pause": pause,
        "engine-double": images.engine_double(double),
        f"engine-double-{images.NEXT_RELEASE}": images.engine_double(double, release=images.NEXT_RELEASE),
    }
    for file, image in archives.items():
        (h / "images" / f"{file}.tar").write_bytes(image.archive)
    (h / "containerd.toml").write_text(_containerd_config(h, runc, cni.parent, pause.reference))
    (h / "cni/net.d/10-infercrane.conflist").write_text(json.dumps(_cni_config(h), indent=1))
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
                "name": NAME,
                "user": {"client-certificate": str(pki_dir / "node-client.crt"), "client-key": str(pki_dir / "node-client.key")},
            }
        ],
        "contexts": [{"name": NAME, "context": {"cluster": "plane", "user": NAME}}],
        "current-context": NAME,
    }
    private.write(h / "kubelet/kubeconfig", yaml.safe_dump(kubeconfig))
    (h / "kubelet/config.yaml").write_text(yaml.safe_dump(_kubelet_config(h, pki_dir, kubelet_port, healthz_port)))


def _containerd_config(h: Path, runc: Path, cni_bin: Path, sandbox: str) -> str:
    cri = "plugins.'io.containerd.cri.v1"
    return f"""version = 3
root = '{h / "containerd/root"}'
state = '{h / "containerd/state"}'
disabled_plugins = ['io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']

[grpc]
  address = '{h / "containerd.sock"}'

[ttrpc]
  address = '{h / "containerd.sock.ttrpc"}'

[{cri}.images']
  snapshotter = 'overlayfs'
  [{cri}.images'.pinned_images]
    sandbox = '{sandbox}'

[{cri}.runtime']
  # Not below containerd's own: a sandbox's -998 needs CAP_SYS_RESOURCE, which a container may lack.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [{cri}.runtime'.containerd]
    default_runtime_name = 'runc'
    [{cri}.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [{cri}.runtime'.containerd.runtimes.runc.options]
        BinaryName = '{runc}'
        SystemdCgroup = false
  [{cri}.runtime'.cni]
    bin_dirs = ['{cni_bin}']
    conf_dir = '{h / "cni/net.d"}'

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
"""


def _cni_config(h: Path) -> dict[str, Any]:
    """A bridge with a private /24 and no route out of it: pods reach the node and each other only."""
    ipam = {"type": "host-local", "ranges": [[{"subnet": SUBNET, "gateway": NODE_IP}]], "dataDir": str(h / "cni/ipam")}
    # Not a gateway: the bridge's address is the node's own (prepare), and a gateway bridge would turn
    # on the host's IP forwarding. Pods reach the node and each other on the /24 without one.
    bridge = {"type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False, "hairpinMode": True, "ipam": ipam}
    return {"cniVersion": "1.0.0", "name": "infercrane-node", "plugins": [bridge, {"type": "loopback"}]}


def _kubelet_config(h: Path, pki_dir: Path, port: int, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # Who asks is who their certificate (or token) says, and may do what the plane's RBAC grants
        # them on nodes/* (a SubjectAccessReview each): the API server's kubelet client all of it,
        # the deploying identity nothing -- every identity of the plane has a certificate of its CA.
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki_dir / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki_dir / "node-serving.crt"),
        "tlsPrivateKeyFile": str(pki_dir / "node-serving.key"),
        # The kubelet's kernel tunables are set by the plane, recorded and put back (infercrane.local.host);
        # the kubelet itself writes none. Its pods' logs live in the plane's state and go with it.
        "protectKernelDefaults": True,
        "podLogsDir": str(pod_logs(h)),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/" + CGROUP_ROOT,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{h / 'containerd.sock'}",
        "registerWithTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "maxPods": 16,
        "makeIPTablesUtilChains": False,
        "resolvConf": "",
        # No DNS server runs on the plane and these pods need none; naming one keeps the kubelet from
        # warning about every pod (MissingClusterDNS), which the progress line would show as a reason.
        "clusterDomain": "cluster.local",
        "clusterDNS": ["10.96.0.10"],
        "serializeImagePulls": False,
    }


def pod_logs(h: Path) -> Path:
    """Where the kubelet writes its pods' logs: in the node's state, never under /var/log."""
    return h / "pod-logs"


def containerd_args(state: Path) -> list[str]:
    return ["--config", str(home(state) / "containerd.toml")]


def kubelet_args(state: Path) -> list[str]:
    h = home(state)
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPU_PRODUCT, "nvidia.com/gpu.count": str(GPUS)}
    return [
        f"--config={h / 'kubelet/config.yaml'}",
        f"--kubeconfig={h / 'kubelet/kubeconfig'}",
        f"--root-dir={h / 'kubelet/root'}",
        f"--cert-dir={h / 'kubelet/pki'}",
        f"--hostname-override={NAME}",
        f"--node-ip={NODE_IP}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()),
        "--v=1",
    ]


def env(state: Path) -> dict[str, str]:
    """containerd finds its shim on PATH."""
    return {"PATH": os.pathsep.join([str(find_tool("containerd-shim-runc-v2").parent), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])}


def containerd_ready(state: Path) -> bool:
    return (home(state) / "containerd.sock").exists()


def import_images(state: Path) -> None:
    """The node's images into containerd's Kubernetes namespace, under their digest references."""
    ctr = find_tool("ctr")
    address = str(home(state) / "containerd.sock")
    for archive in sorted((home(state) / "images").glob("*.tar")):
        done = subprocess.run(
            [str(ctr), "--address", address, "-n", "k8s.io", "images", "import", str(archive)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise PlaneError(f"importing {archive.name} into the real node's containerd failed: {done.stderr.strip()}")


def clean_up(state: Path) -> list[str]:
    """What a stopped node left: every process in its cgroups (the pods' containers) and the
    runtime's shims are killed, its mounts and network namespaces unmounted, its bridge deleted,
    its cgroups removed and the host's settings put back (:func:`host.give_back`). Returns what it
    cleaned or put back (empty: nothing was left, nothing had changed)."""
    h = home(state)
    left: list[str] = []
    pids = {pid for pid in _pids(h) if _alive(pid)}
    if pids:
        left.append(f"{len(pids)} process(es)")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
    mounts = _mounts_under(h)
    if mounts:
        left.append(f"{len(mounts)} mount(s)")
    for m in mounts:
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=10)
    if _ip("link", "show", BRIDGE, check=False).returncode == 0:
        left.append(f"interface {BRIDGE}")
        _ip("link", "del", BRIDGE, check=False)
    left += [f"host: {what}" for what in host.give_back(state, pod_logs(h))]
    for d in _cgroup_dirs():
        if d.is_dir():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [d]:
                try:
                    sub.rmdir()
                except OSError as exc:
                    left.append(f"cgroup {sub} ({exc.strerror})")
    return left


def leftovers(state: Path) -> list[str]:
    """What of the plane's real node is still there (empty after a clean stop): processes in its
    cgroups or speaking to its runtime, mounts under its state, its bridge, its cgroups, a host
    setting not put back, a link to its pods' logs, a pod log under /var/log."""
    h = home(state)
    left = [f"process {pid} ({_cmdline(pid)[:60]})" for pid in sorted(_pids(h)) if _alive(pid)]
    left += [f"mount {m}" for m in _mounts_under(h)]
    left += [f"interface {BRIDGE}"] if _ip("link", "show", BRIDGE, check=False).returncode == 0 else []
    left += [f"cgroup {d}" for d in _cgroup_dirs() if d.is_dir()]
    left += [f"host: {what}" for what in host.changed(state, pod_logs(h))]
    left += [f"pod logs {d}" for d in sorted(Path("/var/log/pods").glob("infercrane-*"))]
    return left


def _pids(h: Path) -> set[int]:
    """The node's pods' processes (in its cgroups) and its runtime's shims (by their address)."""
    pids = {pid for d in _cgroup_dirs() if d.is_dir() for pid in _procs(d)}
    return pids | {pid for pid in _all_pids() if str(h / "containerd.sock") in _cmdline(pid)}


def _procs(cgroup: Path) -> set[int]:
    found: set[int] = set()
    for f in cgroup.rglob("cgroup.procs"):
        try:
            found |= {int(line) for line in f.read_text().split()}
        except OSError:
            continue  # removed meanwhile
    return found


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running (a zombie is not: it waits only for its parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under ``root``, deepest first (/proc/self/mountinfo)."""
    prefix = str(root)
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    mine = {p for p in points if p == prefix or p.startswith(prefix + "/")}
    return sorted(mine, key=lambda p: -p.count("/"))


def advertise(kubeconfig: Path, timeout: float = 30.0) -> None:
    """Once the kubelet has registered its Node and it is Ready, write its GPUs into the Node's
    status as an extended resource (the kubelet keeps a capacity it does not manage itself)."""
    from lightkube import ApiError
    from lightkube.resources.core_v1 import Node
    from lightkube.types import PatchType

    from infercrane.local.bootstrap import admin_client

    client = admin_client(kubeconfig)
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = client.get(Node, NAME)
        except ApiError as exc:
            if exc.status.code != 404 or time.monotonic() > deadline:
                raise PlaneError(f"the real node {NAME} did not register: {exc.status.message}") from exc
            time.sleep(0.2)
            continue
        conditions = (found.status.conditions if found.status else None) or []
        if any(c.type == "Ready" and c.status == "True" for c in conditions):
            break
        if time.monotonic() > deadline:
            raise PlaneError(f"the real node {NAME} registered but is not Ready after {timeout:.0f} s; see the kubelet's log")
        time.sleep(0.2)
    gpus = {"nvidia.com/gpu": str(GPUS)}
    # Allocatable too: the kubelet would derive it from the capacity only at its next status update.
    client.patch(Node.Status, NAME, {"status": {"capacity": gpus, "allocatable": gpus}}, patch_type=PatchType.MERGE)


#: The stack that deploys onto the real node, pinned to the engine double's digest.
STACK_FILE: Final = "stacks/Pulumi.local-node.yaml"


def pin_note(project_dir: Path) -> str | None:
    """A note when the engine double built here is not the digest :data:`STACK_FILE` pins (a
    build is reproducible only with the same Go and sources: the stack then names an image the
    node does not have)."""
    path = project_dir / STACK_FILE
    if not path.is_file():
        return None
    pinned = ((yaml.safe_load(path.read_text()) or {}).get("config") or {}).get("infercrane:kubernetes", {}).get("imageDigest")
    built = images.engine_double(find_tool("engine-double")).reference
    if pinned == built:
        return None
    return (
        f"note: the engine double built here is {built}, but {STACK_FILE} pins {pinned}: its pods would wait "
        "for an image the node does not have; set imageDigest to the built reference (a different Go or double source)"
    )
