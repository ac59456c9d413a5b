"""Repair, restart observation, destroy, KServe mode, RBAC and an absent GPU, on the real engine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service

from infercrane.core import naming
from infercrane.core.errors import ClusterError
from infercrane.live.client.api import Live
from infercrane.live.client.cluster import InferenceService
from infercrane.live.inspect import inspect
from infercrane.project import stackfile
from tests.integration.conftest import ROOT, Project, cli, get_or_none, kill_as_ci, pending_record, replica, start_cli, wait_for

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def owned(admin: Client, stack: str) -> list[str]:
    out = []
    for res in (Deployment, Service, InferenceService):
        for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) == f"infercrane/{stack}":
                out.append(f"{res.__name__}/{obj.metadata.name}")
    return out


def test_a_stack_recorded_before_the_providers_client_rate_existed_gets_one_provider_update_and_no_other_change(
    project: Project, admin: Client
) -> None:
    """The provider's client rate (``providerClient``) is one of its recorded inputs. A stack whose
    state an earlier release wrote, without it, is updated in place: the provider and nothing
    else -- no object applied again, none replaced."""
    stack, key = "itrate", "it-rate-r0"
    name = naming.object_name(key)
    engine = project.stack(stack, [replica(key)])
    engine.up()
    generation = admin.get(Deployment, name, namespace=NS).metadata.generation
    earlier = engine.stack.export_stack()
    (provider,) = [r for r in earlier.deployment["resources"] if r["type"] == "pulumi:providers:kubernetes"]
    del provider["inputs"]["kubeClientSettings"]
    provider.get("outputs", {}).pop("kubeClientSettings", None)
    engine.stack.import_stack(earlier)
    plan = cli(project, "plan", "--stack", stack)  # it speaks of cluster objects: none changes
    assert plan.returncode == 0 and "no changes" in plan.stdout, plan.stdout + plan.stderr[-2000:]
    up = engine.up()
    changes = {op: n for op, n in up.summary.resource_changes.items() if op != "same"}
    assert changes == {"update": 1}, up.stdout
    assert "pulumi:providers:kubernetes infercrane updated" in up.stdout
    assert admin.get(Deployment, name, namespace=NS).metadata.generation == generation
    engine.destroy()


@pytest.mark.qualification
def test_service_deleted_out_of_band_is_repaired_by_refresh_and_up(project: Project, admin: Client) -> None:
    key = "it-repair-r0"
    name = naming.object_name(key)
    engine = project.stack("itrepair", [replica(key)])
    engine.up()
    admin.delete(Service, name, namespace=NS)
    assert get_or_none(admin, Service, name) is None
    config = stackfile.load_stack("itrepair", project_dir=project.root)
    (rec,) = inspect(config, Live(admin, config.kubernetes))
    assert rec["state"] == "degraded"
    assert {"kind": "Service", "name": name, "present": False} in rec["objects"]
    engine.refresh()
    up = engine.up()
    assert up.summary.resource_changes.get("create") == 1
    assert get_or_none(admin, Service, name) is not None
    assert inspect(config, Live(admin, config.kubernetes))[0]["state"] == "ready"
    engine.destroy()


def test_a_deploy_changing_a_replica_deleted_out_of_band_refreshes_first_and_makes_it_again(
    project: Project, admin: Client
) -> None:
    """The state records objects the cluster no longer has (a kubectl delete; a canary's rollback
    that removed a replica its run could not forget) and the config changes them: Pulumi would
    update them, and the provider's update of an object that is gone fails ("not found"). The
    deploy's preflight sees them gone, and its run refreshes first, so it makes them again."""
    stack, key = "itgone", "it-gone-r0"
    name = naming.object_name(key)
    project.stack(stack, [replica(key)])
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    admin.delete(Deployment, name, namespace=NS)
    admin.delete(Service, name, namespace=NS)
    wait_for(lambda: get_or_none(admin, Deployment, name) is None, "the Deployment gone")
    project.stack(stack, [replica(key, args=["--max-num-seqs", "8"])])  # recorded with other inputs now
    done = cli(project, "deploy", "--stack", stack)
    assert done.returncode == 0, done.stderr
    made = admin.get(Deployment, name, namespace=NS)
    assert "--max-num-seqs" in (made.spec.template.spec.containers[0].args or [])
    assert get_or_none(admin, Service, name) is not None
    assert cli(project, "destroy", "--stack", stack).returncode == 0


