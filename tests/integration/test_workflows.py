"""The GitHub workflows lint clean with actionlint (built from the Go module proxy)."""

from __future__ import annotations

import subprocess

import yaml

from infercrane.project.tools import find_tool
from tests.integration.conftest import ROOT


def test_workflows_pass_actionlint() -> None:
    r = subprocess.run([str(find_tool("actionlint")), "-color=false"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_stack_job_has_its_own_concurrency_group_and_never_cancels() -> None:
    groups = []
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            conc = job.get("concurrency")
            assert conc and conc["cancel-in-progress"] is False, f"{path.name}:{name}"
            groups.append(conc["group"])
    assert {"infercrane-stack-dev", "infercrane-stack-staging", "infercrane-stack-prod"} <= set(groups)


def test_workflows_call_the_tested_commands_and_print_no_secret() -> None:
    text = "".join(p.read_text() for p in (ROOT / ".github").rglob("*.yml"))
    for cmd in (
        "infercrane plan --stack",
        "infercrane deploy --stack dev",
        "infercrane promote --from dev --to staging",
        "infercrane promote --from staging --to prod",
    ):
        assert cmd in text
    assert 'echo "$KUBECONFIG_CONTENT"' not in text and "set -x" not in text


def test_the_prod_job_deploys_exactly_the_commit_its_key_names() -> None:
    """The prod job checks out the commit staging recorded and keys its deploy with that commit --
    never main (which may have moved) under the run's commit."""
    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())["jobs"]
    (checkout,) = [s for s in jobs["prod"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    bundle = "${{ needs.staging.outputs.bundle }}"
    assert checkout["with"]["ref"] == bundle
    (deploy,) = [s for s in jobs["prod"]["steps"] if "infercrane deploy --stack prod" in str(s.get("run", ""))]
    assert f'--idempotency-key "prod-{bundle}"' in deploy["run"]
    assert jobs["staging"]["outputs"]["bundle"] == "${{ steps.record.outputs.bundle }}"
