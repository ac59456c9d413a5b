"""The hand-over point of a deploy whose first ``pulumi up`` starts before its preflight is done.

Starting the engine (``pulumi up``, the language runtime, the provider's plugin and its
configuration, which reads the cluster's OpenAPI document) takes about a second; the preflight
(one LIST per kind and a strict dry run of every object) about as long. When the preflight's
verdict cannot change how the engine is started (:func:`infercrane.engine.operations.deploy`
decides), both run at once: the program registers only its provider -- a Pulumi resource, no
cluster write -- and waits here for the run's inputs (the preflight's report, the rollout),
or for the caller to call the run off, in which case it registers nothing else. Shell layer (no
Pulumi: the engine layer imports it before the SDK is loaded).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infercrane.core.errors import InferCraneError
from infercrane.core.plan.waves import Rollout

if TYPE_CHECKING:
    from infercrane.live.stack.context import Prepared


@dataclass(frozen=True)
class Handover:
    """What a gated run gets once the caller's preflight is done (the
    :class:`~infercrane.shell.channel.Channel` fields of the same names)."""

    rollout: Rollout | None = None
    deploy_record: dict[str, Any] | None = None
    prepared: Prepared | None = None


class Gate:
    """Opened once by the caller, with the run's inputs, or called off with the reason."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._handover = Handover()
        self._reason: InferCraneError | None = None

    def open(self, handover: Handover) -> None:
        """Let the program go on with ``handover``."""
        self._handover = handover
        self._set.set()

    def call_off(self, reason: InferCraneError) -> None:
        """The caller cannot go on (its preflight failed, or it was interrupted): the program
        raises ``reason`` before registering any object."""
        if not self._set.is_set():
            self._reason = reason
            self._set.set()

    def wait(self) -> Handover:
        """The handover (blocks until the caller decides); raises the reason it was called off."""
        self._set.wait()
        if self._reason is not None:
            raise self._reason
        return self._handover
