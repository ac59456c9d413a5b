"""What one ``plan`` or ``deploy`` knows about its stack, worked out once and handed down: the
config it acts on, the command's one live client, the stack id its objects carry and the inputs
its provider is recorded with. The checks and deletions take these :class:`Facts`, never the
pieces to work them out again. Engine layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infercrane.core import naming
from infercrane.core.model import config as cfg
from infercrane.core.render import RenderedReplica
from infercrane.core.state import urns

if TYPE_CHECKING:  # lightkube is imported where a request is made
    from lightkube import Client


@dataclass(frozen=True)
class Facts:
    stack: str
    config: cfg.InferCraneConfig
    client: Client
    stack_id: str  # what this stack's objects carry (naming.ANNOTATION_STACK)
    provider: Mapping[str, Any]  # the provider's inputs as the state records them

    @classmethod
    def of(cls, stack: str, config: cfg.InferCraneConfig, client: Client) -> Facts:
        from importlib.metadata import version

        provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
        return cls(stack, config, client, naming.stack_id(stack), provider)

    @classmethod
    def gather(cls, stack: str, config: cfg.InferCraneConfig) -> Facts:
        """The facts of ``stack`` for ``config``, with the command's one client (a kubeconfig or
        context that is not there fails here, before anything else: ClusterError)."""
        from infercrane.live import cluster

        return cls.of(stack, config, cluster.client(config.kubernetes))

    def acting_on(self, config: cfg.InferCraneConfig) -> Facts:
        """The same facts for ``config`` -- the stack's, with only the model caches the cluster
        verified mapped (the target, and so the client and provider, are the same)."""
        return dataclasses.replace(self, config=config)

    def registrations(self, rendered: Sequence[RenderedReplica]) -> list[urns.Registration]:
        """What one run of the program registers for ``rendered`` (:func:`urns.registrations`)."""
        return urns.registrations(self.stack, rendered, self.provider)