@pytest.mark.qualification
def test_fresh_process_observes_state_and_readiness(project: Project, admin: Client) -> None:
    key = "it-restart-r0"
    engine = project.stack("itrestart", [replica(key)])
    engine.up()
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from infercrane.engine.workspace import Engine\n"
        "from infercrane.project import stackfile\n"
        "from infercrane.live.inspect import inspect\n"
        "from infercrane.live.client.api import Live\n"
        f"e = Engine('itrestart', project_dir=Path({str(project.root)!r}))\n"
        "c = stackfile.load_stack('itrestart', project_dir=e.project_dir)\n"
        "outputs = {k: v.value for k, v in e.stack.outputs().items()}\n"
        "print(json.dumps({'outputs': outputs, 'inspect': inspect(c, Live.connect(c.kubernetes), read_nodes=False)}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["outputs"]["replicas"][key]["objects"][0]["name"] == naming.object_name(key)
    ((member,),) = doc["outputs"]["endpoints"].values()
    evidence = member.pop("evidence")
    recorded = doc["outputs"]["replicas"][key]
    assert recorded["release"].startswith("sha256:"), "what its pods run, for a gateway weighing a canary"
    assert doc["outputs"]["endpoints"] == {
        "qwen": [{"key": key, "modelRevision": None, "intentHash": recorded["intentHash"], "release": recorded["release"]}]
    }
    # No worker key where this ran: the evidence says so (never a silent pass), with when it looked.
    assert evidence["state"] == "not verifiable" and evidence["reason"].startswith("no worker key for the check")
    assert evidence["checkedAt"] and evidence["expected"] == ["qwen", "Qwen/Qwen3-8B"] and evidence["served"] == []
    (rec,) = doc["inspect"]
    assert rec["state"] == "ready" and rec["endpoint"] == f"http://{naming.object_name(key)}.{NS}.svc:8000"
    engine.destroy()


@pytest.mark.qualification
def test_destroy_removes_exactly_our_objects_twice_and_leaves_none(project: Project, admin: Client) -> None:
    keys = ["it-destroy-r0", "it-destroy-r1"]
    engine = project.stack("itdestroy", [replica(k) for k in keys])
    engine.up()
    ours = naming.object_name(keys[0])
    decoy_labels = naming.labels(keys[0]) | {naming.LABEL_INSTANCE: ours + "-decoy"}
    decoy = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": ours + "-decoy", "namespace": NS, "labels": decoy_labels},
        "spec": {"selector": {"app": "decoy"}, "ports": [{"port": 80}]},
    }
    from lightkube import codecs

    admin.create(codecs.from_dict(decoy))
    assert len(owned(admin, "itdestroy")) == 4
    engine.destroy()
    assert owned(admin, "itdestroy") == []
    assert get_or_none(admin, Service, ours + "-decoy") is not None
    engine.destroy()  # idempotent
    admin.delete(Service, ours + "-decoy", namespace=NS)


def test_kserve_mode_applies_one_inference_service(project: Project, admin: Client) -> None:
    key = "it-kserve-r0"
    name = naming.object_name(key)
    engine = project.stack("itkserve", [replica(key)], workloadApi="kserve")
    engine.up()
    isvc = admin.get(InferenceService, name, namespace=NS)
    assert naming.FIELD_MANAGER in {m.manager for m in isvc.metadata.managedFields}
    assert isvc.metadata.annotations["serving.kserve.io/deploymentMode"] == "Standard"
    assert get_or_none(admin, Deployment, name) is None
    engine.destroy()
    assert get_or_none(admin, InferenceService, name) is None


def test_identity_without_patch_is_refused_with_a_clear_message(project: Project, identity: Callable[..., str]) -> None:
    context = identity(
        "it-no-patch",
        [{"apiGroups": ["apps", ""], "resources": ["deployments", "services"], "verbs": ["get", "list", "create", "delete"]}],
    )
    engine = project.stack("itnopatch", [replica("it-nopatch-r0")], context=context)
    with pytest.raises(ClusterError) as exc:
        engine.preview()
    text = str(exc.value)
    assert "forbidden for the identity of context 'it-no-patch'" in text
    assert 'cannot patch resource "deployments"' in text
    assert "fix: bind deploy/kubernetes/base/provider-rbac.yaml" in text


