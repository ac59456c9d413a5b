"""How an endpoint's replicas roll: the rollout policy (maxUnavailable / maxSurge), a replica's
override of it, and the per-endpoint settings of ``infercrane:endpoints``. Pure core.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from infercrane.core.model.schema import Frozen

LEGACY_ROLLOUT: Final = {"recreate": "{maxUnavailable: 1, maxSurge: 0}", "surge": "{maxUnavailable: 0, maxSurge: 1}"}


class GoldenRequest(Frozen):
    """A request whose answer a canary must give as its baseline does: sent at temperature 0 with a
    fixed seed to a canary and a baseline replica (``POST /v1/completions``)."""

    prompt: StrictStr = Field(min_length=1, description="The prompt, sent as it is.")
    max_tokens: StrictInt = Field(16, ge=1, le=4096, description="The answer's length limit, in tokens.")
    match: StrictStr | None = Field(
        None,
        description="A regular expression every answer must match (searched); unset: the canary's answer must equal "
        "the baseline's, byte for byte.",
    )

    @field_validator("match")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"match {v!r} is no regular expression ({exc})") from None
        return v


class CanaryPolicy(Frozen):
    """The first wave of a release as a canary: ``replicas`` of the endpoint move first and bake
    for ``bakeSeconds`` beside the replicas still on the old release (the baseline); InferCrane
    judges them from the engines' own evidence (core.plan.canary) before any other wave."""

    replicas: StrictInt = Field(1, ge=1, description="Replicas in the canary (the first wave).")
    bake_seconds: StrictInt = Field(300, ge=1, description="How long the canary serves before its verdict.")
    min_requests: StrictInt = Field(
        100, ge=1, description="Requests the canary and the baseline must each have answered in the bake (fewer: WAIT)."
    )
    max_ttft_p95_ratio: StrictFloat | StrictInt = Field(
        1.5, ge=1, description="The canary's time-to-first-token p95 over the baseline's, at most."
    )
    max_e2e_p95_ratio: StrictFloat | StrictInt = Field(
        1.5,
        ge=1,
        alias="maxE2eP95Ratio",  # as the docs and the verdict spell it (the generator would say maxE2EP95Ratio)
        description="The canary's end-to-end request latency p95 over the baseline's, at most (vLLM's "
        "e2e_request_latency_seconds; not judged where an engine counts none).",
    )
    max_error_ratio_increase: StrictFloat | StrictInt = Field(
        0.01, ge=0, le=1, description="The canary's share of failed requests minus the baseline's, at most."
    )
    golden: tuple[GoldenRequest, ...] = Field((), description="Requests whose answers must not change.")
    required: StrictBool = Field(
        False,
        description="No release without an ACCEPT: a verdict still waiting at the end of the bake (not verifiable) "
        "rejects, and a change that leaves no baseline to compare with is refused.",
    )


class RolloutPolicy(Frozen):
    """How an endpoint moves to a new intent: in waves, never below its replicas minus
    ``maxUnavailable`` ready, never above its GPUs plus ``maxSurge`` replicas' worth.

    Counted in replicas of the endpoint. The defaults replace one replica at a time in place:
    scarce GPUs never deadlock (no surge needs a free GPU set) and the endpoint keeps all but one
    replica serving. ``maxSurge >= 1`` starts each wave's new replica before its old one stops (the
    Deployment rolls with ``RollingUpdate``), which needs that many free GPU sets of the product."""

    max_unavailable: StrictInt = Field(1, ge=0, description="Replicas of the endpoint that may be not ready at once.")
    max_surge: StrictInt = Field(0, ge=0, description="Extra replicas' worth of GPUs a wave may use (0: never more).")
    max_extra_gpus: StrictInt | None = Field(
        None,
        ge=0,
        description="The whole stack's, per GPU product: GPUs all endpoints' surges may hold at once beyond each "
        "endpoint's own (its GPUs before or after the change, whichever is more); the surges take turns for them. "
        "Unset: each endpoint's maxSurge alone bounds its own. Not set per endpoint.",
    )
    canary: CanaryPolicy | None = Field(None, description="The release's first wave is a canary judged before the rest.")
    warm_first: bool = Field(
        False,
        description="Before an in-place wave stops a replica, pull its next release's images (engine and model) onto "
        "its node while it still serves: a GPU-free prefetch pod, deleted once its kubelet has them (needs the optional "
        "pod reader and prefetcher rights; without them the waves pull cold, said so).",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, v: object) -> object:
        if isinstance(v, str) and v in LEGACY_ROLLOUT:
            raise ValueError(f"rollout {v!r} is now a policy: write rollout: {LEGACY_ROLLOUT[v]}")
        return v

    @model_validator(mode="after")
    def _progresses(self) -> RolloutPolicy:
        if self.max_unavailable == 0 and self.max_surge == 0:
            raise ValueError("maxUnavailable 0 with maxSurge 0 can never replace a replica")
        return self


class RolloutOverride(Frozen):
    """An endpoint's own rollout settings; a field left out takes the target's default."""

    max_unavailable: StrictInt | None = Field(None, ge=0, description="As kubernetes.rollout.maxUnavailable.")
    max_surge: StrictInt | None = Field(None, ge=0, description="As kubernetes.rollout.maxSurge.")
    canary: CanaryPolicy | None = Field(None, description="As kubernetes.rollout.canary (replaces it whole).")
    warm_first: bool | None = Field(None, description="As kubernetes.rollout.warmFirst.")


class EndpointSettings(Frozen):
    """Settings of one logical endpoint (the replicas sharing a ``name``)."""

    rollout: RolloutOverride = Field(default_factory=lambda: RolloutOverride.model_validate({}))
