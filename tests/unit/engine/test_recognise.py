"""Automation API failures become one message with the next step (no engine needed)."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from pulumi import automation as auto
from pulumi.automation._cmd import CommandResult

from infercrane.engine.recognise import translate


def err(cls: type[auto.CommandError], stderr: str, stdout: str = "") -> auto.CommandError:
    return cls(CommandResult(stdout=stdout, stderr=stderr, code=255))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            err(auto.ConcurrentUpdateError, "error: the stack is currently locked by 1 lock(s)"),
            "stack 'dev' is locked by another update (a live process, one on another host, or one no run on this machine "
            "started).\n"
            "    fix: wait for it to finish; if you are sure it is gone, run `pulumi cancel --stack dev`",
        ),
        (
            err(
                auto.CommandError,
                "  kubernetes:apps/v1:Deployment (qwen-0-deployment):\n    error: configured Kubernetes cluster is "
                "unreachable: unable to load schema information from the API server: unexpected EOF",
            ),
            "the Kubernetes API stopped answering during the update of stack 'dev'",
        ),
        (
            err(
                auto.CommandError,
                'error: resource "urn:…::qwen-2-deployment" was not successfully created by the Kubernetes API server: '
                "unexpected error when reading response body. Please retry. Original error: unexpected EOF",
            ),
            "the Kubernetes API stopped answering during the update of stack 'dev'",
        ),
        (
            err(auto.CommandError, "error: update failed: etcdserver: request timed out"),
            "then rerun the same command with the same --idempotency-key",
        ),
        (
            # etcd killed while the API server allocated a Service's cluster IP (seen in the outage test)
            err(
                auto.CommandError,
                'error: resource "urn:…::infercrane-a4b4-service" was not successfully created by the Kubernetes API '
                'server: Service "infercrane-a4b4" is invalid: spec.clusterIPs: Invalid value: [""]: failed to '
                "allocate IP: rpc error: code = Unavailable desc = error reading from server: EOF",
            ),
            "the Kubernetes API stopped answering during the update of stack 'dev'",
        ),
        (
            err(auto.StackNotFoundError, "error: no stack named 'dev' found"),
            "stack 'dev' does not exist in this backend.\n    fix: run `infercrane deploy --stack dev` to create it",
        ),
        (
            err(
                auto.CommandError,
                "",
                'error: Server-Side Apply field conflict detected.\nconflict with "hpa-controller": .spec.replicas',
            ),
            "pulumi-kubernetes hit a field-manager conflict; nothing was forced.",
        ),
        (
            err(auto.CommandError, 'deployments.apps "x" is forbidden: User "u" cannot patch resource'),
            "the Kubernetes API refused an action (RBAC).",
        ),
        (
            err(auto.CommandError, "error: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE"),
            "the secrets passphrase of stack 'dev' is missing or wrong.\n    fix: export PULUMI_CONFIG_PASSPHRASE",
        ),
        (
            # PostgreSQL backend: the other update's lock row removed between the key list and its read
            err(auto.CommandError, "error: could not list bucket: blob (code=NotFound): sql: no rows in result set"),
            "stack 'dev' is locked by another update: it took or released the lock as this one looked",
        ),
        (
            err(
                auto.CommandError,
                'error: blob (key ".pulumi/locks/infercrane/dev/1f2e.json") (code=NotFound): sql: no rows in result set',
            ),
            "nothing was applied.\n    fix: wait for the other update to finish, then rerun the same command",
        ),
        (err(auto.CommandError, "error: something else entirely"), "pulumi failed for stack 'dev':\n"),
    ],
    ids=[
        "locked",
        "api-lost",
        "api-lost-mid-create",
        "etcd-lost",
        "etcd-lost-while-allocating-a-cluster-ip",
        "missing-stack",
        "ssa-conflict",
        "rbac",
        "passphrase",
        "lock-row-gone-while-listed",
        "lock-row-gone-while-read",
        "other",
    ],
)
def test_translate_names_what_happened_and_what_to_do(exc: auto.CommandError, expected: str) -> None:
    assert expected in str(translate(exc, "dev"))


def test_an_unrecognised_engine_failure_is_one_message_without_the_automation_apis_scaffolding() -> None:
    exc = auto.CommandError(CommandResult(stdout="", stderr="error: failed to load checkpoint: EOF\n", code=1))
    text = str(translate(exc, "d2"))
    assert text.startswith(
        "pulumi failed for stack 'd2':\nerror: failed to load checkpoint: EOF\n    fix: the full engine log is"
    )
    assert "code: 1" not in text and "stdout:" not in text and "stderr:" not in text
    assert "rerun the same command (with the same --idempotency-key)" in text


def test_an_engine_failure_of_several_errors_keeps_each_of_them() -> None:
    stderr = (
        "error: 2 errors occurred:\n\t* reading lock a.json: blob not found\n\t* reading lock b.json: blob not found\n\n"
        "error: update failed\n"
    )
    text = str(translate(auto.CommandError(CommandResult(stdout="", stderr=stderr, code=1)), "d2"))
    assert text.startswith(
        "pulumi failed for stack 'd2':\nerror: 2 errors occurred:\n    * reading lock a.json: blob not found\n"
        "    * reading lock b.json: blob not found\nerror: update failed\n"
    ), text


def test_rbac_message_keeps_the_apiserver_words() -> None:
    text = str(translate(err(auto.CommandError, 'deployments.apps "x" is forbidden: User "u" cannot patch resource'), "dev"))
    assert "cannot patch resource" in text and "bind deploy/kubernetes/base/provider-rbac.yaml" in text


def test_an_engine_refused_on_claim_templates_names_the_dra_role() -> None:
    forbidden = 'resourceclaimtemplates.resource.k8s.io "x" is forbidden: User "u" cannot patch resource'
    text = str(translate(err(auto.CommandError, forbidden), "dev"))
    assert "cannot patch resource" in text and "bind deploy/kubernetes/dra/provider-rbac.yaml" in text


def test_a_lock_of_a_gone_pulumi_process_a_run_here_started_is_removed_others_kept(tmp_path: Path) -> None:
    """Removed: the lock of a process a run of this machine recorded starting, gone (exited, a
    zombie, its pid reused by another program). Kept: a live one; another host's; and one of this
    host name whose pid no run here recorded -- another container with the same host name may hold
    it (its pid means nothing in our pid namespace) -- with a note naming `pulumi cancel`."""
    import json
    import shutil
    import signal
    import socket
    import subprocess
    import sys
    import time
    from datetime import datetime

    from infercrane.engine import runs
    from infercrane.engine.backend import clear_stale_locks

    fake_pulumi = tmp_path / "pulumi"  # a live process whose name is pulumi
    fake_pulumi.symlink_to(shutil.which("sleep") or "/bin/sleep")
    live = subprocess.Popen([str(fake_pulumi), "30"])
    zombie = subprocess.Popen([str(fake_pulumi), "30"])  # killed, not reaped: as after SIGKILL to a CI job
    zombie.send_signal(signal.SIGKILL)
    other = subprocess.Popen([shutil.which("sleep") or "sleep", "30"])  # the pid now runs something else
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    unrecorded = subprocess.Popen([sys.executable, "-c", "pass"])
    unrecorded.wait()
    try:
        time.sleep(0.2)
        project = tmp_path / "project"
        locks = tmp_path / "state" / ".pulumi" / "locks" / "organization" / "infercrane" / "dev"
        locks.mkdir(parents=True)
        here = socket.gethostname()
        started = time.time() - 5
        written = datetime.fromtimestamp(started + 1, tz=UTC).isoformat().replace("+00:00", "123Z")
        cases = {
            "dead": (dead.pid, here),
            "zombie": (zombie.pid, here),
            "reused": (other.pid, here),
            "live": (live.pid, here),
            "remote": (dead.pid, "ci-runner-7"),
            "unrecorded": (unrecorded.pid, here),
        }
        records = runs.folder(project, "dev")
        records.mkdir(parents=True)
        for name, (pid, host) in cases.items():
            content = {"pid": pid, "hostname": host, "username": "u", "timestamp": written}
            (locks / f"{name}.json").write_text(json.dumps(content))
            if name != "unrecorded":
                (records / f"{pid}.json").write_text(json.dumps({"pid": pid, "started": started}))
        notes = clear_stale_locks("dev", {"PULUMI_BACKEND_URL": (tmp_path / "state").as_uri()}, project)
        assert sorted(p.name for p in locks.iterdir()) == ["live.json", "remote.json", "unrecorded.json"]
        removed = [n for n in notes if n.startswith("note: removed the lock")]
        assert len(removed) == 3
        assert any(
            f"left by pulumi process {zombie.pid} (started by a run on this machine, no longer running" in n for n in notes
        )
        (kept,) = [n for n in notes if not n.startswith("note: removed the lock")]
        assert kept.startswith(f"note: stack 'dev' is locked by pulumi process {unrecorded.pid} of host {here!r}")
        assert "which no run on this machine started: it may run in another container with this host name" in kept
        assert kept.endswith("`pulumi cancel --stack dev` removes it")
        assert set(runs.started(project, "dev")) == {live.pid}  # the removed locks' records go
    finally:
        for p in (live, zombie, other):
            p.kill()
            p.wait()


def test_a_lock_written_long_after_the_recorded_process_started_is_not_its_lock() -> None:
    from infercrane.engine import runs

    start = 1_796_274_400.0  # 2026-12-03T05:06:40Z
    assert runs.lock_written_by("2026-12-03T05:06:41.123456789Z", start)
    assert runs.lock_written_by("2026-12-03T06:06:41+01:00", start)
    assert not runs.lock_written_by("2026-12-03T05:06:30Z", start)  # before the process started
    assert not runs.lock_written_by("2026-12-03T05:16:40Z", start)  # a later process with the same pid
    assert not runs.lock_written_by("?", start)


def test_a_run_records_the_pulumi_processes_it_starts_and_forgets_them_when_it_ends(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from infercrane.engine import runs

    fake_pulumi = tmp_path / "pulumi"
    fake_pulumi.symlink_to(shutil.which("sleep") or "/bin/sleep")
    with runs.watching(tmp_path, "dev"):
        child = subprocess.Popen([str(fake_pulumi), "1"])
        seen = {}
        for _ in range(50):
            seen = runs.started(tmp_path, "dev")
            if seen:
                break
            child.poll() is None and __import__("time").sleep(0.05)
        child.wait()
    assert list(seen) == [child.pid]
    assert runs.started(tmp_path, "dev") == {}  # the run ended: its process with it


def test_lock_stores_are_chosen_by_backend_url_and_read_pulumis_postgresql_layout() -> None:
    import ssl

    from infercrane.engine import stores as locks

    assert isinstance(locks.store_for("file:///var/state"), locks.FileBackend)
    assert locks.store_for("s3://bucket/state") is None  # explained by the "locked" message, never cleared
    pg = locks.store_for("postgres://ci:s%40cret@db.internal:6543/pulumi?sslmode=disable&table=team_state")
    assert isinstance(pg, locks.PostgresBackend)
    assert (pg.prefix, pg.table) == ("pulumi/", "team_state")
    args = pg.connect_args
    assert (args["user"], args["password"], args["host"], args["port"], args["database"]) == (
        "ci",
        "s@cret",
        "db.internal",
        6543,
        "pulumi",
    )
    assert args["ssl_context"] is None
    default = locks.store_for("postgres://ci@db.internal/pulumi")
    assert isinstance(default, locks.PostgresBackend) and isinstance(default.connect_args["ssl_context"], ssl.SSLContext)
    with pytest.raises(ValueError, match="unexpected table name"):
        locks.PostgresBackend("postgres://ci@db/pulumi?table=x;drop")


def test_a_checkpoint_is_read_from_the_backend_in_pulumis_layout_or_left_to_pulumi(tmp_path: Path) -> None:
    import gzip
    import json

    from infercrane.engine import backend, stores

    store = stores.FileBackend(tmp_path)
    stacks = tmp_path / ".pulumi" / "stacks" / "infercrane"
    assert backend.checkpoint(store, "infercrane", "dev") == {}  # nothing written yet, in either layout: no stack
    (tmp_path / ".pulumi" / "stacks").mkdir(parents=True)
    (tmp_path / ".pulumi" / "stacks" / "dev.json").write_text("{}")
    assert backend.checkpoint(store, "infercrane", "dev") is None  # a legacy stack and no meta.yaml: left to pulumi
    (tmp_path / ".pulumi" / "stacks" / "dev.json").unlink()
    stacks.mkdir(parents=True)
    (tmp_path / ".pulumi" / "meta.yaml").write_text("version: 0\n")
    assert backend.checkpoint(store, "infercrane", "dev") is None  # the legacy layout: left to pulumi
    (tmp_path / ".pulumi" / "meta.yaml").write_text("version: 1\n")
    assert backend.checkpoint(store, "infercrane", "dev") == {}  # no stack yet: an empty state
    latest = {"resources": [{"urn": "u", "type": "pulumi:pulumi:Stack"}]}
    (stacks / "dev.json").write_text(json.dumps({"version": 3, "checkpoint": {"stack": "dev", "latest": latest}}))
    assert backend.checkpoint(store, "infercrane", "dev") == latest
    (stacks / "gz.json.gz").write_bytes(gzip.compress(json.dumps({"version": 3, "checkpoint": {"latest": latest}}).encode()))
    assert backend.checkpoint(store, "infercrane", "gz") == latest
    (stacks / "old.json").write_text(json.dumps({"version": 2, "checkpoint": {"latest": latest}}))
    assert backend.checkpoint(store, "infercrane", "old") is None  # another version: `pulumi stack export` reads it
    (stacks / "gz.json").write_text("{}")
    assert backend.checkpoint(store, "infercrane", "gz") is None  # both forms: ambiguous, left to pulumi


POLICY_REPORT = """Policies:
    ❌ infercrane@v0.1.0 (local: /src/policy)
        - [mandatory]  image-digest  (kubernetes:apps/v1:Deployment: tagged)
          Container images are pinned by digest.
          Deployment/tagged: container app: image 'vllm/vllm-openai:latest' is not pinned by digest (a tag can change under you)
              fix: pin the image by digest: vllm/vllm-openai@sha256:<64 lowercase hex>
        - [mandatory]  no-patch-force  (pulumi:providers:kubernetes: default_4_25_0)
          No field-manager conflict is ever forced (no pulumi.com/patchForce, no provider enablePatchForce).
          the Kubernetes provider sets enablePatchForce; InferCrane never forces a conflict