def test_absent_gpu_stays_pending_and_the_scheduler_reason_is_reported(project: Project, admin: Client) -> None:
    """A replica of a GPU no node carries: its pod stays Pending and inspect reports it
    provisioning with the scheduler's reason. The deploy is stopped once that is visible rather
    than after the startup budget: that ``deploy`` then fails naming the reason within budget +
    margin is proven by test_contract's B200 replica."""
    key = "it-nogpu-r0"
    name = naming.object_name(key)
    project.stack("itnogpu", [replica(key, gpu="NVIDIA-A100-SXM4-80GB")])
    proc = start_cli(project, "deploy", "--stack", "itnogpu")
    config = stackfile.load_stack("itnogpu", project_dir=project.root)
    try:
        scheduled_out = pending_record(
            admin, config, name, lambda reasons: any("FailedScheduling" in r or "Unschedulable" in r for r in reasons)
        )
        rec = wait_for(scheduled_out, "the pod to be reported unschedulable", timeout=120)
        assert proc.poll() is None, "deploy must still be waiting within the startup budget"
    finally:
        kill_as_ci(proc)
    assert rec["state"] == "provisioning"
    (pod,) = rec["pods"]
    assert pod["phase"] == "Pending" and pod["node"] is None
    assert any("didn't match Pod's node affinity/selector" in r for r in pod["reasons"]), pod["reasons"]
    assert cli(project, "destroy", "--stack", "itnogpu").returncode == 0
    assert get_or_none(admin, Deployment, name) is None


def test_a_key_change_one_engine_run_would_do_with_extra_gpus_is_refused_and_nothing_changes(
    project: Project, admin: Client
) -> None:
    """[a] -> [b] under the default policy (maxSurge 0): a single `pulumi up` would create b beside
    a (one replica's GPUs more than the endpoint holds); the program refuses and names the command
    that rolls it (stop a, then start b)."""
    from infercrane.core.stops import RolloutRefused

    stack = "itorderdefault"
    engine = project.stack(stack, [replica("it-order-a")])
    engine.up()
    before = admin.get(Deployment, naming.object_name("it-order-a"), namespace=NS).metadata.uid
    engine = project.stack(stack, [replica("it-order-b")])
    with pytest.raises(RolloutRefused) as exc:
        engine.up()
    text = str(exc.value)
    assert "endpoint qwen rolls in 1 wave(s) under maxUnavailable 1, maxSurge 0" in text, text
    assert "1 new replica(s) would need GPUs beside the ones they replace" in text
    assert f"run `infercrane deploy --stack {stack}`" in text
    assert admin.get(Deployment, naming.object_name("it-order-a"), namespace=NS).metadata.uid == before
    assert get_or_none(admin, Deployment, naming.object_name("it-order-b")) is None
    engine.destroy()


