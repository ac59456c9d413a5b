"""The exhaustive check's model of the controllers compared with KServe's: the model's object is
the workload, and for an InferenceService (Standard mode) that is KServe's controller writing the
predictor Deployment and the Deployment controller rolling it. Each transition the model assumes
-- Recreate and RollingUpdate (maxSurge 1, maxUnavailable 0) of a new release, also over a pod
still loading, a scale to two pods, a deletion in the foreground -- is replayed on an
InferenceService InferCrane renders, and every state the controllers rest in must be the one the
model's come to rest in from it (as ``tests/integration/test_controllers.py`` does for a
Deployment on the real node).

On kwok nodes of a plane of their own: each pod loads 3 s (8 s for the first release, so a
release can start while it still loads) and a deleted pod stays terminating for its grace period
(``pod_grace``), so every state is held long enough to be seen. And the one place the model does
not stand for KServe: a surge canary's hold on the predictor Deployment, which KServe's own
reconcile takes back at once (docs/canary.md says so)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.render.manifests import render_checked
from infercrane.live.client.cluster import InferenceService
from infercrane.local.bootstrap import admin_client
from infercrane.local.plane import READY_DELAY_ANNOTATION, Plane
from tests import rollout_model as model
from tests.integration.test_controllers import KEY, Cluster, Observed, remove, settle
from tests.integration.test_promotion import bootstrap_namespace

pytestmark = pytest.mark.integration
GPU = "NVIDIA-L40S"
NODES = {"nodes": [{"name": "kwok-kserve-0", "gpuProduct": GPU, "gpus": 3}]}
DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
FIRST_LOAD = "8s"  # the first release's pod loads longer than the plane's 3 s


@pytest.fixture(scope="module")
def kserve_admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    root = tmp_path_factory.mktemp("kserve-plane")
    nodes = root / "nodes.yaml"
    nodes.write_text(yaml.safe_dump(NODES))
    p = Plane(root / "state")
    status = p.start(nodes_file=nodes, progress=lambda m: None, pod_ready_delay=3.0, real_node=False, pod_grace=True)
    assert status["podGrace"] is True
    yield admin_client(p.kubeconfig)
    p.stop(quiet=True)


def rendered(ns: str, surge: bool) -> dict[str, Any]:
    """Our own InferenceService for one replica on the kwok node, draining for 2 s (grace 7 s)."""
    target = {
        "context": "infercrane-local",
        "namespace": ns,
        "workloadApi": "kserve",
        "imageDigest": DIGEST,
        "rollout": {"maxUnavailable": 0 if surge else 1, "maxSurge": 1 if surge else 0},
        "drain": {"preStopSeconds": 1, "shutdownSeconds": 1},
    }
    replica = {"key": KEY, "model": "Qwen/Qwen3-8B", "name": "ctl", "gpu": GPU}
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": [replica]})
    (out,) = render_checked(config, "ctl")
    (isvc,) = [m for m in out.manifests if m["kind"] == "InferenceService"]
    return dict(isvc)


class Served(Cluster):
    """An InferenceService and the pods KServe's predictor runs, read as the model reads them."""

    resource = InferenceService

    def selector(self) -> dict[str, str]:
        return {naming.KSERVE_ISVC_LABEL: self.name}

    def revised(self, revision: int, replicas: int) -> dict[str, Any]:
        predictor = dict(self.manifest["spec"]["predictor"])
        annotations = {**(predictor.get("annotations") or {}), "it/revision": str(revision)}
        if revision == 0:
            annotations[READY_DELAY_ANNOTATION] = FIRST_LOAD
        predictor |= {"annotations": annotations, "minReplicas": replicas, "maxReplicas": replicas}
        return {**self.manifest, "spec": {**self.manifest["spec"], "predictor": predictor}}

    def apply(self, revision: int, replicas: int = 1) -> None:
        """The InferenceService applied; a new count waited for until its autoscaler (KServe's HPA,
        min = max = the count) has set it on the predictor -- the model's "autoscaler scales" step,
        which the HPA takes on its own period (15 s), not at once."""
        super().apply(revision, replicas)
        deadline = time.monotonic() + 60
        while (self.predictor() or {}).get("spec", {}).get("replicas") not in (None, replicas) and time.monotonic() < deadline:
            time.sleep(0.2)

    def predictor(self) -> Any:
        from lightkube import ApiError

        try:
            return self.admin.get(Deployment, self.name + "-predictor", namespace=self.ns).to_dict()
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise


