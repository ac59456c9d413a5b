"""A canary's verdict from the engines' own evidence: the rules, their words, the record they are
judged from (re-judged: the same verdict, byte for byte), the reading of the engines' pages, and
the planner's canary wave."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import pytest

from infercrane.core.model.endpoints import CanaryPolicy, GoldenRequest, RolloutPolicy
from infercrane.core.plan import canary_record
from infercrane.core.plan.canary import judge, quantile, rejudge
from infercrane.core.plan.canary_record import Golden, Measured, Record, Thresholds
from infercrane.core.plan.replicas import LiveReplica, Target
from infercrane.core.plan.rollout import plan
from infercrane.core.plan.states import ReplicaState
from infercrane.live.evidence import canary as evidence
from tests.json_forms import as_a_store_keeps_it

INF = canary_record.INF
LIMITS = Thresholds(min_requests=100, max_ttft_p95_ratio=1.5, max_error_ratio_increase=0.01, required=True)
BOUNDS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0)


def hist(seconds: float, n: int) -> tuple[tuple[float, int], ...]:
    """A TTFT histogram of ``n`` answers that each took ``seconds``, over vLLM-like bounds."""
    return tuple((b, n if seconds <= b else 0) for b in BOUNDS) + ((INF, n),)


def side(name: str, side: canary_record.Side, requests: int, errors: int = 0, seconds: float = 0.03) -> Measured:
    return Measured(name, side, requests, errors, hist(seconds, requests - errors))


def record(*measured: Measured, golden: tuple[Golden, ...] = (), final: bool = True, limits: Thresholds = LIMITS) -> Record:
    return Record("qwen", limits, measured, golden, baked_seconds=300 if final else 30, final=final)


HEALTHY = (side("c0", "canary", 200), side("b0", "baseline", 200), side("b1", "baseline", 200))


def test_quantile_is_prometheus_histogram_quantile_linear_within_its_bucket() -> None:
    buckets = ((0.1, 50), (0.2, 90), (0.4, 100), (INF, 100))
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.95, buckets) == pytest.approx(0.3)  # rank 95 is halfway through (0.2, 0.4]
    assert quantile(0.95, ((0.1, 0), (INF, 10))) == 0.1  # in +Inf: the highest finite bound
    assert quantile(0.95, ((0.1, 0), (INF, 0))) is None


def test_a_healthy_canary_is_accepted_only_at_the_end_of_its_bake() -> None:
    assert judge(record(*HEALTHY, final=False)).outcome == "WAIT"
    v = judge(record(*HEALTHY))
    assert v.outcome == "ACCEPT" and not v.stops
    assert v.line().startswith("canary qwen: ACCEPT -- within every threshold after 300 s; canary 200 requests, 0 failed")


def test_a_canary_twice_as_slow_is_rejected_with_its_numbers() -> None:
    v = judge(record(side("c0", "canary", 200, seconds=0.07), *HEALTHY[1:], final=False))
    assert v.outcome == "REJECT" and v.stops, "a regression is rejected before the bake ends"
    assert "ttft p95 0.079 s vs baseline 0.039 s (x2.03 > maxTtftP95Ratio 1.5)" in v.line()


def test_a_canary_failing_five_percent_of_requests_is_rejected() -> None:
    v = judge(record(side("c0", "canary", 200, errors=10), *HEALTHY[1:]))
    assert v.outcome == "REJECT"
    assert "error ratio 5.0% vs baseline 0.0% (+5.0% > maxErrorRatioIncrease 1.0%)" in v.line()


def test_a_changed_golden_answer_rejects_at_once_whatever_the_counts() -> None:
    changed = Golden(1, canary="sha256:aa", baseline="sha256:bb")
    v = judge(record(side("c0", "canary", 0), side("b0", "baseline", 0), golden=(changed,), final=False))
    assert v.outcome == "REJECT" and "golden request 1: the canary's answer differs from the baseline's" in v.line()
    missed = Golden(2, canary="sha256:aa", pattern="^Paris", canary_matches=False)
    assert "golden request 2: the canary's answer does not match '^Paris'" in judge(record(*HEALTHY, golden=(missed,))).line()
    silent = Golden(3, baseline="sha256:bb", why="canary c0: HTTP 500 (3 tries)")
    assert (
        "golden request 3: the canary did not answer (canary c0: HTTP 500 (3 tries))"
        in judge(record(*HEALTHY, golden=(silent,))).line()
    )
    same = Golden(1, canary="sha256:aa", baseline="sha256:aa")
    assert judge(record(*HEALTHY, golden=(same,))).outcome == "ACCEPT"


def test_below_the_minimum_requests_the_verdict_waits_and_at_the_end_is_not_verifiable() -> None:
    few = (side("c0", "canary", 40), *HEALTHY[1:])
    assert judge(record(*few, final=False)).outcome == "WAIT"
    v = judge(record(*few))
    assert v.outcome == "NOT VERIFIABLE" and v.stops, "required: no verdict, no release"
    assert "the canary answered 40 of the 100 requests the verdict needs; the bake ended after 300 s" in v.line()
    optional = Thresholds(100, 1.5, 0.01, required=False)
    assert not judge(record(*few, limits=optional)).stops
    # Even a canary far worse than its baseline is not judged on too few requests: it waits.
    assert judge(record(side("c0", "canary", 40, errors=20), *HEALTHY[1:], final=False)).outcome == "WAIT"


def test_a_missing_measurement_is_never_a_pass() -> None:
    unread = Measured("c0", "canary", unreadable="its /metrics has no vllm:time_to_first_token_seconds")
    v = judge(record(unread, *HEALTHY[1:]))
    assert v.outcome == "NOT VERIFIABLE"
    assert "no figures from canary replica c0: its /metrics has no vllm:time_to_first_token_seconds" in v.line()
    assert judge(record(HEALTHY[0])).outcome == "NOT VERIFIABLE", "no baseline: nothing to compare with"
    no_baseline_answer = Golden(1, canary="sha256:aa", why="baseline b0: HTTP 503 (3 tries)")
    assert judge(record(*HEALTHY, golden=(no_baseline_answer,))).outcome == "NOT VERIFIABLE"


def test_never_accept_without_the_minimum_evidence_over_every_small_record() -> None:
    """Every record of one canary and one baseline replica over a grid of counts, failures and
    speeds, mid-bake and final: ACCEPT only with both sides at the minimum, inside every threshold."""
    small = Thresholds(min_requests=4, max_ttft_p95_ratio=1.5, max_error_ratio_increase=0.1, required=True)
    seen = set()
    for cr, ce, br, be, cs, bs, final in itertools.product(
        range(7), range(3), range(7), range(3), (0.03, 0.07), (0.03,), (False, True)
    ):
        if ce > cr or be > br:
            continue
        v = judge(record(side("c", "canary", cr, ce, cs), side("b", "baseline", br, be, bs), final=final, limits=small))
        seen.add(v.outcome)
        if v.outcome == "ACCEPT":
            assert final and cr >= 4 and br >= 4 and cs == bs and ce / cr - be / br <= 0.1
        if cr < 4 or br < 4:
            assert v.outcome == ("NOT VERIFIABLE" if final else "WAIT")
    assert seen == {"ACCEPT", "REJECT", "WAIT", "NOT VERIFIABLE"}


def test_re_judging_a_recorded_verdict_gives_the_same_verdict_byte_for_byte() -> None:
    golden = (
        Golden(1, canary="sha256:aa", baseline="sha256:aa"),
        Golden(2, canary="sha256:cc", pattern="x", canary_matches=True),
    )
    for measured in (HEALTHY, (side("c0", "canary", 200, errors=9), *HEALTHY[1:])):
        v = judge(record(*measured, golden=golden))
        stored = json.loads(json.dumps(v.as_json()))  # as a stack output keeps it
        again = rejudge(stored)
        assert json.dumps(again.as_json(), sort_keys=True) == json.dumps(stored, sort_keys=True)
        assert again.digest == v.digest == stored["digest"]
    assert judge(record(*HEALTHY)).digest != judge(record(*HEALTHY[:2])).digest


def test_a_record_judged_again_after_a_store_that_writes_whole_floats_as_ints_is_the_same() -> None:
    """A Pulumi stack output keeps 1.0 as 1: the record's form and digest do not depend on it."""
    whole = Thresholds(min_requests=100, max_ttft_p95_ratio=2.0, max_error_ratio_increase=0.0, required=False)
    measured = (Measured("c0", "canary", 200, 0, ((1.0, 150), (2.5, 200), (INF, 200))), *HEALTHY[1:])
    v = judge(record(*measured, limits=whole))

    stored = as_a_store_keeps_it(json.loads(json.dumps(v.as_json())))
    assert stored == v.as_json(), "the verdict's JSON form is already the one a store keeps"
    assert json.dumps(rejudge(stored).as_json(), sort_keys=True) == json.dumps(stored, sort_keys=True)


