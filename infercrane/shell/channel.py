"""What one in-process caller and one run of the program pass each other: :class:`Channel`, and
the :class:`Prepared` render and preflight a command hands over. No Pulumi import: the engine
layer builds these before the SDK is loaded. Pulumi shell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infercrane.core.errors import InferCraneError
from infercrane.core.events import Sink
from infercrane.core.model import config as cfg
from infercrane.core.plan.waves import Step
from infercrane.core.render import RenderedReplica
from infercrane.shell.gate import Gate


@dataclass(frozen=True)
class Prepared:
    """What a command prepared once for one run of the program: the replicas rendered and guarded
    from the config it hands over (caches verified), and the preflight's report on exactly those
    manifests, which passed -- the program registers them without rendering again, a second LIST
    or a dry run per object."""

    rendered: Sequence[RenderedReplica]
    report: Any  # live.preflight.Report


@dataclass
class Channel:
    """What one in-process caller (the Automation API, :mod:`infercrane.engine.workspace`) and one
    run of the program pass each other -- explicitly, instead of module globals.

    In: ``config`` -- the validated config the caller prepared (``plan MODEL`` adds its intent
    without touching the stack file); else the program reads the stack's. ``deploy_record`` -- set
    by ``infercrane deploy``: the idempotency history read from the stack's outputs and, on the
    run that completes the deploy, this deploy's entry (exported as ``deploys``, so the record is
    written by the update it describes, only if it succeeds). ``step`` -- one step of a rollout
    the caller drives (:mod:`infercrane.core.plan.rollout`), with ``held`` the recorded manifests of
    the replicas it holds; ``driven`` -- the caller rolls in waves, so the program does not refuse
    a change that needs them; ``legacy`` -- key -> slot name in the state (exact), for aliases;
    ``prepared`` -- the caller's render and preflight for this very run (:class:`Prepared`);
    without it (plain ``pulumi``, a refusal to record, a later rollout step) the program renders,
    verifies the caches and runs its own preflight.
    ``gate`` -- the run started before the caller's preflight was done
    (:mod:`infercrane.shell.gate`): the program registers its provider, then waits there for the
    rest of its inputs. ``client`` -- the command's live client (under plain ``pulumi`` the program
    builds its own). ``progress`` -- the caller's sink for the readiness wait's typed
    :class:`~infercrane.core.events.Readiness` events (without it, plain ``pulumi``: log lines).
    Out: ``error`` -- the program's typed, user-facing failure, re-raised by the caller instead of
    parsing the engine's output."""

    deploy_record: dict[str, Any] | None = None
    config: cfg.InferCraneConfig | None = None
    step: Step | None = None
    held: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    driven: bool = False
    legacy: Mapping[str, str] | None = None
    prepared: Prepared | None = None
    gate: Gate | None = None
    progress: Sink | None = None
    client: Any = None  # the command's lightkube client: an in-process run builds none of its own
    error: InferCraneError | None = None
