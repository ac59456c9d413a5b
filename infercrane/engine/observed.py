"""What a ``plan`` or ``deploy`` observed before its first engine run, taken once -- the state,
the render, the preflight's report, the rollout -- and what they decide: whether the run needs
``--refresh``, whether nothing is left to do, whether a replay's record still stands. Engine layer.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infercrane.core.plan.actions import Action
from infercrane.core.plan.states import ReplicaState
from infercrane.core.plan.waves import Rollout
from infercrane.core.render import RenderedReplica
from infercrane.core.state import urns
from infercrane.live.stack.context import StackContext

if TYPE_CHECKING:
    from infercrane.live.stack.preflight import Report


@dataclass(frozen=True)
class Observed:
    ctx: StackContext  # acting on the config with its verified model caches
    state: Mapping[str, Any]  # the stack's state before the first run
    rendered: Sequence[RenderedReplica]  # ctx.config, rendered
    report: Report | None  # the preflight's report; None: it refuses (StackContext.preflight)

    @functools.cached_property
    def rollout(self) -> Rollout | None:
        """The waves from what runs to ``rendered`` (:meth:`StackContext.rollout`); None: nothing rolls."""
        return self.ctx.rollout(self.rendered, self.report, self.state)

    def needs_refresh(self) -> bool:
        """Whether the engine must read the recorded objects back first (``--refresh``): only when a
        live object drifted from a record Pulumi would otherwise trust, or a recorded one is gone
        (:func:`urns.stale_records`). A new object or an intended change needs no refresh -- at
        fleet size it is one GET per object."""
        if self.report is None or not self.report.drift:
            return False
        gone = [k for k, a in self.report.actions.items() if a is Action.CREATE]
        return bool(urns.stale_records(self.state, self.ctx.registrations(self.rendered), self.report.drift, gone))

    def no_op_doubts(self) -> list[str]:
        """Why a ``pulumi preview`` could have something to do; empty when it cannot.

        Nothing to do is proven when (1) the checkpoint records exactly the resources the program
        registers for this config, with exactly the inputs it would send (the rendered manifests and
        the provider's explicit settings and SDK version), with no pending operation, and (2) every
        live object is present and a strict server-side dry run of its manifest changes nothing (the
        preflight). Pulumi's own diff compares the same two things: recorded inputs with new
        inputs, and -- with server-side apply -- a dry run against the live object."""
        why: list[str] = []
        if self.report is None:
            why.append("the preflight refuses")
        elif self.report.drift:
            why.append(f"{len(self.report.drift)} live object(s) missing or different: {', '.join(self.report.drift[:3])}")
        return why + urns.state_matches(self.state, self.ctx.registrations(self.rendered))

    def replay_doubts(self) -> list[str]:
        """Why what runs does not show a deploy of this config as complete; empty when it does --
        the evidence a replay needs beyond its record: the preflight passes, every live object is
        exactly the rendered one, the state records exactly this config's resources, no replica of
        a key that left the config is left (an orphan deletion that failed), and every replica is
        ready."""
        if self.report is None:
            return ["the preflight refuses now"]
        if self.report.drift:
            return [f"{len(self.report.drift)} live object(s) are missing or differ ({', '.join(self.report.drift[:3])})"]
        from infercrane.live.stack import running

        config = self.ctx.config
        keys = {r.key for r in config.replicas}
        members = running.live_replicas(config, self.report.live, self.ctx.stack_id, predictors=self.report.predictors)
        left = sorted(m.key for m in members if m.key not in keys)
        if left:
            return [f"replica(s) {', '.join(left)} of keys that left the config still run"]
        waiting = sorted(m.key for m in members if m.state != ReplicaState.SETTLED)
        if waiting:
            return [f"replica(s) {', '.join(waiting)} are not ready"]
        return [f"the state differs: {why}" for why in urns.state_matches(self.state, self.ctx.registrations(self.rendered))]


def could_need_refresh(ctx: StackContext, state: Mapping[str, Any], rendered: Sequence[RenderedReplica]) -> bool:
    """Whether some verdict of the preflight could make the first run need ``--refresh``
    (:meth:`Observed.needs_refresh`) by a drift alone: only an object whose record Pulumi would
    trust can. With none -- a first deploy, a lost state, every object changing -- the run can start
    before the preflight is done (:mod:`infercrane.shell.gate`); should the preflight find a recorded
    object gone, that run is called off and started again with ``--refresh``."""
    every = [f"{m['kind']}/{m['metadata']['name']}" for r in rendered for m in r.manifests]
    return bool(urns.stale_records(state, ctx.registrations(rendered), every))