PAGE = """# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.01"} 3
vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 5
vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 6
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.5
vllm:time_to_first_token_seconds_count{model_name="m"} 6
# TYPE http_requests_total counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 6
http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 1
http_requests_total{handler="/v1/models",method="GET",status="2xx"} 40
"""


def test_an_engine_page_gives_completions_failures_and_its_ttft_histogram() -> None:
    page = evidence.parse(PAGE, "vllm")
    assert (page.requests, page.errors, page.ttft) == (7, 1, ((0.01, 3), (0.1, 5), (INF, 6)))
    with pytest.raises(ValueError, match="its /metrics has no sglang:time_to_first_token_seconds"):
        evidence.parse(PAGE, "sglang")


def test_a_window_is_each_pod_now_minus_at_the_start_and_a_restart_has_no_figures() -> None:
    a = ("10.88.0.4", 8000)
    start, now = evidence.Page(10, 1, ((0.1, 9), (INF, 9))), evidence.Page(30, 2, ((0.1, 25), (INF, 28)))
    got = evidence._window("c0", "canary", {a: start}, {a: now})
    assert (got.requests, got.errors, got.ttft, got.unreadable) == (20, 1, ((0.1, 16), (INF, 19)), "")
    restarted = evidence._window("c0", "canary", {a: now}, {a: start})
    assert restarted.unreadable == "its engine restarted during the bake: its counters went back (10.88.0.4)"
    moved = evidence._window("c0", "canary", {a: start}, {("10.88.0.5", 8000): now})
    assert moved.unreadable == "its pods changed during the bake"


