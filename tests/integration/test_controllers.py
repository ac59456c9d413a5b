"""The exhaustive check's model of the controllers (``tests/rollout_model.py``: ``controllers``)
compared with the real ones: each transition the model assumes of a workload -- Recreate and
RollingUpdate (maxSurge 1, maxUnavailable 0) of one key's new template, also over a pod still
loading, a scale to two pods, a deletion in the foreground, a surge canary's hold -- is replayed on
a Deployment InferCrane renders and on an InferenceService InferCrane renders (KServe's controller
writing its predictor Deployment between), and every state the real controllers rest in (unchanged
for a while: the controllers act in milliseconds, pods load and drain for seconds) must be the
state the model's controllers come to rest in from it. A disagreement fails, naming both.

On kwok nodes of a plane of their own -- the controllers under test are the control plane's; the
node only gives the pods their time: each pod loads 3 s (8 s for the first release, so a release
can start while it still loads) and a deleted pod stays terminating for its grace period
(``pod_grace``), so every state is held long enough to be seen. The pods are read as the model
sees them: a pod with a deletion time is terminating; one Ready is available; any other
(unscheduled or loading) is starting -- the model's pending and starting are the scheduler's and
the kubelet's to tell apart, not the controllers'. And the one place the model does not stand for
KServe: a surge canary's hold on the predictor Deployment, which KServe's own reconcile takes back
at once (docs/canary.md says so)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.endpoints import RolloutPolicy
from infercrane.core.render.manifests import render_checked
from infercrane.live.client.cluster import InferenceService
from infercrane.local.applying import admin_client
from infercrane.local.kwok_stages import READY_DELAY_ANNOTATION
from tests import rollout_model as model
from tests.integration.conftest import kwok_plane
from tests.integration.test_promotion import bootstrap_namespace
from tests.integration.test_serving import ready

pytestmark = pytest.mark.integration
KEY = "it-ctl-r0"
GPU = "NVIDIA-L40S"
NODES = {"nodes": [{"name": "kwok-ctl-0", "gpuProduct": GPU, "gpus": 3}]}
DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
FIRST_LOAD = "8s"  # the first release's pod loads longer than the plane's 3 s
STABLE_SECONDS = 1.5  # a state held this long is one the controllers rest in
Observed = tuple[tuple[int, str], ...]  # (revision, phase) per pod, sorted
Make = Callable[..., "Cluster"]


@pytest.fixture(scope="module")
def plane_admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    for p in kwok_plane(tmp_path_factory, "controllers-plane", NODES, pod_ready_delay=3.0, pod_grace=True):
        yield admin_client(p.kubeconfig)


def rendered(ns: str, surge: bool, api: str = "deployment") -> dict[str, Any]:
    """Our own workload for one replica on the kwok node, draining for 2 s (grace 7 s)."""
    target = {
        "context": "infercrane-local",
        "namespace": ns,
        "workloadApi": api,
        "imageDigest": DIGEST,
        "rollout": {"maxUnavailable": 0 if surge else 1, "maxSurge": 1 if surge else 0},
        "drain": {"preStopSeconds": 1, "shutdownSeconds": 1},
    }
    replica = {"key": KEY, "model": "Qwen/Qwen3-8B", "name": "ctl", "gpu": GPU}
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": [replica]})
    (out,) = render_checked(config, "ctl")
    (workload,) = [m for m in out.manifests if m["kind"] in ("Deployment", "InferenceService")]
    return dict(workload)


def annotated(annotations: dict[str, str] | None, revision: int) -> dict[str, str]:
    """A pod's annotations for ``revision``: the revision, and the first release's longer load."""
    return {**(annotations or {}), "it/revision": str(revision)} | ({READY_DELAY_ANNOTATION: FIRST_LOAD} if revision == 0 else {})


class Cluster:
    """A Deployment and its pods, read as the model reads them (the model's object is the workload)."""

    def __init__(self, admin: Client, ns: str, manifest: dict[str, Any], surge: bool) -> None:
        self.admin, self.ns, self.manifest = admin, ns, manifest
        self.name = manifest["metadata"]["name"]
        policy = RolloutPolicy(max_unavailable=0 if surge else 1, max_surge=1 if surge else 0)
        self.world = model.World((model.Endpoint("a", (KEY,), ((KEY, 1),), policy),), pool=3)

    resource: Any = Deployment

    def selector(self) -> dict[str, str]:
        return dict(naming.selector(KEY))

    def revised(self, revision: int, replicas: int) -> dict[str, Any]:
        """The manifest with ``replicas`` pods of ``revision`` (a pod annotation tells them apart)."""
        d = {**self.manifest, "spec": {**self.manifest["spec"], "replicas": replicas}}
        template = d["spec"]["template"]
        annotations = annotated(template["metadata"].get("annotations"), revision)
        d["spec"]["template"] = {**template, "metadata": {**template["metadata"], "annotations": annotations}}
        return d

    def apply(self, revision: int, replicas: int = 1) -> None:
        from lightkube import codecs

        self.admin.apply(codecs.from_dict(self.revised(revision, replicas)), field_manager="it-controllers", force=True)

    def pods(self) -> Observed:
        out = []
        for p in self.admin.list(Pod, namespace=self.ns, labels=self.selector()):
            rev = int((p.metadata.annotations or {}).get("it/revision", "0"))
            phase = model.TERMINATING if p.metadata.deletionTimestamp else model.AVAILABLE if ready(p) else model.STARTING
            out.append((rev, phase))
        return tuple(sorted(out))

    def live(self) -> Any:
        """Our own connection to the namespace, as a deploy's (the hold is ours to place and release)."""
        from infercrane.core.model.target import KubernetesTarget
        from infercrane.live.client.api import Live

        target = KubernetesTarget.model_validate({"context": "infercrane-local", "namespace": self.ns, "imageDigest": DIGEST})
        return Live(self.admin, target)

    def uids(self) -> list[str]:
        return sorted(str(p.metadata.uid) for p in self.admin.list(Pod, namespace=self.ns, labels=self.selector()))

    def exists(self) -> bool:
        return any(d.metadata.name == self.name for d in self.admin.list(self.resource, namespace=self.ns))

    def predicted(self, revision: int, replicas: int, seen: Observed, deleting: bool = False, held: bool = False) -> Observed:
        """Where the model's controllers rest from ``seen`` (its starting pods as the model's)."""
        obj = model.Obj(KEY, revision, replicas, deleting, held)
        pods = tuple(sorted(model.Pod(KEY, rev, phase) for rev, phase in seen))
        _, rest = model.controllers(self.world, (obj,), pods)
        coarse = [(p.rev, model.STARTING if p.phase == model.PENDING else p.phase) for p in rest]
        return tuple(sorted(coarse))

    def replay(
        self, revision: int, replicas: int, until: Callable[[Observed], bool], deleting: bool = False, held: bool = False
    ) -> list[Observed]:
        """Every state held for STABLE_SECONDS until ``until``; each must be the model's rest."""
        rested: list[Observed] = []
        last, since, deadline = None, time.monotonic(), time.monotonic() + 90
        while time.monotonic() < deadline:
            now = self.pods()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= STABLE_SECONDS and (not rested or rested[-1] != now):
                want = self.predicted(revision, replicas, now, deleting, held)
                assert now == want, f"the controllers rest in {now}; the model's controllers in {want} (seen: {rested})"
                rested.append(now)
                if until(now):
                    return rested
            time.sleep(0.1)
        raise AssertionError(f"no end within 90 s; states the controllers rested in: {rested}")


def settle(c: Cluster, loading: bool) -> Cluster:
    """Revision 0 applied, its pod available (``loading``: still loading)."""
    c.apply(0)
    if loading:
        deadline = time.monotonic() + 30
        while c.pods() != ((0, model.STARTING),) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.pods() == ((0, model.STARTING),), c.pods()
    else:
        c.replay(0, 1, lambda s: s == ((0, model.AVAILABLE),))
    return c


def remove(admin: Client, made: list[Cluster]) -> None:
    """Each workload deleted and waited for with its pods (their GPUs are the next test's)."""
    for c in made:
        if c.exists():
            admin.delete(c.resource, c.name, namespace=c.ns)
        deadline = time.monotonic() + 60
        while (c.exists() or c.pods()) and time.monotonic() < deadline:
            time.sleep(0.5)


class Served(Cluster):
    """An InferenceService and the pods KServe's predictor runs, read as the model reads them."""

    resource = InferenceService

    def selector(self) -> dict[str, str]:
        return {naming.KSERVE_ISVC_LABEL: self.name}

    def revised(self, revision: int, replicas: int) -> dict[str, Any]:
        predictor = dict(self.manifest["spec"]["predictor"])
        annotations = annotated(predictor.get("annotations"), revision)
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


def _workloads(admin: Client, cls: type[Cluster], api: str) -> Iterator[Make]:
    """Workloads of ``api`` made available on revision 0 (``loading``: its pod still loading), in a
    namespace of their own each; removed with their pods after the test."""
    made: list[Cluster] = []

    def make(name: str, surge: bool, loading: bool = False) -> Cluster:
        ns = f"it-{'ctl' if api == 'deployment' else 'kctl'}-{name}"
        bootstrap_namespace(admin, ns)
        made.append(cls(admin, ns, rendered(ns, surge, api), surge))
        return settle(made[-1], loading)

    yield make
    remove(admin, made)


@pytest.fixture
def cluster(plane_admin: Client) -> Iterator[Make]:
    """Deployments (the canary's hold is theirs alone)."""
    yield from _workloads(plane_admin, Cluster, "deployment")


@pytest.fixture
def served(plane_admin: Client) -> Iterator[Make]:
    """InferenceServices."""
    yield from _workloads(plane_admin, Served, "kserve")


@pytest.fixture(params=["deployment", "kserve"], ids=["Deployment", "InferenceService"])
def workload(request: pytest.FixtureRequest, plane_admin: Client) -> Iterator[Make]:
    """Each transition the model assumes, replayed on both: the model's object stands for either."""
    yield from _workloads(plane_admin, Cluster if request.param == "deployment" else Served, request.param)


def test_recreate_stops_the_old_pod_before_the_new_one_starts_as_the_model_says(workload: Make) -> None:
    """In place; then a scale (under KServe, its HPA's: min = max = the count, set on its own period)."""
    c = workload("recreate", False)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.TERMINATING),) in seen, seen  # the old pod drains alone: no new pod beside it
    c.apply(1, replicas=2)  # a scale: one more pod of the current template
    assert c.replay(1, 2, lambda s: s == ((1, model.AVAILABLE), (1, model.AVAILABLE)))


