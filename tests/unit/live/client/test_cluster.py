"""KUBECONFIG with several files is merged as kubectl merges it (first definition of a name wins)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infercrane.core.errors import ClusterError
from infercrane.core.model.target import KubernetesTarget
from infercrane.live.client import cluster, kubeconfigs
from tests.unit.conftest import DIGEST


def kubeconfig(path: Path, name: str, server: str, ca: str = "ca.crt") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": ca}}],
                "users": [{"name": name, "user": {"token": "t"}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            }
        )
    )
    return path


def target(context: str) -> KubernetesTarget:
    return KubernetesTarget.model_validate({"context": context, "imageDigest": DIGEST})


def test_a_context_from_the_second_file_is_found_and_its_relative_paths_resolve_there(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = kubeconfig(tmp_path / "a" / "config", "one", "https://one:6443")
    second = kubeconfig(tmp_path / "b" / "config", "two", "https://two:6443")
    merged = kubeconfigs.merged([first, tmp_path / "missing", second])
    assert [c["name"] for c in merged["contexts"]] == ["one", "two"]
    two = next(c for c in merged["clusters"] if c["name"] == "two")
    assert two["cluster"]["certificate-authority"] == str(tmp_path / "b" / "ca.crt")


def test_the_first_file_that_names_a_context_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "first", "same", "https://first:6443")
    second = kubeconfig(tmp_path / "second", "same", "https://second:6443")
    merged = kubeconfigs.merged([first, second])
    assert [c["cluster"]["server"] for c in merged["clusters"]] == ["https://first:6443"]


def test_client_reads_every_kubeconfig_entry(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "first", "one", "https://one:6443", ca=str(tmp_path / "first"))
    second = kubeconfig(tmp_path / "second", "two", "https://two:6443", ca=str(tmp_path / "first"))
    env = {"KUBECONFIG": f"{first}:{second}"}
    assert kubeconfigs.paths(target("two"), env) == [first, second]
    with pytest.raises(ClusterError) as exc:
        cluster.client(target("three"), env=env)
    assert "context 'three' is not in kubeconfig" in str(exc.value) and "(contexts: one, two)" in str(exc.value)
