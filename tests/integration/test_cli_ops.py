"""The infercrane CLI against the local plane, as a user runs it (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infercrane.core import naming
from tests.integration.conftest import Project, cli, replica

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def as_json(r: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(r.stdout)


def test_doctor_passes_with_shipped_rbac(project: Project) -> None:
    project.stack("itdoctor", [replica("it-doctor-r0")])
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdoctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = as_json(r)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["API reachable"]["status"] == "pass" and "v1.36.3" in checks["API reachable"]["detail"]
    for verb in ("get", "list", "create", "patch", "delete"):
        assert checks[f"can {verb} deployments.apps"]["status"] == "pass"
        assert checks[f"can {verb} services"]["status"] == "pass"
    assert checks["can list events"]["status"] == "pass"
    # The deploying identity holds exactly the shipped Role: the optional reads are reported as
    # optional, the cluster-scoped node read as not verifiable -- doctor still passes.
    assert checks["can list pods"]["status"] == "optional"
    assert "deploy/kubernetes/optional/pod-reader.yaml" in checks["can list pods"]["hint"]
    assert not [c for c in doc["checks"] if c["name"].startswith("can watch")]
    assert checks["GPU capacity"]["status"] == "not verifiable" and "cannot list nodes" in checks["GPU capacity"]["detail"]
    # What the shipped Role may not read is said as such, with what would verify it -- never a warning.
    assert checks["namespace"]["status"] == "not verifiable", checks["namespace"]
    assert "`kubectl get namespace infercrane-system` as an administrator" in checks["namespace"]["hint"]
    assert checks["runtime service account"]["status"] == "not verifiable"
    assert not [c for c in doc["checks"] if c["status"] == "warn"], "a healthy set-up under the shipped Role warns about nothing"
    assert doc["ok"] is True


def test_doctor_reads_gpu_capacity_with_the_optional_node_reader(project: Project) -> None:
    project.stack("itdoctorv", [replica("it-doctorv-r0")], context="infercrane-local-viewer")
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdoctorv", "--json")
    checks = {c["name"]: c for c in as_json(r)["checks"]}
    assert checks["GPU capacity"]["status"] == "pass"
    assert "NVIDIA-L40S: 1 requested / 8 allocatable" in checks["GPU capacity"]["detail"]
    assert checks["can list pods"]["status"] == "pass"


def test_doctor_fails_naming_the_missing_verb(project: Project, identity: Callable[..., str]) -> None:
    context = identity(
        "it-no-delete",
        [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "create", "patch", "delete", "watch"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "create", "patch"]},
        ],
    )
    project.stack("itdoctor2", [replica("it-doctor2-r0")], context=context)
    r = cli(project, "doctor", "--kubernetes", "--stack", "itdoctor2")
    assert r.returncode == 1
    assert "[fail] can delete services: in namespace infercrane-system" in r.stdout
    assert "hint: bind deploy/kubernetes/base/provider-rbac.yaml" in r.stdout
    assert "[pass] can delete deployments.apps" in r.stdout


def test_plan_exits_3_listing_creates_and_a_command_line_intent_is_planned_without_writing(project: Project) -> None:
    project.stack("itcliplan", [replica("it-cliplan-r0")])
    stack_file = project.root / "stacks" / "Pulumi.itcliplan.yaml"
    r = cli(project, "plan", "--stack", "itcliplan")
    assert r.returncode == 3, r.stderr
    assert all(s in r.stdout for s in ("create", "key it-cliplan-r0", "gpu NVIDIA-L40S", "changes pending"))
    before = stack_file.read_text()
    intent = ["Qwen/Qwen3-32B", "--name", "qwen32", "--cloud", "kubernetes", "--gpu", "NVIDIA-H100-80GB-HBM3"]
    r = cli(project, "plan", *intent, "--json", "--stack", "itcliplan")
    assert r.returncode == 3, r.stderr
    planned = {p["key"]: p for p in as_json(r)["replicas"]}
    assert planned["qwen32-r0"]["action"] == "create" and planned["qwen32-r0"]["gpu"] == "NVIDIA-H100-80GB-HBM3"
    assert stack_file.read_text() == before


def test_a_deploy_retried_with_its_key_replays_and_the_key_is_refused_for_a_new_intent(project: Project) -> None:
    project.stack("itcli", [replica("it-cli-r0")])
    stack_file = project.root / "stacks" / "Pulumi.itcli.yaml"
    r = cli(project, "deploy", "--stack", "itcli", "--idempotency-key", "it-first")
    assert r.returncode == 0, r.stderr
    assert "deploy it-first: succeeded" in r.stdout and "created" in r.stdout
    r = cli(project, "plan", "--stack", "itcli")
    assert r.returncode == 0 and "no changes" in r.stdout
    r = cli(project, "deploy", "--stack", "itcli", "--idempotency-key", "it-first")
    assert r.returncode == 0 and "already applied at" in r.stdout and "nothing changed" in r.stdout
    before = stack_file.read_text()
    stack_file.write_text(before.replace("Qwen/Qwen3-8B", "Qwen/Qwen3-14B"))
    r = cli(project, "deploy", "--stack", "itcli", "--idempotency-key", "it-first")
    assert r.returncode == 1
    assert "idempotency key 'it-first' was used at" in r.stderr and "for a different intent" in r.stderr
    assert cli(project, "destroy", "--stack", "itcli").returncode == 0


def test_a_deploy_records_each_replicas_start_and_plan_says_how_long_the_next_rollout_takes(project: Project) -> None:
    from infercrane.core.state import urns

    keys = ["it-ledger-r0", "it-ledger-r1"]
    engine = project.stack("itledger", [replica(k) for k in keys])
    r = cli(project, "deploy", "--stack", "itledger")
    assert r.returncode == 0, r.stderr
    starts = urns.stack_outputs(engine.state())["starts"]
    assert set(starts) == set(keys)
    for k in keys:
        s = starts[k]
        assert s["stage"] == "healthy" and s["gpu"] == "NVIDIA-L40S" and s["image"].startswith("vllm/vllm-openai@sha256:")
        assert 0 <= s["scheduled"] <= s["healthy"] < 120, s  # from the scheduler's Event to the deploy's wait seeing it ready
    # This identity may not read pods: inspect shows each replica's last start as the deploy recorded it.
    shown = cli(project, "inspect", "--stack", "itledger")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("  last start        scheduled ") == 2 and "(recorded by the deploy of 20" in shown.stdout
    doc = json.loads(cli(project, "inspect", "--stack", "itledger", "--json").stdout)
    assert {r["key"]: r["recordedStart"]["stage"] for r in doc["replicas"]} == dict.fromkeys(keys, "healthy")
    project.stack("itledger", [replica(k, model="Qwen/Qwen3-14B") for k in keys])  # every pod restarts
    r = cli(project, "plan", "--stack", "itledger")
    assert r.returncode == 3, r.stderr
    assert "  expected: about " in r.stdout and "GPU-hours beyond steady state" in r.stdout
    assert "    starts from: 2 recorded start(s) of NVIDIA-L40S, this image" in r.stdout
    r = cli(project, "plan", "--stack", "itledger", "--json")
    estimate = as_json(r)["estimate"]
    assert estimate["startsFrom"] == ["2 recorded start(s) of NVIDIA-L40S, this image"]
    (lane,) = estimate["endpoints"]
    assert len(lane["stages"]) == 2 and estimate["seconds"] > lane["stages"][1]["begins"] > 0
    assert cli(project, "destroy", "--stack", "itledger").returncode == 0


def test_deploy_without_a_key_prints_one_then_inspect_and_destroy_report_as_the_shipped_role(project: Project) -> None:
    key = "it-clinokey-r0"
    engine = project.stack("itclinokey", [replica(key)])
    r = cli(project, "deploy", "--stack", "itclinokey")
    assert r.returncode == 0 and "idempotency key: deploy-" in r.stderr
    r = cli(project, "inspect", "--stack", "itclinokey", "--json")
    assert r.returncode == 0, r.stderr
    (rec,) = as_json(r)["replicas"]
    assert rec["state"] == "ready" and rec["key"] == key
    assert rec["pods"] is None  # the shipped Role reads no Pod
    dep = next(o for o in rec["objects"] if o["kind"] == "Deployment")
    assert dep["generation"] == dep["observedGeneration"] and naming.FIELD_MANAGER in {m["manager"] for m in dep["managers"]}
    r = cli(project, "inspect", "--stack", "itclinokey")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert (
        "pods: not shown (this identity may not read pods; optional: apply deploy/kubernetes/optional/pod-reader.yaml)"
        in r.stdout
    )
    r = cli(project, "destroy", "--stack", "itclinokey")
    assert r.returncode == 0, r.stderr
    assert "destroy: zero objects owned by stack itclinokey remain in namespace infercrane-system" in r.stdout
    # The cleared state names no secrets provider (its import derives no passphrase key); the next
    # deploy takes it from the stack file again, as a new stack's first update does.
    cleared = engine.state()
    assert not cleared.get("resources") and "secrets_providers" not in cleared
    r = cli(project, "deploy", "--stack", "itclinokey")
    assert r.returncode == 0, r.stderr
    assert engine.state()["secrets_providers"]["type"] == "passphrase"
    assert cli(project, "destroy", "--stack", "itclinokey").returncode == 0


def test_deploy_model_writes_intent_keeping_comments(project: Project) -> None:
    project.stack("itwrite", [replica("it-write-r0")])
    path: Path = project.root / "stacks" / "Pulumi.itwrite.yaml"
    path.write_text("# team-a inference stack: keep this comment\n" + path.read_text())
    r = cli(
        project,
        "deploy",
        "Qwen/Qwen3-8B",
        "--name",
        "qwen-extra",
        "--cloud",
        "kubernetes",
        "--gpu",
        "NVIDIA-L40S",
        "--stack",
        "itwrite",
        "--idempotency-key",
        "it-write-1",
    )
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    assert text.startswith("# team-a inference stack: keep this comment\n")
    assert "key: qwen-extra-r0" in text and "it-write-r0" in text
    r = cli(project, "deploy", "Qwen/Qwen3-8B", "--name", "Bad_Name", "--gpu", "NVIDIA-L40S", "--stack", "itwrite")
    assert r.returncode == 1 and "is not a DNS label" in r.stderr
    assert "Bad_Name" not in path.read_text()
    assert cli(project, "destroy", "--stack", "itwrite").returncode == 0


def test_a_persons_kubectl_works_on_the_plane_without_naming_a_context(project: Project) -> None:
    """The viewer (current-context) reads what a person looks at and writes nothing; evaluating
    `local env` twice keeps one copy of each PATH entry."""
    import shlex

    from infercrane.project.tools import find_tool

    def kubectl_as_viewer(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(find_tool("kubectl")), f"--kubeconfig={project.plane.kubeconfig}", *args, "-n", NS]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    for what in ("pods", "deployments", "services", "events", "inferenceservices"):
        r = kubectl_as_viewer("get", what)
        assert r.returncode == 0, (what, r.stderr)
    r = kubectl_as_viewer("delete", "deployment", "anything")
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), "the viewer never writes"
    r = cli(project, "local", "env")
    assert "infercrane-local-viewer (current-context, for your kubectl): read-only -- deployments, services" in r.stdout
    path = next(
        shlex.split(line.removeprefix("export PATH="))[0] for line in r.stdout.splitlines() if line.startswith("export PATH=")
    )
    again = cli(project, "local", "env", env={"PATH": path}).stdout
    path_again = next(shlex.split(x.removeprefix("export PATH="))[0] for x in again.splitlines() if x.startswith("export PATH="))
    entries = path_again.split(os.pathsep)
    assert len(entries) == len(set(entries)) and path_again == path


def _stderr_events(r: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """Every stderr line of a ``--json`` command, parsed: a line that is not one JSON object fails."""
    events = []
    for line in r.stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON event on stderr: {line!r}\n{r.stderr[-2000:]}") from None
        assert isinstance(event, dict) and "event" in event, line
        events.append(event)
    return events


def test_with_json_every_stderr_line_of_plan_deploy_and_destroy_is_a_json_event(project: Project) -> None:
    keys = ["it-jsonerr-r0", "it-jsonerr-r1"]
    project.stack("itjsonerr", [replica(k) for k in keys])
    seen: dict[str, set[str]] = {}
    for args, rc in ((("plan",), 3), (("deploy",), 0), (("plan",), 0), (("destroy",), 0)):
        r = cli(project, *args, "--stack", "itjsonerr", "--json")
        assert r.returncode == rc, r.stderr[-3000:]
        seen.setdefault(args[0], set()).update(e["event"] for e in _stderr_events(r))
    assert {"target", "idempotency-key", "applied", "readiness", "done"} <= seen["deploy"]
    assert {"target", "deleted", "remaining", "done"} <= seen["destroy"]
    # A failure too: one error event, nothing applied.
    project.stack("itjsonerr", [replica(keys[0], gpu="NVIDIA-NOT-A-GPU")])
    r = cli(project, "deploy", "--stack", "itjsonerr", "--json")
    assert r.returncode == 1
    (error,) = [e for e in _stderr_events(r) if e["event"] == "error"]
    assert error["command"] == "deploy" and "NVIDIA-NOT-A-GPU" in error["message"]


def test_a_plan_a_deploy_and_a_destroy_leave_the_temporary_directory_as_they_found_it(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The stack names its kubeconfig (the plane's, as every test here): pulumi-kubernetes copies
    it into a new temporary file each time its provider is configured and never removes it."""
    tmp = tmp_path_factory.mktemp("tmpdir")
    project.stack("ittmp", [replica("it-tmp-r0")])
    for args in (("plan",), ("deploy",), ("plan",), ("destroy",)):
        r = cli(project, *args, "--stack", "ittmp", env={"TMPDIR": str(tmp)})
        assert r.returncode in (0, 3), r.stderr
        assert sorted(p.name for p in tmp.iterdir()) == [], f"`infercrane {args[0]}` left these in TMPDIR"


