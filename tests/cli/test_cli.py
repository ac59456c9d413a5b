"""CLI tier, offline commands: in-process (``main(argv)``) for parsing, messages and output; the
entry point itself once more as a user runs it (``python -m infercrane`` in a new interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
STACKS = ["local", "dev", "staging", "prod"]


def run_as_user(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # PYTHONUNBUFFERED left out too: a user's stdout into a pipe is block-buffered.
    dropped = ("PULUMI_K8S_ENABLE_PATCH_FORCE", "PYTHONUNBUFFERED")
    base = {k: v for k, v in os.environ.items() if not k.startswith("INFERCRANE_") and k not in dropped}
    base["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "infercrane", *args], cwd=cwd, env=base | (env or {}), capture_output=True, text=True, timeout=60
    )


def edit(scratch_project: Path, stack: str, old: str, new: str) -> None:
    path = scratch_project / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_validates(cli: CliRunner, stack: str) -> None:
    r = cli("validate", "--stack", stack)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"stack {stack}: valid (")


def test_broken_stack_exits_1_naming_file_and_key_path_without_traceback(cli: CliRunner, scratch_project: Path) -> None:
    edit(scratch_project, "dev", "namespace: infercrane-dev", "namespace: Infercrane_Dev")
    edit(scratch_project, "dev", "gpu: NVIDIA-L40S", "gpu: L40S")
    r = cli("validate", "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "error: invalid InferCrane configuration (2 problem(s)); nothing was applied:" in r.stderr
    assert "- stacks/Pulumi.dev.yaml: infercrane:kubernetes.namespace: 'Infercrane_Dev' is not a DNS label" in r.stderr
    assert "- stacks/Pulumi.dev.yaml: infercrane:replicas[0].gpu (replica 'qwen-kubernetes-rev-1-r0'): GPU 'L40S'" in r.stderr


def test_validate_json_lists_problems(cli: CliRunner, scratch_project: Path) -> None:
    edit(scratch_project, "dev", "context: gpu-dev", "context: ''")
    r = cli("validate", "--stack", "dev", "--json", cwd=scratch_project)
    assert r.returncode == 1
    import json

    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["problems"][0].startswith("stacks/Pulumi.dev.yaml: infercrane:kubernetes.context:")


def test_render_local_equals_golden(cli: CliRunner) -> None:
    r = cli("render", "--stack", "local")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "tests" / "golden" / "expected" / "local.yaml").read_text()


def test_render_prod_starts_the_sglang_replica_with_the_worker_key_by_reference_and_hardened_pods(cli: CliRunner) -> None:
    r = cli("render", "--stack", "prod")
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all(r.stdout) if d and d.get("kind") == "Deployment"]
    (llama,) = [d for d in docs if "sglang" in d["spec"]["template"]["spec"]["containers"][0]["command"][-1]]
    args = llama["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--api-key") + 1] == "$(INFERCRANE_WORKER_API_KEY)"
    for d in docs:
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert all(c["securityContext"]["capabilities"] == {"drop": ["ALL"]} for c in pod["containers"])


def test_render_out_writes_one_file_per_object(cli: CliRunner, tmp_path: Path) -> None:
    r = cli("render", "--stack", "local", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "out").glob("*.yaml"))) == 4


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("vllm/vllm-openai:latest", "is not pinned by digest"),
        ("vllm/vllm-openai@sha256:REPLACE_WITH_QUALIFIED_DIGEST", "is a placeholder"),
    ],
    ids=["tag", "placeholder"],
)
def test_render_refuses_mutable_or_placeholder_image(cli: CliRunner, scratch_project: Path, image: str, reason: str) -> None:
    text = (scratch_project / "stacks" / "Pulumi.local.yaml").read_text()
    digest_line = next(line for line in text.splitlines() if "imageDigest:" in line)
    edit(scratch_project, "local", digest_line, f"    imageDigest: {image}")
    r = cli("render", "--stack", "local", cwd=scratch_project)
    assert r.returncode == 1 and r.stdout == ""
    assert f"infercrane:kubernetes.imageDigest: image '{image}' {reason}" in r.stderr


def test_render_refuses_patch_force_setting(cli: CliRunner, scratch_project: Path) -> None:
    path = scratch_project / "stacks" / "Pulumi.local.yaml"
    path.write_text(path.read_text() + '  kubernetes:enablePatchForce: "true"\n')
    r = cli("render", "--stack", "local", cwd=scratch_project)
    assert r.returncode == 1
    assert "stacks/Pulumi.local.yaml: kubernetes:enablePatchForce: is set" in r.stderr


def test_render_refuses_patch_force_environment(cli: CliRunner) -> None:
    r = cli("render", "--stack", "local", env={"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"})
    assert r.returncode == 1
    assert "PULUMI_K8S_ENABLE_PATCH_FORCE (environment): asks pulumi-kubernetes to force field-manager conflicts" in r.stderr


def test_environment_variable_overrides_stack_file(cli: CliRunner) -> None:
    r = cli("render", "--stack", "local", env={"INFERCRANE_KUBERNETES_NAMESPACE": "team-x"})
    assert r.returncode == 0 and "namespace: team-x" in r.stdout and "namespace: infercrane-system" not in r.stdout


def test_missing_stack_file_is_a_clear_error(cli: CliRunner) -> None:
    r = cli("validate", "--stack", "nope")
    assert r.returncode == 1
    assert "stacks/Pulumi.nope.yaml: stack file not found" in r.stderr


def test_usage_error_exits_2(cli: CliRunner) -> None:
    r = cli("frobnicate")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_python_m_infercrane_validates_and_renders_as_a_user_runs_it() -> None:
    r = run_as_user("validate", "--stack", "dev")
    assert r.returncode == 0 and r.stdout.startswith("stack dev: valid ("), r.stderr
    r = run_as_user("render", "--stack", "local")
    assert r.returncode == 0 and r.stdout == (ROOT / "tests" / "golden" / "expected" / "local.yaml").read_text()
    # The entry point ends the process itself: a failure's code and message still arrive whole.
    r = run_as_user("plan", "--stack", "nosuch")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.endswith("fix: create it (copy stacks/Pulumi.dev.yaml) or pick another --stack\n"), r.stderr


def test_any_command_removes_what_a_killed_run_left_in_the_temporary_directory(tmp_path: Path) -> None:
    # A deploy that replays its key runs no engine, so the engine run's own sweep never comes: the
    # kill sweep found a killed run's directory left after the rerun, the third run and the destroy.
    from infercrane.engine import runs

    gone = subprocess.Popen(["true"])
    gone.wait()
    left = tmp_path / f"{runs.SCRATCH_PREFIX}{runs.machine()}-{gone.pid}-1-abcd1234"
    left.mkdir()
    (left / "kubeconfig123").write_text("token")
    other = tmp_path / f"{runs.SCRATCH_PREFIX}0123456789abcdef-{gone.pid}-1-abcd1234"  # another machine's
    other.mkdir()
    r = run_as_user("validate", "--stack", "dev", env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]


def test_python_m_infercrane_usage_error_exits_2_with_argparse_usage() -> None:
    r = run_as_user("frobnicate")
    assert r.returncode == 2 and r.stderr.startswith("usage: infercrane") and "invalid choice" in r.stderr


def test_every_variable_that_retargets_a_stack_is_said_first_with_the_file_and_both_values(
    cli: CliRunner, scratch_project: Path
) -> None:
    env = {"INFERCRANE_KUBERNETES_CONTEXT": "production-cluster", "INFERCRANE_KUBERNETES_NAMESPACE": "infercrane-system"}
    r = cli("validate", "--stack", "dev", cwd=scratch_project, env=env)
    assert r.returncode == 0, r.stderr
    first, second = r.stderr.splitlines()[:2]
    assert first == (
        "note: INFERCRANE_KUBERNETES_CONTEXT sets infercrane:kubernetes.context of stacks/Pulumi.dev.yaml "
        "to 'production-cluster' (the file says 'gpu-dev')"
    )
    assert second.startswith(
        "note: INFERCRANE_KUBERNETES_NAMESPACE sets infercrane:kubernetes.namespace of stacks/Pulumi.dev.yaml"
    )
    r = cli("validate", "--stack", "dev", "--json", cwd=scratch_project, env=env)
    events = [json.loads(line) for line in r.stderr.splitlines()]
    assert [e["event"] for e in events] == ["override", "override"]
    assert events[0]["message"].startswith("INFERCRANE_KUBERNETES_CONTEXT sets infercrane:kubernetes.context")
    assert cli("validate", "--stack", "dev", cwd=scratch_project).stderr == "", "nothing to say without the variables"


def test_with_json_a_failure_is_one_json_event_on_stderr(cli: CliRunner, scratch_project: Path) -> None:
    edit(scratch_project, "dev", "gpu: NVIDIA-L40S", "gpu: L40S")
    r = cli("plan", "--stack", "dev", "--json", cwd=scratch_project)
    assert r.returncode == 1 and r.stdout == ""
    (event,) = [json.loads(line) for line in r.stderr.splitlines()]
    assert event["event"] == "error" and event["command"] == "plan"
    assert event["message"].startswith("invalid InferCrane configuration (1 problem(s)); nothing was applied:")
    r = cli("plan", "--stack", "dev", "--json", "--policy-pack", "no-such-dir", cwd=scratch_project)
    assert r.returncode == 2
    (event,) = [json.loads(line) for line in r.stderr.splitlines()]
    assert event["event"] == "usage-error" and "--policy-pack no-such-dir: no PulumiPolicy.yaml" in event["message"]


@pytest.mark.parametrize("backend", [None, "file:///elsewhere"], ids=["own-backend", "other-backend"])
def test_local_reset_forgets_the_local_stacks_state_on_the_projects_own_backend_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str | None
) -> None:
    """Their objects went with the plane: a deploy trusting their state would wait for objects that
    are gone. On a backend the project does not own, nothing is forgotten."""
    from infercrane.cli.main import main
    from infercrane.engine.workspace import Engine
    from infercrane.local.plane import Plane

    reset: list[Path] = []
    forgotten: list[str] = []
    plane = Plane(tmp_path / "plane")
    monkeypatch.setattr(Plane, "default", classmethod(lambda cls: plane))
    monkeypatch.setattr(Plane, "reset", lambda self: reset.append(self.state))
    monkeypatch.setattr(Engine, "forget_state", lambda self: forgotten.append(self.stack_name) or self.stack_name == "local")
    if backend:
        monkeypatch.setenv("PULUMI_BACKEND_URL", backend)
    else:
        monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    assert main(["local", "reset"]) == 0
    out = capsys.readouterr().out
    assert reset == [plane.state]
    if backend:
        assert forgotten == [] and "removed the state" not in out
    else:
        assert forgotten == ["local", "local-kserve", "local-node"]
        assert "removed the state of stack(s) local (their objects were on that plane)" in out