def test_a_rolling_update_of_one_key_keeps_the_old_pod_until_the_new_one_is_available_as_the_model_says(
    workload: Make,
) -> None:
    """The same-key surge: the new pod starts beside the old one, and the old one goes as soon as the
    new one is available -- before any bake (what docs/canary.md says of a same-key surge canary)."""
    c = workload("rolling", True)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.AVAILABLE), (1, model.STARTING)) in seen, seen
    assert ((0, model.TERMINATING), (1, model.AVAILABLE)) in seen, seen


def test_a_rolling_update_keeps_an_old_pod_still_loading_until_the_new_one_is_available_as_the_model_says(
    workload: Make,
) -> None:
    """The controller's reconcileOldReplicaSets scales an old pod down only while the new pods that
    are not available leave room (maxScaledDown), unavailable old pods first: a replica a run left
    loading, restarted, holds its old pod -- a GPU -- beside the new one until the new one is
    available (what the planner counts for a down replica's restart under a surge). The model once
    stopped an unavailable old pod at once: this test found it."""
    c = workload("loading", True, loading=True)
    c.apply(1)  # while revision 0 still loads
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.STARTING), (1, model.STARTING)) in seen, seen


def test_a_deletion_in_the_foreground_keeps_the_object_until_its_pods_are_gone_as_the_model_says(
    workload: Make, plane_admin: Client
) -> None:
    from lightkube.types import CascadeType

    assert model.waves.STAGE_DELETION == "Foreground"
    c = workload("delete", False)
    plane_admin.delete(c.resource, c.name, namespace=c.ns, cascade=CascadeType.FOREGROUND)
    held: list[bool] = []

    def gone(s: Observed) -> bool:
        held.append(c.exists())
        return s == ()

    seen = c.replay(0, 1, gone, deleting=True)
    assert ((0, model.TERMINATING),) in seen and held[0], (seen, held)  # the object stays while its pod drains
    deadline = time.monotonic() + 30
    while c.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not c.exists(), "the object is gone once its pods are"


