"""plan, deploy (idempotent), destroy: the CLI's engine operations and their summaries.

Per replica, the engine's steps become one action word (plan: create / configure / unchanged /
replace / delete; deploy: created / configured / unchanged / replaced / deleted). A deploy is
recorded in the stack's outputs (by the same ``up``) with its idempotency key and the stack's intent
hash, so a retry with the same key and intent reports the recorded result without a second change,
and the same key with another intent is refused. Engine layer.
"""

from __future__ import annotations

import datetime as dt
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pulumi.automation import EngineEvent, OpType

from infercrane.core import config as cfg
from infercrane.core import naming, urns
from infercrane.core.errors import ClusterError, ConfigError, GuardError, IdempotencyConflict, InferCraneError, PreflightRefused
from infercrane.core.intent import intent as replica_intent
from infercrane.core.manifests import render_checked
from infercrane.core.urns import KIND_OF_TOKEN, slot_of, slots
from infercrane.engine.workspace import Engine
from infercrane.project import paths, stackfile

# Engine operation names as a person reads them, in the order they are listed.
CHANGE_WORDS: Final = {
    "create": "to create",
    "update": "to update",
    "replace": "to replace",
    "delete": "to delete",
    "same": "unchanged",
}
DONE_CHANGE_WORDS: Final = {
    "create": "created",
    "update": "updated",
    "replace": "replaced",
    "delete": "deleted",
    "same": "unchanged",
}


def describe_changes(counts: Mapping[Any, int] | None, *, done: bool = False) -> str:
    """``{'create': 8}`` -> ``8 to create`` (``8 created`` when done); other operations by name.
    Keys may be the Automation API's ``OpType`` members (a str enum) or plain strings."""
    words = DONE_CHANGE_WORDS if done else CHANGE_WORDS
    plain = {str(getattr(op, "value", op)): n for op, n in (counts or {}).items()}
    items = sorted(plain.items(), key=lambda kv: (list(words).index(kv[0]) if kv[0] in words else len(words), kv[0]))
    return ", ".join(f"{n} {words.get(op, op)}" for op, n in items if n) or "nothing"


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


def _both(first: Callable[[EngineEvent], None], second: Callable[[EngineEvent], None] | None) -> Callable[[EngineEvent], None]:
    if second is None:
        return first

    def both(event: EngineEvent) -> None:
        first(event)
        second(event)

    return both


