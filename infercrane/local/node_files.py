"""What the local plane's real nodes are, and the files their processes read: each one's name,
bridge and cgroup root, where it keeps its state, and the generated containerd, CNI and kubelet
configs. Local-plane layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infercrane.project.paths import LOCAL_NODE_STACK

GPU_PRODUCT: Final = "NVIDIA-L4"
GPUS: Final = 3
CGROUP_V1: Final = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class RealNode:
    """One real node of the plane, by its index: each its own kubelet and containerd (its own image
    store, socket and state), bridge and /24, cgroup root, kubelet ports and certificates. The first
    keeps the names a one-node plane always had."""

    index: int

    @property
    def name(self) -> str:
        return f"node-l4-{self.index}"

    @property
    def bridge(self) -> str:
        return f"icbr{self.index}"

    @property
    def subnet(self) -> str:
        return f"10.88.{self.index}.0/24"

    @property
    def ip(self) -> str:
        """The node's address: its bridge's, where its kubelet listens."""
        return f"10.88.{self.index}.1"

    @property
    def cgroup_root(self) -> str:
        return self._suffix("infercrane-node")

    def _suffix(self, word: str, sep: str = "-") -> str:
        """``word`` for the first node, ``word-1`` for the second: the first keeps a one-node plane's names."""
        return word if not self.index else f"{word}{sep}{self.index}"

    @property
    def certs(self) -> str:
        """The prefix of its certificates' files in the plane's PKI (``node`` -> node-client.crt)."""
        return self._suffix("node")

    @property
    def components(self) -> tuple[str, str]:
        """Its processes' names in the plane's table: containerd's, the kubelet's."""
        return self._suffix("containerd"), self._suffix("kubelet")

    @property
    def ports(self) -> tuple[str, str]:
        """Its ports' names in the plane's record: the kubelet's, its health endpoint's."""
        return self._suffix("kubelet", "_"), self._suffix("kubelet_healthz", "_")

    def home(self, state: Path) -> Path:
        """Where the node keeps its state, inside the plane's."""
        return state / self._suffix("node")


#: The real nodes a plane may run, in order (``local start --real-nodes N`` runs the first N).
NODES: Final = (RealNode(0), RealNode(1))
FIRST: Final = NODES[0]
#: The first real node's name, bridge and address: every plane with a real node has it.
NAME: Final = FIRST.name
BRIDGE: Final = FIRST.bridge
NODE_IP: Final = FIRST.ip
RUNC: Final = ("/usr/sbin/runc", "/usr/bin/runc")
CNI_BIN: Final = ("/usr/lib/cni", "/opt/cni/bin")
CNI_PLUGINS: Final = ("bridge", "host-local", "loopback")
NODE_TOOLS: Final = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "pause", "engine-double", "registry")
#: The machine's one real node: held (flock) by its processes for their life (:func:`~infercrane.local.node.claim`).
LOCK: Final = Path("/run/infercrane-node.lock")


def home(state: Path) -> Path:
    """Where the first real node keeps its state (and the plane's registry its storage)."""
    return FIRST.home(state)


def first(paths: tuple[str, ...], name: str = "") -> Path | None:
    return next((Path(p) / name for p in paths if (Path(p) / name).exists()), None)


def containerd_config(h: Path, runc: Path, cni_bin: Path, sandbox: str) -> str:
    cri = "plugins.'io.containerd.cri.v1"
    return f"""version = 3
root = '{h / "containerd/root"}'
state = '{h / "containerd/state"}'
disabled_plugins = ['io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing',
  # NRI's socket is the machine's (/var/run/nri): one containerd's alone, and no plugin of it is used here
  'io.containerd.nri.v1.nri']

[grpc]
  address = '{h / "containerd.sock"}'

[ttrpc]
  address = '{h / "containerd.sock.ttrpc"}'

[{cri}.images']
  snapshotter = 'overlayfs'
  [{cri}.images'.registry]
    # infercrane.local: the plane's registry (hosts.toml, written when it starts); no other host is mirrored
    config_path = '{h / "certs.d"}'
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


def cni_config(n: RealNode, h: Path) -> dict[str, Any]:
    """A bridge with a private /24 and no route out of it: pods reach the node and each other only."""
    ipam = {"type": "host-local", "ranges": [[{"subnet": n.subnet, "gateway": n.ip}]], "dataDir": str(h / "cni/ipam")}
    # Not a gateway: the bridge's address is the node's own (prepare), and a gateway bridge would turn
    # on the host's IP forwarding. Pods reach the node and each other on the /24 without one.
    bridge = {"type": "bridge", "bridge": n.bridge, "isGateway": False, "ipMasq": False, "hairpinMode": True, "ipam": ipam}
    return {"cniVersion": "1.0.0", "name": "infercrane-node", "plugins": [bridge, {"type": "loopback"}]}


def kubelet_config(n: RealNode, h: Path, pki_dir: Path, port: int, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": n.ip,
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
        "tlsCertFile": str(pki_dir / f"{n.certs}-serving.crt"),
        "tlsPrivateKeyFile": str(pki_dir / f"{n.certs}-serving.key"),
        # The kubelet's kernel tunables are set by the plane, recorded and put back (infercrane.local.host);
        # the kubelet itself writes none. Its pods' logs live in the plane's state and go with it.
        "protectKernelDefaults": True,
        "podLogsDir": str(pod_logs(h)),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/" + n.cgroup_root,
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


#: The stack that deploys onto the real node, pinned to the engine double's digest.
STACK_FILE: Final = f"stacks/Pulumi.{LOCAL_NODE_STACK}.yaml"
