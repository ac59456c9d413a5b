"""The real Pulumi engine, driven through the Automation API on *the* program.

The program is :func:`infercrane.shell.program.run` -- the steps of the ``main`` that
``__main__.py`` calls, yielding to the SDK's event loop between registrations -- run by the
Python SDK's in-process language server (the Go ``pulumi-language-python`` host is not served by
the module proxy here; see docs/engine.md). Project settings and stack files come
from the project directory (``Pulumi.yaml``, ``stacks/``); state lives in a local file backend.
Engine layer.

Every Automation API call goes through the one :class:`Engine` (its stack, lock clean-up, state
repair and reads); what the plain Pulumi CLI reads and writes of a stack (its export, tags,
history, removal) is :class:`~infercrane.engine.records.StackRecords`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, cast

from infercrane.core.errors import EngineError
from infercrane.core.events import Note, Sink, discard
from infercrane.core.state.urns import legacy_names
from infercrane.engine import runs
from infercrane.engine.backend import Vouch, clear_stale_locks, repair_torn_writes
from infercrane.engine.environment import engine_env, pulumi_root
from infercrane.engine.recognise import translate
from infercrane.engine.records import StackRecords
from infercrane.project.paths import project_root
from infercrane.shell.channel import Channel

if TYPE_CHECKING:
    from pulumi import automation as auto


@cache
def _auto() -> ModuleType:
    """The Automation API, imported on first use: ``destroy`` and the proven ``plan`` never run an
    engine operation, and ``pulumi``'s import (~0.2 s) would sit on their critical path."""
    from pulumi import automation

    return automation


#: What :meth:`Engine.apply` gives the Automation API for the summary it does not read.
_NO_SUMMARY: Final = object()