@pytest.fixture
def served(kserve_admin: Client) -> Iterator[Any]:
    made: list[Cluster] = []

    def make(ns: str, surge: bool, loading: bool = False) -> Served:
        bootstrap_namespace(kserve_admin, ns)
        made.append(Served(kserve_admin, ns, rendered(ns, surge), surge))
        return settle(made[-1], loading)  # type: ignore[return-value]

    yield make
    remove(kserve_admin, made)


def test_an_inference_service_in_place_stops_the_old_pod_before_the_new_one_starts_as_the_model_says(served: Any) -> None:
    c = served("it-kctl-recreate", False)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.TERMINATING),) in seen, seen  # the old pod drains alone
    c.apply(1, replicas=2)  # a scale: one more pod of the current release
    assert c.replay(1, 2, lambda s: s == ((1, model.AVAILABLE), (1, model.AVAILABLE)))


def test_an_inference_service_under_a_surge_keeps_the_old_pod_until_the_new_one_is_available_as_the_model_says(
    served: Any,
) -> None:
    c = served("it-kctl-rolling", True)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.AVAILABLE), (1, model.STARTING)) in seen, seen
    assert ((0, model.TERMINATING), (1, model.AVAILABLE)) in seen, seen


def test_an_inference_service_under_a_surge_keeps_an_old_pod_still_loading_as_the_model_says(served: Any) -> None:
    c = served("it-kctl-loading", True, loading=True)
    c.apply(1)  # while release 0 still loads
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.STARTING), (1, model.STARTING)) in seen, seen


def test_an_inference_service_deleted_in_the_foreground_stays_until_its_pods_are_gone_as_the_model_says(
    served: Any, kserve_admin: Client
) -> None:
    from lightkube.types import CascadeType

    c = served("it-kctl-delete", False)
    kserve_admin.delete(InferenceService, c.name, namespace=c.ns, cascade=CascadeType.FOREGROUND)
    held: list[bool] = []

    def gone(s: Observed) -> bool:
        held.append(c.exists())
        return s == ()

    seen = c.replay(0, 1, gone, deleting=True)
    assert ((0, model.TERMINATING),) in seen and held[0], (seen, held)  # the object stays while its pod drains
    deadline = time.monotonic() + 30
    while c.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not c.exists(), "the InferenceService is gone once its pods are"


def test_kserve_takes_back_a_hold_placed_on_its_predictor_so_a_kserve_surge_canary_is_not_held(
    served: Any, kserve_admin: Client
) -> None:
    """Why InferCrane holds no InferenceService's canary (docs/canary.md): KServe's reconcile of
    its predictor Deployment patches it back to what KServe renders -- ``minReadySeconds`` unset --
    as soon as the Deployment changes, so the hold would last milliseconds."""
    from infercrane.core.model.config import KubernetesTarget
    from infercrane.live.client.api import Live

    c = served("it-kctl-hold", True)
    name = c.name + "-predictor"
    live = Live(
        kserve_admin, KubernetesTarget.model_validate({"context": "infercrane-local", "namespace": c.ns, "imageDigest": DIGEST})
    )
    # The hold's own field and manager (live.status.hold), for 30 s: KServe's predictor keeps the
    # default progress deadline (600 s), which a minReadySeconds must stay below.
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"minReadySeconds": 30}}
    applied = live.apply(Deployment, name, body, field_manager=naming.HOLD_FIELD_MANAGER, action="hold")
    assert applied["spec"]["minReadySeconds"] == 30, "the hold was not placed"
    deadline = time.monotonic() + 20
    while c.predictor()["spec"].get("minReadySeconds") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not c.predictor()["spec"].get("minReadySeconds"), "KServe kept a hold on its predictor: docs/canary.md is stale"