def test_a_bake_asks_the_golden_requests_of_a_canary_and_a_baseline_replica_and_hashes_the_answers() -> None:
    from infercrane.core.model.config import InferCraneConfig

    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "qwen", "gpu": "NVIDIA-L40S"} for i in range(2)]
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})
    c, b = (r.key for r in config.replicas)
    policy = CanaryPolicy(golden=(GoldenRequest(prompt="2+2="), GoldenRequest(prompt="capital", match="^Paris")), min_requests=1)
    answers = {(c, "2+2="): "4", (b, "2+2="): "5", (c, "capital"): "Paris."}
    where = {c: [("10.0.0.1", 8000)], b: [("10.0.0.2", 8000)]}
    by_address = {a[0]: k for k, addrs in where.items() for a in addrs}
    baking = evidence.Bake(
        config,
        "qwen",
        policy,
        [c],
        [b],
        lambda r: where[r.key],
        "key",
        read=lambda a, engine: evidence.Page(0, 0, ((INF, 0),)),
        ask=lambda a, key, model, req: answers[(by_address[a[0]], req.prompt)],
    )
    g1, g2 = baking.golden
    assert g1.canary == evidence.digest("4") and g1.baseline == evidence.digest("5") and g1.differs
    assert g2.canary_matches is True and not g2.differs
    assert judge(baking.record(final=False)).outcome == "REJECT"


