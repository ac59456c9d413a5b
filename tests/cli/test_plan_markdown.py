"""`plan --markdown`: the plan as a pull-request comment -- a summary table a person reads in ten
seconds, a collapsible block per endpoint, never over 60,000 characters (GitHub's limit is 65,536)."""

from __future__ import annotations

from infercrane.cli import markdown
from infercrane.core.plan.actions import Action
from infercrane.core.plan.waves import EndpointRollout, Rollout, Wave
from infercrane.engine.changes import ReplicaAction
from infercrane.engine.planning import PlanResult

IMAGE = "vllm/vllm-openai@sha256:" + "1" * 64


def fleet(endpoints: int, per_endpoint: int) -> tuple[PlanResult, dict[str, str]]:
    """A digest change of every replica: each endpoint in place, one replica per wave."""
    actions, rollouts, endpoint_of = [], [], {}
    for e in range(endpoints):
        keys = [f"e{e}-r{i}" for i in range(per_endpoint)]
        for k in keys:
            endpoint_of[k] = f"e{e}"
            actions.append(
                ReplicaAction(
                    f"infercrane-{k}", Action.UPDATE, key=k, gpu="NVIDIA-L40S", image=IMAGE, objects=[f"Deployment/{k}"]
                )
            )
        waves = tuple(Wave((k,), (k,)) for k in keys)
        n = per_endpoint
        rollouts.append(EndpointRollout(f"e{e}", 1, 0, "in place", waves, n, n, n - 1, n, n, n, updates=n))
    return PlanResult(actions, "read-only", rollout=Rollout(tuple(rollouts), ())), endpoint_of


def test_the_comment_leads_with_a_table_of_what_changes_then_a_block_per_endpoint() -> None:
    result, endpoint_of = fleet(2, 3)
    unchanged = ReplicaAction("infercrane-quiet-r0", Action.SAME, key="quiet-r0", gpu="NVIDIA-L40S", image=IMAGE)
    result.actions.append(unchanged)
    text = markdown.plan_markdown("prod", result, endpoint_of | {"quiet-r0": "quiet"}, ["note: not checkable read-only: …"])
    assert text.startswith("### InferCrane plan: stack `prod`\n\n**6 replica(s) change in 2 of 3 endpoint(s)**")
    assert "| `e0` | 3 of 3: 3 configure | 3 | 2 of 3 | 3 → 3 (3) | - |" in text
    assert text.count("<details><summary><code>e") == 2 and "quiet" not in text.split("<details>")[0].split("|---|")[1]
    assert "    wave 1: down e0-r0; up e0-r0 (down, then up)" in text
    assert "> not checkable read-only: …" in text
    nothing = PlanResult([unchanged], "read-only")
    assert "**No changes.**" in markdown.plan_markdown("prod", nothing, {"quiet-r0": "quiet"})


def test_a_fleet_of_a_thousand_replicas_stays_under_the_comment_limit_and_says_what_it_left_out() -> None:
    result, endpoint_of = fleet(250, 4)
    text = markdown.plan_markdown("prod", result, endpoint_of)
    assert len(text) <= markdown.COMMENT_LIMIT
    assert "**1000 replica(s) change in 250 of 250 endpoint(s)**" in text
    assert "endpoint(s) are left out: the whole plan is `infercrane plan --json` (the job's artifact)." in text
    huge, endpoint_of = fleet(1000, 1)  # more rows than fit: the table is cut too, and says so
    text = markdown.plan_markdown("prod", huge, endpoint_of)
    assert len(text) <= markdown.COMMENT_LIMIT and "more endpoint(s) change" in text


def test_a_refused_plan_is_a_comment_that_says_so_first() -> None:
    from infercrane.core.errors import PreflightRefused

    refused = PreflightRefused([], ['Deployment ns/d: conflict with "kubectl-scale" (Update): .spec.replicas'], [], [])
    text = markdown.refusal_markdown("prod", refused)
    assert text.startswith("### InferCrane plan: stack `prod`\n\n**Refused: nothing would be applied.**")
    assert 'conflict with "kubectl-scale" (Update): .spec.replicas' in text


def test_the_comment_shows_the_expected_rollout_as_a_mermaid_timeline_with_its_figures() -> None:
    from infercrane.core.plan import duration
    from infercrane.core.plan.waves import Lane, Stage

    result, endpoint_of = fleet(2, 2)
    assert result.rollout is not None
    lanes = tuple(
        Lane(e.endpoint, tuple(Stage(frozenset(w.up), wave=i) for i, w in enumerate(e.waves))) for e in result.rollout.endpoints
    )
    start = duration.Expected(40.0, "2 recorded start(s) of NVIDIA-L40S, this image")
    replicas = {k: duration.Replica(start, 5.0) for k in endpoint_of}
    result.estimate = duration.estimate(Rollout(result.rollout.endpoints, lanes), replicas)
    text = markdown.plan_markdown("prod", result, endpoint_of)
    stage = duration.STAGE_SECONDS + 5 + 40 + duration.EVIDENCE_SECONDS
    assert (
        f"**Expected: about 1 min {round(duration.RUN_SECONDS + 2 * stage) - 60} s**, 0.00 GPU-hours beyond steady state" in text
    )
    assert "(starts from: 2 recorded start(s) of NVIDIA-L40S, this image)" in text
    chart = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert chart.startswith("gantt\n  dateFormat X\n  axisFormat %M:%S\n  section e0\n")
    assert f"  wave 1/2 : 0, {round(stage)}\n  wave 2/2 : {round(stage)}, {round(2 * stage)}\n" in chart
    assert chart.count("section ") == 2
