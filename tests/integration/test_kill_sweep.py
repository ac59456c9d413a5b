"""Killed at any instant: ``deploy`` and ``destroy`` SIGKILLed as a process group (as a CI runner
kills a timed-out job) at instants spread over a whole run -- every ``INFERCRANE_KILL_SWEEP_STEP``
seconds (default 1.0 for deploy, a quarter of that for destroy; ``make test-kill-sweep`` runs
0.25) and at each phase boundary the progress events report -- each followed by the same
command again, on the file backend and on Pulumi's PostgreSQL backend. Every rerun must converge
with no manual step: all replicas ready, no duplicates, the objects created before the kill keep
their uid, no pending operation or lock left, and a third run replays; a destroy rerun leaves zero
owned objects and an empty state. Each sweep prints how many kill points it tried.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod, Service

from infercrane.core import naming
from infercrane.engine import stores
from infercrane.engine.workspace import Engine
from infercrane.live.status.verdicts import deployment_verdict
from infercrane.project import stackfile
from tests.integration.conftest import Project, cli, kill_as_ci, plain_pulumi, replica, start_cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"
STEP = float(os.environ.get("INFERCRANE_KILL_SWEEP_STEP", "1.0"))
REPLICAS = 3
CLOCK_SLACK = 2.5  # seconds: past the backup check's slack for whole-second server timestamps


@pytest.fixture(params=["file", "postgres"])
def swept(request: pytest.FixtureRequest, project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Project:
    """The project, its CLI runs given a temporary directory of the test's own (``TMPDIR``)."""
    if request.param == "postgres":
        monkeypatch.setenv("PULUMI_BACKEND_URL", request.getfixturevalue("postgres"))
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    return project


def left_in_tmpdir() -> list[str]:
    """What the runs left in their temporary directory (the ``swept`` fixture's): a killed run's
    own directory is removed by the next command (``engine.runs.sweep_scratch``, from ``cli.main``)."""
    return sorted(p.name for p in Path(os.environ["TMPDIR"]).iterdir())


def owned(admin: Client, stack: str) -> dict[str, str]:
    """``Kind/name`` -> uid of every live object carrying this stack's annotation."""
    out = {}
    for res in (Deployment, Service):
        for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
            if (obj.metadata.annotations or {}).get(naming.ANNOTATION_STACK) == f"infercrane/{stack}":
                out[f"{res.__name__}/{obj.metadata.name}"] = str(obj.metadata.uid)
    return out


def kill_at(
    project: Project,
    args: list[str],
    *,
    after: float | None = None,
    when: Callable[[dict[str, Any]], bool] | None = None,
    as_json: bool = True,
) -> bool:
    """Run the CLI and SIGKILL its process group ``after`` seconds, or at the first progress event
    (``--json`` on stderr) that ``when`` accepts. Returns whether the kill landed (the run had not
    finished)."""
    proc = start_cli(project, *args, *(["--json"] if as_json else []), capture=when is not None)
    hit = threading.Event()
    if when is not None:

        def watch() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and when(event):
                    break
            hit.set()  # the event, or the run ended without it

        threading.Thread(target=watch, daemon=True).start()
        hit.wait(timeout=120)
    else:
        time.sleep(after or 0)
    landed = proc.poll() is None
    return kill_as_ci(proc) and landed


def assert_clean_state(project: Project, stack: str) -> dict[str, Any]:
    engine = Engine(stack, project_dir=project.root)
    url = engine.backend_url()
    store = stores.store_for(url)
    assert store is not None
    assert store.locks("infercrane", stack) == [], "a lock was left"
    state = engine.state()
    assert not state.get("pending_operations"), state["pending_operations"]
    return state


def run_ok(project: Project, *args: str) -> Any:
    r = cli(project, *args)
    assert r.returncode == 0, f"{' '.join(args)}:\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr
    return r


def timed(project: Project, *args: str) -> float:
    began = time.monotonic()
    run_ok(project, *args)
    return time.monotonic() - began