def test_the_state_records_no_stack_trace_of_the_program_and_no_path_of_this_machine(project: Project) -> None:
    """The SDK would record with every resource the Python stack that registered it: the
    package's and the SDK's frames, with this machine's paths (``project:///…/site-packages/…``).
    Neither ``infercrane deploy`` nor plain ``pulumi up`` of the same program records one."""
    from infercrane.engine.workspace import Engine
    from tests.integration.conftest import plain_pulumi

    stack = "itnotrace"
    project.stack(stack, [replica("it-notrace-r0")])
    r = cli(project, "deploy", "--stack", stack)
    assert r.returncode == 0, r.stderr[-3000:]
    project.stack(stack, [replica("it-notrace-r0"), replica("it-notrace-r1")])
    up = plain_pulumi(project, stack)("up", "--yes", "--skip-preview")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    resources = [x for x in Engine(stack, project_dir=project.root).state()["resources"] if x["type"] != "pulumi:pulumi:Stack"]
    assert sorted(x["type"] for x in resources) == sorted(
        ["pulumi:providers:kubernetes"]
        + ["infercrane:index:Replica", "kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Service"] * 2
    )
    assert [x["urn"] for x in resources if "stackTrace" in x or "sourcePosition" in x] == []
    assert "project:///" not in json.dumps(resources)
    assert cli(project, "destroy", "--stack", stack).returncode == 0
