"""The seed's ownership contract on the real engine, as the identity bound to exactly the shipped Role:
readiness without Pod reads, refresh without drift, drift repaired by deploy, exact deletion
(foreign namesakes refused, orphans deleted, decoys kept), strict server-side validation."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest
import yaml
from lightkube import Client, codecs
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.core.errors import NotReady, PreflightRefused
from infercrane.core.model import config as cfg
from infercrane.core.render.manifests import render_checked
from infercrane.engine import backend, stores
from infercrane.engine.workspace import Engine
from infercrane.live.client import cluster
from infercrane.live.client.api import Live
from infercrane.live.stack import preflight
from infercrane.local.layout import DEPLOYER_USER
from infercrane.project import stackfile
from tests.integration.conftest import Project, get_or_none, kubectl, replica
from tests.integration.test_cli_ops import cli
from tests.integration.test_read_only_plan import requests_by

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def load(project: Project, stack: str) -> cfg.InferCraneConfig:
    return stackfile.load_stack(stack, project_dir=project.root)


def test_up_waits_for_ready_and_refresh_reports_no_drift(project: Project, admin: Client) -> None:
    keys = ["it-ready-r0", "it-ready-r1"]
    engine = project.stack("itready", [replica(k) for k in keys])
    engine.up()
    for k in keys:  # up returned: every Deployment is ready by the rule, no wait needed here
        dep = admin.get(Deployment, naming.object_name(k), namespace=NS)
        assert dep.status.observedGeneration == dep.metadata.generation and dep.status.availableReplicas == 1
    refreshed = engine.refresh()
    assert set(refreshed.summary.resource_changes) <= {"same"}, refreshed.summary.resource_changes
    again = engine.preview()
    assert set(again.change_summary) <= {"same"}, again.change_summary
    engine.destroy()


def test_absent_gpu_fails_within_budget_and_margin_with_the_scheduler_reason(project: Project) -> None:
    engine = project.stack("itbudget", [replica("it-budget-r0", gpu="NVIDIA-B200", startupBudgetSeconds=60)])
    began = time.monotonic()
    with pytest.raises(NotReady) as exc:
        engine.up()
    elapsed = time.monotonic() - began
    text = str(exc.value)
    assert "1 of 1 replica(s) not ready" in text
    assert "ProgressDeadlineExceeded" in text or "startup budget" in text
    assert "FailedScheduling" in text and "didn't match Pod's node affinity/selector" in text
    assert "stalled scheduling for " in text, text  # where the time went (issue #67)
    assert "fix: use a GPU value your nodes carry" in text
    assert elapsed < 60 + 60 + 30, f"the wait must end by budget + margin, took {elapsed:.0f}s"
    engine.destroy()


def test_deploy_repairs_a_deleted_service_and_a_reset_field_and_plan_shows_both(project: Project, admin: Client) -> None:
    keys = ["it-drift-r0", "it-drift-r1"]
    project.stack("itdrift", [replica(k) for k in keys])
    assert cli(project, "deploy", "--stack", "itdrift").returncode == 0
    # The state read from the file backend directly is what `pulumi stack export` prints.
    engine = Engine("itdrift", project_dir=project.root)
    exported = engine.export()
    store = stores.store_for(engine.backend_url())
    assert store is not None and backend.checkpoint(store, "infercrane", "itdrift") == exported
    # Nothing to do: proven by the state and a live dry run, and Pulumi's own preview agrees.
    r = cli(project, "plan", "--stack", "itdrift", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["basis"] == "state+live", r.stderr
    r = cli(project, "plan", "--stack", "itdrift", "--json", "--full-preview")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["basis"] == "pulumi preview", r.stderr
    assert {p["action"] for p in doc["replicas"]} == {"same"}
    gone, reset = naming.object_name(keys[0]), naming.object_name(keys[1])
    admin.delete(Service, gone, namespace=NS)
    # Our own manager re-applies one field with another value (a lost or partial earlier apply).
    (dep,) = [
        m
        for m in render_checked(load(project, "itdrift"), "itdrift")
        for m in m.manifests
        if m["kind"] == "Deployment" and m["metadata"]["name"] == reset
    ]
    changed = copy.deepcopy(dep)
    changed["spec"]["revisionHistoryLimit"] = 7
    r = kubectl(
        project.plane,
        "apply",
        "--server-side",
        f"--field-manager={naming.FIELD_MANAGER}",
        "-f",
        "-",
        stdin=yaml.safe_dump(changed),
    )
    assert r.returncode == 0, r.stderr

    r = cli(project, "plan", "--stack", "itdrift", "--json")
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert {p["key"]: p["action"] for p in doc["replicas"]} == {keys[0]: "create", keys[1]: "update"}
    assert doc["basis"] == "pulumi preview"
    assert any("2 live object(s) missing or different" in why for why in doc["whyPreview"]), doc["whyPreview"]

    r = cli(project, "deploy", "--stack", "itdrift")
    assert r.returncode == 0, r.stderr
    assert get_or_none(admin, Service, gone) is not None
    assert admin.get(Deployment, reset, namespace=NS).spec.revisionHistoryLimit == 3
    r = cli(project, "plan", "--stack", "itdrift")
    assert r.returncode == 0 and "no changes (proven by the stack's state and a live dry run" in r.stdout
    assert cli(project, "destroy", "--stack", "itdrift").returncode == 0


def _dry_runs(project: Project) -> list[str]:
    """``resource/name`` of every server-side dry run the CLI's own client sent as the deploying
    identity, in order (the plane's audit log; the provider's, which a ``pulumi preview`` sends,
    come from another user agent)."""
    return [
        f"{e['objectRef']['resource']}/{e['objectRef']['name']}"
        for e in requests_by(project.plane, DEPLOYER_USER)
        if e["verb"] == "patch" and "dryRun=All" in e["requestURI"] and e.get("userAgent", "").startswith("python-httpx")
    ]


def test_a_plan_dry_runs_every_deployment_but_no_service_its_live_form_proves_unchanged(project: Project, admin: Client) -> None:
    keys = ["it-proven-r0", "it-proven-r1"]
    project.stack("itproven", [replica(k) for k in keys])
    assert cli(project, "deploy", "--stack", "itproven").returncode == 0
    names = [naming.object_name(k) for k in keys]
    before = len(_dry_runs(project))
    r = cli(project, "plan", "--stack", "itproven", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["basis"] == "state+live", r.stderr
    assert sorted(_dry_runs(project)[before:]) == sorted(f"deployments/{n}" for n in names)
    # Our own manager re-applies a Service's port with another value: that Service is dry-run
    # and planned as an update; the other is still proven by its live form.
    (svc,) = [
        m
        for m in render_checked(load(project, "itproven"), "itproven")
        for m in m.manifests
        if m["kind"] == "Service" and m["metadata"]["name"] == names[1]
    ]
    changed = copy.deepcopy(svc)
    changed["spec"]["ports"][0]["port"] += 1
    stdin = yaml.safe_dump(changed)
    r = kubectl(project.plane, "apply", "--server-side", f"--field-manager={naming.FIELD_MANAGER}", "-f", "-", stdin=stdin)
    assert r.returncode == 0, r.stderr
    before = len(_dry_runs(project))
    r = cli(project, "plan", "--stack", "itproven", "--json")
    assert r.returncode == 3, r.stderr
    assert {p["key"]: p["action"] for p in json.loads(r.stdout)["replicas"]} == {keys[0]: "same", keys[1]: "update"}
    sent = _dry_runs(project)[before:]
    assert f"services/{names[1]}" in sent and f"services/{names[0]}" not in sent, sent
    assert cli(project, "deploy", "--stack", "itproven").returncode == 0
    assert admin.get(Service, names[1], namespace=NS).spec.ports[0].port == svc["spec"]["ports"][0]["port"]
    assert cli(project, "destroy", "--stack", "itproven").returncode == 0


@pytest.mark.qualification
def test_a_field_taken_by_another_manager_is_still_refused_by_deploy(project: Project, admin: Client) -> None:
    from tests.integration.conftest import foreign_apply

    key = "it-taken-r0"
    project.stack("ittaken", [replica(key)])
    assert cli(project, "deploy", "--stack", "ittaken").returncode == 0
    foreign_apply(project.plane, naming.object_name(key), 2)
    r = cli(project, "deploy", "--stack", "ittaken")
    assert r.returncode == 1
    assert "Field-manager conflicts" in r.stderr and 'conflict with "foreign-owner"' in r.stderr and ".spec.replicas" in r.stderr
    assert admin.get(Deployment, naming.object_name(key), namespace=NS).spec.replicas == 2
    foreign_apply(project.plane, naming.object_name(key), 1)


def _owned_manifest(project: Project, stack: str, key: str) -> list[dict[str, Any]]:
    config = load(project, stack)
    return [m for r in render_checked(config, stack) for m in r.manifests if r.replica.key == key]


@pytest.mark.qualification
def test_destroy_deletes_orphans_refuses_foreign_namesakes_and_keeps_decoys(project: Project, admin: Client) -> None:
    keys = ["it-exact-r0", "it-exact-r1"]
    project.stack("itexact", [replica(k) for k in keys])
    assert cli(project, "deploy", "--stack", "itexact").returncode == 0
    # An orphan: an object carrying this stack's exact ownership that the state does not know
    # (as after lost state or a killed update) -- applied directly, never registered with Pulumi.
    project.stack("itexact", [replica(k) for k in [*keys, "it-exact-orphan"]])
    for m in _owned_manifest(project, "itexact", "it-exact-orphan"):
        admin.apply(codecs.from_dict(m), field_manager=naming.FIELD_MANAGER)
    project.stack("itexact", [replica(k) for k in keys])
    # A foreign namesake: our Service replaced by an object without our ownership.
    foreign = naming.object_name(keys[1])
    admin.delete(Service, foreign, namespace=NS)
    admin.create(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": foreign, "namespace": NS},
                "spec": {"ports": [{"port": 80}]},
            }
        )
    )
    # Decoys: our labels without our exact annotations; and the same object of another stack.
    decoy = copy.deepcopy(_owned_manifest(project, "itexact", keys[0])[1])
    decoy["metadata"]["name"] = naming.object_name(keys[0]) + "-decoy"
    decoy["metadata"]["annotations"].pop(naming.ANNOTATION_KEY)
    other = copy.deepcopy(_owned_manifest(project, "itexact", keys[0])[1])
    other["metadata"]["name"] = naming.object_name(keys[0]) + "-other"
    other["metadata"]["annotations"][naming.ANNOTATION_STACK] = "infercrane/another-stack"
    for d in (decoy, other):
        admin.create(codecs.from_dict(d))

    r = cli(project, "destroy", "--stack", "itexact")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refused: Service/{foreign}: not owned by this stack" in r.stdout
    assert "left untouched and dropped from the stack's state" in r.stdout
    orphan = naming.object_name("it-exact-orphan")
    assert f"Deployment/{orphan}" in r.stdout and f"Service/{orphan}" in r.stdout
    assert "zero objects owned by stack itexact remain" in r.stdout
    for name in (naming.object_name(keys[0]), naming.object_name(keys[1]), orphan):
        assert get_or_none(admin, Deployment, name) is None
    assert get_or_none(admin, Service, foreign) is not None  # untouched
    for d in (decoy, other):
        assert get_or_none(admin, Service, d["metadata"]["name"]) is not None
        admin.delete(Service, d["metadata"]["name"], namespace=NS)
    admin.delete(Service, foreign, namespace=NS)
    r = cli(project, "destroy", "--stack", "itexact")  # idempotent, and the state is clean
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.qualification
def test_strict_dry_run_refuses_a_deployment_field_the_server_does_not_know(project: Project, admin: Client) -> None:
    key = "it-strict-r0"
    project.stack("itstrict", [replica(key)])
    config = load(project, "itstrict")
    manifests = [copy.deepcopy(m) for r in render_checked(config, "itstrict") for m in r.manifests]
    manifests[0]["spec"]["template"]["spec"]["containers"][0]["gpuPinning"] = "strict"
    with pytest.raises(PreflightRefused) as exc:
        preflight.run(config, manifests, "infercrane/itstrict", Live.connect(config.kubernetes))
    text = str(exc.value)
    assert "Strict server-side validation" in text
    assert '.spec.template.spec.containers[name="runtime"].gpuPinning: field not declared in schema' in text
    assert get_or_none(admin, Deployment, naming.object_name(key)) is None  # nothing applied


def test_strict_dry_run_refuses_an_inference_service_field_an_older_crd_lacks(project: Project, admin: Client) -> None:
    crd = admin.get(CustomResourceDefinition, "inferenceservices.serving.kserve.io")
    original = crd.to_dict()
    older = copy.deepcopy(original)
    for k in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
        older["metadata"].pop(k, None)
    older.pop("status", None)
    # An older schema: the predictor knows its pod fields, containers and rollout, not volumes (the
    # one field it lacks: the server names only one unknown field, and which one of several varies).
    predictor = {
        "type": "object",
        "properties": {
            f: {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            for f in ("nodeSelector", "deploymentStrategy", "securityContext")
        }
        | {
            "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "serviceAccountName": {"type": "string"},
            "automountServiceAccountToken": {"type": "boolean"},
            "tolerations": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "containers": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        },
    }
    older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "properties": {"predictor": predictor},
    }
    admin.apply(codecs.from_dict(older), field_manager="it-older-kserve", force=True)
    try:
        engine = project.stack("itstrictk", [replica("it-strictk-r0")], workloadApi="kserve")
        deadline = time.monotonic() + 30
        text = ""
        while ".spec.predictor.volumes: field not declared in schema" not in text:
            # the API server takes a moment to serve the new schema (each of its handlers in turn)
            assert time.monotonic() < deadline, f"the older schema never took effect; last refusal: {text or 'none'}"
            time.sleep(1)
            try:
                engine.preview()
            except PreflightRefused as exc:
                text = str(exc)
        assert "Upgrade the CRD/cluster" in text
    finally:  # the plane's own schema back, for the tests after this one
        admin.apply(codecs.from_dict(older | {"spec": original["spec"]}), field_manager="it-older-kserve", force=True)


def test_a_deploy_and_a_plan_build_one_live_client_each_even_across_a_rollout_of_several_stages(
    project: Project, admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One command, one client: the preflight, the rollout's reads, the program (its
    preflight and readiness wait, in this process) and the deletions share the one the command
    built -- counted on a rollout of several stages that also deletes a key."""
    from infercrane.engine import operations, planning

    keys = ["it-oneclient-r0", "it-oneclient-r1", "it-oneclient-r2"]
    engine = project.stack("itoneclient", [replica(k) for k in keys])
    assert operations.deploy(engine, load(project, "itoneclient"), "first").status == "succeeded"
    built: list[str] = []
    real = cluster.client

    def counted(target: Any, **kw: Any) -> Any:
        built.append(target.context)
        return real(target, **kw)

    monkeypatch.setattr(cluster, "client", counted)
    newer = "vllm/vllm-openai@sha256:" + "e" * 64
    engine = project.stack("itoneclient", [replica(k) for k in keys[:2]], imageDigest=newer)
    config = load(project, "itoneclient")
    planned = planning.plan(engine, config)
    assert planned.rollout is not None and planned.rollout.stages > 1, planned.rollout
    assert len(built) == 1, built
    built.clear()
    result = operations.deploy(engine, config, "second")
    assert result.status == "succeeded" and result.rollout is not None and result.rollout.stages > 1, result
    assert len(built) == 1, built
    assert get_or_none(admin, Deployment, naming.object_name(keys[2])) is None
    assert cli(project, "destroy", "--stack", "itoneclient").returncode == 0