@dataclass
class Engine(StackRecords):
    """One stack of the project, ready for preview/up/refresh/destroy."""

    stack_name: str
    project_dir: Path = field(default_factory=project_root)
    env: Mapping[str, str] | None = None
    #: Checks a backup checkpoint against the live objects before a repair restores it (the
    #: operation that knows the cluster sets it: :func:`infercrane.engine.recovery.vouch_for`).
    vouch: Vouch | None = None
    #: Where the engine's notes for the person go (a repair, a stale lock cleared): the caller's
    #: progress view; this layer never prints.
    sink: Sink = discard
    _stack: auto.Stack | None = None
    _channel: Channel = field(default_factory=Channel)  # what the program of the current run gets
    _repaired: bool = False
    _created: bool = False  # selecting the stack created it (this engine's start wrote it)
    _selecting: threading.Lock = field(default_factory=threading.Lock)  # a run started early selects it too

    @property
    def created(self) -> bool:
        """Whether this engine's start created the stack (it did not exist when it was selected)."""
        return self._created and self._stack is not None

    @functools.cached_property
    def engine_env(self) -> dict[str, str]:
        """The environment of this stack's ``pulumi`` processes (:func:`engine_env`), worked out once."""
        return engine_env(self.stack_name, self.project_dir, self.env)

    def backend_url(self) -> str:
        return self.engine_env["PULUMI_BACKEND_URL"]

    def check_passphrase(self) -> dict[str, str]:
        """The engine's environment; raises when the stack's secrets passphrase is missing (before
        a command changes anything, not halfway through it)."""
        env = self.engine_env
        if not any(env.get(k) or os.environ.get(k) for k in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")):
            raise EngineError(
                f"stack {self.stack_name!r} needs its secrets passphrase.",
                fix="export PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE); in CI, from a secret",
            )
        return dict(env)  # a copy: the workspace adds variables to its own

    def _options(self) -> auto.LocalWorkspaceOptions:
        env = self.check_passphrase()
        options: auto.LocalWorkspaceOptions = _auto().LocalWorkspaceOptions(
            work_dir=str(self.project_dir),
            env_vars=env,
            pulumi_command=_auto().PulumiCommand(root=str(pulumi_root()), skip_version_check=True),
        )
        return options

    @property
    def stack(self) -> auto.Stack:
        """The stack, selected (created if new) with the program attached: for engine operations."""
        return self._select(create=True)

    def existing(self) -> auto.Stack:
        """The stack, selected -- never created: for a command that may not write to the backend
        (a read-only plan's policy packs). A stack that does not exist is an error with a fix, told
        from the backend itself where it is a directory or PostgreSQL (before the CLI, which would
        initialise an empty backend's metadata)."""
        from infercrane.engine import backend, stores

        store = stores.store_for(self.backend_url())
        if store is not None and not backend.has_stack(store, "infercrane", self.stack_name):
            raise self._missing()
        return self._select(create=False)

    def _missing(self) -> EngineError:
        return EngineError(
            f"stack {self.stack_name} does not exist in the backend; a read-only command creates none, and nothing was written",
            fix="check --stack and the backend (PULUMI_BACKEND_URL); a stack is created by its first "
            f"`infercrane deploy --stack {self.stack_name}`",
        )

    def _select(self, *, create: bool) -> auto.Stack:
        with self._selecting:
            return self._select_once(create=create)

    def _select_once(self, *, create: bool) -> auto.Stack:
        if self._stack is None:
            from infercrane.shell import program

            auto = _auto()
            chosen = {
                "stack_name": self.stack_name,
                "project_name": "infercrane",
                "program": lambda: program.run(self._channel),  # this run's channel
                "opts": self._options(),
            }
            try:  # what create_or_select_stack does, knowing which of the two it was
                try:
                    self._stack = auto.select_stack(**chosen)
                except auto.StackNotFoundError:
                    if not create:
                        raise self._missing() from None
                    self._stack = auto.create_stack(**chosen)
                    self._created = True
            except auto.CommandError as exc:
                raise translate(exc, self.stack_name) from exc
        return self._stack

    def _run(self, op: str, channel: Channel | None = None, *, skip_checkpoints: bool = False, **kw: Any) -> Any:
        """Run one Automation API operation; map failures to typed, user-facing errors (the
        program's own, passed back on its ``channel``, else the engine's translated).

        ``skip_checkpoints``: the engine writes the state once, when the run ends (success or
        failure), instead of after every step (PULUMI_SKIP_CHECKPOINTS). Each write is the whole
        checkpoint, so per-step writes cost O(objects²) per run (docs/benchmarks.md). A run
        killed before its end leaves the state it started from; that is recoverable by the same
        command because the objects carry our exact ownership: the preflight verifies them, the
        provider's server-side apply on create applies to an existing object of the same name
        (pulumi-kubernetes 4.25), and the deploy deletes owned objects of keys that left the
        config even when the state does not record them (the kill sweep proves it)."""
        channel = channel or Channel()
        if not channel.read_only:  # a read-only plan writes nothing to the backend: no repair, no lock cleared
            self.repair()
        stack = self.stack
        if not channel.read_only:
            for note in clear_stale_locks(self.stack_name, stack.workspace.env_vars, self.project_dir):
                self.sink(Note(note))
        if op in ("preview", "up") and channel.legacy is None:
            # The program runs in this process, beside no `pulumi` of its own environment: it gets
            # the slot names from here, read from the state (plain `pulumi` reads them itself).
            channel = dataclasses.replace(channel, legacy=legacy_names(self.state()))
        channel.error = None
        self._channel = channel
        env = cast(dict[str, str], stack.workspace.env_vars)  # LocalWorkspace keeps a dict
        if skip_checkpoints:
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        try:
            with (
                runs.watching(self.project_dir, self.stack_name),
                runs.scratch(env),
            ):  # proof its lock is ours, should it be killed
                return getattr(stack, op)(color="never", **kw)
        except _auto().CommandError as exc:
            if channel.error is not None:
                raise channel.error from exc
            raise translate(exc, self.stack_name, during_update=op == "up") from exc
        finally:
            env.pop("PULUMI_SKIP_CHECKPOINTS", None)
            self._channel = Channel()

    def preview(
        self, on_output: Callable[[str], None] | None = None, *, channel: Channel | None = None, **kw: Any
    ) -> auto.PreviewResult:
        """``pulumi preview``: the program runs its preflight; nothing is changed."""
        result: auto.PreviewResult = self._run("preview", channel, on_output=on_output, **kw)
        return result

    def up(
        self,
        on_output: Callable[[str], None] | None = None,
        *,
        channel: Channel | None = None,
        skip_checkpoints: bool = False,
        **kw: Any,
    ) -> auto.UpResult:
        """``pulumi up``; ``channel`` for the program (e.g. ``deploy_record``, exported as the stack
        output ``deploys``; a rollout ``step``); ``skip_checkpoints``: see :meth:`_run`."""
        result: auto.UpResult = self._run("up", channel, on_output=on_output, skip_checkpoints=skip_checkpoints, **kw)
        return result

    def apply(
        self,
        on_output: Callable[[str], None] | None = None,
        *,
        channel: Channel | None = None,
        skip_checkpoints: bool = False,
        **kw: Any,
    ) -> None:
        """:meth:`up` for a caller that has the run's events and needs no result object. The
        Automation API builds one after every ``up`` with three more ``pulumi`` processes -- the
        outputs twice (with and without secrets) and the last history entry -- each reading the
        whole state, every time (docs/benchmarks.md). Here those two calls return nothing for
        the one run."""
        stack = self.stack
        stack.outputs = dict  # type: ignore[method-assign]
        stack.info = lambda *a, **k: _NO_SUMMARY  # type: ignore[method-assign,assignment]
        try:
            self._run("up", channel, on_output=on_output, skip_checkpoints=skip_checkpoints, **kw)
        finally:
            del stack.outputs, stack.info  # the class's own again

    def refresh(self, on_output: Callable[[str], None] | None = None, **kw: Any) -> auto.RefreshResult:
        result: auto.RefreshResult = self._run("refresh", on_output=on_output, **kw)
        return result

    def repair(self) -> None:
        """Repair what a killed run left of this stack, once per command, before the engine or a
        direct read sees the state: torn checkpoint writes, and its stale lock -- a run killed
        after its update wrote the state but before it unlocked leaves a deploy a rerun replays
        without an engine call (stale locks are also cleared before each engine call)."""
        if self._repaired:
            return
        self._repaired = True
        for note in repair_torn_writes(self.backend_url(), self.stack_name, self.project_dir, vouch=self.vouch):
            self.sink(Note(note))
        for note in clear_stale_locks(self.stack_name, self.engine_env, self.project_dir):
            self.sink(Note(note))

    def state(self, *, repair: bool = True) -> dict[str, Any]:
        """The stack's checkpoint (secrets left encrypted): resources, outputs, pending operations.
        A stack that does not exist yet has an empty one. Read from the backend directly when it
        is a local directory or PostgreSQL (milliseconds, see :mod:`infercrane.engine.backend`), else
        with one ``pulumi stack export``. A torn write is repaired first (a backend write) unless
        ``repair`` is False: a read-only plan reads the state as it is."""
        from infercrane.engine import backend, stores

        if repair:
            self.repair()
        store = stores.store_for(self.backend_url())
        if store is not None:
            try:
                latest = backend.checkpoint(store, "infercrane", self.stack_name)
            except Exception:  # noqa: BLE001 - unreadable here: pulumi reads it (and reports why)
                latest = None
            if latest is not None:
                return latest
        return self.export()
