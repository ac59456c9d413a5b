"""A canary's bake as the engines' pages show it (live.evidence.canary), read through a double of
the pod reads (named so): an engine that restarts mid-bake is never accepted -- its counters
start again near 0 and the requests its crash failed are counted by no engine (issue #64, 5)."""

from __future__ import annotations

from collections.abc import Iterator

from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.endpoints import CanaryPolicy
from infercrane.core.plan.canary import judge
from infercrane.core.plan.canary_record import INF
from infercrane.live.evidence import canary as evidence

CANARY, BASELINE = ("10.0.0.1", 8000), ("10.0.0.2", 8000)


def config() -> InferCraneConfig:
    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "namespace": "ns"}
    replicas = [{"key": f"k{i}", "model": "m/m", "name": "qwen", "gpu": "NVIDIA-L40S"} for i in range(2)]
    return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})


def page(requests: int, started: float | None = 100.0) -> evidence.Page:
    return evidence.Page(requests, 0, ((0.1, requests), (INF, requests)), started=started)


class PodsDouble:
    """Stands in for the pods' /metrics and the EndpointSlices' ready addresses: each read of a
    replica takes its next page (or ``None``: no ready address at that read)."""

    def __init__(self, canary: list[evidence.Page | None], baseline: list[evidence.Page | None]) -> None:
        self.pages: dict[tuple[str, int], Iterator[evidence.Page | None]] = {CANARY: iter(canary), BASELINE: iter(baseline)}
        self.now: dict[tuple[str, int], evidence.Page | None] = {}

    def addresses(self, replica: object) -> list[tuple[str, int]]:
        a = CANARY if getattr(replica, "key", "") == "k0" else BASELINE
        self.now[a] = next(self.pages[a])
        return [] if self.now[a] is None else [a]

    def read(self, address: tuple[str, int], engine: str) -> evidence.Page:
        got = self.now[address]
        assert got is not None
        return got


def baked(pods: PodsDouble, reads: int) -> str:
    """The verdict after ``reads`` reads past the first, the last at the bake's end."""
    policy = CanaryPolicy(min_requests=10, required=True)
    baking = evidence.Bake(config(), "qwen", policy, ["k0"], ["k1"], pods.addresses, None, read=pods.read)
    verdict = None
    for i in range(reads):
        verdict = judge(baking.record(final=i == reads - 1))
        if verdict.outcome == "REJECT":
            break
    assert verdict is not None
    return f"{verdict.outcome}: {'; '.join(verdict.reasons)}"


def test_a_healthy_canary_is_accepted() -> None:
    pods = PodsDouble([page(0), page(50), page(100)], [page(0), page(50), page(100)])
    assert baked(pods, 2).startswith("ACCEPT")


def test_an_engine_restarted_between_two_reads_is_rejected_though_its_counts_climbed_past_the_start() -> None:
    # 500 at the start; it crashes and restarts, then counts 20 and later 900 from its new start:
    # compared with the start alone, 900 - 500 looks like 400 healthy requests.
    pods = PodsDouble([page(500, None), page(20, None), page(900, None)], [page(0), page(200), page(400)])
    assert baked(pods, 2) == (
        "REJECT: canary replica k0: its engine restarted during the bake: its counters went back (10.0.0.1)"
    )


def test_an_engine_whose_process_start_time_changed_is_rejected_even_when_its_counters_never_went_back() -> None:
    pods = PodsDouble([page(5, 100.0), page(300, 160.0)], [page(0), page(300)])
    assert baked(pods, 1) == (
        "REJECT: canary replica k0: its engine restarted during the bake: its process start time changed (10.0.0.1)"
    )


def test_a_canary_that_lost_its_ready_address_during_the_bake_is_rejected_when_it_is_back() -> None:
    pods = PodsDouble([page(0), None, page(300)], [page(0), page(150), page(300)])
    assert baked(pods, 2) == (
        "REJECT: canary replica k0: it stopped serving during the bake (no ready address in its EndpointSlices)"
    )


def test_a_baseline_that_restarted_is_no_evidence_the_verdict_waits_and_ends_not_verifiable() -> None:
    pods = PodsDouble([page(0), page(100), page(200)], [page(300, 1.0), page(10, 2.0), page(400, 2.0)])
    said = baked(pods, 2)
    assert said.startswith("NOT VERIFIABLE: no figures from baseline replica k1: its engine restarted during the bake")


def test_a_page_gives_its_process_start_time_where_it_serves_one() -> None:
    text = (
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 0\n'
    )
    assert evidence.parse(text, "vllm").started == 1.7e9


class HeldServiceDouble:
    """Stands in for the checker: k0's Service routes to the canary's pod (ReplicaSet
    ``infercrane-k0-new``) and its held old pod (``infercrane-k0-old``); k1's to its one pod."""

    OLD = ("10.0.0.3", 8000)

    def pods(self, replica: object) -> list[tuple[str, int, str]]:
        if getattr(replica, "key", "") == "k0":
            return [(*CANARY, "infercrane-k0-new-abcde"), (*self.OLD, "infercrane-k0-old-fghij")]
        return [(*BASELINE, "infercrane-k1-x-klmno")]

    def addresses(self, replica: object) -> list[tuple[str, int]]:
        return [(a, p) for a, p, _ in self.pods(replica)]

    key = None


def test_a_held_canarys_old_pod_bakes_as_baseline_and_its_new_pod_alone_as_the_canary() -> None:
    """Issue #64: under a surge the same Service routes to the canary's pod and its held old pod;
    the canary's side is only the pod of its Deployment's current ReplicaSet."""
    from infercrane.live.evidence.held import addresses as held_addresses

    cfg = config()
    replicas = {r.key: r for r in cfg.replicas}
    addresses, olds = held_addresses(HeldServiceDouble(), replicas, {"k0"}, {"k0": "infercrane-k0-new"}.get)  # type: ignore[arg-type]
    assert olds == ["k0 (old pod)"]
    assert addresses(replicas["k0"]) == [CANARY]
    assert addresses(replicas["k0"].model_copy(update={"key": "k0 (old pod)"})) == [HeldServiceDouble.OLD]
    assert addresses(replicas["k1"]) == [BASELINE]
    pages = {CANARY: page(0), HeldServiceDouble.OLD: page(0), BASELINE: page(0)}
    baking = evidence.Bake(cfg, "qwen", CanaryPolicy(min_requests=1), ["k0"], ["k1", *olds], addresses, None,
                           read=lambda a, e: pages[a])  # fmt: skip
    pages.update({CANARY: page(40), HeldServiceDouble.OLD: page(30), BASELINE: page(20)})
    measured = {m.replica: (m.side, m.requests) for m in baking.record(final=True).measured}
    assert measured == {"k0": ("canary", 40), "k1": ("baseline", 20), "k0 (old pod)": ("baseline", 30)}


def test_a_held_canary_whose_current_replica_set_is_not_named_has_no_figures_never_the_old_pods() -> None:
    from infercrane.live.evidence.held import addresses as held_addresses

    replicas = {r.key: r for r in config().replicas}
    addresses, olds = held_addresses(HeldServiceDouble(), replicas, {"k0"}, lambda key: None)  # type: ignore[arg-type]
    assert addresses(replicas["k0"]) == [] and olds == []
