"""Warm-first's prefetch: the pod that makes a node pull a release (no replica label, no GPU, runs
nothing), which replicas need one, what the kubelet's Events say of it, and the run around it --
made, watched, deleted by uid whatever happens; a missing right said, never a failure. The cluster
is a scripted Live; tests/integration/test_model_images.py runs it on the real node."""

from __future__ import annotations

import copy
from typing import Any

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.render import prefetch as render
from infercrane.live.client import failures
from infercrane.live.status import prefetch

STACK = "infercrane/dev"
OLD = "vllm/vllm-openai@sha256:" + "a" * 64
NEW = "vllm/vllm-openai@sha256:" + "d" * 64
MODEL = "oci://registry.example/models/m@sha256:" + "b" * 64


def config(values: dict[str, Any], **target: Any) -> InferCraneConfig:
    v = copy.deepcopy(values)
    v["infercrane:kubernetes"] |= {"imageDigest": NEW, "rollout": {"warmFirst": True}} | target
    v["infercrane:replicas"] = [
        {"key": f"r{i}", "model": "Qwen/Qwen3-8B", "name": "qwen", "gpu": "NVIDIA-L40S", "modelImage": MODEL} for i in range(3)
    ]
    return loading.load(v, source="s", env={})


def running(key: str, node: str, image: str = OLD, model: str | None = None, phase: str = "Running") -> dict[str, Any]:
    volumes = [{"name": "model-image", "image": {"reference": model.removeprefix("oci://")}}] if model else []
    return {
        "metadata": {"name": f"{naming.object_name(key)}-5d8f-x", "labels": naming.labels(key)},
        "spec": {"nodeName": node, "containers": [{"name": "runtime", "image": image}], "volumes": volumes},
        "status": {"phase": phase},
    }


def test_the_prefetch_pod_is_bound_to_its_node_pulls_the_release_and_runs_nothing(values: dict[str, Any]) -> None:
    c = config(values)
    pod = render.pod(c, c.replicas[0], "gpu-node-1", STACK)
    spec, meta = pod["spec"], pod["metadata"]
    assert spec["nodeName"] == "gpu-node-1" and spec["restartPolicy"] == "Never"
    assert meta["labels"] == {render.LABEL: "true"}  # no replica label: no ReplicaSet adopts it, no wait counts it
    assert meta["annotations"] == {naming.ANNOTATION_STACK: STACK, render.ANNOTATION_FOR: "r0"}
    (container,) = spec["containers"]
    assert container["image"] == NEW and container["command"] == [render.COMMAND] and "ports" not in container
    assert container["resources"] == {"requests": render.REQUESTS, "limits": render.LIMITS}  # no GPU
    # Room for runc's init of its sandbox and container, which run in its cgroup: never a few millicores.
    assert render.LIMITS["cpu"] == "500m" and render.REQUESTS["cpu"] == "10m"
    assert spec["volumes"] == [
        {"name": "model-image", "image": {"reference": MODEL.removeprefix("oci://"), "pullPolicy": "IfNotPresent"}}
    ]
    assert spec["tolerations"] == [{"operator": "Exists"}] and spec["automountServiceAccountToken"] is False
    # One per node, release and stack: two replicas of a release on one node share it.
    assert meta["name"] == render.pod(c, c.replicas[1], "gpu-node-1", STACK)["metadata"]["name"]
    assert meta["name"] != render.pod(c, c.replicas[0], "gpu-node-2", STACK)["metadata"]["name"]
    assert render.ours(pod, STACK) and not render.ours(pod, "infercrane/prod")


def test_only_replicas_running_now_without_every_image_of_their_release_are_warmed(values: dict[str, Any]) -> None:
    c = config(values)
    listed = [
        running("r0", "gpu-node-1"),  # the old engine, no model image: both to pull
        running("r1", "gpu-node-1"),  # the same node and release: the same pod
        running("r2", "gpu-node-2", image=NEW, model=MODEL),  # runs the release already: nothing to pull
    ]
    (w,) = prefetch.plan(c, listed, ["r0", "r1", "r2"], STACK).values()
    assert (w.node, w.keys, w.images) == ("gpu-node-1", ["r0", "r1"], (NEW, MODEL.removeprefix("oci://")))
    pending = [running("r0", "", phase="Pending")]
    assert prefetch.plan(c, pending, ["r0"], STACK) == {}  # nothing runs it: its start is cold anyway


