"""Integration tier: the real Pulumi engine, provider and a real control plane (local plane).

One plane per test session (its own state directory; `make test` runs several sessions side by
side, :mod:`tests.workers`), one Pulumi stack per test (its own stack file and replica keys, so
tests never share objects). The deploying identity is the restricted
``infercrane-local`` context bound to deploy/ RBAC. Missing tools fail the tier, never skip it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node

from infercrane.engine.workspace import Engine
from infercrane.local import host, node_files, node_teardown
from infercrane.local import node as real_node
from infercrane.local.applying import admin_client
from infercrane.local.plane import Plane
from infercrane.project.tools import find_tool
from tests.postgres import PostgresMissing
from tests.postgres import throwaway as throwaway_postgres
from tests.workers import REAL_NODE_MODULES, fail_without_the_real_node, runs_the_real_node

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
KUBERNETES_VERSION_ENV = "INFERCRANE_TEST_KUBERNETES_VERSION"

pytestmark = pytest.mark.integration


def kwok_plane(factory: pytest.TempPathFactory, name: str, nodes: dict[str, Any], **start: Any) -> Iterator[Plane]:
    """A module's own plane of kwok ``nodes`` (no real node), started with ``start`` (a pod-ready
    delay, pod grace) -- for a module whose pods must load or drain for a while; stopped after it."""
    root = factory.mktemp(name)
    (root / "nodes.yaml").write_text(yaml.safe_dump(nodes))
    p = Plane(root / "state")
    status = p.start(nodes_file=root / "nodes.yaml", progress=lambda m: None, real_node=False, **start)
    assert status["realNode"] is None and status["podGrace"] is bool(start.get("pod_grace")), status
    assert status["podReadyDelaySeconds"] == start.get("pod_ready_delay", 0), status
    yield p
    p.stop(quiet=True)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    for tool in ("pulumi", "pulumi-resource-kubernetes", "kube-apiserver", "etcd", "kwok"):
        find_tool(tool)  # raises with "run tools/build.sh" when missing: the tier fails, never skips
    p = Plane(tmp_path_factory.mktemp("plane"))
    found = host.settings()  # the host as the plane finds it: as `local stop` must leave it
    began = time.monotonic()
    # make test-matrix runs the tier on each pinned Kubernetes (make test: the default one)
    status = p.start(
        progress=lambda m: None,
        kubernetes_version=os.environ.get(KUBERNETES_VERSION_ENV) or None,
        real_node=runs_the_real_node(),
        real_nodes=len(node_files.NODES),
    )
    print(f"local plane (Kubernetes {status['kubernetesVersion']}) started in {time.monotonic() - began:.1f}s")
    if status["realNode"]:  # the real nodes after the first wait, cordoned, for a test that asks (second_node)
        assert status["realNodes"] == [n.name for n in node_files.NODES], status
        for n in node_files.NODES[1:]:
            admin_client(p.kubeconfig).patch(Node, n.name, {"spec": {"unschedulable": True}})
    yield p
    while_running = host.settings()
    p.stop(quiet=True)
    if status.get("realNode"):  # the one plane that changes the host (the others run beside it)
        left = node_teardown.leftovers(p.state)
        assert not left, f"`local stop` left the real node's {', '.join(left)} behind"
        assert host.settings() == found, f"`local stop` left the host changed: found {found}, left {host.settings()}"
        assert {k: while_running[k] for k in host.KUBELET_TUNABLES} == host.KUBELET_TUNABLES, while_running
    else:
        assert not (p.state / "host.json").exists(), "a plane without the real node changed the host"


@pytest.fixture(scope="session")
def plane_has_the_real_node(plane: Plane) -> bool:
    return bool(plane.status()["realNode"])


@pytest.fixture(autouse=True)
def _the_real_node_is_there(request: pytest.FixtureRequest) -> None:
    """A test of the real node's modules fails at once, saying why, on a plane without the node."""
    if request.node.nodeid.split("::", 1)[0] in REAL_NODE_MODULES:
        plane: Plane = request.getfixturevalue("plane")
        has_node: bool = request.getfixturevalue("plane_has_the_real_node")
        fail_without_the_real_node(request.node.nodeid, has_node, lambda: real_node.why_not(plane.state))


@pytest.fixture(scope="session")
def admin(plane: Plane) -> Client:
    return admin_client(plane.kubeconfig)


@pytest.fixture
def second_node(plane: Plane, admin: Client) -> Iterator[str]:
    """The plane's second real node (its own kubelet, containerd and image store), schedulable for
    this test: the one-node tests' replicas never land on it, so it waits cordoned between tests."""
    name = node_files.NODES[1].name
    assert name in plane.status()["realNodes"], "the real node's plane runs without its second real node"
    admin.patch(Node, name, {"spec": {"unschedulable": None}})
    yield name
    admin.patch(Node, name, {"spec": {"unschedulable": True}})