def test_a_held_rolling_update_keeps_the_old_pod_beside_the_ready_canary_until_released_as_the_model_says(
    cluster: Make,
) -> None:
    """The surge canary's hold (live.status.hold: minReadySeconds by a manager of its own): the new
    pod becomes ready beside the old one and both stay; released, the old one goes -- the model's
    held Deployment. And a REJECT's order: the old template back first, then the release -- the
    canary's pod goes and the old pod, never restarted, is the one that served before."""
    from infercrane.live.status import hold

    c = cluster("held", True)
    (old,) = c.uids()
    assert hold.hold(c.live(), c.name, 15) == ""
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((0, model.AVAILABLE), (1, model.AVAILABLE)), held=True)
    assert ((0, model.AVAILABLE), (1, model.STARTING)) in seen, seen
    time.sleep(3 * STABLE_SECONDS)  # held: neither pod goes
    assert c.pods() == ((0, model.AVAILABLE), (1, model.AVAILABLE)) and old in c.uids()

    c.apply(0)  # the rollback's revert, the hold still in place
    assert c.replay(0, 1, lambda s: s == ((0, model.AVAILABLE), (1, model.AVAILABLE)), held=True)
    assert hold.release(c.live(), c.name) > 0
    seen = c.replay(0, 1, lambda s: s == ((0, model.AVAILABLE),))
    assert ((0, model.AVAILABLE), (1, model.TERMINATING)) in seen, seen
    assert c.uids() == [old], "the old pod never restarted: the REJECT cost no model load"