"""


def test_a_blocked_preview_names_each_mandatory_violation_with_its_resource() -> None:
    from infercrane.engine.recognise import translate_text

    err = translate_text(POLICY_REPORT + "\nerror: preview failed\n", "dev")
    text = str(err)
    assert text.startswith("the policy pack blocked the preview of stack 'dev' (2 violation(s)); nothing was applied:")
    assert "- image-digest (kubernetes:apps/v1:Deployment: tagged): Deployment/tagged: container app: image" in text
    assert "- no-patch-force (pulumi:providers:kubernetes: default_4_25_0): the Kubernetes provider sets enablePatchForce" in text


def test_a_stopped_rollout_names_each_stopped_endpoint_where_and_why_with_its_own_fix() -> None:
    from infercrane.core.errors import ClusterError
    from infercrane.core.stops import RolloutStopped

    cause = ClusterError("replica r0 failed: FailedScheduling", fix="add a node")
    stopped = RolloutStopped([("qwen", "wave 2/4", cause)], 20)
    assert str(stopped) == (
        "the rollout stopped for 1 of 20 endpoint(s); the other 19 rolled to the end. A stopped endpoint's old "
        "replicas that its rollout had not reached keep serving; fix the cause and deploy again to continue from there.\n"
        "endpoint qwen stopped at wave 2/4: replica r0 failed: FailedScheduling\n    fix: add a node"
    )
    assert stopped.stopped == [("qwen", "wave 2/4", cause)] and stopped.applied_nothing is False


def test_a_preflight_refusal_gives_each_kind_of_finding_its_list_and_its_fix_in_the_one_format() -> None:
    from infercrane.core.errors import PreflightRefused

    text = str(PreflightRefused(["Service ns/a: not owned by this stack"], ["Deployment ns/a: .spec.replicas"]))
    assert text.startswith(
        "preflight refused the change; nothing was applied.\n"
        "Ownership errors:\n- Service ns/a: not owned by this stack\n"
        "    fix: InferCrane never adopts an object it does not own. Rename or delete the foreign object yourself, "
        "or change the replica key\n"
        "Field-manager conflicts:\n- Deployment ns/a: .spec.replicas\n"
        "    fix: InferCrane never forces a conflict. "
    ), text
    assert "hint:" not in text and "Strict server-side validation" not in text


def test_a_kernel_without_thread_children_lists_still_finds_the_runs_pulumi_children(tmp_path: Path) -> None:
    import os

    from infercrane.engine import runs

    proc = tmp_path / "proc"
    (proc / "self" / "task" / "1").mkdir(parents=True)  # no `children` file: CONFIG_PROC_CHILDREN off
    me = os.getpid()
    for pid, ppid in ((4242, me), (4343, 1), (4444, me)):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "stat").write_text(f"{pid} (pulumi) S {ppid} {pid} {pid} 0 -1")
    assert runs._children(1, proc) == {4242, 4444}


def test_an_engine_failure_during_an_update_says_it_may_have_applied_part_of_its_change() -> None:
    """A failed ``up`` keeps the CLI's stack file edit (applied_nothing False), with the same words;
    a failure of any other engine call applied nothing."""
    from infercrane.core.errors import EngineError, UpdateFailed

    exc = err(auto.CommandError, "error: failed to load checkpoint: EOF\n")
    during, before = translate(exc, "d2", during_update=True), translate(exc, "d2")
    assert isinstance(during, UpdateFailed) and during.applied_nothing is False
    assert type(before) is EngineError and before.applied_nothing is True
    assert str(during) == str(before)