def test_a_baseline_leaving_the_config_with_the_release_is_read_and_asked_as_a_replica_of_its_endpoint() -> None:
    """A cutover to new keys: the old keys are the baseline, though the config names only the new."""
    from infercrane.core.model.config import InferCraneConfig

    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    config = InferCraneConfig.model_validate(
        {
            "kubernetes": target,
            "replicas": [{"key": "b0", "model": "m/m", "name": "qwen", "gpu": "NVIDIA-L40S", "engine": "sglang"}],
        }
    )
    read: list[tuple[str, str]] = []
    asked: list[tuple[str, str]] = []

    def page(address: evidence.Address, engine: str) -> evidence.Page:
        read.append((address[0], engine))
        return evidence.Page(0, 0, ((INF, 0),))

    def ask(address: evidence.Address, key: str | None, model: str, request: GoldenRequest) -> str:
        asked.append((address[0], model))
        return "4"

    where = {"b0": [("10.0.0.1", 8000)], "a0": [("10.0.0.2", 8000)], "a1": [("10.0.0.3", 8000)]}
    policy = CanaryPolicy(golden=(GoldenRequest(prompt="2+2="),), min_requests=1)
    baking = evidence.Bake(config, "qwen", policy, ["b0"], ["a0", "a1"], lambda r: where[r.key], None, read=page, ask=ask)
    assert [(side, r.key) for side, r in baking.sides] == [("canary", "b0"), ("baseline", "a0"), ("baseline", "a1")]
    assert read == [("10.0.0.1", "sglang"), ("10.0.0.2", "sglang"), ("10.0.0.3", "sglang")]
    assert asked == [("10.0.0.1", "qwen"), ("10.0.0.2", "qwen")], "the golden request of the canary and a baseline replica"
    assert [(m.replica, m.unreadable) for m in baking.record(final=True).measured] == [("b0", ""), ("a0", ""), ("a1", "")]


def policy_with(canary_policy: CanaryPolicy | None, surge: int = 0) -> Callable[[str], RolloutPolicy]:
    p = RolloutPolicy(max_unavailable=1 if surge == 0 else 0, max_surge=surge, canary=canary_policy)
    return lambda name: p


def members(*keys: str) -> list[LiveReplica]:
    return [LiveReplica(k, "e", ReplicaState.SETTLED, 1) for k in keys]


def test_the_canary_is_the_first_wave_and_bakes_beside_the_replicas_still_on_the_old_release() -> None:
    two_at_a_time = RolloutPolicy(max_unavailable=2, max_surge=0, canary=CanaryPolicy())
    keys = ("a0", "a1", "a2", "a3")
    r = plan(members(*keys), [Target(k, "e", 1, restarts=True) for k in keys], lambda name: two_at_a_time)
    (e,) = r.endpoints
    assert [w.up for w in e.waves] == [("a0",), ("a1", "a2"), ("a3",)], "the canary alone, then maxUnavailable at a time"
    assert (e.canary, e.baseline, e.canary_wave) == (("a0",), ("a1", "a2", "a3"), 0)
    (lane,) = r.lanes
    assert [s.bake for s in lane.stages] == [True, False, False]
    assert e.stages_needed == 3


def test_with_a_surge_the_replica_a_canary_replaces_serves_as_baseline_until_the_verdict() -> None:
    r = plan(members("a0"), [Target("b0", "e", 1)], policy_with(CanaryPolicy(), surge=1))
    (e,) = r.endpoints
    assert (e.canary, e.baseline) == (("b0",), ("a0",))
    (lane,) = r.lanes
    (stage,) = lane.stages
    assert stage.bake and stage.delete == frozenset({"a0"}), "a0 goes only once the canary is judged"
    assert e.stages_needed == 2, "plain pulumi up cannot bake: the change needs infercrane deploy"


def test_a_release_that_leaves_no_baseline_has_no_canary_and_says_why() -> None:
    r = plan(members("a0"), [Target("a0", "e", 1, restarts=True)], policy_with(CanaryPolicy()))
    (e,) = r.endpoints
    assert e.canary == () and e.no_canary == "no replica would stay on the old release to compare the canary with"
    created = plan([], [Target("a0", "e", 1)], policy_with(CanaryPolicy()))
    assert created.endpoints[0].no_canary == "", "a new endpoint is no release of a running one"


def test_golden_requests_with_a_pattern_that_is_no_regular_expression_are_refused() -> None:
    with pytest.raises(ValueError, match=r"match '\(' is no regular expression"):
        GoldenRequest(prompt="x", match="(")