class EventCollector:
    """Collects per-slot operations from engine events."""

    def __init__(self) -> None:
        self.ops: dict[str, set[str]] = {}

    def __call__(self, event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata is None:
            return
        slot = slot_of(pre.metadata.urn)
        if slot is not None:
            self.ops.setdefault(slot, set()).add(_op_class(pre.metadata.op))


def summarize(config: cfg.InferCraneConfig, collector: EventCollector, stack: str) -> list[ReplicaAction]:
    rendered = render_checked(config, stack)
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
    root = paths.project_root()
    if replica is None:
        yield root
        return
    real = paths.stack_file(stack, root)
    stackfile.read_stack_values(real)  # missing or malformed: the error names the real file, not a copy
    tmp = Path(tempfile.mkdtemp(prefix="infercrane-plan-"))
    try:
        shutil.copy(root / "Pulumi.yaml", tmp / "Pulumi.yaml")
        shutil.copytree(root / "stacks", tmp / "stacks")
        from infercrane.project.stackfile import upsert_replica

        upsert_replica(paths.stack_file(stack, tmp), replica, stackfile.check_stack_file(real))
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Raised by the program's own checks inside `pulumi up`, before anything is applied.
REFUSED_BEFORE_APPLY: Final = (ConfigError, GuardError, ClusterError, PreflightRefused)


def stack_outputs(state: dict[str, Any]) -> dict[str, Any]:
    """The stack outputs recorded in a state (``Engine.state``): the root Stack resource's outputs."""
    root: dict[str, Any] = next((r for r in state.get("resources") or [] if r.get("type") == "pulumi:pulumi:Stack"), {})
    return dict(root.get("outputs") or {})


def resolve_pending_creates(engine: Engine, config: cfg.InferCraneConfig, state: dict[str, Any]) -> list[str]:
    """Clear the pending CREATE operations an interrupted update left in the state (Pulumi warns
    about them on every run and never resolves them itself), after checking each live object.

    An object that exists and carries this stack's exact ownership is ours: clearing the pending
    operation lets the next ``up`` apply to it again (server-side apply adopts only after the
    preflight has verified that ownership). An object that does not exist needs nothing. An object
    with our name but not our ownership is refused: the state is left as it is, and nothing applied."""
    from infercrane.live import cluster

    pending = [op for op in state.get("pending_operations") or [] if op.get("type") == "creating"]
    if not pending:
        return []
    client = cluster.client(config.kubernetes)
    live = cluster.live_by_name(client, config.kubernetes, KIND_OF_TOKEN.values())
    stack_id = naming.stack_identity(cfg.PROJECT, engine.stack_name)
    foreign = []
    names = []
    for op in pending:
        res = op.get("resource") or {}
        kind = KIND_OF_TOKEN.get(res.get("type", ""))
        name = ((res.get("inputs") or {}).get("metadata") or {}).get("name")
        if kind is None or name is None:
            continue
        names.append(f"{kind}/{name}")
        obj = live.get((kind, name))
        reasons = naming.not_owned(obj, namespace=config.kubernetes.namespace, stack=stack_id) if obj is not None else []
        if reasons:
            foreign.append(f"{kind}/{name}: {'; '.join(reasons)}")
    if foreign:
        raise InferCraneError(
            "an interrupted update left pending creates for objects that are not this stack's; nothing was applied:\n"
            + "\n".join(f"- {f}" for f in foreign),
            fix="rename or delete the foreign objects yourself, then deploy again",
        )
    engine.refresh(clear_pending_creates=True)
    return [
        f"note: cleared {len(pending)} pending create(s) left by an interrupted update ({', '.join(names)}); "
        "the live objects carry this stack's exact ownership and are applied again"
    ]


def live_check(config: cfg.InferCraneConfig, stack: str) -> Any:
    """The preflight's report (ownership, conflicts, strict dry run, live vs rendered), or None
    when it refuses: the program's own preflight then refuses again inside the update, where the
    refusal is recorded as a failed update (promote's health gate reads the stack's history)."""
    from infercrane.live import preflight

    manifests = [m for r in render_checked(config, stack) for m in r.manifests]
    try:
        return preflight.run(config, manifests, naming.stack_identity(cfg.PROJECT, stack))
    except PreflightRefused:
        return None


def needs_refresh(config: cfg.InferCraneConfig, stack: str) -> bool:
    """Whether Pulumi's state may be stale: some live object differs from what the stack renders.

    When all are present and unchanged, the state can only differ where applying converges
    anyway, so ``--refresh`` (one GET per object in Pulumi, seconds at fleet size) is skipped;
    when an object was deleted or changed out of band, the refresh lets Pulumi see it and ``up``
    repairs it."""
    report = live_check(config, stack)
    return bool(report is not None and report.drift)


def stack_intent(config: cfg.InferCraneConfig) -> str:
    """One hash over every replica's intent hash and the target identity."""
    parts = [config.kubernetes.context, config.kubernetes.namespace] + [replica_intent(config, r) for r in config.replicas]
    return naming.intent_hash({"stack": parts})


def new_idempotency_key() -> str:
    return "deploy-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


@dataclass
class DeployResult:
    key: str
    intent: str
    status: str  # succeeded | replayed
    actions: list[ReplicaAction]
    recorded_at: str


def deploy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    key: str,
    on_output: Callable[[str], None] | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
) -> DeployResult:
    """``pulumi up`` guarded by an idempotency key (see module docstring).

    The record is the stack output ``deploys`` (the last :data:`program.DEPLOY_HISTORY` keys with
    their intent and time), written by the same ``up`` that applies the change -- so it exists only
    if that update succeeded, costs no extra engine call, and is gone with the state it describes
    (a replay never claims a result that no longer stands). Reading it is one ``stack output``."""

    intent = stack_intent(config)
    state = engine.state()  # one `pulumi stack export`: the idempotency record and pending operations
    history = [h for h in stack_outputs(state).get("deploys") or [] if isinstance(h, dict)]
    record = next((h for h in reversed(history) if h.get("key") == key), None)
    if record and record.get("intent") != intent:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used at {record.get('at')} for a different intent "
            f"({str(record.get('intent'))[:19]}…, now {intent[:19]}…); nothing was applied.",
            fix="use a new --idempotency-key for a new intent (or omit it to get one)",
        )
    if record:
        return DeployResult(key, intent, "replayed", [], str(record.get("at")))
    for note in resolve_pending_creates(engine, config, state):
        print(note, file=sys.stderr, flush=True)  # a note for the person, not for the log file
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record_out = {"history": history, "entry": {"key": key, "intent": intent, "at": at}}
    collector = EventCollector()
    refresh = needs_refresh(config, engine.stack_name)
    try:
        engine.up(on_output=on_output, on_event=_both(collector, on_event), refresh=refresh, deploy_record=record_out)
    except InferCraneError as exc:
        # Refused by the program's own checks inside the update: nothing was applied.
        exc.applied_nothing = isinstance(exc, REFUSED_BEFORE_APPLY)  # type: ignore[attr-defined]
        raise
    return DeployResult(key, intent, "succeeded", summarize(config, collector, engine.stack_name), at)