def _entries() -> tuple[Any, dict[str, tuple[int, list[str]]]]:
    """A profiler and what it records: for each ``infercrane`` module, the most separate times it
    is on one call stack (frames of one module in a row are one entry: a call down into another
    module and back up into it is a second) and that stack, as its modules from the entry down."""
    most: dict[str, tuple[int, list[str]]] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("infercrane."):
            return
        path: list[str] = []
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if module.startswith("infercrane.") and (not path or path[-1] != module):
                path.append(module)
            frame = frame.f_back
        path.reverse()
        for module in set(path):
            times = path.count(module)
            if times > most.get(module, (0, []))[0]:
                most[module] = (times, path)

    return profile, most


def test_a_deploy_enters_each_module_at_most_twice_and_works_nothing_out_twice(project: Project) -> None:
    """Following a deploy from its entry down to the applied objects -- across a rollout of several
    stages that also deletes a key, its program runs in this process -- no module is entered more
    than twice on one call stack (a call down that comes back up to work something out again is a
    second entry), and what the command worked out once (the client, the stack id, the
    provider's inputs, the rollout) is not worked out again below it."""
    import sys
    import threading

    from infercrane.core.state import urns
    from infercrane.engine import operations
    from infercrane.live.stack.context import StackContext

    keys = ["it-entries-r0", "it-entries-r1", "it-entries-r2"]
    engine = project.stack("itentries", [replica(k) for k in keys])
    assert operations.deploy(engine, load(project, "itentries"), "first").status == "succeeded"
    newer = "vllm/vllm-openai@sha256:" + "f" * 64
    engine = project.stack("itentries", [replica(k) for k in keys[:2]], imageDigest=newer)
    config = load(project, "itentries")
    worked_out: dict[str, int] = {}
    profile, most = _entries()
    with pytest.MonkeyPatch.context() as patched:
        for owner, name in ((naming, "stack_id"), (urns, "provider_inputs"), (cluster, "client"), (StackContext, "rollout")):
            real = getattr(owner, name)

            def counted(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
                worked_out[_name] = worked_out.get(_name, 0) + 1
                return _real(*a, **kw)

            patched.setattr(owner, name, counted)
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            result = operations.deploy(engine, config, "second")
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    assert result.status == "succeeded" and result.rollout is not None and result.rollout.stages > 1, result
    assert "infercrane.shell.program" in most, "the rollout's program ran in this process and was followed"
    over = {module: path for module, (times, path) in most.items() if times > 2}
    assert not over, "\n".join(f"{m}: {' > '.join(p)}" for m, p in over.items())
    assert worked_out == {"stack_id": 1, "provider_inputs": 1, "client": 1, "rollout": 1}, worked_out
    assert cli(project, "destroy", "--stack", "itentries").returncode == 0
