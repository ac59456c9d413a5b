"""How long a rollout takes, and the GPU-hours it holds beyond steady state, estimated from the
starts the stack recorded (its ``starts`` output: each replica's last start, stage by stage --
:mod:`infercrane.live.status.startup`). Pure functions; core layer.

A lane's stages run one after the other and the lanes side by side, so the rollout takes its
longest lane plus the run's own start and end. A stage takes: its apply (:data:`STAGE_SECONDS`),
the drain of each old pod its new one waits for (in place, or recreated), the start of its
slowest new pod, the serving evidence, the canary's bake, and the drain of what it deletes
(waited for until gone). A start is the replica's expected time from its pod's creation to its
engine healthy, taken from recorded starts of the same GPU product: the same image first, else
any image of that product, else :data:`DEFAULT_START_SECONDS`, said as such. A drain is the
replica's preStop wait (an idle engine stops at once on SIGTERM; one still answering takes up to
its ``drain.shutdownSeconds`` more). What this does not count: a GPU budget
(``rollout.maxExtraGpus``) that makes one lane wait for another's borrowed GPUs, and the time a
pod waits for a node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from infercrane.core.plan.waves import EndpointRollout, Rollout, Stage

#: A start no recorded start tells about (a new stack, a GPU product never started): a stated guess.
DEFAULT_START_SECONDS: Final = 180.0
#: A stage's own time beyond its pods': registering its objects through the engine, the
#: controllers' reaction, the LIST that sees it ready (measured on the local plane).
STAGE_SECONDS: Final = 2.0
#: Asking a ready replica's engine what it serves.
EVIDENCE_SECONDS: Final = 0.5
#: The deploy's own start and end around its lanes: the engine's start, the preflight, the state
#: written at the end (measured on the local plane with a handful of replicas; it grows with the
#: fleet -- docs/benchmarks.md).
RUN_SECONDS: Final = 10.0


@dataclass(frozen=True)
class Expected:
    """One replica's expected start, and what it is taken from."""

    seconds: float
    basis: str


@dataclass(frozen=True)
class Replica:
    """What the estimate needs of one replica: its start and its drain."""

    start: Expected
    drain_seconds: float


def expected_start(gpu: str, image: str, recorded: Mapping[str, Mapping[str, Any]]) -> Expected:
    """The median of the recorded starts (to *healthy*) of GPU product ``gpu`` with ``image``,
    else of that product with any image, else :data:`DEFAULT_START_SECONDS`."""
    same = [r for r in recorded.values() if r.get("gpu") == gpu and isinstance(r.get("healthy"), int | float)]
    for pool, which in (([r for r in same if r.get("image") == image]), "this image"), (same, "any image"):
        if pool:
            seconds = float(statistics.median(float(r["healthy"]) for r in pool))
            return Expected(seconds, f"{len(pool)} recorded start(s) of {gpu}, {which}")
    return Expected(DEFAULT_START_SECONDS, f"no recorded start of {gpu}: the default {DEFAULT_START_SECONDS:g} s")


@dataclass(frozen=True)
class StageCost:
    """One stage of a lane, placed on the lane's timeline."""

    label: str
    begins: float  # seconds after the lanes begin
    seconds: float
    extra_gpus: int  # GPUs it holds beyond its endpoint's own while it runs


@dataclass(frozen=True)
class LaneCost:
    endpoint: str
    stages: tuple[StageCost, ...]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    @property
    def gpu_hours(self) -> float:
        """GPU-hours held beyond the endpoint's steady state: what its surges borrow, for as long."""
        return sum(s.extra_gpus * s.seconds for s in self.stages) / 3600


@dataclass(frozen=True)
class Estimate:
    lanes: tuple[LaneCost, ...]
    bases: tuple[str, ...]  # what the starts were taken from, each once

    @property
    def seconds(self) -> float:
        """The whole deploy: its longest lane and the run's own start and end."""
        return RUN_SECONDS + max((lane.seconds for lane in self.lanes), default=0.0)

    @property
    def gpu_hours(self) -> float:
        return sum(lane.gpu_hours for lane in self.lanes)

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "gpuHoursBeyondSteadyState": round(self.gpu_hours, 3),
            "startsFrom": list(self.bases),
            "endpoints": [
                {
                    "endpoint": lane.endpoint,
                    "seconds": round(lane.seconds, 1),
                    "gpuHoursBeyondSteadyState": round(lane.gpu_hours, 3),
                    "stages": [
                        {
                            "stage": s.label,
                            "begins": round(s.begins, 1),
                            "seconds": round(s.seconds, 1),
                            "extraGpus": s.extra_gpus,
                        }
                        for s in lane.stages
                    ],
                }
                for lane in self.lanes
            ],
        }


def estimate(rollout: Rollout, replicas: Mapping[str, Replica]) -> Estimate:
    """The rollout's expected duration and GPU-hours (see the module docstring). ``replicas``: key ->
    its expected start and drain, for every key the rollout applies or deletes."""
    in_place = rollout.restarts_in_place() | rollout.recreated
    endpoints = {e.endpoint: e for e in rollout.endpoints}
    lanes = []
    for lane in rollout.lanes:
        e = endpoints.get(lane.endpoint)
        begins, stages = 0.0, []
        for stage in lane.stages:
            seconds = _stage_seconds(stage, e, replicas, rollout.restarts, in_place)
            label = e.where(stage) if e is not None else "a stage"
            stages.append(StageCost(label, begins, seconds, sum(n for _, n in stage.borrow)))
            begins += seconds
        lanes.append(LaneCost(lane.endpoint, tuple(stages)))
    keys = {k for lane in rollout.lanes for s in lane.stages for k in _restarted(s, rollout.restarts)}
    bases = tuple(dict.fromkeys(replicas[k].start.basis for k in sorted(keys) if k in replicas))
    return Estimate(tuple(lanes), bases)


def _restarted(stage: Stage, restarts: frozenset[str] | None) -> frozenset[str]:
    """The keys of ``stage`` whose pods start anew (a key applied with the template it runs starts none)."""
    return stage.apply if restarts is None else stage.apply & restarts


def _stage_seconds(
    stage: Stage,
    e: EndpointRollout | None,
    replicas: Mapping[str, Replica],
    restarts: frozenset[str] | None,
    in_place: frozenset[str],
) -> float:
    def drain(keys: frozenset[str]) -> float:
        return max((replicas[k].drain_seconds for k in keys if k in replicas), default=0.0)

    restarted = _restarted(stage, restarts)
    start = max((replicas[k].start.seconds for k in restarted if k in replicas), default=0.0)
    bake = e.canary_policy.bake_seconds if stage.bake and e is not None and e.canary_policy is not None else 0
    return (
        STAGE_SECONDS
        + drain((restarted & in_place) | stage.recreate)  # the old pod goes before the new one starts
        + start
        + (EVIDENCE_SECONDS if restarted else 0.0)
        + bake
        + drain(stage.delete)  # deleted once the stage is ready, waited for until gone
    )