def test_a_bad_canary_policy_is_refused_naming_its_path_and_how_to_fix_it() -> None:
    from infercrane.core.errors import ConfigError
    from infercrane.core.load import loading

    canary_policy = {"bakeSeconds": 0, "maxErrorRatioIncrease": 2, "golden": [{"prompt": "x", "match": "("}], "bake": 3}
    target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
    values = {
        "infercrane:kubernetes": target,
        "infercrane:replicas": [{"key": "k0", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}],
        "infercrane:endpoints": {"e": {"rollout": {"canary": canary_policy}}},
    }
    with pytest.raises(ConfigError) as refused:
        loading.load(values, source="stacks/Pulumi.dev.yaml", env={})
    where = "- stacks/Pulumi.dev.yaml: infercrane:endpoints.e.rollout.canary."
    assert str(refused.value).splitlines()[1:] == [
        f"{where}bakeSeconds: 0: Input should be greater than or equal to 1",
        "    fix: use seconds >= 1 (how long the canary serves before its verdict; default 300)",
        f"{where}maxErrorRatioIncrease: 2: Input should be less than or equal to 1",
        "    fix: use a share from 0 to 1 (0.01: the canary may fail 1 % more requests; default 0.01)",
        f"{where}golden[0].match: match '(' is no regular expression (missing ), unterminated subpattern at position 0)",
        "    fix: use a Python regular expression every answer must match (searched), or leave it out: equal answers",
        f"{where}bake: is not a known setting",
        "    fix: remove it or check its spelling (keys are camelCase)",
    ]


def test_a_release_already_serving_beside_the_others_needs_no_canary_a_rerun_after_accept_or_a_rollback() -> None:
    """After an accepted canary a killed deploy is rerun: a0 runs the new release, a1 the old. And
    after a rejection the previous config is deployed: a0 goes back to what a1 serves. Neither is
    a release the endpoint has not served: neither has a canary, and a required one is not refused."""
    live = [
        LiveReplica("a0", "e", ReplicaState.SETTLED, 1, release="new"),
        LiveReplica("a1", "e", ReplicaState.SETTLED, 1, release="old"),
    ]
    rerun = plan(live, [Target("a0", "e", 1, release="new"), Target("a1", "e", 1, restarts=True, release="new")],
                 policy_with(CanaryPolicy(required=True)))  # fmt: skip
    (e,) = rerun.endpoints
    assert (e.canary, e.canary_unneeded, e.no_canary) == ((), "its release already serves on a0", "")
    rollback = plan(live, [Target("a0", "e", 1, restarts=True, release="old"), Target("a1", "e", 1, release="old")],
                    policy_with(CanaryPolicy(required=True)))  # fmt: skip
    assert rollback.endpoints[0].canary_unneeded == "its release already serves on a1"
    one_changes = plan(live, [Target("a0", "e", 1, restarts=True, release="newer"), Target("a1", "e", 1, release="old")],
                       policy_with(CanaryPolicy()))  # fmt: skip
    assert (one_changes.endpoints[0].canary, one_changes.endpoints[0].baseline) == (("a0",), ("a1",)), (
        "a0 alone moves to a release no replica serves; a1, unchanged on its own, is the baseline"
    )


def test_a_release_is_what_the_pods_run_whatever_the_key_and_the_api_servers_defaults() -> None:
    from infercrane.core.plan.workload import release_of

    def deployment(name: str, image: str, with_default: bool) -> dict[str, object]:
        ref = {"fieldPath": "status.podIP"} | ({"apiVersion": "v1"} if with_default else {})
        container = {"image": image, "args": ["--port", "8000"], "env": [{"name": "IP", "valueFrom": {"fieldRef": ref}}]}
        return {"metadata": {"name": name}, "spec": {"template": {"spec": {"containers": [container]}}}}

    assert release_of(deployment("a", "i@sha256:1", False)) == release_of(deployment("b", "i@sha256:1", True))
    assert release_of(deployment("a", "i@sha256:1", False)) != release_of(deployment("a", "i@sha256:2", False))