def event(uid: str, reason: str, message: str) -> dict[str, Any]:
    return {"involvedObject": {"kind": "Pod", "uid": uid}, "reason": reason, "message": message}


def test_the_kubelets_events_of_this_pod_alone_say_what_is_on_the_node(values: dict[str, Any]) -> None:
    c = config(values)
    (w,) = prefetch.plan(c, [running("r0", "n1")], ["r0"], STACK).values()
    w.uid = "u-1"
    model = MODEL.removeprefix("oci://")
    prefetch.observe(
        {"p": w},
        [
            event("u-0", "Pulled", f'Successfully pulled image "{NEW}" in 1s'),  # an earlier pod of the same name
            event("u-1", "Pulled", f'Container image "{model}" already present on machine and can be accessed by the pod'),
        ],
    )
    assert w.pulled == {model: True} and not prefetch.done(w)
    prefetch.observe({"p": w}, [event("u-1", "Pulled", f'Successfully pulled image "{NEW}" in 40s (40s including waiting).')])
    assert w.pulled == {model: True, NEW: False} and prefetch.done(w)
    other = prefetch.plan(c, [running("r0", "n1")], ["r0"], STACK)
    (x,) = other.values()
    x.uid = "u-2"
    prefetch.observe(other, [event("u-2", "Failed", f'Failed to pull image "{NEW}": not found')])
    assert x.failed == f'Failed to pull image "{NEW}": not found' and prefetch.done(x)
    prefetch.observe(other | {}, [event("u-2", "Failed", "Error: failed to create containerd task: exec: no such file")])
    assert x.failed.startswith("Failed to pull image")  # the start that fails by design is no failure of the pull


def test_the_start_that_fails_by_design_is_no_failed_pull_even_in_the_poll_that_saw_the_pulls(values: dict[str, Any]) -> None:
    """The kubelet's words for the prefetch container's start name its command, which says "pulls":
    seen in the same poll as the pulls (a fast runtime), the warm is still done and pulled."""
    c = config(values)
    (w,) = prefetch.plan(c, [running("r0", "n1")], ["r0"], STACK).values()
    w.uid = "u-1"
    model = MODEL.removeprefix("oci://")
    start = (
        "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
        f'failed: unable to start container process: exec: "{render.COMMAND}": stat {render.COMMAND}: no such file or directory'
    )
    prefetch.observe(
        {"p": w},
        [
            event("u-1", "Pulled", f'Successfully pulled image "{model}" in 8s (8s including waiting). Image size: 1 bytes.'),
            event("u-1", "Pulled", f'Container image "{NEW}" already present on machine and can be accessed by the pod'),
            event("u-1", "Failed", start),
        ],
    )
    assert w.failed == "" and prefetch.pulled(w) and w.pulled == {model: False, NEW: True}
    cluster = Cluster([running("r0", "n1")])
    cluster.events.append(event("u-0", "Failed", start))  # before its Pulled events in the list
    said = prefetch.warm(cluster, c, STACK, ["r0"], budget=5, sleep=lambda s: None)  # type: ignore[arg-type]
    assert said and "pulled 2 image(s) onto n1" in said[0], said


