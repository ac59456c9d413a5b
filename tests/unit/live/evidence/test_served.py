"""Serving evidence (infercrane.live.evidence.served): each answer a replica can give, and what a deploy and
routing membership make of it. The Kubernetes side is a scripted LIST of EndpointSlices; the
replica's side a scripted /v1/models answer -- the real node's integration tests ask real pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infercrane.core.load import loading
from infercrane.core.model.config import InferCraneConfig
from infercrane.live.client import failures
from infercrane.live.evidence import asking, said, served, slices, worker_key

KEY = "k-" + "x" * 30


class Slices:
    """A Live whose EndpointSlice LISTs answer from a script: each call takes the next namespace
    snapshot (the last one repeats), or raises it; a LIST by Service name sees that Service's."""

    def __init__(self, *answers: Any) -> None:
        self.answers, self.calls = list(answers), 0

    def list(self, res: Any, *, labels: Any = None, action: str | None = None, **_: Any) -> list[dict[str, Any]]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        wanted = (labels or {}).get(slices.SERVICE_NAME_LABEL)
        return [s for s in answer if wanted is None or s["metadata"]["labels"][slices.SERVICE_NAME_LABEL] == wanted]


SERVICE = "infercrane-935120ec8f148f03a1305f63"  # the replica's Service (naming.object_name of its key)


def endpoint_slice(
    *addresses: str, ready: bool = True, terminating: bool = False, port: int = 8000, service: str = SERVICE
) -> dict[str, Any]:
    conditions = {"ready": ready, "serving": True, "terminating": terminating}
    return {
        "metadata": {
            "labels": {
                slices.SERVICE_NAME_LABEL: service,
                "app.kubernetes.io/managed-by": "infercrane",
                slices.SLICE_MANAGER_LABEL: slices.SLICE_MANAGER,
            }
        },
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [a], "conditions": conditions, "targetRef": {"kind": "Pod", "name": f"{service}-5d8f9c7b6-x{i}"}}
            for i, a in enumerate(addresses)
        ],
    }


