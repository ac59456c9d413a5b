"""An unreachable cluster is a clear error, quickly, not a hang (no cluster needed)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import yaml

from infercrane.core.errors import ClusterError
from infercrane.core.load import loading
from infercrane.core.model import config as cfg
from infercrane.core.render.manifests import render_checked
from infercrane.live.client.api import Live
from infercrane.live.stack import preflight
from infercrane.project import stackfile
from tests.conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_config(tmp_path: Path, *, server: str | None, context: str) -> cfg.InferCraneConfig:
    """The local stack pointed at a kubeconfig with one context ``context`` (server may be absent)."""
    kubeconfig = tmp_path / "kubeconfig"
    clusters = [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}] if server else []
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": clusters,
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    values = stackfile.read_stack_values(ROOT / "stacks" / "Pulumi.local.yaml")
    return loading.load(values, source="stacks/Pulumi.local.yaml", env={"INFERCRANE_KUBERNETES_KUBECONFIG": str(kubeconfig)})


def test_preflight_against_a_closed_port_fails_fast_with_next_step(tmp_path: Path) -> None:
    config = local_config(tmp_path, server=f"https://127.0.0.1:{closed_port()}", context="infercrane-local")
    manifests = [m for r in render_checked(config, "local") for m in r.manifests]
    began = time.monotonic()
    with pytest.raises(ClusterError) as exc:
        preflight.run(config, manifests, "infercrane/local", Live.connect(config.kubernetes))
    assert time.monotonic() - began < 15
    assert "cannot reach the Kubernetes API of context 'infercrane-local'" in str(exc.value)
    assert "infercrane doctor --kubernetes" in str(exc.value)


def test_missing_context_lists_the_ones_there(tmp_path: Path) -> None:
    config = local_config(tmp_path, server=None, context="prod")
    kubeconfig = tmp_path / "kubeconfig"
    with pytest.raises(ClusterError) as exc:
        preflight.run(config, [], "infercrane/local", Live.connect(config.kubernetes))
    assert f"context 'infercrane-local' is not in kubeconfig {kubeconfig} (contexts: prod)" in str(exc.value)
    assert "never uses the current-context" in str(exc.value)


@pytest.mark.parametrize("command", ["inspect", "doctor"])
def test_live_commands_against_a_closed_port_say_cannot_reach_without_a_traceback(
    cli: CliRunner, tmp_path: Path, command: str
) -> None:
    local_config(tmp_path, server=f"https://127.0.0.1:{closed_port()}", context="infercrane-local")
    args = [command, "--stack", "local"] + (["--kubernetes"] if command == "doctor" else [])
    r = cli(*args, env={"INFERCRANE_KUBERNETES_KUBECONFIG": str(tmp_path / "kubeconfig")})
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout
    assert "cannot reach the Kubernetes API of context 'infercrane-local'" in r.stderr + r.stdout
