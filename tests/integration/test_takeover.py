"""Users of the original adapter: its objects (the seed's ownership, no stack annotation) are
taken over by a stack without a restart; anything else is refused and nothing changes."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

from infercrane.core import naming
from infercrane.core.render.manifests import render_checked
from infercrane.live.status.verdicts import deployment_verdict
from infercrane.project import stackfile
from tests.integration.conftest import Project, kubectl, replica, wait_for
from tests.integration.test_cli_ops import cli

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def apply_as_original_adapter(project: Project, stack: str) -> None:
    """``kubectl apply --server-side --field-manager=infercrane-provider-v1``, as the original adapter
    applies: the seed's labels and annotations, no stack annotation, no Pulumi annotations."""
    config = stackfile.load_stack(stack, project_dir=project.root)
    for m in [copy.deepcopy(m) for r in render_checked(config, stack) for m in r.manifests]:
        ann = m["metadata"]["annotations"]
        for k in [k for k in ann if k == naming.ANNOTATION_STACK or k.startswith("pulumi.com/")]:
            del ann[k]
        r = kubectl(
            project.plane, "apply", "--server-side", f"--field-manager={naming.FIELD_MANAGER}", "-f", "-", stdin=yaml.safe_dump(m)
        )
        assert r.returncode == 0, r.stderr


def test_original_adapter_objects_are_taken_over_without_a_restart(project: Project, admin: Client) -> None:
    key = "it-legacy-r0"
    name = naming.object_name(key)
    project.stack("itlegacy", [replica(key)])
    apply_as_original_adapter(project, "itlegacy")
    wait_for(lambda: deployment_verdict(admin.get(Deployment, name, namespace=NS).to_dict(), 1).state == "ready", "legacy ready")
    uid = admin.get(Deployment, name, namespace=NS).metadata.uid
    (pod,) = admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name})

    r = cli(project, "deploy", "--stack", "itlegacy")
    assert r.returncode == 1 and "exists but is not owned by this stack" in r.stderr
    assert f"annotation {naming.ANNOTATION_STACK} is missing" in r.stderr

    r = cli(project, "takeover", "--stack", "itlegacy", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["taken"] == [f"Deployment/{name}", f"Service/{name}"]
    assert naming.ANNOTATION_STACK not in (admin.get(Deployment, name, namespace=NS).metadata.annotations or {})

    r = cli(project, "takeover", "--stack", "itlegacy")
    assert r.returncode == 0, r.stderr
    assert f"took over 2 object(s) for stack itlegacy: Deployment/{name}, Service/{name}" in r.stdout
    r = cli(project, "deploy", "--stack", "itlegacy")
    assert r.returncode == 0, r.stderr[-3000:]
    dep = admin.get(Deployment, name, namespace=NS)
    assert dep.metadata.uid == uid and dep.metadata.annotations[naming.ANNOTATION_STACK] == "infercrane/itlegacy"
    (after,) = admin.list(Pod, namespace=NS, labels={naming.LABEL_INSTANCE: name})
    assert after.metadata.uid == pod.metadata.uid, "taking over must not restart the pod"
    assert cli(project, "destroy", "--stack", "itlegacy").returncode == 0


def test_takeover_refuses_an_object_that_is_not_exactly_the_seeds_and_changes_nothing(project: Project, admin: Client) -> None:
    keys = ["it-legacy2-r0", "it-legacy2-r1"]
    project.stack("itlegacy2", [replica(k) for k in keys])
    apply_as_original_adapter(project, "itlegacy2")
    bad = naming.object_name(keys[1])
    r = kubectl(project.plane, "annotate", "service", bad, f"{naming.ANNOTATION_KEY}=someone-else", "--overwrite", "-n", NS)
    assert r.returncode == 0, r.stderr
    r = cli(project, "takeover", "--stack", "itlegacy2")
    assert r.returncode == 1
    assert "takeover refused; nothing was changed" in r.stderr
    assert f"Service/{bad} (replica {keys[1]}): annotation {naming.ANNOTATION_KEY} is 'someone-else'" in r.stderr
    for k in keys:
        assert naming.ANNOTATION_STACK not in (
            admin.get(Deployment, naming.object_name(k), namespace=NS).metadata.annotations or {}
        )
    for k in keys:
        kubectl(project.plane, "delete", "deployment,service", naming.object_name(k), "-n", NS)
