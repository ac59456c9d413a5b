"""The embedded local control plane: etcd, kube-apiserver (TLS, RBAC), controller-manager,
scheduler, kwok with simulated GPU nodes (labelled as GPU Feature Discovery does, and DRA-only ones
whose GPUs are ResourceSlices: :mod:`~infercrane.local.dra`), the KServe manager (Standard mode, its
webhooks served with local certificates) and real nodes (:mod:`~infercrane.local.node`), on loopback only.

State, certificates, logs and the kubeconfig live in one directory (default
``<project>/.infercrane/local``). ``start`` is idempotent (a running plane is reused; a stopped
one restarts on its kept etcd data), ``stop`` ends only the processes this module started (their
pids and executables are recorded), ``reset`` wipes the state. Contexts in the kubeconfig:
``infercrane-local`` (the restricted deployer bound to exactly the shipped Roles),
``infercrane-local-viewer`` (read-only: the optional readers) and ``infercrane-local-admin``.
Local-plane layer. Its identities and kubeconfigs are :mod:`~infercrane.local.access`, kwok's
stages :mod:`~infercrane.local.kwok_stages`, its processes :mod:`~infercrane.local.components`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane.core.errors import PlaneError, ToolNotFound
from infercrane.local import access, kwok_stages, node, node_files
from infercrane.local.components import COMPONENTS, MORE_NODES, NAMES, NODE_COMPONENTS, OF_THE_NODES, PORTS, WITH_THE_NODE
from infercrane.local.launch import Launch, http_status
from infercrane.local.layout import ADMIN_CONTEXT, CONTEXT, START_TIMEOUT_SECONDS
from infercrane.local.supervise import Supervisor, alive, free_port, read_record, stop_recorded
from infercrane.project.paths import project_root
from infercrane.project.tools import find_tool, kubernetes_tools


def default_state_dir() -> Path:
    return Path(os.environ.get("INFERCRANE_LOCAL_DIR") or project_root() / ".infercrane" / "local")


def _check(pod_ready_delay: float, real_nodes: int) -> None:
    """A start's numbers, each refused before anything starts."""
    if pod_ready_delay < 0:
        raise PlaneError(f"--pod-ready-delay {pod_ready_delay:g} is negative.", fix="use seconds >= 0 (default 0)")
    if not 1 <= real_nodes <= len(node_files.NODES):
        raise PlaneError(
            f"--real-nodes {real_nodes}: a plane runs 1 to {len(node_files.NODES)} real nodes.",
            fix=f"use --real-nodes 1 to {len(node_files.NODES)}, or --no-real-node for none",
        )