def test_a_canary_a_killed_run_left_down_is_brought_back_first_and_judged_before_any_other_replica_moves() -> None:
    """A deploy killed while its canary a0 restarted on the new release: a0 is down on it, a1 and
    a2 serve the old one. The rerun brings a0 back first and bakes it there; a1 and a2 wait."""
    live = [
        LiveReplica("a0", "e", ReplicaState.STARTING, 1, release="new"),
        LiveReplica("a1", "e", ReplicaState.SETTLED, 1, release="old"),
        LiveReplica("a2", "e", ReplicaState.SETTLED, 1, release="old"),
    ]
    targets = [Target("a0", "e", 1, release="new")] + [Target(k, "e", 1, restarts=True, release="new") for k in ("a1", "a2")]
    r = plan(live, targets, policy_with(CanaryPolicy(required=True)))
    (e,) = r.endpoints
    assert (e.canary, e.baseline, e.canary_first, e.canary_wave) == (("a0",), ("a1", "a2"), True, None)
    (lane,) = r.lanes
    assert [(sorted(s.apply), s.bake) for s in lane.stages] == [(["a0"], True), (["a1"], False), (["a2"], False)]
    assert e.describe(lane.stages[0]) == (
        "e: bring back a0 first (not available: the waves wait for it), then bake the canary a0 300 s beside a1, a2"
    )


def test_a_rejected_release_retried_is_judged_again_where_its_canary_still_runs_never_taken_as_proven() -> None:
    """After a rejection a0 still runs the rejected release; a1 the old one. The same config again
    would see the release "already serving" on a0 and roll it without a verdict -- the deploy
    refuses that (a stack tag remembers the rejection) unless retried, and a retry bakes a0 again."""
    live = [
        LiveReplica("a0", "e", ReplicaState.SETTLED, 1, release="bad"),
        LiveReplica("a1", "e", ReplicaState.SETTLED, 1, release="old"),
    ]
    targets = [Target("a0", "e", 1, release="bad"), Target("a1", "e", 1, restarts=True, release="bad")]
    blind = plan(live, targets, policy_with(CanaryPolicy(required=True)))
    assert blind.endpoints[0].canary_unneeded == "its release already serves on a0" and blind.endpoints[0].release == "bad"
    retried = plan(live, targets, policy_with(CanaryPolicy(required=True)), unproven=frozenset({"bad"}))
    (e,) = retried.endpoints
    assert (e.canary, e.baseline, e.canary_first, e.canary_unneeded) == (("a0",), ("a1",), True, "")
    (lane,) = retried.lanes
    assert [(sorted(s.apply), s.bake) for s in lane.stages] == [(["a0"], True), (["a1"], False)]


def test_a_page_that_counts_answers_but_not_its_requests_has_no_figures() -> None:
    answered_uncounted = "\n".join(line for line in PAGE.splitlines() if not line.startswith(("http_", "# TYPE http")))
    with pytest.raises(ValueError, match=r"its /metrics has no http_requests_total .* \(no count of failed requests\)"):
        evidence.parse(answered_uncounted + "\n", "vllm")
    sglang = answered_uncounted.replace("vllm:", "sglang:")
    with pytest.raises(
        ValueError, match=r"its /metrics has no sglang:num_requests_total \(no count of the requests it answered\)"
    ):
        evidence.parse(sglang + "\n", "sglang")


SGLANG_PAGE = (
    PAGE.split("# TYPE http_requests_total")[0].replace("vllm:", "sglang:")
    + """\
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 7
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{model_name="m"} 1
"""
)


def test_an_sglang_page_counts_its_finished_requests_and_its_aborted_ones_as_failed() -> None:
    page = evidence.parse(SGLANG_PAGE, "sglang")
    assert (page.requests, page.errors, page.ttft) == (7, 1, ((0.01, 3), (0.1, 5), (INF, 6)))
    # SGLang shows its labelled counter of aborted requests only once it aborted one: none yet is 0.
    unaborted = SGLANG_PAGE.split("# TYPE sglang:num_aborted_requests_total")[0]
    assert (evidence.parse(unaborted, "sglang").requests, evidence.parse(unaborted, "sglang").errors) == (7, 0)
    # vLLM's instrumentator counts on an SGLang page are not SGLang's count of its requests.
    http = "".join(line + "\n" for line in PAGE.splitlines() if line.startswith(("http_", "# TYPE http")))
    with pytest.raises(ValueError, match="has no sglang:num_requests_total"):
        evidence.parse(SGLANG_PAGE.split("# TYPE sglang:num_requests_total")[0] + http, "sglang")


def test_plain_pulumi_up_is_told_a_canary_needs_a_step_of_its_own() -> None:
    r = plan(members("a0"), [Target("b0", "e", 1)], policy_with(CanaryPolicy(), surge=1))
    (e,) = r.beyond_one_step()
    assert e.all_at_once().startswith("the canary b0 would not bake nor be judged before the rest")


