"""How an endpoint's replicas roll: the rollout policy (maxUnavailable / maxSurge), a replica's
override of it, and the per-endpoint settings of ``infercrane:endpoints``. Pure core.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, StrictInt, model_validator

from infercrane.core.model.schema import Frozen

LEGACY_ROLLOUT: Final = {"recreate": "{maxUnavailable: 1, maxSurge: 0}", "surge": "{maxUnavailable: 0, maxSurge: 1}"}


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


class EndpointSettings(Frozen):
    """Settings of one logical endpoint (the replicas sharing a ``name``)."""

    rollout: RolloutOverride = Field(default_factory=lambda: RolloutOverride.model_validate({}))
