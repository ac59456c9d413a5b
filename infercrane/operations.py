"""plan, deploy (idempotent), destroy: the CLI's engine operations and their summaries.

Per replica, the engine's steps become one action word (plan: create / configure / unchanged /
replace / delete; deploy: created / configured / unchanged / replaced / deleted). A deploy is
recorded as a stack tag keyed by its idempotency key with the stack's intent hash, so a retry with
the same key and intent reports the recorded result without a second change, and the same key with
another intent is refused. Operations layer.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pulumi.automation import EngineEvent, OpType

from infercrane import config as cfg
from infercrane import naming
from infercrane.errors import InferCraneError
from infercrane.program import slots
from infercrane.render import render_all
from infercrane.stack import Engine

COMPONENT_TYPE: Final = "infercrane:index:Replica"
PLAN_WORDS: Final = {"create": "create", "update": "configure", "same": "unchanged", "replace": "replace", "delete": "delete"}
DONE_WORDS: Final = {"create": "created", "update": "configured", "same": "unchanged", "replace": "replaced", "delete": "deleted"}
TAG_PREFIX: Final = "infercrane-idem-"


class IdempotencyConflict(InferCraneError):
    """The idempotency key was already used for a different intent."""


@dataclass
class ReplicaAction:
    slot: str
    action: str  # create / update / same / replace / delete (engine vocabulary)
    key: str | None = None
    gpu: str | None = None
    image: str | None = None
    objects: list[str] = field(default_factory=list)


def _op_class(op: str) -> str:
    if op in (OpType.CREATE_REPLACEMENT, OpType.DELETE_REPLACED, OpType.REPLACE, "discard-replaced"):
        return "replace"
    if op == OpType.CREATE:
        return "create"
    if op == OpType.DELETE:
        return "delete"
    if op == OpType.UPDATE:
        return "update"
    return "same"


def _slot_of(urn: str) -> str | None:
    """The replica slot of a component or child URN (``…::infercrane:index:Replica…::<name>``)."""
    if f"::{COMPONENT_TYPE}" not in urn:
        return None
    name = urn.rsplit("::", 1)[1]
    for suffix in ("-deployment", "-service", "-inferenceservice"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


class EventCollector:
    """Collects per-slot operations from engine events."""

    def __init__(self) -> None:
        self.ops: dict[str, set[str]] = {}

    def __call__(self, event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata is None:
            return
        slot = _slot_of(pre.metadata.urn)
        if slot is not None:
            self.ops.setdefault(slot, set()).add(_op_class(pre.metadata.op))


def summarize(config: cfg.InferCraneConfig, collector: EventCollector, stack_id: str) -> list[ReplicaAction]:
    rendered = render_all(config, stack_id)
    out = []
    known = set()
    for slot, r in zip(slots(rendered), rendered, strict=True):
        known.add(slot)
        ops = collector.ops.get(slot, {"same"})
        action = next((a for a in ("replace", "create", "delete", "update") if a in ops), "same")
        out.append(
            ReplicaAction(
                slot,
                action,
                key=r.replica.key,
                gpu=r.replica.gpu,
                image=config.image_for(r.replica),
                objects=[f"{m['kind']}/{m['metadata']['name']}" for m in r.manifests],
            )
        )
    for slot in sorted(collector.ops):
        if slot not in known:
            out.append(ReplicaAction(slot, "delete"))
    return out


@contextmanager
def project_with_intent(stack: str, replica: dict[str, Any] | None) -> Iterator[Path]:
    """The project dir, or a scratch copy whose stack file also holds ``replica`` (for plan MODEL)."""
    root = cfg.project_root()
    if replica is None:
        yield root
        return
    tmp = Path(tempfile.mkdtemp(prefix="infercrane-plan-"))
    try:
        shutil.copy(root / "Pulumi.yaml", tmp / "Pulumi.yaml")
        shutil.copytree(root / "stacks", tmp / "stacks")
        from infercrane.stackfile import upsert_replica

        upsert_replica(cfg.stack_file(stack, tmp), replica)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash and the target identity."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [config.intent(r) for r in config.replicas]
    return naming.intent_hash({"stack": parts})


def _tag_name(key: str) -> str:
    return TAG_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:20]


def new_idempotency_key() -> str:
    return "deploy-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


@dataclass
class DeployResult:
    key: str
    intent: str
    status: str  # succeeded | replayed
    actions: list[ReplicaAction]
    recorded_at: str


def read_record(engine: Engine, key: str) -> dict[str, str] | None:
    tags = engine.stack.workspace.list_tags(engine.stack_name)
    raw = tags.get(_tag_name(key))
    if not raw:
        return None
    status, intent, at = raw.split(" ", 2)
    return {"status": status, "intent": intent, "at": at}


def write_record(engine: Engine, key: str, status: str, intent: str) -> str:
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    engine.stack.workspace.set_tag(engine.stack_name, _tag_name(key), f"{status} {intent} {at}")
    return at


def deploy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    key: str,
    on_output: Callable[[str], None] | None = None,
) -> DeployResult:
    """``pulumi up`` guarded by an idempotency key (see module docstring)."""
    intent = stack_intent(config)
    stack_id = naming.stack_identity(cfg.PROJECT, engine.stack_name)
    record = read_record(engine, key)
    if record and record["intent"] != intent:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used at {record['at']} for a different intent "
            f"({record['intent'][:19]}…, now {intent[:19]}…); nothing was applied.\n"
            "    fix: use a new --idempotency-key for a new intent (or omit it to get one)"
        )
    if record and record["status"] == "succeeded":
        return DeployResult(key, intent, "replayed", [], record["at"])
    write_record(engine, key, "started", intent)
    collector = EventCollector()
    # --refresh: an object deleted or changed out of band is seen and repaired (recreated or
    # re-applied); Deployments carry skipAwait, so the refresh is one GET per object.
    engine.up(on_output=on_output, on_event=collector, refresh=True)
    at = write_record(engine, key, "succeeded", intent)
    return DeployResult(key, intent, "succeeded", summarize(config, collector, stack_id), at)


def plan(engine: Engine, config: cfg.InferCraneConfig, on_output: Callable[[str], None] | None = None) -> list[ReplicaAction]:
    collector = EventCollector()
    engine.preview(on_output=on_output, on_event=collector, refresh=True)
    return summarize(config, collector, naming.stack_identity(cfg.PROJECT, engine.stack_name))