@dataclass
class PlanResult:
    actions: list[ReplicaAction]
    basis: str  # "state+live" (proven no-op, no engine run) or "pulumi preview"
    why_preview: list[str] = field(default_factory=list)  # why the state+live proof did not hold

    @property
    def changes_pending(self) -> bool:
        return any(a.action != "same" for a in self.actions)


def proven_no_op(config: cfg.InferCraneConfig, stack: str, state: Mapping[str, Any]) -> list[str]:
    """Why a ``pulumi preview`` could have something to do; empty when it cannot.

    Nothing to do is proven when (1) the checkpoint records exactly the resources the program
    registers for this config, with exactly the inputs it would send (the rendered manifests and
    the provider's explicit settings and SDK version), with no pending operation, and (2) every
    live object is present and a strict server-side dry run of its manifest changes nothing (the
    preflight, run before this). Pulumi's own diff compares the same two things: recorded inputs
    with new inputs, and -- with server-side apply -- a dry run against the live object."""
    from importlib.metadata import version

    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
    return urns.state_matches(state, urns.registrations(stack, render_checked(config, stack), provider))


def plan(
    engine: Engine,
    config: cfg.InferCraneConfig,
    on_output: Callable[[str], None] | None = None,
    *,
    full: bool = False,
    on_event: Callable[[EngineEvent], None] | None = None,
) -> PlanResult:
    """The plan of a stack. When the state and the live objects prove there is nothing to do
    (:func:`proven_no_op`), every replica is ``same`` without an engine run (as fast as ``kubectl
    diff``); otherwise -- or with ``full`` -- ``pulumi preview`` computes it (with ``--refresh``
    when a live object drifted)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = None if full else pool.submit(engine.state)  # in parallel with the preflight
        report = live_check(config, engine.stack_name)
        state = reading.result() if reading is not None else None
    why: list[str] = ["--full-preview"] if full else []
    if report is None:
        why.append("the preflight refuses")
    elif report.drift:
        why.append(f"{len(report.drift)} live object(s) missing or different: {', '.join(report.drift[:3])}")
    if state is not None:
        why += proven_no_op(config, engine.stack_name, state)
    if not why:
        return PlanResult(summarize(config, EventCollector(), engine.stack_name), "state+live")
    collector = EventCollector()
    engine.preview(on_output=on_output, on_event=_both(collector, on_event), refresh=bool(report is not None and report.drift))
    return PlanResult(summarize(config, collector, engine.stack_name), "pulumi preview", why)
