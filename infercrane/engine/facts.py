"""What one ``plan`` or ``deploy`` knows about its stack, worked out once and handed down: the
config it acts on, the command's one connection to the cluster, the stack id its objects carry and the inputs
its provider is recorded with -- and the reads made with them before a run (the model caches, the
preflight, who serves now). Checks, deletions and recovery take these :class:`Facts`, never the
pieces to work them out again. Engine layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infercrane.core import naming
from infercrane.core.errors import CacheRefused, PreflightRefused
from infercrane.core.events import Note, Sink
from infercrane.core.model import config as cfg
from infercrane.core.plan.waves import Rollout
from infercrane.core.render import RenderedReplica
from infercrane.core.render.manifests import guarded
from infercrane.core.state import urns

if TYPE_CHECKING:  # lightkube is imported where a request is made
    from infercrane.live.api import Live
    from infercrane.live.preflight import Report


@dataclass(frozen=True)
class Facts:
    stack: str
    config: cfg.InferCraneConfig
    live: Live  # the command's one connection to its cluster
    stack_id: str  # what this stack's objects carry (naming.ANNOTATION_STACK)
    provider: Mapping[str, Any]  # the provider's inputs as the state records them
    caches_refused: bool = False  # a required model cache is not there (verify_caches)

    @classmethod
    def of(cls, stack: str, config: cfg.InferCraneConfig, live: Live) -> Facts:
        from importlib.metadata import version

        provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
        return cls(stack, config, live, naming.stack_id(stack), provider)

    @classmethod
    def gather(cls, stack: str, config: cfg.InferCraneConfig) -> Facts:
        """The facts of ``stack`` for ``config``, with the command's one connection (a kubeconfig
        or context that is not there fails here, before anything else: ClusterError)."""
        from infercrane.live.api import Live

        return cls.of(stack, config, Live.connect(config.kubernetes))

    def registrations(self, rendered: Sequence[RenderedReplica]) -> list[urns.Registration]:
        """What one run of the program registers for ``rendered`` (:func:`urns.registrations`)."""
        return urns.registrations(self.stack, rendered, self.provider)

    def render(self) -> list[RenderedReplica]:
        """The config rendered for this stack and guarded (GuardError on any violation)."""
        return guarded(self.config, self.stack_id)

    def verify_caches(self, sink: Sink) -> Facts:
        """These facts acting on the config with only the model caches the cluster verifies mapped
        (``prefer``: the others noted as warnings, their replicas download). When a required cache
        is not there, ``caches_refused`` is set and the config is left as it is: the program
        refuses again inside the update, where the refusal is recorded as a failed update
        (promote's health gate reads the history)."""
        from infercrane.live import preflight

        try:
            verdict = preflight.verify_cache(self.config, self.live)
        except CacheRefused:
            return dataclasses.replace(self, caches_refused=True)
        for warning in verdict.warnings:
            sink(Note(f"warning: {warning}"))
        return dataclasses.replace(self, config=verdict.config)

    def preflight(self, rendered: Sequence[RenderedReplica]) -> Report | None:
        """The preflight's report on ``rendered`` (ownership, conflicts, strict dry run, live vs
        rendered, what runs), or None when it refuses or the caches did: the program's own
        preflight then refuses again inside the update, where it is recorded (as above)."""
        if self.caches_refused:
            return None
        from infercrane.live import preflight

        manifests = [m for r in rendered for m in r.manifests]
        try:
            return preflight.run(self.config, manifests, self.stack_id, self.live)
        except PreflightRefused:
            return None

    def rollout(
        self,
        rendered: Sequence[RenderedReplica],
        report: Report | None,
        state: Mapping[str, Any],
        unproven: frozenset[str] = frozenset(),
    ) -> Rollout | None:
        """The waves from what runs (``report``) to ``rendered`` -- None when the preflight
        refused: nothing rolls -- counting the replicas the state records in another namespace
        (a ``namespace`` switch)."""
        if report is None:
            return None
        from infercrane.live import membership

        elsewhere = membership.recorded_elsewhere(self.config, urns.recorded_namespaces(state), self.live)
        return membership.plan_rollout(self.config, rendered, report, self.stack_id, elsewhere, unproven)
