"""The package as a platform team installs it: a wheel, the Pulumi CLI and the Kubernetes provider
plugin on PATH, no checkout (no tools/, no tools/build.sh) -- plan, deploy, plan, destroy against
the real cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lightkube import Client
from lightkube.resources.apps_v1 import Deployment

from infercrane.core import naming
from infercrane.project.tools import find_tool
from tests.integration.conftest import ROOT, Project, get_or_none, replica


def test_an_installed_wheel_plans_and_deploys_with_pulumi_from_path_and_no_checkout(
    project: Project, admin: Client, tmp_path: Path
) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("infercrane-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    # PATH as the platform team set it up: the Pulumi CLI and the provider plugin (here the same
    # pinned builds, copied out of the checkout's cache), the system; a fresh PULUMI_HOME.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("pulumi", "pulumi-resource-kubernetes"):
        (bin_dir / tool).symlink_to(find_tool(tool))
    env = dict(os.environ) | {
        "PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONPATH": str(site),
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "INFERCRANE_PROJECT_DIR": str(project.root),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=project.root, env=env, capture_output=True, text=True, timeout=600)

    probe = run("-c", "import infercrane.project.tools as t, infercrane; print(infercrane.__file__); print(t.tool_dirs())")
    where, dirs = probe.stdout.splitlines()
    assert where.startswith(str(site)) and dirs == "()", probe.stdout + probe.stderr

    key = "it-wheel-r0"
    project.stack("itwheel", [replica(key)])
    r = run("-m", "infercrane", "plan", "--stack", "itwheel")
    assert r.returncode == 3 and "changes pending" in r.stdout, r.stdout + r.stderr
    r = run("-m", "infercrane", "deploy", "--stack", "itwheel", "--idempotency-key", "wheel-1")
    assert r.returncode == 0 and "deploy wheel-1: succeeded" in r.stdout, r.stdout + r.stderr[-3000:]
    assert get_or_none(admin, Deployment, naming.object_name(key)) is not None
    assert not (tmp_path / "pulumi-home" / "plugins" / "resource-kubernetes-v4.25.0").exists()  # the plugin came from PATH
    r = run("-m", "infercrane", "plan", "--stack", "itwheel", "--full-preview")
    assert r.returncode == 0 and "no changes" in r.stdout, r.stdout + r.stderr[-3000:]
    r = run("-m", "infercrane", "destroy", "--stack", "itwheel")
    assert r.returncode == 0 and "zero objects owned by stack itwheel" in r.stdout, r.stdout + r.stderr[-3000:]