class Clock:
    """Time that passes only when the checker sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def config(values: dict[str, Any], **target: Any) -> InferCraneConfig:
    values["infercrane:kubernetes"].update(target)
    return loading.load(values, source="s", env={})


def answering(status: int, *names: str, error: str = "") -> Any:
    asked: list[tuple[str, int, str | None]] = []

    def ask(address: str, port: int, key: str | None) -> asking.Served:
        asked.append((address, port, key))
        return asking.Served(status, tuple(names), error)

    ask.asked = asked  # type: ignore[attr-defined]
    return ask


def check(values: dict[str, Any], live: Slices, ask: Any, key: str | None = KEY, **target: Any) -> served.Evidence:
    c = config(values, **target)
    checker = served.Checker(live, c, key, "no worker key for the check", ask=ask, address_wait=0, sleep=lambda _: None)  # type: ignore[arg-type]
    return checker.check(c.replicas[0])


def test_a_replica_serving_the_names_its_intent_renders_is_serving_by_the_route_it_was_asked(values: dict[str, Any]) -> None:
    ask = answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B")
    evidence = check(values, Slices([endpoint_slice("10.88.0.4")]), ask)
    assert evidence.state == "serving" and evidence.expected == ("qwen-kubernetes", "Qwen/Qwen3-8B")
    assert evidence.route == "EndpointSlice address 10.88.0.4:8000" and evidence.checked_at.endswith("Z")
    assert ask.asked == [("10.88.0.4", 8000, KEY)]
    assert KEY not in repr(evidence.as_output()) and KEY not in evidence.line()
    assert evidence.verdict("require").state == "ready"


def test_a_ready_replica_serving_another_model_is_not_serving_with_both_names(values: dict[str, Any]) -> None:
    evidence = check(values, Slices([endpoint_slice("10.88.0.4")]), answering(200, "llama-other"))
    assert evidence.state == "not serving"
    assert evidence.reason == "serves ['llama-other'], expected ['qwen-kubernetes', 'Qwen/Qwen3-8B']"
    verdict = evidence.verdict("check")
    assert verdict.state == "failed"
    assert verdict.reason.startswith(
        "ready, but not serving: serves ['llama-other'], expected ['qwen-kubernetes', 'Qwen/Qwen3-8B'] "
        "(EndpointSlice address 10.88.0.4:8000)"
    )
    assert "the old replicas keep serving" in verdict.reason


def test_a_replica_that_refuses_the_control_planes_key_is_refused_with_the_status_named(values: dict[str, Any]) -> None:
    evidence = check(values, Slices([endpoint_slice("10.88.0.4")]), answering(401))
    assert evidence.state == "refused"
    assert evidence.reason.startswith("refused the worker key (401)") and evidence.route.endswith("10.88.0.4:8000")
    assert "restart the replicas after a rotation" in evidence.fix
    assert evidence.verdict("check").state == "failed"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (answering(404), "did not answer /v1/models as an engine (HTTP 404"),
        (answering(0, error="ConnectionRefusedError: refused"), "(ConnectionRefusedError: refused"),
        (answering(200, error="the answer is no model list"), "(the answer is no model list"),
    ],
    ids=["not-found", "no-answer", "not-a-model-list"],
)
def test_an_answer_that_is_no_engines_is_not_verifiable_never_a_pass(values: dict[str, Any], answer: Any, said: str) -> None:
    evidence = check(values, Slices([endpoint_slice("10.244.0.2")]), answer)
    assert evidence.state == "not verifiable" and said in evidence.reason
    assert evidence.verdict("check").state == "ready"  # reported, not failed ...
    required = evidence.verdict("require")  # ... unless the stack requires evidence
    assert required.state == "failed" and required.reason.startswith("ready, but not verifiable: did not answer")
    assert "(EndpointSlice address 10.244.0.2:8000)" in required.reason


def test_without_a_key_nothing_is_asked_and_the_fix_names_the_variables(values: dict[str, Any]) -> None:
    live, ask = Slices([endpoint_slice("10.88.0.4")]), answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B")
    evidence = check(values, live, ask, key=None)
    assert evidence.state == "not verifiable" and evidence.reason == "no worker key for the check"
    assert worker_key.KEY_FILE_ENV in evidence.fix and worker_key.KEY_ENV in evidence.fix
    assert live.calls == 0 and ask.asked == []


def test_an_identity_that_may_not_list_endpointslices_is_told_the_optional_role_once_per_command(
    values: dict[str, Any],
) -> None:
    values["infercrane:replicas"].append(values["infercrane:replicas"][0] | {"key": "qwen-kubernetes-rev-1-r1"})
    c = config(values)
    live = Slices(failures.Forbidden("forbidden", code=403))
    checker = served.Checker(live, c, KEY, ask=answering(200), address_wait=0)  # type: ignore[arg-type]
    first, second = (checker.check(r) for r in c.replicas)
    assert first == second or first.reason == second.reason
    assert first.state == "not verifiable"
    assert first.reason == f"this identity may not list endpointslices (optional: apply {slices.READER})"
    assert live.calls == 1, "the second replica does not ask again"


def test_only_ready_addresses_that_are_not_terminating_are_asked_and_all_of_them(values: dict[str, Any]) -> None:
    slices = [endpoint_slice("10.88.0.4", "10.88.0.5"), endpoint_slice("10.88.0.6", terminating=True, ready=False)]
    ask = answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B")
    evidence = check(values, Slices(slices), ask)
    assert evidence.state == "serving" and [a for a, _, _ in ask.asked] == ["10.88.0.4", "10.88.0.5"]
    assert evidence.route == "EndpointSlice addresses 10.88.0.4:8000, 10.88.0.5:8000"


def test_a_service_without_a_ready_address_is_waited_for_a_moment_then_not_verifiable(values: dict[str, Any]) -> None:
    live = Slices([endpoint_slice("10.88.0.4", ready=False)], [], [], [endpoint_slice("10.88.0.4")])
    c = config(values)
    clock = Clock()
    ask = answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B")
    checker = served.Checker(live, c, KEY, ask=ask, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert checker.check(c.replicas[0]).state == "serving"
    # not ready yet; then no slice (its own LIST too); then ready -- one snapshot per half second
    assert live.calls == 4 and clock.now == 1.0
    never = served.Checker(Slices([]), c, KEY, ask=answering(200), address_wait=0)  # type: ignore[arg-type]
    evidence = never.check(c.replicas[0])
    assert evidence.state == "not verifiable" and "has no ready address in its EndpointSlices" in evidence.reason


def test_kserve_replicas_are_asked_at_their_predictor_service(values: dict[str, Any]) -> None:
    c = config(values, workloadApi="kserve")
    assert served.service_name(c, c.replicas[0]).endswith("-predictor")


def test_the_key_comes_from_its_file_else_its_variable_and_is_never_in_a_reason(tmp_path: Path) -> None:
    f = tmp_path / "worker-api-key"
    f.write_text(KEY + "\n")
    assert worker_key.worker_key({worker_key.KEY_FILE_ENV: str(f), worker_key.KEY_ENV: "other"}) == (KEY, "")
    assert worker_key.worker_key({worker_key.KEY_ENV: KEY}) == (KEY, "")
    missing = worker_key.worker_key({worker_key.KEY_FILE_ENV: str(tmp_path / "nope")})
    assert missing[0] is None and missing[1] == f"{worker_key.KEY_FILE_ENV} cannot be read (No such file or directory)"
    f.write_text("")
    assert worker_key.worker_key({worker_key.KEY_FILE_ENV: str(f)}) == (
        None,
        f"the file {worker_key.KEY_FILE_ENV} names is empty",
    )
    assert worker_key.worker_key({})[0] is None


def test_the_deploy_says_each_serving_replica_and_groups_the_others_by_reason() -> None:
    expected = ("qwen", "Qwen/Qwen3-8B")
    nokey = served.Evidence("not verifiable", expected, reason="no worker key for the check", fix="set it")
    taken = {f"r{i}": nokey for i in range(5)} | {
        "s0": served.Evidence("serving", expected, expected, "EndpointSlice address 10.88.0.4:8000", "2026-12-03T12:00:00Z"),
    }
    assert said.lines(taken) == [
        "evidence: replica s0: serving qwen, Qwen/Qwen3-8B (EndpointSlice address 10.88.0.4:8000, 2026-12-03T12:00:00Z)",
        "evidence: 5 replicas (r0, r1, r2, …): not verifiable: no worker key for the check; fix: set it",
    ]


def test_a_fleet_checked_within_half_a_second_shares_one_list_of_the_endpointslices(values: dict[str, Any]) -> None:
    first = values["infercrane:replicas"][0]
    values["infercrane:replicas"] = [first | {"key": f"qwen-kubernetes-rev-1-r{i}"} for i in range(20)]
    c = config(values)
    from infercrane.core import naming

    slices = [endpoint_slice(f"10.88.0.{i + 2}", service=naming.object_name(r.key)) for i, r in enumerate(c.replicas)]
    live, clock = Slices(slices), Clock()
    checker = served.Checker(live, c, KEY, ask=answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"), clock=clock)  # type: ignore[arg-type]
    assert {checker.check(r).state for r in c.replicas} == {"serving"}
    assert live.calls == 1
    clock.sleep(0.5)
    checker.check(c.replicas[0])
    assert live.calls == 2, "an older snapshot is taken again"


def test_of_several_ready_addresses_the_one_that_answers_otherwise_is_named(values: dict[str, Any]) -> None:
    def ask(address: str, port: int, key: str | None) -> asking.Served:
        return asking.Served(200, ("qwen-kubernetes", "Qwen/Qwen3-8B") if address.endswith(".4") else ("old",))

    evidence = check(values, Slices([endpoint_slice("10.88.0.4", "10.88.0.5")]), ask)
    assert evidence.state == "not serving" and evidence.reason.startswith("10.88.0.5:8000 serves ['old']")


def test_evidence_against_a_replica_outweighs_an_address_that_could_not_be_asked(values: dict[str, Any]) -> None:
    def ask(address: str, port: int, key: str | None) -> asking.Served:
        return asking.Served(404) if address.endswith(".4") else asking.Served(401)

    evidence = check(values, Slices([endpoint_slice("10.88.0.4", "10.88.0.5")]), ask)
    assert evidence.state == "refused" and evidence.reason.startswith("10.88.0.5:8000 refused the worker key (401)")


def test_a_slice_someone_else_made_or_an_endpoint_not_of_the_replicas_pods_never_gets_the_key(values: dict[str, Any]) -> None:
    # Anyone who may write EndpointSlices can label one with the Service's name: only the
    # controller's own slices count, and in them only endpoints that are this replica's pods.
    planted = endpoint_slice("10.99.0.1")
    planted["metadata"]["labels"][slices.SLICE_MANAGER_LABEL] = "someone-else"
    stray = endpoint_slice("10.99.0.2")
    stray["endpoints"][0]["targetRef"] = {"kind": "Pod", "name": "listener-0"}
    ask = answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B")
    evidence = check(values, Slices([planted, stray, endpoint_slice("10.88.0.4")]), ask)
    assert ask.asked == [("10.88.0.4", 8000, KEY)], ask.asked
    assert evidence.state == "serving"


def test_a_throttled_list_of_endpointslices_is_asked_again_like_every_other_read(values: dict[str, Any]) -> None:
    clock = Clock()
    busy = failures.Unavailable("list endpointslices: 429 Too Many Requests", code=429)
    live = Slices(busy, busy, [endpoint_slice("10.88.0.4")])
    c = config(values)
    checker = served.Checker(live, c, KEY, ask=answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"), sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert checker.check(c.replicas[0]).state == "serving"
    assert live.calls == 3


def test_a_redirect_is_an_answer_never_followed_with_the_key() -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            hits.append(f"{self.path} {self.headers.get('Authorization')}")
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/elsewhere")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        answer = asking.models("127.0.0.1", server.server_port, KEY)
    finally:
        server.shutdown()
    assert answer.status == 302 and hits == [f"/v1/models Bearer {KEY}"]


def test_a_pod_address_is_asked_directly_whatever_proxy_the_environment_names(tmp_path: Path) -> None:
    # In a process of its own whose environment names a proxy nothing listens on: the engine is
    # still asked at its own address (a proxy would see the worker key).
    import http.server
    import os
    import subprocess
    import sys
    import threading

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"data": [{"id": "qwen"}]}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ask = f"from infercrane.live.evidence import asking; print(asking.models('127.0.0.1', {server.server_port}, 'k'))"
    proxy = {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}
    try:
        done = subprocess.run([sys.executable, "-c", ask], env=os.environ | proxy, capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
    assert "Served(status=200, names=('qwen',)" in done.stdout, done.stdout + done.stderr


def test_the_cli_takes_the_worker_key_out_of_its_environment_so_no_child_process_inherits_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pulumi, its language host and provider, a policy pack, a plane process: each is a child of the
    CLI and gets a copy of its environment. The key stays the CLI's own; its file variable (a path) stays."""
    import subprocess
    import sys

    from infercrane.cli.main import main

    monkeypatch.setattr(worker_key, "_withheld", None)
    monkeypatch.setenv(worker_key.KEY_ENV, "the-worker-key")
    monkeypatch.setenv(worker_key.KEY_FILE_ENV, "/a/path")
    with pytest.raises(SystemExit):
        main(["no-such-command"])
    probe = "import os; print(os.environ.get('INFERCRANE_WORKER_API_KEY'), os.environ.get('INFERCRANE_WORKER_API_KEY_FILE'))"
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert child.stdout.split() == ["None", "/a/path"]
    monkeypatch.delenv(worker_key.KEY_FILE_ENV)
    assert worker_key.worker_key() == ("the-worker-key", "")  # the CLI's own checks still have it


