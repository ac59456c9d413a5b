"""The embedded local control plane: etcd, kube-apiserver (TLS, RBAC), controller-manager,
scheduler, kwok with simulated GPU nodes and the KServe manager (Standard mode, its webhooks
served with local certificates), on loopback only.

State, certificates, logs and the kubeconfig live in one directory (default
``<project>/.infercrane/local``). ``start`` is idempotent (a running plane is reused; a stopped
one restarts on its kept etcd data), ``stop`` ends only the processes this module started (their
pids and executables are recorded), ``reset`` wipes the state. Contexts in the kubeconfig:
``infercrane-local`` (the restricted deployer bound to exactly the shipped Roles),
``infercrane-local-viewer`` (read-only: the optional pod and node readers) and ``infercrane-local-admin``.
Operations layer.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from lightkube import ApiError

from infercrane.config import code_root, project_root
from infercrane.errors import InferCraneError
from infercrane.local import pki

CONTEXT: Final = "infercrane-local"
ADMIN_CONTEXT: Final = "infercrane-local-admin"
# Read-only evidence identity: the optional pod and node readers, nothing else (demo placement).
VIEWER_CONTEXT: Final = "infercrane-local-viewer"
VIEWER_USER: Final = "infercrane-local-viewer"
CLUSTER: Final = "infercrane-local"
NAMESPACE: Final = "infercrane-system"
DEPLOYER_USER: Final = "system:serviceaccount:infercrane-system:infercrane-control-plane"
DEPLOYER_GROUPS: Final = ("system:serviceaccounts", "system:serviceaccounts:infercrane-system")
BOOTSTRAP_MANAGER: Final = "infercrane-bootstrap"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
SERVICE_CIDR: Final = "10.96.0.0/16"
START_TIMEOUT_SECONDS: Final = 90
COMPONENTS: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kserve-manager")
# The KServe manager's own identity (client certificate), bound to KServe's own ClusterRole.
KSERVE_USER: Final = "kserve-controller-manager"
KSERVE_NAMESPACE: Final = "kserve"
HERE: Final = Path(__file__).resolve().parent


class PlaneError(InferCraneError):
    """The local control plane could not be started, checked or stopped."""


def default_state_dir() -> Path:
    return Path(os.environ.get("INFERCRANE_LOCAL_DIR") or project_root() / ".infercrane" / "local")


@functools.cache
def tool_dirs() -> tuple[Path, ...]:
    """The cache entries of the pinned tools (tools/build.sh owns the layout; asked once)."""
    script = code_root() / "tools" / "build.sh"
    out = subprocess.run(["bash", str(script), "--print-path"], capture_output=True, text=True, check=True).stdout
    return tuple(Path(line) for line in out.splitlines() if line)


def find_tool(name: str) -> Path:
    for d in tool_dirs():
        if (d / name).is_file():
            return d / name
    raise PlaneError(
        f"{name} is not built yet.\n    fix: run `tools/build.sh` (or `make tools`); the first build takes tens of minutes"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int, exe: str) -> bool:
    """Is ``pid`` a live process running ``exe``? (never another process that reused the pid)

    Reads the ``/proc/<pid>/exe`` link, which names the executable from ``exec`` on; the cmdline
    is not used: it can read empty for a live process (seen for most reads right after Popen)."""
    try:
        running = os.readlink(f"/proc/{pid}/exe")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and running == os.path.realpath(exe)


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
        try:
            return dict(json.loads(self._record.read_text()))
        except (OSError, ValueError):
            return {}

    # -- status --------------------------------------------------------------------------------
    def processes(self) -> dict[str, bool]:
        rec = self._read_record()
        return {name: _alive(p["pid"], p["exe"]) for name, p in rec.get("processes", {}).items()}

    def api_ready(self, timeout: float = 2.0) -> bool:
        rec = self._read_record()
        port = rec.get("ports", {}).get("apiserver")
        if not port:
            return False
        return self._get(f"https://127.0.0.1:{port}/readyz", timeout) == 200

    def running(self) -> bool:
        procs = self.processes()
        return bool(procs) and all(procs.values()) and set(procs) == set(COMPONENTS) and self.api_ready()

    def status(self) -> dict[str, Any]:
        rec = self._read_record()
        return {
            "running": self.running(),
            "state": str(self.state),
            "kubeconfig": str(self.kubeconfig),
            "context": CONTEXT,
            "adminContext": ADMIN_CONTEXT,
            "apiserver": f"https://127.0.0.1:{rec['ports']['apiserver']}" if rec.get("ports") else None,
            "processes": self.processes(),
        }

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        return ctx

    def _get(self, url: str, timeout: float) -> int:
        try:
            with urllib.request.urlopen(url, context=self._ssl(), timeout=timeout) as resp:
                return int(resp.status)
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return 0

    # -- start ---------------------------------------------------------------------------------
    def start(self, nodes_file: Path | None = None, progress: Any = print) -> dict[str, Any]:
        """Start (or reuse) the plane, bootstrap it, and return :meth:`status`."""
        if self.running():
            progress(f"local plane already running ({self.status()['apiserver']})")
            return self.status()
        self.stop(quiet=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        began = time.monotonic()
        tools = {name: find_tool(name) for name in COMPONENTS}
        self.state.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        ports = {
            "etcd": _free_port(),
            "etcd_peer": _free_port(),
            "apiserver": _free_port(),
            "kwok": _free_port(),
            "kserve_webhook": _free_port(),
            "kserve_probe": _free_port(),
        }
        self._write_pki()
        self._write_kubeconfigs(ports["apiserver"])
        record: dict[str, Any] = {"ports": ports, "processes": {}}
        self._record.write_text(json.dumps(record))

        def launch(name: str, args: list[str], env: dict[str, str] | None = None) -> None:
            exe = str(tools[name])
            with (self.logs / f"{name}.log").open("ab") as log:  # the child keeps its own descriptor
                proc = subprocess.Popen(
                    [exe, *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, **env} if env else None,
                )
            self._children[name] = proc
            record["processes"][name] = {"pid": proc.pid, "exe": exe}
            self._record.write_text(json.dumps(record, indent=2))

        p, k = self.pki_dir, self.state
        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd_peer']}"
        launch(
            "etcd",
            [
                "--name=infercrane-local",
                f"--data-dir={k / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=infercrane-local={peer_url}",
                "--unsafe-no-fsync=true",  # a disposable local plane: speed over durability
                "--log-level=warn",
            ],
        )
        self._wait(lambda: self._port_open(ports["etcd"]), "etcd", began)
        launch(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--cert-dir={k / 'apiserver'}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--v=0",
            ],
        )
        self._wait(self.api_ready, "kube-apiserver /readyz", began)
        launch(
            "kube-controller-manager",
            [
                f"--kubeconfig={k / 'controller-manager.kubeconfig'}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={p / 'sa.key'}",
                f"--root-ca-file={p / 'ca.crt'}",
                "--use-service-account-credentials=true",
                "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle-controller,-node-route-controller",
                "--v=0",
            ],
        )
        launch(
            "kube-scheduler",
            [f"--kubeconfig={k / 'scheduler.kubeconfig'}", "--leader-elect=false", "--secure-port=0", "--v=0"],
        )
        stages = tools["kwok"].parent.parent / "etc" / "stages.yaml"
        if not stages.is_file():
            raise PlaneError(f"kwok stages {stages} are missing.\n    fix: run `tools/build.sh kwok`")
        launch(
            "kwok",
            [
                f"--kubeconfig={k / 'admin.kubeconfig'}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                "--node-lease-duration-seconds=40",
                "--cidr=10.244.0.0/16",
            ],
        )
        from infercrane.local import bootstrap

        try:
            bootstrap.run(self, nodes_file or HERE / "nodes.yaml")
        except ApiError as exc:
            raise PlaneError(
                f"bootstrapping the local plane failed: {exc.status.message} (HTTP {exc.status.code}).\n"
                f"    fix: see {self.logs}; `python -m infercrane local reset` then `local start` starts from scratch"
            ) from None
        except (OSError, yaml.YAMLError) as exc:
            raise PlaneError(
                f"bootstrapping the local plane failed: {exc}\n    fix: check the nodes file and deploy/ manifests"
            ) from None
        # KServe's manager: its CRDs, ConfigMap and ClusterRole are in place (bootstrap); it serves
        # its admission webhooks with a certificate of the plane's CA, from $TMPDIR/k8s-webhook-server.
        certs = k / "kserve" / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(p / "kserve-webhook.crt", certs / "tls.crt")
        shutil.copy(p / "kserve-webhook.key", certs / "tls.key")
        launch(
            "kserve-manager",
            [
                "--metrics-addr=0",
                f"--health-probe-addr=127.0.0.1:{ports['kserve_probe']}",
                f"--webhook-port={ports['kserve_webhook']}",
                "--leader-elect=false",
            ],
            env={
                "KUBECONFIG": str(k / "kserve-manager.kubeconfig"),
                "TMPDIR": str(k / "kserve"),
                "POD_NAMESPACE": KSERVE_NAMESPACE,
            },
        )
        self._wait(lambda: self._get(f"http://127.0.0.1:{ports['kserve_probe']}/readyz", 1.0) == 200, "the KServe manager", began)
        try:
            bootstrap.register_kserve_webhooks(self, ports["kserve_webhook"])
        except ApiError as exc:
            raise PlaneError(f"registering KServe's webhooks failed: {exc.status.message} (HTTP {exc.status.code})") from None
        dead = self._exited_children()
        if dead:
            raise PlaneError(f"{dead[0]} exited during start; see {self.logs / (dead[0] + '.log')}")
        progress(f"local plane ready in {time.monotonic() - began:.1f}s: context {CONTEXT} in {self.kubeconfig}")
        return self.status()

    def _port_open(self, port: int) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def _exited_children(self) -> list[str]:
        """Components started by this start() that have exited (asked of the child itself)."""
        return [n for n, p in getattr(self, "_children", {}).items() if p.poll() is not None]

    def _wait(self, check: Any, what: str, began: float) -> None:
        while not check():
            dead = self._exited_children()
            if dead:
                raise PlaneError(f"{dead[0]} exited during start; see {self.logs / (dead[0] + '.log')}")
            if time.monotonic() - began > START_TIMEOUT_SECONDS:
                raise PlaneError(f"timed out waiting for {what}; see {self.logs}")
            time.sleep(0.2)

    def _write_pki(self) -> None:
        p = self.pki_dir
        ca = pki.CA.load_or_create(p)
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
        if not (p / "kserve-webhook.crt").is_file():  # a plane created before KServe ran on it
            self._write_kserve_pki(pki.CA.load_or_create(p))
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
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(data, sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(path)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self, quiet: bool = False, progress: Any = print) -> list[str]:
        """End the plane's own processes (verified by pid and executable). Returns what was stopped."""
        rec = self._read_record()
        stopped = []
        for name in reversed(COMPONENTS):
            p = rec.get("processes", {}).get(name)
            if p and _alive(p["pid"], p["exe"]):
                os.kill(p["pid"], signal.SIGTERM)
                stopped.append(name)
        deadline = time.monotonic() + 15
        for name in stopped:
            p = rec["processes"][name]
            while _alive(p["pid"], p["exe"]) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(p["pid"], p["exe"]):
                os.kill(p["pid"], signal.SIGKILL)
        if rec:
            rec["processes"] = {}
            self._record.write_text(json.dumps(rec, indent=2))
        if not quiet:
            progress(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return stopped

    def reset(self) -> None:
        self.stop(quiet=True)
        shutil.rmtree(self.state, ignore_errors=True)


def random_secret() -> str:
    """A fresh worker key; written to the Secret, never printed or logged."""
    return secrets.token_urlsafe(32)
