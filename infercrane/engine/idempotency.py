"""A deploy's idempotency: the stack's intent (one hash over what a deploy is asked to do), a new
key, and the record a key left. A deploy is recorded in the stack's outputs (by the same ``up``)
with its key and the stack's intent hash, so a retry with the same key and intent reports the
recorded result without a second change, and the same key with another intent is refused. Engine
layer.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import IdempotencyConflict
from infercrane.core.model import config as cfg
from infercrane.core.render.intent import intent as replica_intent
from infercrane.core.state import urns


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash, the target identity, each endpoint's rollout policy
    and the serving evidence asked for (how the change is carried out and what proves it done are
    part of what a deploy is asked to do: a key recorded under one policy, or under ``check``, is not
    replayed for another, or for ``require``)."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [replica_intent(config, r) for r in config.replicas]
    endpoints = sorted({r.name for r in config.replicas})
    # warmFirst enters only when on: a stack that never set it keeps its intent (and its records replay).
    policies = {
        e: config.rollout_for(e).model_dump(
            mode="json", exclude={"max_extra_gpus"} | (set() if config.rollout_for(e).warm_first else {"warm_first"})
        )
        for e in endpoints
    }
    for policy in policies.values():  # no canary: none in the hash (the stack's intent stays)
        if policy.get("canary") is None:
            policy.pop("canary", None)
    intent: dict[str, object] = {"stack": parts, "rollout": policies, "servingEvidence": config.kubernetes.serving_evidence}
    if config.kubernetes.rollout.max_extra_gpus is not None:  # the stack's, not an endpoint's (set: the intent changes)
        intent["maxExtraGpus"] = config.kubernetes.rollout.max_extra_gpus
    if config.kubernetes.canary_metrics.prometheus is not None:  # what a canary is judged from (set: the intent changes)
        intent["canaryPrometheus"] = config.kubernetes.canary_metrics.prometheus
    return naming.intent_hash(intent)


def new_idempotency_key() -> str:
    return "deploy-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def history(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The deploys the stack's outputs record (the last :data:`~infercrane.shell.outputs.DEPLOY_HISTORY`)."""
    return [h for h in urns.stack_outputs(state).get("deploys") or [] if isinstance(h, dict)]


def record_of(deploys: list[dict[str, Any]], key: str, intent: str) -> dict[str, Any] | None:
    """The record ``key`` left (None: it was never deployed); one for another intent is refused."""
    record = next((h for h in reversed(deploys) if h.get("key") == key), None)
    if record and record.get("intent") != intent:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used at {record.get('at')} for a different intent "
            f"({str(record.get('intent'))[:19]}…, now {intent[:19]}…); nothing was applied.",
            fix="use a new --idempotency-key for a new intent (or omit it to get one)",
        )
    return record