def test_a_held_canary_released_as_accepted_lets_its_old_pod_go_as_the_model_says(cluster: Make) -> None:
    from infercrane.live.status import hold

    c = cluster("accept", True)
    (old,) = c.uids()
    assert hold.hold(c.live(), c.name, 15) == ""
    c.apply(1)
    c.replay(1, 1, lambda s: s == ((0, model.AVAILABLE), (1, model.AVAILABLE)), held=True)
    (canary,) = [u for u in c.uids() if u != old]
    assert hold.release(c.live(), c.name) > 0
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.TERMINATING), (1, model.AVAILABLE)) in seen, seen
    assert c.uids() == [canary], "accepted: the canary's pod is the release's, no load more"


def test_kserve_takes_back_a_hold_placed_on_its_predictor_so_a_kserve_surge_canary_is_not_held(
    served: Make, plane_admin: Client
) -> None:
    """Why InferCrane holds no InferenceService's canary (docs/canary.md): KServe's reconcile of
    its predictor Deployment patches it back to what KServe renders -- ``minReadySeconds`` unset --
    as soon as the Deployment changes, so the hold would last milliseconds."""
    from infercrane.core.model.target import KubernetesTarget
    from infercrane.live.client.api import Live

    c = served("hold", True)
    name = c.name + "-predictor"
    live = Live(
        plane_admin, KubernetesTarget.model_validate({"context": "infercrane-local", "namespace": c.ns, "imageDigest": DIGEST})
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