class Cluster:
    """A Live that lists pods, creates and deletes prefetch pods and answers Events from a script."""

    def __init__(self, listed: list[dict[str, Any]] | str | None, create: Exception | None = None) -> None:
        self.listed, self.create_error = listed, create
        self.created: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.asked: list[dict[str, str] | None] = []  # each Events LIST's field selector

    def list(self, res: Any, *, labels: Any = None, **_: Any) -> list[dict[str, Any]]:
        if self.listed is None:
            raise failures.Forbidden("list pods")
        if self.listed == "gone":
            raise failures.Unreachable("list pods: connection refused")
        if labels == {render.LABEL: "true"}:
            return [{"metadata": p["metadata"] | {"uid": f"u-{i}"}} for i, p in enumerate(self.created)]
        return self.listed

    def create(self, obj: Any, *, action: str) -> Any:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(obj.to_dict())
        obj.metadata.uid = f"u-{len(self.created) - 1}"
        images = [c.image for c in obj.spec.containers] + [v.image.reference for v in obj.spec.volumes or []]
        self.events += [event(obj.metadata.uid, "Pulled", f'Successfully pulled image "{i}" in 2s') for i in images]
        return obj

    def list_cached(self, plural: str, *, action: str, fields: dict[str, str] | None = None) -> list[dict[str, Any]]:
        self.asked.append(fields)
        uid = (fields or {}).get("involvedObject.uid")
        return [e for e in self.events if uid is None or e["involvedObject"]["uid"] == uid]

    def delete_exact(self, kind: str, name: str, uid: str, **_: Any) -> bool:
        self.deleted.append((kind, name, uid))
        return True


def test_a_wave_is_warmed_then_its_prefetch_pod_deleted_by_uid_and_a_missing_right_is_said(values: dict[str, Any]) -> None:
    c = config(values)
    live = Cluster([running("r0", "n1")])
    lines = prefetch.before_wave(live, c, STACK, "qwen", ["r0"])  # type: ignore[arg-type]
    assert lines == ["warm-first: r0: pulled 2 image(s) onto n1 in 0 s while the old replica served"]
    (made,) = live.created
    assert live.deleted == [("Pod", made["metadata"]["name"], "u-0")]
    no_pods = prefetch.before_wave(Cluster(None), c, STACK, "qwen", ["r0"])  # type: ignore[arg-type]
    assert no_pods == [
        "warm-first: not done, this identity may not read pods (optional: apply deploy/kubernetes/optional/pod-reader.yaml)"
    ]
    refused = prefetch.before_wave(Cluster([running("r0", "n1")], failures.Forbidden("create")), c, STACK, "qwen", ["r0"])  # type: ignore[arg-type]
    assert refused == [f"warm-first: not done, this identity may not create pods (optional: apply {prefetch.PREFETCHER})"]
    lost = prefetch.before_wave(Cluster("gone"), c, STACK, "qwen", ["r0"])  # type: ignore[arg-type]
    assert lost == ["warm-first: not done, the pods could not be read (list pods: connection refused); the wave goes on cold"]
    off = config(values, rollout={"warmFirst": False})
    assert prefetch.before_wave(Cluster([running("r0", "n1")]), off, STACK, "qwen", ["r0"]) == []  # type: ignore[arg-type]


def test_a_prefetch_pod_a_killed_run_left_is_deleted_by_the_next_warm_first_wave_and_another_stacks_is_not(
    values: dict[str, Any],
) -> None:
    c = config(values)
    live = Cluster([running("r0", "n1")])
    left = render.pod(c, c.replicas[0], "n0", STACK)  # a killed run's, on another node
    theirs = render.pod(c, c.replicas[0], "n0", "infercrane/prod")
    live.created += [left, theirs]
    prefetch.before_wave(live, c, STACK, "qwen", ["r0"])  # type: ignore[arg-type]
    made = live.created[2]["metadata"]["name"]
    assert live.deleted == [("Pod", left["metadata"]["name"], "u-0"), ("Pod", made, "u-2")]  # never the other stack's


def test_a_runs_own_prefetch_pods_still_warming_are_no_leftovers_to_its_next_wave(values: dict[str, Any]) -> None:
    c = config(values)
    live = Cluster([running("r0", "n1")])
    warming = render.pod(c, c.replicas[0], "n2", STACK)  # the next wave's, warming ahead (uid u-0)
    being_made = render.pod(c, c.replicas[0], "n3", STACK)  # another lane's, listed before its create returned
    live.created += [warming, being_made]
    run = prefetch.Run(made={"u-0"}, making={being_made["metadata"]["name"]})
    prefetch.before_wave(live, c, STACK, "qwen", ["r0"], run)  # type: ignore[arg-type]
    made = live.created[2]["metadata"]["name"]
    assert live.deleted == [("Pod", made, "u-2")]  # its own, once warmed; never a pod still warming or being made
    assert run.made == {"u-0"}