def test_a_key_change_within_the_surge_allowance_runs_in_one_engine_run_new_first(project: Project, admin: Client) -> None:
    from pulumi.automation import EngineEvent

    stack = "itordersurge"
    surge = {"maxUnavailable": 0, "maxSurge": 1}
    engine = project.stack(stack, [replica("it-surge-a")], rollout=surge)
    engine.up()
    engine = project.stack(stack, [replica("it-surge-b")], rollout=surge)
    ops: list[str] = []

    def record(event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre and pre.metadata and pre.metadata.type == "kubernetes:apps/v1:Deployment":
            ops.append(pre.metadata.op)

    engine.up(on_event=record)
    assert ops == ["create", "delete"], ops  # the new one first (and ready), then the old one: never a replace
    assert get_or_none(admin, Deployment, naming.object_name("it-surge-a")) is None
    new = admin.get(Deployment, naming.object_name("it-surge-b"), namespace=NS)
    assert new.spec.strategy.type == "RollingUpdate"
    engine.destroy()


@pytest.mark.qualification
def test_a_key_that_left_the_config_is_deleted_even_when_the_state_lost_it(project: Project, admin: Client) -> None:
    """Lost state (the backend directory gone): the kept key is adopted again, same uid; the key
    that left the config -- which Pulumi no longer knows -- is deleted by its exact ownership."""
    import shutil

    stack = "itorphan"
    kept, left = "it-orphan-kept", "it-orphan-left"
    project.stack(stack, [replica(kept), replica(left)])
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    uid = admin.get(Deployment, naming.object_name(kept), namespace=NS).metadata.uid
    shutil.rmtree(project.root / ".infercrane" / "pulumi-state")
    project.stack(stack, [replica(kept)])
    r = cli(project, "deploy", "--stack", stack, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    # the rollout plans the leaving key (known from what runs) and deletes it by ownership in its stage
    assert f"deleted {left} (not in the state) as the rollout planned" in r.stderr, r.stderr[-3000:]
    actions = {a["key"]: a["action"] for a in json.loads(r.stdout)["replicas"]}
    assert actions[left] == "delete"
    assert admin.get(Deployment, naming.object_name(kept), namespace=NS).metadata.uid == uid
    wait_for(lambda: get_or_none(admin, Deployment, naming.object_name(left)) is None, "the orphan's Deployment to go")
    assert get_or_none(admin, Service, naming.object_name(left)) is None
    assert cli(project, "destroy", "--stack", stack).returncode == 0


def test_re_running_an_older_key_rolls_back_to_its_intent_and_a_replay_needs_what_runs_to_agree(
    project: Project, admin: Client
) -> None:
    """CI re-runs an older job (``prod-<sha>``) to roll back: its key's record matches its intent,
    but prod runs the newer release -- the older intent is applied, never "replayed"."""
    from lightkube import codecs

    from tests.integration.conftest import DIGEST

    stack = "itreplay"
    key = "it-replay-r0"
    newer = "vllm/vllm-openai@sha256:" + "e" * 64
    project.stack(stack, [replica(key)])
    first = cli(project, "deploy", "--stack", stack, "--idempotency-key", "prod-old", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    project.stack(stack, [replica(key)], imageDigest=newer)
    assert cli(project, "deploy", "--stack", stack, "--idempotency-key", "prod-new").returncode == 0
    image = lambda: admin.get(Deployment, naming.object_name(key), namespace=NS).spec.template.spec.containers[0].image  # noqa: E731
    assert image() == newer

    project.stack(stack, [replica(key)])  # the older job's checkout
    r = cli(project, "deploy", "--stack", stack, "--idempotency-key", "prod-old", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["status"] == "succeeded", r.stdout
    assert "note: idempotency key prod-old was deployed at " in r.stderr, r.stderr[-2000:]
    assert ": applying its intent again" in r.stderr
    assert image() == DIGEST
    again = cli(project, "deploy", "--stack", stack, "--idempotency-key", "prod-old", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "replayed", again.stdout + again.stderr[-2000:]

    # A replica of a key that left the config still runs (an orphan deletion that failed after the
    # record was written): the same key again is no replay -- it deletes it.
    project.stack(stack, [replica(key), replica("it-replay-gone")])
    for m in [m for r in _rendered(project, stack) for m in r.manifests if r.replica.key == "it-replay-gone"]:
        admin.apply(codecs.from_dict(m), field_manager=naming.FIELD_MANAGER)
    project.stack(stack, [replica(key)])
    r = cli(project, "deploy", "--stack", stack, "--idempotency-key", "prod-old", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "it-replay-gone of keys that left the config still run" in r.stderr, r.stderr[-2000:]
    assert json.loads(r.stdout)["status"] == "succeeded"
    wait_for(lambda: get_or_none(admin, Deployment, naming.object_name("it-replay-gone")) is None, "the orphan to go")
    assert cli(project, "destroy", "--stack", stack).returncode == 0


def _rendered(project: Project, stack: str) -> Any:
    from infercrane.core.render.manifests import render_checked

    return render_checked(stackfile.load_stack(stack, project_dir=project.root), stack)


def test_a_leaving_keys_object_replaced_by_a_foreign_namesake_is_not_deleted_by_name(project: Project, admin: Client) -> None:
    """Pulumi deletes what its state records by name; the deploy refuses when the live namesake is
    no longer this stack's (someone replaced it), and leaves it."""
    from lightkube import codecs

    stack = "itforeignleave"
    kept, left = "it-fleave-kept", "it-fleave-left"
    project.stack(stack, [replica(kept), replica(left)])
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    name = naming.object_name(left)
    admin.delete(Service, name, namespace=NS)
    wait_for(lambda: get_or_none(admin, Service, name) is None, "the Service to go")
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"ports": [{"port": 80}]},
    }
    admin.create(codecs.from_dict(foreign))
    project.stack(stack, [replica(kept)])
    r = cli(project, "deploy", "--stack", stack)
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    assert f"Service {NS}/{name} (recorded for key '{left}', which leaves) is no longer this stack's" in r.stderr, r.stderr[
        -2000:
    ]
    assert get_or_none(admin, Service, name) is not None  # the foreign one stays
    assert get_or_none(admin, Deployment, name) is not None  # nothing of the change was applied
    admin.delete(Service, name, namespace=NS)
    r = cli(project, "deploy", "--stack", stack)  # the foreign object gone: the change goes through
    assert r.returncode == 0, r.stderr[-2000:]
    assert cli(project, "destroy", "--stack", stack).returncode == 0