@dataclass
class Plane:
    """One local control plane, identified by its state directory."""

    state: Path

    @classmethod
    def default(cls) -> Plane:
        return cls(default_state_dir())

    # -- paths ---------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def _record(self) -> Path:
        return self.state / "plane.json"

    def _read_record(self) -> dict[str, Any]:
        return read_record(self._record)

    # -- status --------------------------------------------------------------------------------
    def processes(self) -> dict[str, bool]:
        rec = self._read_record()
        return {name: alive(p["pid"], p["exe"]) for name, p in rec.get("processes", {}).items()}

    def api_ready(self, timeout: float = 2.0) -> bool:
        rec = self._read_record()
        port = rec.get("ports", {}).get("apiserver")
        if not port:
            return False
        return http_status(f"https://127.0.0.1:{port}/readyz", self.pki_dir, timeout) == 200

    def running(self) -> bool:
        procs = self.processes()
        wanted = self._read_record().get("components") or NAMES  # what its start launched (a record before it: all)
        return bool(procs) and all(procs.values()) and set(procs) == set(wanted) and self.api_ready()

    def status(self) -> dict[str, Any]:
        rec = self._read_record()
        return {
            "running": self.running(),
            "state": str(self.state),
            "kubeconfig": str(self.kubeconfig),
            "context": CONTEXT,
            "adminContext": ADMIN_CONTEXT,
            "apiserver": f"https://127.0.0.1:{rec['ports']['apiserver']}" if rec.get("ports") else None,
            "podReadyDelaySeconds": rec.get("podReadyDelaySeconds", 0),
            "podGrace": bool(rec.get("podGrace")),
            "kubernetesVersion": rec.get("kubernetesVersion"),
            "realNode": rec.get("realNode"),
            "realNodes": rec.get("realNodes") or ([rec["realNode"]] if rec.get("realNode") else []),
            # The plane's Prometheus (with the real node), scraping its pods: a stack's
            # kubernetes.canaryMetrics.prometheus (or INFERCRANE_KUBERNETES_CANARY_PROMETHEUS).
            "prometheus": f"http://127.0.0.1:{rec['ports']['prometheus']}"
            if "prometheus" in (rec.get("components") or ()) and rec.get("ports")
            else None,
            "processes": self.processes(),
        }

    # -- start ---------------------------------------------------------------------------------
    def start(
        self,
        nodes_file: Path | None = None,
        progress: Any = print,
        pod_ready_delay: float = 0,
        kubernetes_version: str | None = None,
        real_node: bool = True,
        pod_grace: bool = False,
        real_nodes: int = 1,
    ) -> dict[str, Any]:
        """Start (or reuse) the plane, bootstrap it, and return :meth:`status`.

        ``pod_ready_delay``: seconds from a pod's start to its Ready condition (simulated model
        load; kwok's pod-ready Stage delayed), kept until the next start. ``pod_grace``: a deleted
        pod on the kwok nodes stays, terminating, until its grace period ends (kwok's pod-delete
        Stage waits for its ``deletionTimestamp``), as a pod whose engine drains to its last second
        would -- the window in which a predecessor still holds its GPUs; default: it goes at once.
        Kept until the next start. ``kubernetes_version``: a minor of tools/versions.env's
        KUBERNETES_VERSIONS (``1.34``; default KUBERNETES_VERSION), built by ``tools/build.sh
        kube@1.34``. ``real_nodes``: how many real nodes run, each its own kubelet, containerd,
        image store, bridge and cgroup root (none without ``real_node``). A running plane is reused
        as it is."""
        _check(pod_ready_delay, real_nodes)
        if self.running():
            return self._reused(progress, pod_ready_delay, kubernetes_version, pod_grace, real_nodes if real_node else 0)
        self.stop(quiet=True)
        tools, version, held = self._tools(progress, kubernetes_version, real_node, real_nodes)
        wanted = [c for c in COMPONENTS if c.name in tools]
        self.state.mkdir(parents=True, exist_ok=True)
        ports: dict[str, int] = {}
        for name in PORTS:  # distinct: each chosen apart from the ones before it
            ports[name] = free_port(ports.values())
        access.write_pki(self.pki_dir)
        access.write_kubeconfigs(self.state, self.pki_dir, ports["apiserver"])
        record = {
            "ports": ports,
            "podReadyDelaySeconds": pod_ready_delay,
            "podGrace": pod_grace,
            "kubernetesVersion": version,
            "components": [c.name for c in wanted],
        }
        with_node = not isinstance(held, str)
        names = [n.name for n in node_files.NODES[:real_nodes]] if with_node else []
        record |= {"realNode": node_files.NAME if with_node else None, "realNodes": names}
        run = Supervisor(self._record, self.logs, record, START_TIMEOUT_SECONDS)
        stages = kwok_stages.stages(tools["kwok"], self.state, pod_ready_delay, pod_grace)
        launch = Launch(self.state, self.pki_dir, self.logs, ports, stages, nodes_file, version, real_node=with_node)
        keep = (held,) if isinstance(held, int) else ()  # the node's processes hold its lock (node.claim)
        try:
            for c in wanted:  # the table's order
                if c.before is not None:
                    c.before(launch)
                run.launch(
                    c.name,
                    tools[c.name],
                    c.args(launch),
                    c.env(launch) if c.env else None,
                    keep if c.name in OF_THE_NODES else (),
                )
                if c.ready is not None:
                    run.wait(functools.partial(c.ready, launch), c.ready_what)
                if c.after is not None:
                    c.after(launch)
            run.check()
        except BaseException:
            run.rollback()  # a failed start leaves nothing running (etcd's data and the PKI stay)
            raise
        finally:
            for fd in keep:
                os.close(fd)
        run.release()
        progress(f"local plane ready in {run.elapsed():.1f}s: context {CONTEXT} in {self.kubeconfig}")
        note = node.pin_note(project_root(), self.state) if with_node else None
        if note:
            progress(note)
        return self.status()

    def _reused(
        self, progress: Any, pod_ready_delay: float, kubernetes_version: str | None, pod_grace: bool, real_nodes: int
    ) -> dict[str, Any]:
        """The running plane's status, as it is: another version asked for is refused, another
        delay, grace or number of real nodes said."""
        status = self.status()
        progress(f"local plane already running ({status['apiserver']})")
        if real_nodes > 1 and len(status["realNodes"]) != real_nodes:
            progress(
                f"note: it keeps its {len(status['realNodes'])} real node(s); "
                f"`local stop` then `local start --real-nodes {real_nodes}` to change it"
            )
        if kubernetes_version and not str(status.get("kubernetesVersion") or "").startswith(kubernetes_version + "."):
            raise PlaneError(
                f"the running plane is Kubernetes {status.get('kubernetesVersion') or 'of the default version'}, "
                f"not {kubernetes_version}.",
                fix=f"`local stop`, then `local start --kubernetes-version {kubernetes_version}`",
            )
        if bool(status.get("podGrace")) != pod_grace:
            progress(
                f"note: it keeps its pods' grace {'honoured' if status.get('podGrace') else 'unhonoured'}; "
                f"`local stop` then `local start{' --pod-grace' if pod_grace else ''}` to change it"
            )
        if status["podReadyDelaySeconds"] != pod_ready_delay:
            progress(
                f"note: it keeps its pod-ready delay of {status['podReadyDelaySeconds']:g} s; "
                f"`local stop` then `local start --pod-ready-delay {pod_ready_delay:g}` to change it"
            )
        return status

    def _tools(
        self, progress: Any, kubernetes_version: str | None, real_node: bool, real_nodes: int = 1
    ) -> tuple[dict[str, Path], str, int | str]:
        """The binaries this start runs (the real nodes after the first run the first's containerd
        and kubelet), the Kubernetes version they are, and the real nodes' lock (its file
        descriptor) -- or why the plane starts without its real node."""
        tools = {name: find_tool(name) for name in NAMES if name not in OF_THE_NODES + WITH_THE_NODE}
        node_tools: dict[str, Path] = {}
        if kubernetes_version:
            built = kubernetes_tools(kubernetes_version)
            tools |= {k: v for k, v in built.items() if k in tools}
            node_tools = {k: v for k, v in built.items() if k in NODE_COMPONENTS}
        version = self._version(tools["kube-apiserver"])
        why = node.why_not(self.state) if real_node else "not asked for (--no-real-node)"
        if why is None:
            node_tools = {name: node_tools.get(name) or find_tool(name) for name in NODE_COMPONENTS}
            if (kubelet := self._version(node_tools["kubelet"])) != version:
                release = version.rsplit(".", 1)[0]
                why = (
                    f"its kubelet is Kubernetes {kubelet}, this plane {version}; fix: `tools/build.sh kube@{release}` "
                    "builds the release's kubelet beside it (an entry built before it had one: remove the entry "
                    f"`tools/build.sh --print-kube-path {release}` names, then build)"
                )
        held = node.claim(self.state) if why is None else why
        if isinstance(held, str):
            progress(f"note: the plane starts without its real node: {held}")
            return tools, version, held
        tools |= node_tools
        for containerd, kubelet in MORE_NODES[: real_nodes - 1]:
            tools |= {containerd: node_tools["containerd"], kubelet: node_tools["kubelet"]}
        try:
            tools |= {name: find_tool(name) for name in WITH_THE_NODE}
        except ToolNotFound as exc:
            progress(f"note: the plane starts without its Prometheus: {exc.message} (tools/build.sh prometheus)")
        return tools, version, held

    @staticmethod
    def _version(apiserver: Path) -> str:
        """``1.36.3``: what the API server binary says it is (``Kubernetes v1.36.3``)."""
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True, timeout=30).stdout
        return out.strip().rsplit(" ", 1)[-1].removeprefix("v")

    def add_identity(self, context: str, user: str, groups: tuple[str, ...] = ()) -> str:
        """Issue a client certificate for ``user`` and add context ``context`` to the kubeconfig."""
        access.add_identity(self.state, self.pki_dir, context, user, groups)
        access.write_kubeconfigs(self.state, self.pki_dir, int(self._read_record()["ports"]["apiserver"]))
        return context

    # -- stop ----------------------------------------------------------------------------------
    def stop(self, quiet: bool = False, progress: Any = print) -> list[str]:
        """End the plane's own processes (verified by pid and executable). Returns what was stopped."""
        stopped = stop_recorded(self._record, reversed(NAMES))
        left: list[str] | None = []
        if node_files.home(self.state).is_dir():
            left = node.clean_up_if_free(self.state)
        if left is None:  # the node is another plane's now: nothing of the machine is ours to clean
            if not quiet:
                progress("note: the real node is another plane's now; its pods, bridge and the host's settings are left to it")
        elif left:
            put_back = [x.removeprefix("host: ") for x in left if x.startswith("host: ")]
            if stopped and put_back and not quiet:  # the host as the start found it
                progress(f"the host as the plane found it: {', '.join(put_back)}")
            elif left and not stopped:  # a plane that was killed: say what its node had left
                progress(f"note: cleaned up what the real node left: {', '.join(left)}")
        if not quiet:
            progress(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return stopped

    def reset(self) -> None:
        self.stop(quiet=True)
        shutil.rmtree(self.state, ignore_errors=True)