def test_a_run_that_ends_stops_a_warm_still_waiting_and_deletes_its_pod(values: dict[str, Any]) -> None:
    class Silent(Cluster):
        def create(self, obj: Any, *, action: str) -> Any:
            made = super().create(obj, action=action)
            self.events.clear()  # the kubelet says nothing: not placed
            return made

    c = config(values)
    live = Silent([running("r0", "n1")])
    run = prefetch.Run()
    run.stop.set()
    lines = prefetch.warm(live, c, STACK, ["r0"], budget=600, run=run, sleep=lambda _: None)  # type: ignore[arg-type]
    assert lines == ["warm-first: r0: the release was not on n1 after 0 s (not placed, or still pulling); its wave goes on cold"]
    assert live.deleted == [("Pod", live.created[0]["metadata"]["name"], "u-0")]


def test_a_later_wave_on_a_node_this_run_warmed_with_its_release_makes_no_second_pod(values: dict[str, Any]) -> None:
    c = config(values)
    live = Cluster([running("r0", "n1"), running("r1", "n1")])
    run = prefetch.Run()
    first = prefetch.before_wave(live, c, STACK, "qwen", ["r0"], run)  # type: ignore[arg-type]
    assert first == ["warm-first: r0: pulled 2 image(s) onto n1 in 0 s while the old replica served"]
    # The next wave, one ahead: the first wave's pod (same node, release, name) may still be terminating.
    ahead = prefetch.before_wave(live, c, STACK, "qwen", ["r1"], run)  # type: ignore[arg-type]
    assert ahead == ["warm-first: r1: the release is on n1 already (pulled for r0)"]
    assert len(live.created) == 1


def two_warms(live: Any, c: InferCraneConfig, run: prefetch.Run, created: Any, release: Any) -> tuple[dict[str, list[str]], bool]:
    """r0's warm, then -- once its pod is made -- r1's on the same node and release; ``release``
    lets r0's pull end. What each said, and whether r1's was still waiting before that."""
    import threading

    said: dict[str, list[str]] = {}
    first = threading.Thread(target=lambda: said.update(r0=prefetch.before_wave(live, c, STACK, "qwen", ["r0"], run)))
    first.start()
    assert created.wait(5)
    second = threading.Thread(target=lambda: said.update(r1=prefetch.before_wave(live, c, STACK, "qwen", ["r1"], run)))
    second.start()
    second.join(0.3)
    waited = second.is_alive()
    release.set()
    first.join(5)
    second.join(5)
    return said, waited


def test_a_warm_begun_while_another_pulls_its_node_and_release_waits_for_that_pull_and_makes_no_second_pod(
    values: dict[str, Any],
) -> None:
    """The next wave's warm, begun beside this wave's: on the same node and release it waits for
    the pull under way (one pod of that name at a time) and says whose pull brought the release."""
    import threading

    created = threading.Event()
    release = threading.Event()

    class Slow(Cluster):
        def list_cached(self, plural: str, *, action: str, fields: dict[str, str] | None = None) -> list[dict[str, Any]]:
            created.set()
            release.wait(5)  # the kubelet still pulls until the second warm has joined
            return self.events

    live = Slow([running("r0", "n1"), running("r1", "n1")])
    run = prefetch.Run()
    said, waited = two_warms(live, config(values), run, created, release)
    assert waited  # waiting for r0's pull, not making a pod of its own
    assert said["r0"] == ["warm-first: r0: pulled 2 image(s) onto n1 in 0 s while the old replica served"]
    assert said["r1"] == ["warm-first: r1: the release is on n1 already (pulled for r0)"]
    assert len(live.created) == 1 and run.pulling == {}