def test_a_replica_that_lists_its_models_while_its_health_says_503_is_not_serving_and_says_which(
    values: dict[str, Any],
) -> None:
    """Issue #67: SGLang answers /v1/models 200 before its warm-up ends, while /health answers 503;
    /v1/models alone counted it serving. /health is asked again for a while, then it decides."""
    c = config(values)
    clock = Clock()
    healths = iter([503, 503, 200])

    def warming(address: str, port: int, key: str | None) -> asking.Served:
        return asking.Served(200, ("qwen-kubernetes", "Qwen/Qwen3-8B"), health=next(healths, 200))

    checker = served.Checker(Slices([endpoint_slice("10.88.0.4")]), c, KEY, ask=warming, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert checker.check(c.replicas[0]).state == "serving" and clock.now == 2.0  # warmed up within the wait

    never = served.Checker(
        Slices([endpoint_slice("10.88.0.4")]),
        c,
        KEY,
        ask=lambda a, p, k: asking.Served(200, ("qwen-kubernetes", "Qwen/Qwen3-8B"), health=503),
        address_wait=0,
    )  # type: ignore[arg-type]
    evidence = never.check(c.replicas[0])
    assert evidence.state == "not serving"
    assert evidence.reason == (
        "its /health answered 503 though /v1/models answered: the engine is not ready to serve (still warming up, or unhealthy)"
    )


MODEL = "oci://registry.example/models/qwen3-8b@sha256:" + "b" * 64
OTHER = "sha256:" + "c" * 64


class SlicesAndPods(Slices):
    """The scripted slices, and each pod's status as its kubelet reported its mounted model image."""

    def __init__(self, slices: list[dict[str, Any]], mounted: dict[str, str | None] | Exception) -> None:
        super().__init__(slices)
        self.mounted = mounted

    def get(self, res: Any, name: str, *, action: str | None = None) -> dict[str, Any]:
        if isinstance(self.mounted, Exception):
            raise self.mounted
        ref = self.mounted[name]
        status = {"image": {"imageRef": f"registry.example/models/qwen3-8b@{ref}"}} if ref else None
        mount = {"name": "model-image", "mountPath": "/mnt/model", "readOnly": True, "volumeStatus": status}
        return {"metadata": {"name": name}, "status": {"containerStatuses": [{"name": "runtime", "volumeMounts": [mount]}]}}


def with_model(values: dict[str, Any]) -> dict[str, Any]:
    values["infercrane:replicas"][0]["modelImage"] = MODEL
    return values


POD0, POD1 = f"{SERVICE}-5d8f9c7b6-x0", f"{SERVICE}-5d8f9c7b6-x1"


def test_a_replica_whose_pods_mounted_the_pinned_model_image_is_serving_with_the_proof(values: dict[str, Any]) -> None:
    live = SlicesAndPods([endpoint_slice("10.88.0.4", "10.88.0.5")], {POD0: MODEL[-71:], POD1: MODEL[-71:]})
    evidence = check(with_model(values), live, answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"))
    assert evidence.state == "serving" and evidence.model_image is not None
    assert evidence.as_output()["modelImage"] == {"state": "proven", "pinned": MODEL[-71:], "mounted": [MODEL[-71:]] * 2}
    assert "its pods mounted the pinned model image sha256:bbbbbbbbbbbb…" in evidence.line()


def test_a_pod_that_mounted_another_digest_than_the_pin_never_counts_as_serving(values: dict[str, Any]) -> None:
    live = SlicesAndPods([endpoint_slice("10.88.0.4", "10.88.0.5")], {POD0: MODEL[-71:], POD1: OTHER})
    evidence = check(with_model(values), live, answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"))
    assert evidence.state == "not serving"
    assert f"its weights are not the pinned ones: pod {POD1} mounted model image {OTHER}, but the stack pins" in evidence.reason
    assert evidence.verdict("check").state == "failed"


def test_a_mount_the_kubelet_does_not_report_or_pods_this_identity_may_not_read_leave_the_proof_missing_not_failed(
    values: dict[str, Any],
) -> None:
    silent = SlicesAndPods([endpoint_slice("10.88.0.4")], {POD0: None})
    evidence = check(with_model(values), silent, answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"))
    assert evidence.state == "serving" and evidence.as_output()["modelImage"]["state"] == "unreported"
    assert f"model image mount not proven: the kubelet reported no mounted digest for {POD0} (ImageVolumeWithDigest" in (
        evidence.line()
    )
    forbidden = SlicesAndPods([endpoint_slice("10.88.0.4")], failures.Forbidden("read pod"))
    evidence = check(with_model(values), forbidden, answering(200, "qwen-kubernetes", "Qwen/Qwen3-8B"))
    assert evidence.state == "serving"
    assert "this identity may not read pods (optional: apply deploy/kubernetes/optional/pod-reader.yaml)" in evidence.line()
