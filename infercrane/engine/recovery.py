"""What a killed run left behind, found before the next one and settled only on evidence: the
pending creates an interrupted update left in the state (cleared when each live object is this
stack's), and the check a repair of a damaged checkpoint runs before restoring Pulumi's backup
(:func:`infercrane.engine.backend.repair_torn_writes`). Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import InferCraneError, bullets
from infercrane.core.state import urns
from infercrane.core.state.urns import KIND_OF_TOKEN
from infercrane.engine.workspace import Engine
from infercrane.live.stack.context import StackContext


def resolve_pending_creates(engine: Engine, ctx: StackContext, state: dict[str, Any]) -> list[str]:
    """Clear the pending CREATE operations an interrupted update left in the state (Pulumi warns
    about them on every run and never resolves them itself), after checking each live object.

    An object that exists and carries this stack's exact ownership is ours: clearing the pending
    operation lets the next ``up`` apply to it again (server-side apply adopts only after the
    preflight has verified that ownership). An object that does not exist needs nothing. An object
    with our name but not our ownership is refused: the state is left as it is, and nothing applied."""
    pending = [op for op in state.get("pending_operations") or [] if op.get("type") == "creating"]
    if not pending:
        return []
    t = ctx.config.kubernetes
    # This stack's kinds; the others (another workload API's, the DRA claim templates) only when
    # this identity may list them: a right the seed's Role does not grant is never required.
    live = ctx.live.by_name(t.object_kinds, optional=KIND_OF_TOKEN.values())
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
        reasons = naming.not_owned(obj, namespace=t.namespace, stack=ctx.stack_id) if obj is not None else []
        if reasons:
            foreign.append(f"{kind}/{name}: {'; '.join(reasons)}")
    if foreign:
        raise InferCraneError(
            "an interrupted update left pending creates for objects that are not this stack's; nothing was applied:\n"
            + bullets(foreign),
            fix="rename or delete the foreign objects yourself, then deploy again",
        )
    engine.refresh(clear_pending_creates=True)
    return [
        f"note: cleared {len(pending)} pending create(s) left by an interrupted update ({', '.join(names)}); "
        "the live objects carry this stack's exact ownership and are applied again"
    ]


def vouch_for(ctx: StackContext) -> Callable[[Mapping[str, Any]], str | None]:
    """The check a repair runs before it restores Pulumi's backup checkpoint of ``stack``
    (:func:`infercrane.engine.backend.repair_torn_writes`): the live objects of this stack's exact
    ownership that existed when the backup was written must be recorded in it. One LIST per kind,
    run only when a checkpoint is damaged."""

    def vouch(checkpoint: Mapping[str, Any]) -> str | None:
        t = ctx.config.kubernetes
        live = {
            ref: str(obj["metadata"].get("creationTimestamp") or "")
            for ref, obj in ctx.live.by_name(t.object_kinds).items()
            if not naming.not_owned(obj, namespace=t.namespace, stack=ctx.stack_id)
        }
        older = urns.unrecorded_before(checkpoint, live)
        return f"it does not record {', '.join(older)}, which existed when it was written" if older else None

    return vouch