def test_a_warm_that_waited_for_another_pull_which_failed_says_so_and_its_wave_goes_on_cold(values: dict[str, Any]) -> None:
    """The pull it waited for failed (the kubelet's words): the waiting warm makes no pod of its own
    and says its wave goes on cold."""
    import threading

    created = threading.Event()
    release = threading.Event()

    class Failing(Cluster):
        def create(self, obj: Any, *, action: str) -> Any:
            made = super().create(obj, action=action)
            self.events = [event(made.metadata.uid, "Failed", f'Failed to pull image "{NEW}": not found')]
            return made

        def list_cached(self, plural: str, *, action: str, fields: dict[str, str] | None = None) -> list[dict[str, Any]]:
            created.set()
            release.wait(5)
            return self.events

    live = Failing([running("r0", "n1"), running("r1", "n1")])
    run = prefetch.Run()
    said, _ = two_warms(live, config(values), run, created, release)
    assert said["r0"][0].startswith("warm-first: r0: the release was not pulled onto n1 (Failed to pull image")
    assert said["r1"] == [
        "warm-first: r1: the release was not pulled onto n1 (the warm for r0 did not bring it); its wave goes on cold"
    ]
    assert len(live.created) == 1 and run.pulling == {} and run.warmed == {}


def test_a_warm_whose_turn_comes_after_another_claims_once_that_one_has_and_says_whose_pull_it_was(
    values: dict[str, Any],
) -> None:
    """The wave before claims the shared node and release though its warm began later; the warm
    after it waits for that claim, then for the pull, and makes no pod."""
    import threading

    c = config(values)
    live = Cluster([running("r0", "n1"), running("r1", "n1")])
    run = prefetch.Run()
    first = prefetch.Turn()
    said: dict[str, list[str]] = {}
    ahead = threading.Thread(
        target=lambda: said.update(r1=prefetch.before_wave(live, c, STACK, "qwen", ["r1"], run, prefetch.Turn(first.claimed)))  # type: ignore[arg-type]
    )
    ahead.start()
    ahead.join(0.3)
    assert ahead.is_alive() and not live.created  # waiting for its turn, not pulling
    said["r0"] = prefetch.before_wave(live, c, STACK, "qwen", ["r0"], run, first)  # type: ignore[arg-type]
    ahead.join(5)
    assert said["r0"] == ["warm-first: r0: pulled 2 image(s) onto n1 in 0 s while the old replica served"]
    assert said["r1"] == ["warm-first: r1: the release is on n1 already (pulled for r0)"]
    assert len(live.created) == 1 and first.claimed.is_set()


def test_a_warm_that_ends_before_it_claims_still_lets_the_next_one_claim(values: dict[str, Any]) -> None:
    off, unread = prefetch.Turn(), prefetch.Turn()
    assert prefetch.before_wave(Cluster([]), config(values, rollout={}), STACK, "qwen", ["r0"], prefetch.Run(), off) == []  # type: ignore[arg-type]
    said = prefetch.before_wave(Cluster("gone"), config(values), STACK, "qwen", ["r0"], prefetch.Run(), unread)  # type: ignore[arg-type]
    assert (
        said[0].startswith("warm-first: not done, the pods could not be read")
        and off.claimed.is_set()
        and unread.claimed.is_set()
    )


def test_a_warm_reads_each_prefetch_pods_own_events_never_the_namespaces(values: dict[str, Any]) -> None:
    """At fleet size the namespace holds thousands of Events: a warm polling them every second made
    a LIST of all of them per warm. Each poll now asks for one pod's own (a field selector on its
    uid, served from the API server's cache), and stops asking once the pod is done."""
    c = config(values)
    live = Cluster([running("r0", "n1"), running("r1", "n2")])
    live.events = [event("u-other", "Pulled", f'Container image "{NEW}" already present on machine')] * 1000
    lines = prefetch.before_wave(live, c, STACK, "qwen", ["r0", "r1"])  # type: ignore[arg-type]
    assert lines == [
        "warm-first: r0: pulled 2 image(s) onto n1 in 0 s while the old replica served",
        "warm-first: r1: pulled 2 image(s) onto n2 in 0 s while the old replica served",
    ]
    assert live.asked == [{"involvedObject.uid": "u-0"}, {"involvedObject.uid": "u-1"}]
