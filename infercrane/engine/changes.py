"""What an engine run did to each replica: its steps (the Automation API's events) folded into one
:class:`~infercrane.core.plan.actions.Action` per replica, and its objects' outputs as the person's
progress (:class:`~infercrane.core.events.Applied`). Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infercrane.core.events import Applied, Sink
from infercrane.core.model import config as cfg
from infercrane.core.plan.actions import Action, replica_action
from infercrane.core.render import RenderedReplica
from infercrane.core.state.urns import component_of, kind_of

if TYPE_CHECKING:
    from pulumi.automation import EngineEvent


@dataclass
class ReplicaAction:
    """What a plan or deploy does to one replica (``--json``'s ``replicas``)."""

    name: str  # the replica's object name: its component's logical name
    action: Action
    key: str | None = None
    gpu: str | None = None
    image: str | None = None
    objects: list[str] = field(default_factory=list)


def both(first: Callable[[EngineEvent], None], second: Callable[[EngineEvent], None]) -> Callable[[EngineEvent], None]:
    """One engine-event handler that hands each event to ``first``, then ``second``."""

    def handle(event: EngineEvent) -> None:
        first(event)
        second(event)

    return handle


def applied_events(sink: Sink) -> Callable[[EngineEvent], None]:
    """The engine's events as the person's progress: an :class:`~infercrane.core.events.Applied`
    for every Kubernetes object (a component's child, ``$`` in its URN) whose outputs are in."""

    def on_event(event: EngineEvent) -> None:
        out = event.res_outputs_event
        meta = getattr(out, "metadata", None)
        if meta is None or "$" not in str(meta.urn):  # components and the provider are not objects
            return
        replica = component_of(str(meta.urn))
        if replica is not None:
            sink(Applied(replica))

    return on_event


class EventCollector:
    """Collects per-replica operations from engine events (by component name)."""

    def __init__(self) -> None:
        self.ops: dict[str, set[Action]] = {}
        self.created: dict[str, set[str]] = {}  # component -> the kinds of the objects it creates

    def __call__(self, event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata is None:
            return
        name = component_of(pre.metadata.urn)
        if name is not None:
            action = Action.of_step(pre.metadata.op)
            self.ops.setdefault(name, set()).add(action)
            if action is Action.CREATE:
                self.created.setdefault(name, set()).add(kind_of(pre.metadata.urn) or "")

    def action(self, name: str) -> Action:
        """The replica's one action (:func:`~infercrane.core.plan.actions.replica_action`)."""
        ops = self.ops.get(name, set())
        created = self.created.get(name, set())
        by_kind: dict[str, set[Action]] = {kind: {Action.CREATE} for kind in created}
        by_kind["*"] = ops - {Action.CREATE} if created else ops  # the other objects' steps
        return replica_action(by_kind)


def summarize(
    config: cfg.InferCraneConfig,
    collector: EventCollector,
    rendered: Sequence[RenderedReplica],
    keys: Mapping[str, str] | None = None,
) -> list[ReplicaAction]:
    """One action per replica of the config, then one ``delete`` per replica only the engine saw
    (``keys``: object name -> key, for the replicas the state names)."""
    out = []
    known = set()
    for r in rendered:
        known.add(r.name)
        out.append(
            ReplicaAction(
                r.name,
                collector.action(r.name),
                key=r.replica.key,
                gpu=r.replica.gpu,
                image=config.image_for(r.replica),
                objects=[f"{m['kind']}/{m['metadata']['name']}" for m in r.manifests],
            )
        )
    for name in sorted(collector.ops):
        if name not in known and Action.DELETE in collector.ops[name]:
            out.append(ReplicaAction(name, Action.DELETE, key=(keys or {}).get(name)))
    return out
