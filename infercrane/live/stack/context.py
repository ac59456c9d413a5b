"""What one run knows about its stack, worked out once and handed down -- the one place that
verifies the model caches, renders, runs the preflight and plans the rollout, for ``infercrane``
commands and for the program under plain ``pulumi`` alike.

A :class:`StackContext` holds the config it acts on, the command's one connection to the
cluster, the stack id its objects carry and the inputs its provider is recorded with. Checks,
deletions and recovery take it, never the pieces to work them out again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infercrane.core import naming
from infercrane.core.errors import CacheRefused, PreflightRefused
from infercrane.core.model import config as cfg
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.waves import Rollout
from infercrane.core.render import RenderedReplica
from infercrane.core.render.manifests import guarded
from infercrane.core.state import urns

if TYPE_CHECKING:  # lightkube is imported where a request is made
    from infercrane.live.client.api import Live
    from infercrane.live.stack.preflight import Report


@dataclass(frozen=True)
class Prepared:
    """What a command prepared once for one run of the program: the replicas rendered and guarded
    from the config it hands over (caches verified), and the preflight's report on exactly those
    manifests, which passed -- the program registers them without rendering again, a second LIST
    or a dry run per object."""

    rendered: Sequence[RenderedReplica]
    report: Report | None  # None: the preflight refused; the program runs its own on this render


@dataclass(frozen=True)
class StackContext:
    stack: str
    config: cfg.InferCraneConfig
    live: Live  # the command's one connection to its cluster
    stack_id: str  # what this stack's objects carry (naming.ANNOTATION_STACK)
    provider: Mapping[str, Any]  # the provider's inputs as the state records them
    caches_refused: bool = False  # a required model cache is not there (verify_caches, deferred)

    @classmethod
    def of(cls, stack: str, config: cfg.InferCraneConfig, live: Live) -> StackContext:
        from importlib.metadata import version

        provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
        return cls(stack, config, live, naming.stack_id(stack), provider)

    @classmethod
    def connect(cls, stack: str, config: cfg.InferCraneConfig) -> StackContext:
        """The context of ``stack`` for ``config``, with its one connection (a kubeconfig or
        context that is not there fails here, before anything else: ClusterError)."""
        from infercrane.live.client.api import Live

        return cls.of(stack, config, Live.connect(config.kubernetes))

    def registrations(self, rendered: Sequence[RenderedReplica]) -> list[urns.Registration]:
        """What one run of the program registers for ``rendered`` (:func:`urns.registrations`)."""
        return urns.registrations(self.stack, rendered, self.provider)

    def render(self) -> list[RenderedReplica]:
        """The config rendered for this stack and guarded (GuardError on any violation)."""
        return guarded(self.config, self.stack_id)

    def prepare(
        self,
        warn: Callable[[str], None],
        *,
        read_only: bool = False,
        defer_refusal: bool = False,
        beside: Callable[[StackContext, Sequence[RenderedReplica]], None] | None = None,
    ) -> tuple[StackContext, Prepared]:
        """The one order of a run's checks, for ``plan``, ``plan --read-only``, ``deploy`` and the
        program: the model caches verified (:meth:`verify_caches`), the config rendered and guarded
        (:meth:`render`), the preflight on exactly that render (:meth:`preflight`) -- this context
        acting on the verified config, and what it prepared. ``defer_refusal``: a command before
        its run, whose refusal is the run's; a read-only plan, which no run follows, and the program
        refuse at once. ``beside``: what starts on the render while the preflight runs (``deploy``:
        the engine's first run)."""
        ctx = self.verify_caches(warn, defer_refusal=defer_refusal)
        rendered = ctx.render()
        if beside is not None:
            beside(ctx, rendered)
        return ctx, Prepared(rendered, ctx.preflight(rendered, read_only=read_only, defer_refusal=defer_refusal))

    def verify_caches(self, warn: Callable[[str], None], *, defer_refusal: bool = False) -> StackContext:
        """This context acting on the config with only the model caches the cluster verifies
        mapped (``prefer``: the others passed to ``warn``, their replicas download).

        A required cache that is not there raises CacheRefused -- or, with ``defer_refusal`` (a
        command before its run), sets ``caches_refused`` and leaves the config as it is: the
        program refuses again inside the update, where the refusal is recorded as a failed update
        (promote's health gate reads the history)."""
        from infercrane.live.stack import preflight

        try:
            verdict = preflight.verify_cache(self.config, self.live)
        except CacheRefused:
            if not defer_refusal:
                raise
            return dataclasses.replace(self, caches_refused=True)
        for warning in verdict.warnings:
            warn(warning)
        return dataclasses.replace(self, config=verdict.config)

    def preflight(
        self, rendered: Sequence[RenderedReplica], *, read_only: bool = False, defer_refusal: bool = False
    ) -> Report | None:
        """The preflight's report on ``rendered`` (ownership, conflicts, strict dry run -- or,
        ``read_only``, the live form and managedFields -- live vs rendered, what runs).

        A refusal raises PreflightRefused -- or, with ``defer_refusal``, gives None, as do caches
        refused so: the program's own preflight then refuses again inside the update, where it is
        recorded (as :meth:`verify_caches` says)."""
        from infercrane.live.stack import preflight

        if self.caches_refused and defer_refusal:
            return None
        manifests = [m for r in rendered for m in r.manifests]
        try:
            return preflight.run(self.config, manifests, self.stack_id, self.live, read_only=read_only)
        except PreflightRefused:
            if not defer_refusal:
                raise
            return None

    def rollout(
        self,
        rendered: Sequence[RenderedReplica],
        report: Report | None,
        state: Mapping[str, Any],
        unproven: frozenset[str] = frozenset(),
        started: Mapping[str, Gpus] | None = None,
    ) -> Rollout | None:
        """The waves from what runs (``report``) to ``rendered`` -- None when the preflight
        refused: nothing rolls -- counting the replicas the state records in another namespace
        (a ``namespace`` switch); ``started``: the GPUs the stack recorded per endpoint at the
        change's start (:mod:`infercrane.core.plan.marks`)."""
        if report is None:
            return None
        from infercrane.live.stack import running

        elsewhere = running.recorded_elsewhere(self.config, urns.recorded_namespaces(state), self.live)
        return running.plan_rollout(self.config, rendered, report, self.stack_id, elsewhere, unproven, started)