def test_the_plan_shows_the_canary_step_its_bake_and_thresholds_and_why_there_is_none() -> None:
    from infercrane.cli.rollout_text import rollout_lines

    golden = (GoldenRequest(prompt="2 + 2 ="),)
    r = plan(members("a0", "a1"), [Target(k, "e", 1, restarts=True) for k in ("a0", "a1")],
             policy_with(CanaryPolicy(bakeSeconds=60, golden=golden, required=True)))  # fmt: skip
    lines = rollout_lines(r)
    assert "    wave 1: down a0; up a0 (down, then up)" in lines
    assert (
        "      the canary: bakes 60 s, judged on at least 100 requests each: ttft p95 at most x1.5 the baseline's, "
        "error ratio at most +1.0%, 1 golden request(s) answered as the baseline's; required: no verdict, no release; "
        "beside the baseline a1"
    ) in lines
    alone = plan(members("a0"), [Target("a0", "e", 1, restarts=True)], policy_with(CanaryPolicy()))
    assert (
        "    no canary: no replica would stay on the old release to compare the canary with "
        "(canary.required is false: the release rolls without a verdict)"
    ) in rollout_lines(alone)


def test_a_golden_request_is_asked_three_times_before_the_canary_counts_as_not_answering() -> None:
    from infercrane.core.model.config import InferCraneConfig

    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "qwen", "gpu": "NVIDIA-L40S"} for i in range(2)]
    config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})
    tries: list[str] = []

    def flaky(fails: int) -> Callable[..., str]:
        def ask(address: object, key: object, model: object, request: object) -> str:
            tries.append("x")
            if len(tries) <= fails:
                raise ValueError("HTTP 500")
            return "4"

        return ask

    def bake(fails: int) -> evidence.Bake:
        tries.clear()
        return evidence.Bake(
            config,
            "qwen",
            CanaryPolicy(golden=(GoldenRequest(prompt="2+2=", match="4"),)),
            ["k0"],
            ["k1"],
            lambda r: [("10.0.0.1", 8000)],
            None,
            read=lambda a, engine: evidence.Page(0, 0, ((INF, 0),)),
            ask=flaky(fails),
        )

    (answered,) = bake(fails=2).golden
    assert answered.canary == evidence.digest("4") and len(tries) == 3
    (silent,) = bake(fails=3).golden
    assert silent.canary == "" and silent.why == "canary k0: HTTP 500 (3 tries)" and len(tries) == 3


def test_a_canary_whose_requests_take_twice_as_long_end_to_end_is_rejected_though_its_first_token_is_not_late() -> None:
    limits = Thresholds(100, 1.5, 0.01, required=True, max_e2e_p95_ratio=1.5)

    def with_e2e(m: Measured, seconds: float) -> Measured:
        return Measured(m.replica, m.side, m.requests, m.errors, m.ttft, e2e=hist(seconds, m.requests))

    slow = record(with_e2e(side("c0", "canary", 200), 0.5), with_e2e(side("b0", "baseline", 200), 0.2), limits=limits)
    verdict = judge(slow)
    assert verdict.outcome == "REJECT"
    assert verdict.reasons[0] == "e2e p95 0.487 s vs baseline 0.242 s (x2.01 > maxE2eP95Ratio 1.5)"
    assert "e2e p95 0.487 s" in verdict.reasons[1]
    assert json.dumps(rejudge(as_a_store_keeps_it(verdict.as_json())).as_json()) == json.dumps(verdict.as_json())
    # An engine that counts no latency: nothing to compare, nothing judged (and nothing invented).
    assert judge(record(side("c0", "canary", 200), side("b0", "baseline", 200), limits=limits)).outcome == "ACCEPT"


def test_a_record_from_before_latency_was_judged_re_judges_byte_for_byte() -> None:
    old = judge(record(*HEALTHY)).as_json()  # thresholds without maxE2eP95Ratio, replicas without e2e
    assert "max_e2e_p95_ratio" not in old["record"]["thresholds"] and "e2e" not in old["record"]["measured"][0]
    assert "e2e_p95" not in old["canary"]
    assert json.dumps(rejudge(old).as_json(), sort_keys=True) == json.dumps(old, sort_keys=True)
