"""Promotion flow on the local plane: dev and staging as two stacks in two namespaces."""

from __future__ import annotations

import pytest
import yaml
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment

from infercrane.core import naming
from infercrane.project.paths import code_root
from tests.integration.conftest import Project, foreign_apply, kubectl, replica
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
D1 = "vllm/vllm-openai@sha256:" + "1" * 64
D0 = "vllm/vllm-openai@sha256:" + "0" * 64
D2 = "vllm/vllm-openai@sha256:" + "2" * 64
R1 = "rev1" + "a" * 36


def bootstrap_namespace(admin: Client, ns: str) -> None:
    """The shipped namespace bootstrap (deploy/), re-targeted at another namespace."""
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    for rel in ("deploy/kubernetes/base/service-accounts.yaml", "deploy/kubernetes/base/provider-rbac.yaml"):
        for d in yaml.safe_load_all((code_root() / rel).read_text()):
            d["metadata"]["namespace"] = ns
            docs.append(d)
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "infercrane-worker", "namespace": ns},
            "stringData": {"api-key": "not-a-real-key"},
        }
    )
    for d in docs:
        admin.apply(codecs.from_dict(d), field_manager="it-bootstrap")


def test_deploy_dev_promote_deploy_staging_and_refuse_a_failed_dev(project: Project, admin: Client) -> None:
    bootstrap_namespace(admin, "it-staging")
    key = "it-promo-r0"
    name = naming.object_name(key)
    project.stack("itdev", [replica(key, modelRevision=R1)], imageDigest=D1)
    project.stack("itstg", [replica(key, modelRevision="rev0" + "b" * 36)], imageDigest=D0, namespace="it-staging")
    staging_file = project.root / "stacks" / "Pulumi.itstg.yaml"

    dev_file = project.root / "stacks" / "Pulumi.itdev.yaml"
    dev_before = dev_file.read_text()
    r = cli(project, "promote", "--from", "itdev", "--to", "itstg")
    assert r.returncode == 1 and "stack 'itdev' is not healthy: it was never deployed; nothing was written" in r.stderr
    assert dev_file.read_text() == dev_before, "a refused promote reads the source stack; it never writes its file"

    assert cli(project, "deploy", "--stack", "itdev", "--idempotency-key", "dev-1").returncode == 0
    r = cli(project, "promote", "--from", "itdev", "--to", "itstg")
    assert r.returncode == 0, r.stderr
    assert f"{key}: modelRevision: 'rev0{'b' * 36}' -> '{R1}'" in r.stdout
    assert f"{key}: image: '{D0}' -> '{D1}'" in r.stdout
    text = staging_file.read_text()
    assert "namespace: it-staging" in text and D1 in text and R1 in text

    assert cli(project, "deploy", "--stack", "itstg", "--idempotency-key", "stg-1").returncode == 0
    dep = admin.get(Deployment, name, namespace="it-staging")
    (c,) = dep.spec.template.spec.containers
    assert c.image == D1 and c.args[c.args.index("--revision") + 1] == R1

    # An edit of the dev file that was never deployed is not what dev runs: nothing is promoted.
    dev_text = dev_file.read_text()
    dev_file.write_text(dev_text.replace(D1, D2))
    before = staging_file.read_text()
    r = cli(project, "promote", "--from", "itdev", "--to", "itstg")
    assert r.returncode == 1, r.stdout
    assert "stack 'itdev' does not run what its stack file names; nothing was written:" in r.stderr, r.stderr
    assert f"- {key}: image '{D1}' (the file: '{D2}')" in r.stderr, r.stderr
    assert staging_file.read_text() == before
    dev_file.write_text(dev_text)

    # A failed dev update (a foreign manager took a field, so deploy is refused) blocks promotion.
    foreign_apply(project.plane, name, 2)
    dev_file = project.root / "stacks" / "Pulumi.itdev.yaml"
    dev_file.write_text(dev_file.read_text().replace(D1, D2))
    r = cli(project, "deploy", "--stack", "itdev", "--idempotency-key", "dev-2")
    assert r.returncode == 1 and 'conflict with "foreign-owner"' in r.stderr
    before = staging_file.read_text()
    r = cli(project, "promote", "--from", "itdev", "--to", "itstg")
    assert r.returncode == 1
    assert "stack 'itdev' is not healthy: its last update failed; nothing was written" in r.stderr
    assert staging_file.read_text() == before

    kubectl(project.plane, "delete", "deployment", name, "-n", "infercrane-system")
    for stack in ("itdev", "itstg"):
        assert cli(project, "destroy", "--stack", stack).returncode == 0


def test_promotion_refused_while_a_source_replica_is_not_ready(project: Project, admin: Client) -> None:
    key = "it-promo-notready-r0"
    project.stack("itdev2", [replica(key)], imageDigest=D1)
    project.stack("itstg2", [], imageDigest=D0)
    staging_file = project.root / "stacks" / "Pulumi.itstg2.yaml"
    assert cli(project, "deploy", "--stack", "itdev2", "--idempotency-key", "dev2-1").returncode == 0
    foreign_apply(project.plane, naming.object_name(key), 0)  # the update succeeded; nothing runs now
    before = staging_file.read_text()
    r = cli(project, "promote", "--from", "itdev2", "--to", "itstg2")
    assert r.returncode == 1
    assert f"stack 'itdev2' has replicas that are not ready: {key} (provisioning); nothing was written." in r.stderr
    assert staging_file.read_text() == before
    kubectl(project.plane, "delete", "deployment", naming.object_name(key), "-n", "infercrane-system")
    assert cli(project, "destroy", "--stack", "itdev2").returncode == 0
