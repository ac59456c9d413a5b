"""Faults: a deploy killed like a CI runner kills it (SIGKILL to the whole process group) while it
waits for readiness; the retry -- same command, same key -- converges without a manual step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.engine.workspace import Engine
from infercrane.live.status.verdicts import deployment_verdict
from tests.integration.conftest import ROOT, Project, get_or_none, kill_deploy_while_waiting, kubectl, replica
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def test_deploy_killed_while_waiting_is_retried_with_the_same_key_and_converges(project: Project, admin: Client) -> None:
    key = "it-killed-r0"
    name = naming.object_name(key)
    project.stack("itkilled", [replica(key)])
    kill_deploy_while_waiting(project, admin, "itkilled", key, "ci-run-41")
    locks = list((project.root / ".infercrane" / "pulumi-state" / ".pulumi" / "locks").rglob("*.json"))
    assert locks, "the killed update should have left its lock behind"
    runs = list((project.root / ".infercrane" / "engine-runs").rglob("*.json"))
    assert runs, "the killed run should have left the record of its pulumi process"
    left = {path: path.read_bytes() for path in locks + runs}
    r = cli(project, "deploy", "--stack", "itkilled", "--idempotency-key", "ci-run-41")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "removed the lock of stack 'itkilled' left by pulumi process" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr
    assert not any(path.exists() for path in locks)
    dep = admin.get(Deployment, name, namespace=NS)
    assert deployment_verdict(dep.to_dict(), 1).state == "ready"
    # A kill after the update wrote the state but before it unlocked (a window of milliseconds,
    # stood for by putting the killed run's lock and record back): the rerun replays, with no
    # engine call, and still removes the lock.
    for path, raw in left.items():
        path.write_bytes(raw)
    r = cli(project, "deploy", "--stack", "itkilled", "--idempotency-key", "ci-run-41")
    assert r.returncode == 0 and "already applied at" in r.stdout, r.stderr[-3000:]
    assert "removed the lock of stack 'itkilled' left by pulumi process" in r.stderr + r.stdout
    assert not any(path.exists() for path in locks)
    assert cli(project, "destroy", "--stack", "itkilled").returncode == 0


def test_a_lock_of_this_host_name_that_no_run_here_recorded_is_left_and_explained(project: Project, admin: Client) -> None:
    """Another container given the same host name holds the lock (its pids are not ours to see):
    stood for by a killed run whose records are gone. The lock stays, the deploy says why and
    applies nothing; after `pulumi cancel` the same command converges."""
    import shutil

    from tests.integration.conftest import plain_pulumi

    key = "it-unrecorded-r0"
    project.stack("itunrecorded", [replica(key)])
    kill_deploy_while_waiting(project, admin, "itunrecorded", key, "ci-run-43")
    locks = project.root / ".infercrane" / "pulumi-state" / ".pulumi" / "locks"
    (left,) = list(locks.rglob("*.json"))
    shutil.rmtree(project.root / ".infercrane" / "engine-runs")
    r = cli(project, "deploy", "--stack", "itunrecorded", "--idempotency-key", "ci-run-43")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "which no run on this machine started: it may run in another container with this host name" in r.stderr
    assert "stack 'itunrecorded' is locked by another update" in r.stderr and "Traceback" not in r.stderr
    assert left.exists()
    assert plain_pulumi(project, "itunrecorded")("cancel", "--yes").returncode == 0
    r = cli(project, "deploy", "--stack", "itunrecorded", "--idempotency-key", "ci-run-43")
    assert r.returncode == 0, r.stderr[-3000:]
    dep = admin.get(Deployment, naming.object_name(key), namespace=NS)
    assert deployment_verdict(dep.to_dict(), int(dep.metadata.generation or 0)).state == "ready"
    assert cli(project, "destroy", "--stack", "itunrecorded").returncode == 0


def _interrupt_create(engine: Engine, type_token: str) -> str:
    """Leave the stack's checkpoint as an update killed inside a create leaves it: the object is
    live, the resource is missing from the checkpoint's resources and listed as a pending CREATE.

    Creates take milliseconds, so a kill cannot be timed into one reliably, and ``pulumi stack
    import`` drops pending operations; the file backend's checkpoint is edited in its own format
    (``.pulumi/stacks/<project>/<stack>.json``: ``checkpoint.latest`` is the deployment)."""
    backend = Path(engine.backend_url().removeprefix("file://"))
    path = backend / ".pulumi" / "stacks" / "infercrane" / f"{engine.stack_name}.json"
    doc = json.loads(path.read_text())
    latest = doc["checkpoint"]["latest"]
    (res,) = [r for r in latest["resources"] if r["type"] == type_token]
    latest["resources"] = [r for r in latest["resources"] if r is not res]
    latest["pending_operations"] = [{"resource": res, "type": "creating"}]
    path.write_text(json.dumps(doc))
    assert engine.state().get("pending_operations")
    return str(res["id"]).split("/")[-1]


def test_pending_creates_of_our_own_objects_are_cleared_and_the_deploy_converges(
    project: Project, admin: Client, identity: Callable[..., str]
) -> None:
    """As an identity bound to exactly the seed's deployment Role (no KServe or DRA rights): the
    check of the pending objects reads only what this stack may hold."""
    (role, _) = yaml.safe_load_all((ROOT / "deploy/kubernetes/base/provider-rbac.yaml").read_text())
    key = "it-pending-r0"
    engine = project.stack("itpending", [replica(key)], context=identity("it-pending", role["rules"]))
    assert cli(project, "deploy", "--stack", "itpending").returncode == 0
    uid = admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.uid
    _interrupt_create(engine, "kubernetes:apps/v1:Deployment")

    r = cli(project, "deploy", "--stack", "itpending", "--idempotency-key", "after-kill")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cleared 1 pending create(s) left by an interrupted update (Deployment/" in r.stderr + r.stdout
    assert not engine.state().get("pending_operations")
    assert admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.uid == uid  # applied again, not recreated
    r = cli(project, "plan", "--stack", "itpending", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["basis"] == "state+live", r.stdout + r.stderr[-2000:]
    assert cli(project, "destroy", "--stack", "itpending").returncode == 0


def test_a_pending_create_whose_object_is_now_foreign_is_refused_with_nothing_applied(project: Project, admin: Client) -> None:
    key = "it-pendforeign-r0"
    engine = project.stack("itpendforeign", [replica(key)])
    assert cli(project, "deploy", "--stack", "itpendforeign").returncode == 0
    name = _interrupt_create(engine, "kubernetes:core/v1:Service")
    r = kubectl(
        project.plane, "annotate", "--overwrite", "service", name, "-n", NS, f"{naming.ANNOTATION_STACK}=infercrane/someone-else"
    )
    assert r.returncode == 0, r.stderr
    version = admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.resourceVersion

    r = cli(project, "deploy", "--stack", "itpendforeign")
    assert r.returncode == 1
    assert "an interrupted update left pending creates for objects that are not this stack's; nothing was applied" in r.stderr
    assert f"Service/{name}" in r.stderr and "Traceback" not in r.stderr
    assert engine.state().get("pending_operations"), "the state is left as it was"
    assert admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.resourceVersion == version
    admin.delete(Service, name, namespace=NS)


def test_destroy_without_the_passphrase_is_refused_before_anything_is_deleted(project: Project, admin: Client) -> None:
    key = "it-nopass-r0"
    project.stack("itnopass", [replica(key)])
    assert cli(project, "deploy", "--stack", "itnopass").returncode == 0
    r = cli(project, "destroy", "--stack", "itnopass", env={"PULUMI_CONFIG_PASSPHRASE": ""})
    assert r.returncode == 1
    assert "stack 'itnopass' needs its secrets passphrase" in r.stderr and "Traceback" not in r.stderr
    assert get_or_none(admin, Deployment, naming.object_name(key)) is not None  # nothing deleted
    assert cli(project, "destroy", "--stack", "itnopass").returncode == 0


def test_a_torn_checkpoint_write_is_repaired_before_the_engine_runs_and_the_rerun_converges(
    project: Project, admin: Client
) -> None:
    """What a kill between the blob store's two writes leaves: an empty ``.attrs`` sidecar and a
    ``.tmp`` -- plain Pulumi then fails every command ("failed to load checkpoint: EOF")."""
    from tests.integration.conftest import plain_pulumi

    key = "it-torn-r0"
    project.stack("ittorn", [replica(key)])
    assert cli(project, "deploy", "--stack", "ittorn").returncode == 0
    stacks = project.root / ".infercrane" / "pulumi-state" / ".pulumi" / "stacks" / "infercrane"
    (stacks / "ittorn.json.attrs").write_bytes(b"")
    (stacks / "ittorn.json.2074937.tmp").write_bytes(b"{")
    broken = plain_pulumi(project, "ittorn")("stack", "export")
    assert broken.returncode != 0 and "failed to load checkpoint" in broken.stderr, broken.stderr
    uid = admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.uid
    r = cli(project, "deploy", "--stack", "ittorn")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ittorn.json.attrs of stack 'ittorn' was empty (a write interrupted by a kill); removed it" in r.stderr
    assert "removed ittorn.json.2074937.tmp" in r.stderr
    assert admin.get(Deployment, naming.object_name(key), namespace=NS).metadata.uid == uid
    assert plain_pulumi(project, "ittorn")("stack", "export").returncode == 0
    assert cli(project, "destroy", "--stack", "ittorn").returncode == 0


@pytest.mark.parametrize("why", ["missing-context", "foreign-object"])
def test_a_first_deploy_refused_before_anything_is_applied_writes_nothing(project: Project, admin: Client, why: str) -> None:
    """The engine starts beside the preflight (it creates the stack and writes its encryptionsalt);
    a refusal that applied nothing takes both back: the stack file byte for byte, no stack left."""
    from lightkube import codecs

    stack = f"itrefused{why.split('-')[0]}"
    key = f"it-refused-{why}"
    target = {"context": "no-such-context"} if why == "missing-context" else {}
    project.stack(stack, [replica(key)], **target)
    if why == "foreign-object":  # a Service of our name that is not ours: the preflight refuses
        foreign = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": naming.object_name(key), "namespace": "infercrane-system"},
            "spec": {"ports": [{"port": 80}]},
        }
        admin.create(codecs.from_dict(foreign))
    path = project.root / "stacks" / f"Pulumi.{stack}.yaml"
    before = path.read_bytes()
    r = cli(project, "deploy", "--stack", stack)
    assert r.returncode == 1, r.stderr[-2000:]
    assert ("no-such-context" if why == "missing-context" else "not owned by this stack") in r.stderr, r.stderr[-2000:]
    assert path.read_bytes() == before, path.read_text() + r.stderr[-2000:]
    assert Engine(stack, project_dir=project.root).export() == {}, "the refused deploy left a stack behind"
    if why == "foreign-object":
        admin.delete(Service, naming.object_name(key), namespace="infercrane-system")
        r = cli(project, "deploy", "--stack", stack)  # the next run creates the stack again
        assert r.returncode == 0, r.stderr[-2000:]
        assert b"encryptionsalt" in path.read_bytes()
        assert cli(project, "destroy", "--stack", stack).returncode == 0