def sweep_points(span: float, step: float) -> list[float]:
    """Kill instants every ``step`` seconds over a run of ``span`` seconds (mid-step each)."""
    return [step * (i + 0.5) for i in range(int(span / step) + 1)]


def test_a_deploy_killed_at_any_instant_converges_when_rerun_with_the_same_key(swept: Project, admin: Client) -> None:
    stack = "itsweepdeploy"
    keys = [f"it-sweep-d{i}" for i in range(REPLICAS)]
    swept.stack(stack, [replica(k) for k in keys])
    span = timed(swept, "deploy", "--stack", stack)  # one whole run, to spread the kill points over
    run_ok(swept, "destroy", "--stack", stack)
    points: list[tuple[str, Any]] = [(f"{t:.2f}s", t) for t in sweep_points(span, STEP)]
    points += [
        ("first object applied", lambda e: e.get("event") == "applied" and e.get("applied") == 0),
        ("first replica applied", lambda e: (e.get("applied") or 0) >= 1),
        ("waiting for readiness", lambda e: e.get("event") == "readiness"),
    ]
    tried = []
    for i, (label, at) in enumerate(points):
        key = f"sweep-{i}"
        args = ["deploy", "--stack", stack, "--idempotency-key", key]
        landed = kill_at(swept, args, after=at) if isinstance(at, float) else kill_at(swept, args, when=at)
        before = owned(admin, stack)
        run_ok(swept, *args)
        after = owned(admin, stack)
        assert len(after) == 2 * REPLICAS, (label, after)  # no duplicates, nothing missing
        assert {k: v for k, v in after.items() if k in before} == before, f"kill at {label}: an object was recreated"
        for k in keys:
            dep = admin.get(Deployment, naming.object_name(k), namespace=NS)
            assert deployment_verdict(dep.to_dict(), 1).state == "ready", label
        assert_clean_state(swept, stack)
        third = run_ok(swept, *args)
        assert "already applied at" in third.stdout, (label, third.stdout)
        tried.append(f"{label}{'' if landed else ' (finished first)'}: {len(before)} live")
        run_ok(swept, "destroy", "--stack", stack)
        assert left_in_tmpdir() == [], label
    print(f"deploy kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged: {tried}")


def test_a_destroy_killed_at_any_instant_leaves_zero_objects_and_an_empty_state_when_rerun(swept: Project, admin: Client) -> None:
    stack = "itsweepdestroy"
    keys = [f"it-sweep-x{i}" for i in range(REPLICAS)]
    swept.stack(stack, [replica(k) for k in keys])
    run_ok(swept, "deploy", "--stack", stack)
    span = timed(swept, "destroy", "--stack", stack)
    points = sweep_points(span, STEP / 4)
    for at in points:
        run_ok(swept, "deploy", "--stack", stack)
        kill_at(swept, ["destroy", "--stack", stack], after=at)
        run_ok(swept, "destroy", "--stack", stack)
        assert owned(admin, stack) == {}, at
        state = assert_clean_state(swept, stack)
        assert [r["type"] for r in state.get("resources") or [] if r["type"] != "pulumi:pulumi:Stack"] == [], at
        assert left_in_tmpdir() == [], at
    print(f"destroy kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged")


