"""The policy pack on the real engine: `pulumi preview --policy-pack policy` passes InferCrane's
own stack and blocks a plain pulumi-kubernetes program that breaks each policy, every violation
named with its resource and fix (the engine starts the pack through the stand-in language host)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infercrane.core.render import guards
from infercrane.engine.environment import engine_env
from tests.integration.conftest import ROOT, Project, cli, plain_pulumi, replica

pytestmark = pytest.mark.integration
PACK = str(ROOT / "policy")


def test_infercranes_own_stack_passes_every_policy(project: Project) -> None:
    project.stack("itpolicy", [replica("it-policy-r0"), replica("it-policy-r1", gpu="NVIDIA-H100-80GB-HBM3", gpuCount=2)])
    pulumi = plain_pulumi(project, "itpolicy")
    assert pulumi("stack", "init").returncode == 0
    r = pulumi("preview", "--policy-pack", PACK)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "✅ infercrane@v0.1.0" in r.stdout
    assert "[mandatory]" not in r.stdout
    r = cli(project, "plan", "--stack", "itpolicy", "--policy-pack", PACK, "--json")
    assert r.returncode == 3, "changes pending, no violation: " + r.stderr[-2000:]


def test_infercranes_own_dra_stack_passes_every_policy(project: Project) -> None:
    """gpuAllocation dra: the claim templates select a known productName, the pods claim them."""
    replicas = [replica("it-policydra-r0"), replica("it-policydra-r1", gpu="NVIDIA-A100-80GB-PCIe", gpuCount=2)]
    project.stack("itpolicydra", replicas, gpuAllocation="dra")
    pulumi = plain_pulumi(project, "itpolicydra")
    assert pulumi("stack", "init").returncode == 0
    r = pulumi("preview", "--policy-pack", PACK)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "✅ infercrane@v0.1.0" in r.stdout and "[mandatory]" not in r.stdout
    assert "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate" in r.stdout, "the templates were judged"


def test_a_plain_program_breaking_each_policy_is_blocked_with_every_violation_named(tmp_path: Path) -> None:
    program = tmp_path / "violations"
    shutil.copytree(ROOT / "policy" / "examples" / "violations", program)
    env = dict(os.environ) | engine_env("violations", program) | {"PULUMI_CONFIG_PASSPHRASE": "policy-test"}

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = ["pulumi", *args, "--stack", "violations", "--non-interactive"]
        return subprocess.run(cmd, cwd=program, env=env, capture_output=True, text=True, timeout=300)

    assert pulumi("stack", "init").returncode == 0
    r = pulumi("preview", "--policy-pack", PACK)
    assert r.returncode != 0, "mandatory policies block the preview"
    assert "❌ infercrane@v0.1.0" in r.stdout, r.stdout[-3000:]
    for rule, resource in {
        "image-digest": "kubernetes:apps/v1:Deployment: tagged",
        "gpu-product-selector": "kubernetes:apps/v1:Deployment: guessed-gpu",
        "gpu-limits": "kubernetes:apps/v1:Deployment: uneven-gpu",
        "no-patch-force": "kubernetes:apps/v1:Deployment: forced",
        "no-secret-literals": "kubernetes:apps/v1:Deployment: literal-key",
        "infercrane-ownership": "kubernetes:apps/v1:Deployment: claims-ours",
        "infercrane-pod-contract": "kubernetes:apps/v1:Deployment: claims-ours",
        "gpu-claim-product": "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate: guessed-claim",
    }.items():
        assert f"[mandatory]  {rule}  ({resource})" in r.stdout, rule
        assert f"fix: {guards.RULES[rule].fix}" in r.stdout, rule
    # Every other shape of a GPU claim: a firstAvailable alternative, the SDK's v1beta1 and v1beta2 types, a ResourceClaim.
    for resource in (
        "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate: guessed-alternative",
        "kubernetes:resource.k8s.io/v1beta1:ResourceClaimTemplate: guessed-v1beta1",
        "kubernetes:resource.k8s.io/v1beta2:ResourceClaim: guessed-claim-object",
    ):
        assert f"[mandatory]  gpu-claim-product  ({resource})" in r.stdout, resource + r.stdout[-3000:]
    assert "[mandatory]  no-patch-force  (pulumi:providers:kubernetes: default_4_25_0)" in r.stdout
    assert set(guards.RULES) == {line.split()[2] for line in r.stdout.splitlines() if "[mandatory]" in line}
    assert not (program / "rendered").exists(), "nothing was rendered: the preview was blocked"