@pytest.fixture(scope="session")
def pulumi_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pulumi-home")


class Project:
    """A scratch Pulumi project (Pulumi.yaml, __main__.py, stacks/) bound to the plane."""

    def __init__(self, root: Path, plane: Plane, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.plane = root, plane
        shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
        shutil.copy(ROOT / "__main__.py", root / "__main__.py")
        (root / "stacks").mkdir()
        for var in [v for v in os.environ if v.startswith("INFERCRANE_KUBERNETES_")]:
            monkeypatch.delenv(var)
        monkeypatch.setenv("INFERCRANE_KUBERNETES_KUBECONFIG", str(plane.kubeconfig))
        monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "integration")
        monkeypatch.setenv("PULUMI_HOME", str(pulumi_home))
        monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
        for var in ("INFERCRANE_WORKER_API_KEY_FILE", "INFERCRANE_WORKER_API_KEY"):  # a test gives the key it means
            monkeypatch.delenv(var, raising=False)
        self.stacks: set[str] = set()

    def cleanup(self, admin: Client) -> None:
        """Delete every object of this test's stacks, whatever the test's outcome: a failed test
        must not leave replicas that hold the plane's few GPUs for the tests after it."""
        from lightkube.resources.apps_v1 import Deployment
        from lightkube.resources.core_v1 import Service
        from lightkube.resources.resource_v1 import ResourceClaimTemplate
        from lightkube.types import CascadeType

        from infercrane.core import naming
        from infercrane.live.client.cluster import InferenceService

        ours = {f"infercrane/{s}" for s in self.stacks}
        for res in (Deployment, Service, InferenceService, ResourceClaimTemplate):
            try:
                items = list(admin.list(res, namespace="*", labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}))
            except ApiError:
                continue
            for obj in items:
                if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) in ours:
                    try:
                        admin.delete(res, obj.metadata.name, namespace=obj.metadata.namespace, cascade=CascadeType.BACKGROUND)
                    except ApiError:
                        pass

    def stack(self, name: str, replicas: list[dict[str, Any]], **target: Any) -> PulumiStack:
        t = {"context": "infercrane-local", "namespace": "infercrane-system", "imageDigest": DIGEST} | target
        self.stacks.add(name)
        doc = {"config": {"infercrane:kubernetes": t, "infercrane:replicas": replicas}}
        (self.root / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return PulumiStack(name, project_dir=self.root)


class PulumiStack(Engine):
    """A stack the tests also drive as plain Pulumi does (``infercrane destroy`` never runs
    ``pulumi destroy``: it deletes by ownership, :mod:`infercrane.engine.teardown`)."""

    def destroy(self) -> Any:
        """``pulumi destroy`` through the Automation API, as the program's own engine runs it."""
        return self._run("destroy")

    def outputs(self) -> dict[str, Any]:
        return {k: v.value for k, v in self.stack.outputs().items()}


@pytest.fixture
def project(tmp_path: Path, plane: Plane, pulumi_home: Path, monkeypatch: pytest.MonkeyPatch, admin: Client) -> Iterator[Project]:
    p = Project(tmp_path, plane, pulumi_home, monkeypatch)
    yield p
    p.cleanup(admin)


def replica(key: str, gpu: str = "NVIDIA-L40S", **extra: Any) -> dict[str, Any]:
    return {"key": key, "model": "Qwen/Qwen3-8B", "name": "qwen", "gpu": gpu} | extra


def kubectl(
    plane: Plane, *args: str, stdin: str | None = None, context: str = "infercrane-local-admin"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_tool("kubectl")), f"--kubeconfig={plane.kubeconfig}", f"--context={context}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def foreign_apply(plane: Plane, name: str, replicas: int, *, manager: str | None = "foreign-owner") -> None:
    """Another field manager takes ``spec.replicas`` of Deployment ``name`` with --force-conflicts."""
    patch = f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: infercrane-system\nspec:\n  replicas: {replicas}\n"
    flags = [f"--field-manager={manager}"] if manager else []
    r = kubectl(plane, "apply", "--server-side", *flags, "--force-conflicts", "-f", "-", stdin=patch)
    assert r.returncode == 0, r.stderr


def get_or_none(client: Client, res: Any, name: str, namespace: str = "infercrane-system") -> Any:
    try:
        return client.get(res, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


L40S_NODES = ("kwok-l40s-0", "kwok-l40s-1")


def pending_record(
    admin: Client, config: Any, name: str, why: Callable[[list[str]], bool]
) -> Callable[[], dict[str, Any] | None]:
    """A check for :func:`wait_for`: ``inspect``'s record of the stack's only replica (read as the
    admin, so with its pods) once its Deployment exists and its pod's reasons satisfy ``why``."""
    from lightkube.resources.apps_v1 import Deployment

    from infercrane.live.client.api import Live
    from infercrane.live.inspect import inspect

    def check() -> dict[str, Any] | None:
        recs = inspect(config, Live(admin, config.kubernetes)) if get_or_none(admin, Deployment, name) else []
        pods = (recs[0]["pods"] or []) if recs else []
        return dict(recs[0]) if pods and why(pods[0]["reasons"]) else None

    return check


def kill_as_ci(proc: subprocess.Popen[str]) -> bool:
    """SIGKILL ``proc``'s whole process group, as a CI runner kills a timed-out job, and wait for
    it; then stop, by pid, what the group kill cannot reach -- Pulumi starts its plugins in
    process groups of their own, and they would outlive the test. Returns whether the group was
    still there to kill."""
    import signal

    started = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        hit = True
    except ProcessLookupError:
        hit = False
    proc.wait()
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return hit


def descendants(root: int) -> list[int]:
    """Every process below ``root`` now (from /proc: each process's parent)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def kill_deploy_while_waiting(project: Project, admin: Client, stack: str, key: str, idempotency_key: str) -> None:
    """Run ``deploy`` of ``stack`` (one replica ``key``) as a CI job would, and SIGKILL its whole
    process group once the Deployment is applied and the deploy is waiting for readiness (no
    L40S node may take the pod meanwhile: they are cordoned, and uncordoned afterwards)."""
    from lightkube.resources.apps_v1 import Deployment

    from infercrane.core import naming

    for node in L40S_NODES:
        assert kubectl(project.plane, "cordon", node).returncode == 0
    try:
        proc = start_cli(project, "deploy", "--stack", stack, "--idempotency-key", idempotency_key)
        name = naming.object_name(key)
        wait_for(lambda: get_or_none(admin, Deployment, name), "the Deployment to be applied", timeout=120)
        time.sleep(2)  # inside the readiness wait
        kill_as_ci(proc)
    finally:
        for node in L40S_NODES:
            kubectl(project.plane, "uncordon", node)


def plain_pulumi(
    project: Project, stack: str, env: dict[str, str] | None = None
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``pulumi <args> --stack <stack>`` from a shell (the stand-in language host), not the
    Automation API; ``env``: added to its environment. Its ``TMPDIR`` is the test's own, as
    docs/faults.md advises for plain Pulumi: the provider leaves a kubeconfig copy there each run."""
    from infercrane.engine.environment import engine_env

    scratch = project.root / ".tmp"
    scratch.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ) | engine_env(stack, project.root) | {"TMPDIR": str(scratch)} | (env or {})

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--stack", stack, "--non-interactive"],
            cwd=project.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return pulumi


def _cli_env(project: Project) -> dict[str, str]:
    return dict(os.environ) | {"INFERCRANE_PROJECT_DIR": str(project.root), "PYTHONPATH": str(ROOT)}


def cli(project: Project, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m infercrane ARGS`` in ``project``, as a user or a CI job runs it (a new process)."""
    return subprocess.run(
        [sys.executable, "-m", "infercrane", *args],
        cwd=project.root,
        env=_cli_env(project) | (env or {}),
        capture_output=True,
        text=True,
        timeout=600,
    )


def start_cli(project: Project, *args: str, capture: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m infercrane ARGS`` started in its own process group (to be killed as a CI
    runner kills a job: ``os.killpg``); output captured as text, or discarded."""
    stream = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "infercrane", *args],
        cwd=project.root,
        env=_cli_env(project) | (env or {}),
        stdout=stream,
        stderr=stream,
        text=True,
        start_new_session=True,
    )


@pytest.fixture
def identity(plane: Plane, admin: Client) -> Iterator[Callable[[str, list[dict[str, Any]]], str]]:
    """A restricted identity: ``identity(name, rules)`` binds a new user to a Role of exactly
    ``rules`` in the namespace and returns its kubeconfig context (``name``). Removed after the test."""
    from lightkube import codecs
    from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

    made: list[str] = []

    def make(name: str, rules: list[dict[str, Any]]) -> str:
        meta = {"name": name, "namespace": "infercrane-system"}
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules}
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"{name}-user"}],
        }
        admin.apply(codecs.from_dict(role), field_manager="it")
        admin.apply(codecs.from_dict(binding), field_manager="it")
        made.append(name)
        return plane.add_identity(name, f"{name}-user")

    yield make
    for name in made:
        for res in (RoleBinding, Role):
            try:
                admin.delete(res, name, namespace="infercrane-system")
            except ApiError:
                pass


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 (:mod:`tests.postgres`); its URL as Pulumi takes it."""
    try:
        with throwaway_postgres() as url:
            yield url
    except PostgresMissing as exc:
        pytest.fail(str(exc))
