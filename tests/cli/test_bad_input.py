"""Bad input through the CLI as a user runs it: one clear message, the right exit code, no
traceback, nothing written (no cluster needed: each is refused before anything live)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliRunner

INTENT = ["Qwen/Qwen3-32B", "--name", "qwen32", "--cloud", "kubernetes", "--gpu", "NVIDIA-L40S"]


def stack_file(root: Path, stack: str = "dev") -> Path:
    return root / "stacks" / f"Pulumi.{stack}.yaml"


@pytest.mark.parametrize("command", ["deploy", "plan"])
def test_intent_on_a_missing_stack_file_names_the_real_file(cli: CliRunner, scratch_project: Path, command: str) -> None:
    r = cli(command, *INTENT, "--stack", "nosuch", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "stacks/Pulumi.nosuch.yaml: stack file not found" in r.stderr
    assert "infercrane-plan-" not in r.stderr  # never a temporary copy's path
    assert not stack_file(scratch_project, "nosuch").exists()


@pytest.mark.parametrize("command", ["deploy", "plan"])
def test_intent_on_malformed_yaml_is_refused_and_the_file_kept(cli: CliRunner, scratch_project: Path, command: str) -> None:
    path = stack_file(scratch_project)
    path.write_text("config:\n  infercrane:kubernetes: [unclosed\n")
    r = cli(command, *INTENT, "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "stacks/Pulumi.dev.yaml:" in r.stderr and "is not valid YAML" in r.stderr
    assert path.read_text() == "config:\n  infercrane:kubernetes: [unclosed\n"


@pytest.mark.parametrize("count", ["0", "17"])
def test_an_out_of_range_gpu_count_is_refused_like_the_same_value_in_a_file(
    cli: CliRunner, scratch_project: Path, count: str
) -> None:
    before = stack_file(scratch_project).read_text()
    r = cli("deploy", *INTENT, "--gpu-count", count, "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "infercrane:replicas[" in r.stderr and "gpuCount" in r.stderr
    assert stack_file(scratch_project).read_text() == before


def test_intent_flags_without_model_are_a_usage_error(cli: CliRunner, scratch_project: Path) -> None:
    r = cli("plan", "--cloud", "aws", "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 2
    assert "--cloud describe a replica intent and need MODEL" in r.stderr


def test_deploy_model_refused_before_applying_restores_the_stack_file(cli: CliRunner, scratch_project: Path) -> None:
    # The local stack's kubeconfig does not exist in this scratch project: the deploy is refused
    # before any `pulumi` process starts, so the intent written first is taken back.
    path = stack_file(scratch_project, "local")
    before = path.read_text()
    r = cli("deploy", *INTENT, "--stack", "local", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "stacks/Pulumi.local.yaml: replica qwen32-r0 added" in r.stderr
    assert "stack file stacks/Pulumi.local.yaml restored: the intent was not applied" in r.stderr
    assert path.read_text() == before


DUPLICATE = "config:\n  infercrane:kubernetes:\n    context: a\n    context: b\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DUPLICATE, "stacks/Pulumi.dev.yaml:4: is not valid YAML (duplicate key 'context' (first on line 3))"),
        ("config:\n  42: x\n", "stacks/Pulumi.dev.yaml: config.42: is not a string key"),
        ("config:\n  null: x\n", "stacks/Pulumi.dev.yaml: config.None: is not a string key"),
        ("confg:\n  infercrane:kubernetes: {}\n", "stacks/Pulumi.dev.yaml: 'confg': is not a stack file key"),
        (
            "config:\n  x: " + "[" * 5000 + "]" * 5000 + "\n",
            "stacks/Pulumi.dev.yaml: nests maps or lists too deeply to be read (thousands of levels; a stack file needs a handful)",
        ),
        (b"config:\n  x: \xff\n", "stacks/Pulumi.dev.yaml: is not UTF-8 text (byte 13: invalid start byte)"),
    ],
    ids=["duplicate-key", "numeric-key", "null-key", "misspelt-config", "deep-nesting", "not-utf8"],
)
@pytest.mark.parametrize("command", ["validate", "render", "plan"])
def test_every_command_gives_a_broken_file_the_same_verdict(
    cli: CliRunner, scratch_project: Path, text: str | bytes, expected: str, command: str
) -> None:
    path = stack_file(scratch_project)
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    r = cli(command, "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert expected in r.stderr


def test_a_negative_pod_ready_delay_is_refused_before_any_plane_process_starts(
    cli: CliRunner, scratch_project: Path, tmp_path: Path
) -> None:
    r = cli(
        "local", "start", "--pod-ready-delay", "-1", cwd=scratch_project, env={"INFERCRANE_LOCAL_DIR": str(tmp_path / "plane")}
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "--pod-ready-delay -1 is negative." in r.stderr and "fix: use seconds >= 0 (default 0)" in r.stderr
    assert not (tmp_path / "plane").exists()


@pytest.mark.parametrize("count", ["0", "3"])
def test_a_number_of_real_nodes_the_plane_cannot_run_is_refused_before_any_plane_process_starts(
    cli: CliRunner, scratch_project: Path, tmp_path: Path, count: str
) -> None:
    r = cli("local", "start", "--real-nodes", count, cwd=scratch_project, env={"INFERCRANE_LOCAL_DIR": str(tmp_path / "plane")})
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"--real-nodes {count}: a plane runs 1 to 2 real nodes." in r.stderr, r.stderr
    assert "fix: use --real-nodes 1 to 2, or --no-real-node for none" in r.stderr
    assert not (tmp_path / "plane").exists()


def test_a_policy_pack_that_is_not_a_pack_directory_is_a_usage_error(cli: CliRunner, scratch_project: Path) -> None:
    r = cli("plan", "--stack", "dev", "--policy-pack", str(scratch_project))
    assert r.returncode == 2
    assert f"--policy-pack {scratch_project}: no PulumiPolicy.yaml in {scratch_project}; name a policy pack directory" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("cluster: {}\n", "has no `nodes` list of named nodes"),
        ("nodes: [{gpus: 2}]\n", "has no `nodes` list of named nodes"),
        ("nodes: [\n", "is not YAML"),
    ],
    ids=["no-nodes-key", "a-node-without-a-name", "not-yaml"],
)
def test_a_nodes_file_without_a_nodes_list_is_refused_before_any_plane_process_starts(
    cli: CliRunner, scratch_project: Path, tmp_path: Path, text: str, said: str
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(text)
    r = cli("local", "start", "--nodes", str(nodes), cwd=scratch_project, env={"INFERCRANE_LOCAL_DIR": str(tmp_path / "plane")})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert said in r.stderr and "fix: " in r.stderr, r.stderr
    assert not (tmp_path / "plane").exists()


def test_render_into_an_existing_file_says_it_needs_a_directory(cli: CliRunner, scratch_project: Path) -> None:
    out = scratch_project / "rendered.yaml"
    out.write_text("keep me\n")
    r = cli("render", "--stack", "dev", "--out", str(out), cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "is a file; render writes one file per object into a directory" in r.stderr
    assert out.read_text() == "keep me\n"


def test_a_model_image_by_tag_is_refused_with_where_and_how_and_the_stack_file_kept(
    cli: CliRunner, scratch_project: Path
) -> None:
    import yaml

    path = stack_file(scratch_project)
    doc = yaml.safe_load(path.read_text())
    doc["config"]["infercrane:replicas"][0]["modelImage"] = "oci://registry.example/models/qwen3-8b:latest"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    before = path.read_text()
    r = cli("deploy", "--stack", "dev", cwd=scratch_project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "stacks/Pulumi.dev.yaml: infercrane:replicas[0].modelImage" in r.stderr, r.stderr
    assert "is not pinned by digest (a tag can change under you)" in r.stderr
    assert "pin the model image by digest: oci://registry.example/models/qwen3-8b@sha256:<64 lowercase hex>" in r.stderr
    assert path.read_text() == before
