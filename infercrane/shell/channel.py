"""What one in-process caller and one run of the program pass each other: :class:`Channel`, and
the :class:`Prepared` render and preflight a command hands over. No Pulumi import: the engine
layer builds these before the SDK is loaded. Pulumi shell.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from infercrane.core.errors import InferCraneError
from infercrane.core.events import Sink
from infercrane.core.plan.waves import Rollout
from infercrane.shell.gate import Gate, Handover

if TYPE_CHECKING:  # the live layer is imported where it connects
    from infercrane.live.stack.context import Prepared, StackContext

#: Plain ``pulumi preview`` as the read-only plan (:attr:`Channel.read_only`): ``1`` sets it.
READ_ONLY_ENV: Final = "INFERCRANE_PLAN_READ_ONLY"


@dataclass(frozen=True)
class Pinned:
    """A replica registered exactly as the state recorded it before the deploy (a rollback): its
    manifests and its component's facts, as recorded then."""

    manifests: Sequence[Mapping[str, Any]]
    summary: Mapping[str, Any]


@dataclass
class Channel:
    """What one in-process caller (the Automation API, :mod:`infercrane.engine.workspace`) and one
    run of the program pass each other -- explicitly, instead of module globals. Under plain
    ``pulumi`` every field keeps its default and the program reads and checks for itself."""

    # In.
    #: The idempotency history read from the stack's outputs and, on the run that completes a
    #: deploy, its entry: exported as ``deploys`` by the update it describes, only if it succeeds.
    deploy_record: dict[str, Any] | None = None
    #: The caller's stack context: the validated config it prepared (``plan MODEL`` adds its intent
    #: without touching the stack file, caches verified) and the command's one connection to the
    #: cluster -- an in-process run builds none of its own. None: the program reads the stack's
    #: config and connects itself.
    context: StackContext | None = None
    #: The rollout the caller drives, one lane per endpoint (:mod:`infercrane.core.plan.rollout`):
    #: the program registers each stage's replicas when its lane reaches it
    #: (:mod:`infercrane.shell.lanes`). None: every replica at once.
    rollout: Rollout | None = None
    #: Deletes what a lane's stage ends by deleting (keys that leave; a moved key's old form), by
    #: exact ownership, until gone; returns object name -> key. Called from a worker thread.
    delete: Callable[[Collection[str]], Mapping[str, str]] | None = None
    #: Deletes the workload objects of keys a stage recreates (:attr:`~infercrane.core.plan.waves.Stage.recreate`)
    #: by exact ownership, until gone, before the stage registers them; returns object name -> key.
    #: None: Pulumi's delete-before-replace alone (plain ``pulumi up``: a key its state records).
    recreate: Callable[[Collection[str]], Mapping[str, str]] | None = None
    #: What Pulumi would delete by name at the end of this run that is no longer this stack's, asked
    #: again once every lane is done (a rollout can span hours; :func:`engine.deletions.foreign_deletions`).
    recheck: Callable[[], Sequence[str]] | None = None
    #: A rejected canary's rollback (:mod:`infercrane.core.plan.rollback`): the keys its lanes
    #: register as the state recorded them before the deploy. The run then ends failed on purpose
    #: (:class:`~infercrane.core.stops.RolledBack` once every lane is done): Pulumi deletes nothing.
    #: None: not a rollback.
    rollback: Mapping[str, Pinned] | None = None
    #: The caller rolls in waves: the program does not refuse a change that needs them.
    driven: bool = False
    #: A preview with get and list only (``plan --read-only``; plain ``pulumi preview`` under
    #: ``INFERCRANE_PLAN_READ_ONLY=1``): the preflight judges each object from its live form and
    #: managedFields, never by a dry run; an update under it is refused.
    read_only: bool = False
    #: key -> slot name in the state (exact), for aliases.
    legacy: Mapping[str, str] | None = None
    #: The caller's render and preflight for this very run; None (a refusal to record): the
    #: program renders, verifies the caches and runs its own preflight.
    prepared: Prepared | None = None
    #: The run started before the caller's preflight was done (:mod:`infercrane.shell.gate`): the
    #: program registers its provider, then waits there for the rest of its inputs.
    gate: Gate | None = None
    #: The caller's sink for the readiness wait's :class:`~infercrane.core.events.Readiness`
    #: events; None: log lines.
    progress: Sink | None = None
    # Out.
    #: The program's typed, user-facing failure, re-raised by the caller instead of parsing the
    #: engine's output.
    error: InferCraneError | None = None

    def hand_over(self, late: Handover) -> None:
        """Take what a gated run gets once the caller's preflight is done."""
        self.rollout, self.deploy_record, self.prepared = late.rollout, late.deploy_record, late.prepared
