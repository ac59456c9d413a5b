"""The exhaustive check's model of the controllers (``tests/rollout_model.py``: ``controllers``)
compared with the real ones, on the local plane's real node: each transition the model assumes of a
Deployment -- Recreate and RollingUpdate (maxSurge 1, maxUnavailable 0) of one key's new template,
a scale to two pods, a deletion in the foreground -- is replayed on a real Deployment rendered by
InferCrane, and every state the real controllers rest in (unchanged for a while: the controller
acts in milliseconds, the engine double loads for seconds and its pods drain for seconds) must be
the state the model's controllers come to rest in from it. A disagreement fails, naming both.

The pods are read as the model sees them: a pod with a deletion time is terminating; one Ready is
available; any other (unscheduled or loading) is starting -- the model's pending and starting are
the scheduler's and the kubelet's to tell apart, not the controllers'."""

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
from tests import rollout_model as model
from tests.integration.test_real_node import double, on_node
from tests.integration.test_serving import namespace_with_evidence, ready

KEY = "it-ctl-r0"
STABLE_SECONDS = 1.5  # a state held this long is one the controllers rest in
Observed = tuple[tuple[int, str], ...]  # (revision, phase) per pod, sorted
Make = Callable[..., "Cluster"]


def rendered(ns: str, surge: bool) -> dict[str, Any]:
    """Our own Deployment for one replica on the real node, loading for 6 s, draining for 4 s."""
    env = [{"name": "INFERCRANE_DOUBLE_LOAD_SECONDS", "value": "6"}]
    target = {
        "context": "infercrane-local",
        "namespace": ns,
        "imageDigest": double(),
        "rollout": {"maxUnavailable": 0 if surge else 1, "maxSurge": 1 if surge else 0},
        "drain": {"preStopSeconds": 4, "shutdownSeconds": 8},
    }
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": [on_node(KEY, pod={"env": env})]})
    (replica,) = render_checked(config, "ctl")
    (d,) = [m for m in replica.manifests if m["kind"] == "Deployment"]
    return dict(d)


class Cluster:
    """The workload and its pods, read as the model reads them (the model's object is the workload:
    a Deployment here; ``tests/integration/test_kserve_controllers.py`` the InferenceService)."""

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
        annotations = {**(template["metadata"].get("annotations") or {}), "it/revision": str(revision)}
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
        from infercrane.core.model.config import KubernetesTarget
        from infercrane.live.client.api import Live

        target = KubernetesTarget.model_validate({"context": "infercrane-local", "namespace": self.ns, "imageDigest": double()})
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


@pytest.fixture
def cluster(admin: Client) -> Iterator[Make]:
    """A Deployment on the real node, available on revision 0 (``loading``: its pod still loading);
    removed with its pods after the test."""
    made: list[Cluster] = []

    def make(ns: str, surge: bool, loading: bool = False) -> Cluster:
        namespace_with_evidence(admin, ns)
        made.append(Cluster(admin, ns, rendered(ns, surge), surge))
        return settle(made[-1], loading)

    yield make
    remove(admin, made)


def test_recreate_stops_the_old_pod_before_the_new_one_starts_as_the_model_says(cluster: Make) -> None:
    c = cluster("it-ctl-recreate", False)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.TERMINATING),) in seen, seen  # the old pod drains alone: no new pod beside it
    c.apply(1, replicas=2)  # a scale: one more pod of the current template
    assert c.replay(1, 2, lambda s: s == ((1, model.AVAILABLE), (1, model.AVAILABLE)))


def test_a_rolling_update_of_one_key_keeps_the_old_pod_until_the_new_one_is_available_as_the_model_says(
    cluster: Make,
) -> None:
    """The same-key surge: the new pod starts beside the old one, and the old one goes as soon as the
    new one is available -- before any bake (what docs/canary.md says of a same-key surge canary)."""
    c = cluster("it-ctl-rolling", True)
    c.apply(1)
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.AVAILABLE), (1, model.STARTING)) in seen, seen
    assert ((0, model.TERMINATING), (1, model.AVAILABLE)) in seen, seen


def test_a_rolling_update_keeps_an_old_pod_still_loading_until_the_new_one_is_available_as_the_model_says(
    cluster: Make,
) -> None:
    """The controller's reconcileOldReplicaSets scales an old pod down only while the new pods that
    are not available leave room (maxScaledDown), unavailable old pods first: a replica a run left
    loading, restarted, holds its old pod -- a GPU -- beside the new one until the new one is
    available (what the planner counts for a down replica's restart under a surge). The model once
    stopped an unavailable old pod at once: this test found it."""
    c = cluster("it-ctl-loading", True, loading=True)
    c.apply(1)  # while revision 0 still loads
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.STARTING), (1, model.STARTING)) in seen, seen


def test_a_deletion_in_the_foreground_keeps_the_object_until_its_pods_are_gone_as_the_model_says(
    cluster: Make, admin: Client
) -> None:
    from lightkube.types import CascadeType

    assert model.waves.STAGE_DELETION == "Foreground"
    c = cluster("it-ctl-delete", False)
    admin.delete(Deployment, c.name, namespace=c.ns, cascade=CascadeType.FOREGROUND)
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

    c = cluster("it-ctl-held", True)
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

    c = cluster("it-ctl-accept", True)
    (old,) = c.uids()
    assert hold.hold(c.live(), c.name, 15) == ""
    c.apply(1)
    c.replay(1, 1, lambda s: s == ((0, model.AVAILABLE), (1, model.AVAILABLE)), held=True)
    (canary,) = [u for u in c.uids() if u != old]
    assert hold.release(c.live(), c.name) > 0
    seen = c.replay(1, 1, lambda s: s == ((1, model.AVAILABLE),))
    assert ((0, model.TERMINATING), (1, model.AVAILABLE)) in seen, seen
    assert c.uids() == [canary], "accepted: the canary's pod is the release's, no load more"
