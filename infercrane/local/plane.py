"""The embedded local control plane: etcd, kube-apiserver (TLS, RBAC), controller-manager,
scheduler, kwok with simulated GPU nodes (labelled as GPU Feature Discovery does, and DRA-only ones
whose GPUs are ResourceSlices: :mod:`~infercrane.local.dra`) and the KServe manager (Standard mode, its webhooks
served with local certificates), on loopback only.

State, certificates, logs and the kubeconfig live in one directory (default
``<project>/.infercrane/local``). ``start`` is idempotent (a running plane is reused; a stopped
one restarts on its kept etcd data), ``stop`` ends only the processes this module started (their
pids and executables are recorded), ``reset`` wipes the state. Contexts in the kubeconfig:
``infercrane-local`` (the restricted deployer bound to exactly the shipped Roles),
``infercrane-local-viewer`` (read-only: the optional readers) and ``infercrane-local-admin``.
Local-plane layer.

One module, past 300 lines: start, stop and reset act on one recorded state.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import yaml

from infercrane.core.errors import PlaneError, ToolNotFound
from infercrane.local import node, node_files, pki, private
from infercrane.local.components import COMPONENTS, NAMES, NODE_COMPONENTS, PORTS, WITH_THE_NODE
from infercrane.local.launch import Launch, http_status
from infercrane.local.layout import (
    ADMIN_CONTEXT,
    CLUSTER,
    CONTEXT,
    DEPLOYER_GROUPS,
    DEPLOYER_USER,
    KSERVE_USER,
    KUBELET_CLIENT_USER,
    NAMESPACE,
    PROMETHEUS_USER,
    START_TIMEOUT_SECONDS,
    VIEWER_CONTEXT,
    VIEWER_USER,
)
from infercrane.local.supervise import Supervisor, alive, free_port, read_record, stop_recorded
from infercrane.project.paths import project_root
from infercrane.project.tools import find_tool, kubernetes_tools

#: On a plane started with a pod-ready delay, a kwok pod with this annotation (a duration, "60s")
#: becomes Ready after that long instead: one release that loads slower than the rest.
READY_DELAY_ANNOTATION: Final = "pod-ready.stage.kwok.x-k8s.io/delay"


def default_state_dir() -> Path:
    return Path(os.environ.get("INFERCRANE_LOCAL_DIR") or project_root() / ".infercrane" / "local")


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
    ) -> dict[str, Any]:
        """Start (or reuse) the plane, bootstrap it, and return :meth:`status`.

        ``pod_ready_delay``: seconds from a pod's start to its Ready condition (simulated model
        load; kwok's pod-ready Stage delayed), kept until the next start. ``pod_grace``: a deleted
        pod on the kwok nodes stays, terminating, until its grace period ends (kwok's pod-delete
        Stage waits for its ``deletionTimestamp``), as a pod whose engine drains to its last second
        would -- the window in which a predecessor still holds its GPUs; default: it goes at once.
        Kept until the next start. ``kubernetes_version``:
        a minor of tools/versions.env's KUBERNETES_VERSIONS (``1.34``; default KUBERNETES_VERSION),
        built by ``tools/build.sh kube@1.34``. A running plane is reused as it is, its delay and
        version included."""
        if pod_ready_delay < 0:
            raise PlaneError(f"--pod-ready-delay {pod_ready_delay:g} is negative.", fix="use seconds >= 0 (default 0)")
        if self.running():
            status = self.status()
            progress(f"local plane already running ({status['apiserver']})")
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
        self.stop(quiet=True)
        tools = {name: find_tool(name) for name in NAMES if name not in NODE_COMPONENTS + WITH_THE_NODE}
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
        why = held if isinstance(held, str) else None
        if why is None:
            tools |= node_tools
            try:
                tools |= {name: find_tool(name) for name in WITH_THE_NODE}
            except ToolNotFound as exc:
                progress(f"note: the plane starts without its Prometheus: {exc.message} (tools/build.sh prometheus)")
        else:
            progress(f"note: the plane starts without its real node: {why}")
        wanted = [c for c in COMPONENTS if c.name in tools]
        self.state.mkdir(parents=True, exist_ok=True)
        ports: dict[str, int] = {}
        for name in PORTS:  # distinct: each chosen apart from the ones before it
            ports[name] = free_port(ports.values())
        self._write_pki()
        self._write_kubeconfigs(ports["apiserver"])
        record = {
            "ports": ports,
            "podReadyDelaySeconds": pod_ready_delay,
            "podGrace": pod_grace,
            "kubernetesVersion": version,
            "components": [c.name for c in wanted],
        }
        run = Supervisor(
            self._record, self.logs, record | {"realNode": node_files.NAME if why is None else None}, START_TIMEOUT_SECONDS
        )
        stages = self._stages(tools["kwok"], pod_ready_delay, pod_grace)
        launch = Launch(self.state, self.pki_dir, self.logs, ports, stages, nodes_file, version, real_node=why is None)
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
                    keep if c.name in NODE_COMPONENTS else (),
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
        note = node.pin_note(project_root(), self.state) if why is None else None
        if note:
            progress(note)
        return self.status()

    @staticmethod
    def _version(apiserver: Path) -> str:
        """``1.36.3``: what the API server binary says it is (``Kubernetes v1.36.3``)."""
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True, timeout=30).stdout
        return out.strip().rsplit(" ", 1)[-1].removeprefix("v")

    def _stages(self, kwok: Path, pod_ready_delay: float, pod_grace: bool = False) -> Path:
        """kwok's stages: the built ones, or a copy in the plane's state -- with a pod-ready delay,
        whose ``pod-ready`` Stage waits that long (``spec.delay``), so a pod is Pending, and its
        Deployment unavailable, for as long as a model would take to load -- or as long as its
        :data:`READY_DELAY_ANNOTATION` says (a slower load for one release); with ``pod_grace``, whose
        ``pod-delete`` Stage waits until the pod's ``deletionTimestamp`` (its deletion + its grace)."""
        built = kwok.parent.parent / "etc" / "stages.yaml"
        if not built.is_file():
            raise PlaneError(f"kwok stages {built} are missing.", fix="run `tools/build.sh kwok`")
        if not pod_ready_delay and not pod_grace:
            return built
        docs = [d for d in yaml.safe_load_all(built.read_text(encoding="utf-8")) if d]

        def stage(name: str) -> dict[str, Any]:
            found = [d for d in docs if d.get("kind") == "Stage" and d.get("metadata", {}).get("name") == name]
            if len(found) != 1:
                raise PlaneError(f"kwok stages {built} have no single {name} Stage.", fix="rebuild: `tools/build.sh kwok`")
            return cast(dict[str, Any], found[0])  # the document itself: the caller edits it in place

        if pod_ready_delay:  # a pod may ask for a load of its own (kwok's annotation, a duration: "60s")
            stage("pod-ready")["spec"]["delay"] = {
                "durationMilliseconds": int(pod_ready_delay * 1000),
                "durationFrom": {"expressionFrom": f'.metadata.annotations["{READY_DELAY_ANNOTATION}"]'},
            }
        if pod_grace:  # a time: kwok waits until it (kwok's own general pod-delete Stage reads the same field)
            stage("pod-delete")["spec"]["delay"] = {
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
            }
        delayed = self.state / "kwok-stages.yaml"
        delayed.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
        return delayed

    def _write_pki(self) -> None:
        p = self.pki_dir
        ca = pki.CA.load_or_create(p)
        if not (p / "etcd" / "apiserver-client.crt").is_file():  # also a plane created before etcd asked for one
            # etcd's own CA: every identity of the plane has a certificate of the plane's CA, and etcd
            # must take only the API server's.
            etcd = pki.CA.load_or_create(p / "etcd")
            etcd.issue("server", "etcd", ips=("127.0.0.1",), dns=("localhost",), peer=True)
            etcd.issue("apiserver-client", "kube-apiserver-etcd-client")
        if (p / "apiserver.crt").is_file():
            return
        ca.issue(
            "apiserver",
            "kube-apiserver",
            dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ips=("127.0.0.1", "10.96.0.1"),
            server=True,
        )
        ca.issue("admin", "infercrane-admin", orgs=("system:masters",))
        ca.issue("deployer", DEPLOYER_USER, orgs=DEPLOYER_GROUPS)
        ca.issue("viewer", VIEWER_USER)
        ca.issue("controller-manager", "system:kube-controller-manager")
        ca.issue("apiserver-kubelet-client", KUBELET_CLIENT_USER)
        ca.issue("scheduler", "system:kube-scheduler")
        pki.service_account_keys(p)
        self._write_kserve_pki(ca)

    def _write_kserve_pki(self, ca: pki.CA) -> None:
        ca.issue("kserve-manager", KSERVE_USER)
        ca.issue("kserve-webhook", "kserve-webhook-server", dns=("localhost",), ips=("127.0.0.1",), server=True)

    def _write_kubeconfigs(self, port: int) -> None:
        server = f"https://127.0.0.1:{port}"
        p = self.pki_dir

        def doc(users: dict[str, str], contexts: dict[str, str], current: str | None) -> dict[str, Any]:
            d: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": CLUSTER, "cluster": {"server": server, "certificate-authority": str(p / "ca.crt")}}],
                "users": [
                    {"name": u, "user": {"client-certificate": str(p / f"{stem}.crt"), "client-key": str(p / f"{stem}.key")}}
                    for u, stem in users.items()
                ],
                "contexts": [
                    {"name": c, "context": {"cluster": CLUSTER, "user": u, "namespace": NAMESPACE}} for c, u in contexts.items()
                ],
            }
            if current:
                d["current-context"] = current
            return d

        if not (p / "viewer.crt").is_file():  # a plane created before the viewer identity existed
            pki.CA.load_or_create(p).issue("viewer", VIEWER_USER)
        if not (p / "apiserver-kubelet-client.crt").is_file():  # a plane created before its real node
            pki.CA.load_or_create(p).issue("apiserver-kubelet-client", KUBELET_CLIENT_USER)
        if not (p / "kserve-webhook.crt").is_file():  # a plane created before KServe ran on it
            self._write_kserve_pki(pki.CA.load_or_create(p))
        if not (p / "prometheus.crt").is_file():  # a plane created before its Prometheus
            pki.CA.load_or_create(p).issue("prometheus", PROMETHEUS_USER)
        users = {"infercrane-deployer": "deployer", "infercrane-admin": "admin", "infercrane-viewer": "viewer"}
        contexts = {CONTEXT: "infercrane-deployer", ADMIN_CONTEXT: "infercrane-admin", VIEWER_CONTEXT: "infercrane-viewer"}
        extra = self._read_identities()
        users |= {f"identity-{c}": f"identity-{c}" for c in extra}
        contexts |= {c: f"identity-{c}" for c in extra}
        # InferCrane never uses a current-context (every stack names its context); a person's
        # kubectl does: the read-only viewer, so `kubectl get pods -n infercrane-system` just works.
        self._write_yaml(self.kubeconfig, doc(users, contexts, VIEWER_CONTEXT))
        for stem in ("admin", "controller-manager", "scheduler", "kserve-manager"):
            self._write_yaml(self.state / f"{stem}.kubeconfig", doc({stem: stem}, {stem: stem}, stem))

    def _read_identities(self) -> list[str]:
        path = self.state / "identities.json"
        return list(json.loads(path.read_text())) if path.is_file() else []

    def add_identity(self, context: str, user: str, groups: tuple[str, ...] = ()) -> str:
        """Issue a client certificate for ``user`` and add context ``context`` to the kubeconfig."""
        pki.CA.load_or_create(self.pki_dir).issue(f"identity-{context}", user, orgs=groups)
        names = sorted(set(self._read_identities()) | {context})
        (self.state / "identities.json").write_text(json.dumps(names))
        self._write_kubeconfigs(int(self._read_record()["ports"]["apiserver"]))
        return context

    @staticmethod
    def _write_yaml(path: Path, data: dict[str, Any]) -> None:
        private.write(path, yaml.safe_dump(data, sort_keys=False))

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
