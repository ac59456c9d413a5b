"""Pod Security on a real API server (its built-in admission): a namespace that enforces
``restricted`` makes the strict dry run warn for the pods of a stack without a non-root identity --
the preflight refuses with the admission's words and the fix, before anything is applied. Told to
only report the warnings, the deploy applies and fails at once on the ReplicaSet's rejected pods;
with the identity the pods are admitted and ready."""

from __future__ import annotations

import time

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from infercrane.core import naming
from tests.integration.conftest import Project, cli, replica
from tests.integration.test_promotion import bootstrap_namespace

pytestmark = pytest.mark.integration
NS = "it-restricted"


@pytest.mark.qualification
def test_a_restricted_namespace_refuses_pods_without_a_non_root_identity_before_applying_and_admits_them_with_one(
    project: Project, admin: Client
) -> None:
    bootstrap_namespace(admin, NS)
    admin.patch(
        Namespace,
        NS,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        patch_type=PatchType.MERGE,
    )
    key = "it-psa-r0"
    project.stack("itpsa", [replica(key)], namespace=NS)
    r = cli(project, "deploy", "--stack", "itpsa")
    assert r.returncode == 1
    assert "preflight refused the change; nothing was applied." in r.stderr, r.stderr[-2000:]
    assert f'Deployment {NS}/{naming.object_name(key)}: would violate PodSecurity "restricted:latest"' in r.stderr
    assert "set infercrane:kubernetes.securityContext {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}" in r.stderr
    assert not list(admin.list(Deployment, namespace=NS)), "refused before anything was applied"

    project.stack("itpsa", [replica(key)], namespace=NS, podSecurityWarnings="report")
    began = time.monotonic()
    r = cli(project, "deploy", "--stack", "itpsa")
    assert r.returncode == 1
    assert 'violates PodSecurity "restricted:latest"' in r.stderr, r.stderr[-2000:]
    assert admin.get(Deployment, naming.object_name(key), namespace=NS), "reported, applied, then failed on the pods"
    assert time.monotonic() - began < 300, "failed at once, not after the 1800 s startup budget"

    identity = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
    project.stack("itpsa", [replica(key)], namespace=NS, securityContext=identity)
    r = cli(project, "deploy", "--stack", "itpsa")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "PodSecurity" not in r.stderr
    dep = admin.get(Deployment, naming.object_name(key), namespace=NS)
    assert dep.status.availableReplicas == 1
    assert cli(project, "destroy", "--stack", "itpsa").returncode == 0
