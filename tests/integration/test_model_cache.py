"""The verified model cache on a real API server: claims bound by the real PV controller, read by
an identity holding the optional PVC reader. Under ``required`` a Pending or single-reader claim
refuses the deploy before anything is applied; under ``prefer`` the same stack deploys and its
replicas download; a Bound many-reader claim is mounted read-only and the replica becomes ready
(the scheduler's volume binding admits it)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import PersistentVolumeClaim

from infercrane.core import naming
from infercrane.project.paths import code_root
from tests.integration.conftest import Project, cli, replica
from tests.integration.test_promotion import bootstrap_namespace

pytestmark = pytest.mark.integration
NS = "it-cache"
REV_A, REV_B = "a" * 40, "b" * 40


def volume(name: str, mode: str) -> dict[str, Any]:
    """A PersistentVolume pre-bound to the claim ``name`` (hostPath: the kwok node never mounts it)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{NS}-{name}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": [mode],
            "storageClassName": "",
            "hostPath": {"path": f"/models/{name}"},
            "claimRef": {"namespace": NS, "name": name},
        },
    }


def claim(name: str, mode: str, storage_class: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"accessModes": [mode], "storageClassName": storage_class, "resources": {"requests": {"storage": "1Gi"}}},
    }


def prepare_claims(admin: Client) -> None:
    bootstrap_namespace(admin, NS)
    for d in yaml.safe_load_all((code_root() / "deploy/kubernetes/optional/pvc-reader.yaml").read_text()):
        d["metadata"]["namespace"] = NS  # bound, like the shipped Role, to the plane's deploying identity
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")
    docs = [
        volume("qwen-weights", "ReadOnlyMany"),
        claim("qwen-weights", "ReadOnlyMany"),
        volume("rwo-weights", "ReadWriteOnce"),
        claim("rwo-weights", "ReadWriteOnce"),
        claim("pending-weights", "ReadOnlyMany", storage_class="no-such-class"),
    ]
    for d in docs:
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        phases = {n: admin.get(PersistentVolumeClaim, n, namespace=NS).status.phase for n in ("qwen-weights", "rwo-weights")}
        if set(phases.values()) == {"Bound"}:
            return
        time.sleep(0.5)
    raise AssertionError(f"the PV controller did not bind the claims: {phases}")


def cached(policy: str, pvcs: dict[str, str]) -> dict[str, Any]:
    return {"namespace": NS, "artifactCache": {"policy": policy, "pvcs": {f"Qwen/Qwen3-8B@{r}": c for r, c in pvcs.items()}}}


def volumes(admin: Client, key: str) -> list[Any]:
    dep = admin.get(Deployment, naming.object_name(key), namespace=NS)
    return [v for v in dep.spec.template.spec.volumes if v.persistentVolumeClaim]


def test_a_required_cache_refuses_unusable_claims_prefer_downloads_and_a_bound_many_reader_claim_is_mounted(
    project: Project, admin: Client
) -> None:
    prepare_claims(admin)
    r0, r1 = "it-cache-r0", "it-cache-r1"
    replicas = [replica(r0, modelRevision=REV_A), replica(r1, modelRevision=REV_B)]
    unusable = {REV_A: "pending-weights", REV_B: "rwo-weights"}

    project.stack("itcache", replicas, **cached("required", unusable))
    r = cli(project, "deploy", "--stack", "itcache")
    assert r.returncode == 1
    assert "the model cache is required and could not be verified; nothing was applied:" in r.stderr, r.stderr[-2000:]
    assert f"PersistentVolumeClaim {NS}/pending-weights is Pending, not Bound" in r.stderr
    assert f"PersistentVolumeClaim {NS}/rwo-weights allows ReadWriteOnce only" in r.stderr
    assert not list(admin.list(Deployment, namespace=NS)), "refused before anything was applied"
    # The read-only plan, which no run follows, refuses the same at once (it planned an update before).
    r = cli(project, "plan", "--read-only", "--stack", "itcache")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "the model cache is required and could not be verified" in r.stderr, r.stderr[-2000:]
    assert f"PersistentVolumeClaim {NS}/pending-weights is Pending, not Bound" in r.stderr

    project.stack("itcache", replicas, **cached("prefer", unusable))
    r = cli(project, "deploy", "--stack", "itcache")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("they download the weights instead") == 2
    assert volumes(admin, r0) == [] and volumes(admin, r1) == []

    project.stack("itcache", [replicas[0]], **cached("required", {REV_A: "qwen-weights"}))
    r = cli(project, "deploy", "--stack", "itcache")
    assert r.returncode == 0, r.stderr[-2000:]
    (vol,) = volumes(admin, r0)
    assert (vol.persistentVolumeClaim.claimName, vol.persistentVolumeClaim.readOnly) == ("qwen-weights", True)
    assert admin.get(Deployment, naming.object_name(r0), namespace=NS).status.availableReplicas == 1
    assert cli(project, "destroy", "--stack", "itcache").returncode == 0