def test_a_damaged_checkpoint_is_restored_from_pulumis_backup_only_when_the_backup_records_what_runs(
    project: Project, admin: Client
) -> None:
    stack = "itbackup"
    keys = ["it-bak-a", "it-bak-b"]
    pulumi = plain_pulumi(project, stack)
    folder = project.root / ".infercrane" / "pulumi-state" / ".pulumi" / "stacks" / "infercrane"
    checkpoint, bak = folder / f"{stack}.json", folder / f"{stack}.json.bak"
    project.stack(stack, [replica(keys[0])])
    run_ok(project, "deploy", "--stack", stack)
    only_a = pulumi("stack", "export")
    assert only_a.returncode == 0, only_a.stderr
    time.sleep(CLOCK_SLACK)  # b is created well after the state that records only a
    project.stack(stack, [replica(k) for k in keys])
    run_ok(project, "deploy", "--stack", stack)
    both = checkpoint.read_bytes()
    objects = owned(admin, stack)
    time.sleep(CLOCK_SLACK)
    # A state that does not record b, written after b existed (an old export imported again, its
    # time now -- an import keeps the export's time), imported twice so that Pulumi's own write
    # makes it the backup. Then a write is torn.
    doc = json.loads(only_a.stdout)
    doc["deployment"]["manifest"]["time"] = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    exported = project.root / "only-a.json"
    exported.write_text(json.dumps(doc))
    for _ in range(2):
        assert pulumi("stack", "import", "--file", str(exported)).returncode == 0
    checkpoint.write_bytes(both[: len(both) // 2])

    r = cli(project, "deploy", "--stack", stack, "--idempotency-key", "bak-1")
    assert r.returncode == 1
    b = naming.object_name(keys[1])
    assert (
        f"Pulumi's {stack}.json.bak beside it is older than the cluster: it does not record Deployment/{b}, Service/{b}, which existed when it was written; nothing was applied."
        in r.stderr
    ), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert owned(admin, stack) == objects and checkpoint.read_bytes() == both[: len(both) // 2]

    bak.write_bytes(both)  # a backup that records what runs (the manual step: a newer backup file)
    r = run_ok(project, "deploy", "--stack", stack, "--idempotency-key", "bak-2")
    assert f"note: the checkpoint of stack '{stack}' did not parse (kept as {stack}.json.damaged-" in r.stderr
    assert owned(admin, stack) == objects  # nothing recreated
    assert_clean_state(project, stack)
    run_ok(project, "destroy", "--stack", stack)


def test_deploy_model_killed_at_any_instant_leaves_a_whole_stack_file_and_the_rerun_finishes(
    project: Project, admin: Client
) -> None:
    stack = "itsweepmodel"
    base = [replica("it-sm-r0")]
    path = project.root / "stacks" / f"Pulumi.{stack}.yaml"
    intent = ["deploy", "Qwen/Qwen3-8B", "--name", "qwen-extra", "--gpu", "NVIDIA-L40S", "--stack", stack]
    extra = naming.object_name("qwen-extra-r0")

    def reset() -> None:
        project.stack(stack, base)
        run_ok(project, "deploy", "--stack", stack)

    reset()
    span = timed(project, *intent)
    points: list[tuple[str, Any]] = [(f"{t:.2f}s", t) for t in sweep_points(span, 2 * STEP)]
    points.append(("first object applied", lambda e: e.get("event") == "applied" and e.get("applied") == 0))
    for i, (label, at) in enumerate(points):
        reset()
        args = [*intent, "--idempotency-key", f"model-{i}"]
        kill_at(project, args, after=at) if isinstance(at, float) else kill_at(project, args, when=at)
        written = stackfile.load_stack(stack, project_dir=project.root)  # whole: the old file or the new one
        assert [r.key for r in written.replicas] in (["it-sm-r0"], ["it-sm-r0", "qwen-extra-r0"]), label
        run_ok(project, *args)
        keys = [r.key for r in stackfile.load_stack(stack, project_dir=project.root).replicas]
        assert keys == ["it-sm-r0", "qwen-extra-r0"], (label, keys)
        assert path.read_text().count("key: qwen-extra-r0") == 1
        for name in (naming.object_name("it-sm-r0"), extra):
            assert deployment_verdict(admin.get(Deployment, name, namespace=NS).to_dict(), 1).state == "ready", label
        assert_clean_state(project, stack)
        assert "already applied at" in run_ok(project, *args).stdout, label
        assert sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")) in ([], [f"{path.name}.tmp"])
    run_ok(project, "destroy", "--stack", stack)
    print(f"deploy MODEL kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged")


def test_promote_killed_at_any_instant_leaves_a_whole_target_file_and_the_rerun_finishes(project: Project) -> None:
    source, target = "itsweepsrc", "itsweeptgt"
    key = "it-sp-r0"
    newer = "vllm/vllm-openai@sha256:" + "3" * 64
    project.stack(source, [replica(key)], imageDigest=newer)
    run_ok(project, "deploy", "--stack", source)  # healthy: promote's gate reads its history
    target_file = project.root / "stacks" / f"Pulumi.{target}.yaml"
    project.stack(target, [replica(key)])
    before = target_file.read_text()
    span = timed(project, "promote", "--from", source, "--to", target)
    points = sweep_points(span, STEP / 4)
    for at in points:
        target_file.write_text(before)
        kill_at(project, ["promote", "--from", source, "--to", target], after=at, as_json=False)
        # Parses and validates: the old file or the promoted one, never a part of one.
        assert [r.key for r in stackfile.load_stack(target, project_dir=project.root).replicas] == [key], at
        run_ok(project, "promote", "--from", source, "--to", target)
        promoted = stackfile.load_stack(target, project_dir=project.root)
        assert promoted.image_for(promoted.replicas[0]) == newer, at
        again = run_ok(project, "promote", "--from", source, "--to", target)
        assert "nothing to change (the bundles are already equal)" in again.stdout, at
    run_ok(project, "destroy", "--stack", source)
    print(f"promote kill sweep: {len(points)} kill points over a {span:.1f} s run, all converged")


def test_takeover_killed_at_any_instant_is_finished_by_the_rerun_without_a_restart(project: Project, admin: Client) -> None:
    from tests.integration.test_takeover import apply_as_original_adapter

    stack = "itsweeptake"
    keys = [f"it-st-r{i}" for i in range(REPLICAS)]
    project.stack(stack, [replica(k) for k in keys])
    apply_as_original_adapter(project, stack)
    names = [naming.object_name(k) for k in keys]
    objects = {f"{kind}/{n}" for n in names for kind in ("Deployment", "Service")}

    def shape() -> dict[str, tuple[str, str]]:
        """Each object's uid and spec, and each pod's uid (an annotation bumps a Deployment's
        generation -- the controller copies annotations to its ReplicaSet -- but restarts nothing)."""
        out = {}
        for res in (Deployment, Service):
            for obj in admin.list(res, namespace=NS, labels={naming.LABEL_MANAGED_BY: naming.MANAGED_BY}):
                if obj.metadata.name in names:
                    out[f"{res.__name__}/{obj.metadata.name}"] = (str(obj.metadata.uid), json.dumps(obj.to_dict()["spec"]))
        for pod in admin.list(Pod, namespace=NS):
            if any(pod.metadata.name.startswith(n + "-") for n in names):
                out[f"Pod/{pod.metadata.name}"] = (str(pod.metadata.uid), "")
        return out

    def release() -> dict[str, tuple[str, str]]:
        """The objects as the original adapter left them: no stack annotation."""
        for res in (Deployment, Service):
            for name in names:
                admin.patch(res, name, {"metadata": {"annotations": {naming.ANNOTATION_STACK: None}}}, namespace=NS)
        return shape()

    release()
    span = timed(project, "takeover", "--stack", stack)
    points = sweep_points(span, min(STEP / 4, span / 10))
    partial = 0
    for at in points:
        was = release()
        kill_at(project, ["takeover", "--stack", stack], after=at)
        partial += 0 < len(owned(admin, stack)) < len(objects)  # the kill landed between two patches
        run_ok(project, "takeover", "--stack", stack)
        assert set(owned(admin, stack)) == objects, at
        assert shape() == was, f"kill at {at:.2f}s: takeover changed more than metadata, or restarted a pod"
    run_ok(project, "destroy", "--stack", stack)
    assert owned(admin, stack) == {}
    print(
        f"takeover kill sweep: {len(points)} kill points over a {span:.1f} s run ({partial} between two patches), all converged"
    )
