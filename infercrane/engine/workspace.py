"""The real Pulumi engine, driven through the Automation API on *the* program.

The program is :func:`infercrane.shell.program.run` -- the steps of the ``main`` that
``__main__.py`` calls, yielding to the SDK's event loop between registrations -- run by the
Python SDK's in-process language server (the Go ``pulumi-language-python`` host is not served by
the module proxy here; see docs/engine.md). Project settings and stack files come
from the project directory (``Pulumi.yaml``, ``stacks/``); state lives in a local file backend.
Engine layer.

One module, past 300 lines: every Automation API call goes through the one :class:`Engine` (its stack, lock clean-up, state repair and reads).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, cast

from infercrane.core.errors import EngineError, UpdateFailed
from infercrane.core.events import Note, Sink, discard
from infercrane.core.state.urns import legacy_names
from infercrane.engine import runs
from infercrane.engine.backend import Vouch, clear_stale_locks, repair_torn_writes
from infercrane.engine.environment import engine_env, pulumi_root
from infercrane.engine.recognise import translate_text
from infercrane.project.paths import project_root
from infercrane.project.tools import find_tool
from infercrane.shell.channel import Channel

if TYPE_CHECKING:
    from pulumi import automation as auto


@contextlib.contextmanager
def _scratch(env: dict[str, str]) -> Iterator[None]:
    """The run's own temporary directory (mode 0700) as the engine's ``TMPDIR``, removed with
    all it holds when the run ends. pulumi-kubernetes writes the kubeconfig it is given into a new
    temporary file each time its provider is configured (for Helm) and never removes it: a copy
    of the kubeconfig, with any credentials it embeds, left by every plan and deploy (docs/engine.md).
    A run killed with SIGKILL leaves its directory: the next run of this machine removes it
    (:func:`~infercrane.engine.runs.sweep_scratch`), at its start and again at its end -- a
    removal at the start can race with the killed run's last process, still writing there."""
    before = env.get("TMPDIR")
    tmp = Path(tempfile.gettempdir())
    runs.sweep_scratch(tmp)  # what killed runs of this machine left there
    try:
        with tempfile.TemporaryDirectory(prefix=runs.scratch_prefix(), ignore_cleanup_errors=True) as scratch:
            env["TMPDIR"] = scratch
            yield
    finally:
        if before is None:
            env.pop("TMPDIR", None)
        else:
            env["TMPDIR"] = before
        runs.sweep_scratch(tmp)


@cache
def _auto() -> ModuleType:
    """The Automation API, imported on first use: ``destroy`` and the proven ``plan`` never run an
    engine operation, and ``pulumi``'s import (~0.2 s) would sit on their critical path."""
    from pulumi import automation

    return automation


#: What :meth:`Engine.apply` gives the Automation API for the summary it does not read.
_NO_SUMMARY: Final = object()

#: What :meth:`Engine.clear_state` leaves out of the checkpoint it imports (resources become []).
CLEARED: Final = frozenset({"resources", "pending_operations", "secrets_providers"})


# What a refused first run may have recorded without touching the cluster: the stack itself and
# its provider (registered before the program's checks finish, shell/gate.py).
_BOOKKEEPING: Final = ("pulumi:pulumi:Stack", "pulumi:providers:")


@dataclass
class Engine:
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
            with runs.watching(self.project_dir, self.stack_name), _scratch(env):  # proof its lock is ours, should it be killed
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

    def export(self) -> dict[str, Any]:
        """The checkpoint as ``pulumi stack export`` prints it (empty for a stack that does not exist)."""
        done = self._cli("stack", "export", check=False)
        if done.returncode != 0:
            if f"no stack named '{self.stack_name}' found" in done.stderr:
                return {}
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        return dict(json.loads(done.stdout).get("deployment") or {})

    def clear_state(self, recorded: Mapping[str, Any]) -> None:
        """Drop every resource from the state without touching the cluster: for ``destroy``,
        which deletes by ownership, never by the state. ``recorded`` is the checkpoint just read
        (:meth:`state`); what is imported is the same with no resources and no pending operations
        -- what ``pulumi state delete --all`` leaves, for less (docs/benchmarks.md).

        Nor its secrets provider: a deployment that names one makes ``stack import`` build that
        provider, and the passphrase provider derives its key with 1,000,000 rounds of PBKDF2
        (a core's fraction of a second, beside the DELETEs). A deployment without resources
        holds no ciphertext to read, and the next update takes its secrets provider from the stack
        file (``encryptionsalt`` / ``secretsprovider``), as a new stack's first update does."""
        self.repair()
        for note in clear_stale_locks(self.stack_name, self.engine_env, self.project_dir):
            self.sink(Note(note))
        empty = {k: v for k, v in recorded.items() if k not in CLEARED} | {"resources": []}
        self._cli("stack", "import", stdin=json.dumps({"version": 3, "deployment": empty}))  # no file left by a killed run

    def forget_new(self, stack_file: bytes | None) -> None:
        """Undo what selecting a stack that did not exist wrote, after a refusal applied nothing:
        the empty stack in the backend (``stack rm``: it has no resources) and the stack file's
        ``encryptionsalt`` (its bytes put back; ``stack_file`` None: it had none). A refused
        command leaves no trace; the next run creates the stack again."""
        if self._stack is None:
            return
        self._stack = None
        self._created = False
        kept = [r for r in self.export().get("resources") or [] if not str(r.get("type", "")).startswith(_BOOKKEEPING)]
        if kept:
            return  # something beyond the stack and its provider was recorded: not ours to forget
        self._cli("stack", "rm", "--yes", "--force", "--preserve-config", check=False)
        from infercrane.project import paths

        path = paths.stack_file(self.stack_name, self.project_dir)
        if stack_file is not None:
            path.write_bytes(stack_file)

    def forget_state(self) -> bool:
        """Remove this stack's state from the backend (``stack rm --force``), deleting nothing in
        the cluster: for a stack whose cluster is gone (a reset local plane). Its stack file stays.
        True when there was a stack to remove."""
        return self._cli("stack", "rm", "--yes", "--force", "--preserve-config", check=False).returncode == 0

    def _cli(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """One Pulumi CLI command on this stack outside the Automation API (no program, no
        ``pulumi version`` probe, no SDK import): state bookkeeping, ``stdin`` its standard input.
        Failures: EngineError."""
        env = {**os.environ, **self.check_passphrase()}
        cmd = [str(find_tool("pulumi")), *args, "--stack", self.stack_name, "--non-interactive"]
        with runs.watching(self.project_dir, self.stack_name):
            done = subprocess.run(cmd, cwd=self.project_dir, env=env, input=stdin, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        return done

    def tags(self) -> dict[str, str]:
        """The stack's tags (``pulumi stack tag ls``); {} when it has none or does not exist yet
        (a first deploy, a lost state). Fails closed: a backend that cannot say them raises
        (EngineError) -- a canary's rejection is never taken as absent."""
        from infercrane.engine import backend, stores

        store = stores.store_for(self.backend_url())
        if self._stack is None and store is not None and not backend.has_stack(store, "infercrane", self.stack_name):
            return {}
        done = self._cli("stack", "tag", "ls", "--output", "json", check=False)
        if done.returncode != 0:
            if f"no stack named '{self.stack_name}' found" in done.stdout + done.stderr:
                return {}  # not created yet: no tags (a backend the CLI alone reads)
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        try:
            found = json.loads(done.stdout or "{}")
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise EngineError(
                f"stack {self.stack_name}: `pulumi stack tag ls` answered what is not a JSON object: {done.stdout[:200]!r}",
                fix="check the backend the stack lives in (`pulumi stack tag ls --stack NAME`), then run the command again",
            )
        return {str(k): str(v) for k, v in found.items()}

    def set_tag(self, name: str, value: str) -> None:
        self._cli("stack", "tag", "set", name, value)

    def remove_tag(self, name: str) -> None:
        self._cli("stack", "tag", "rm", name, check=False)

    def history(self) -> list[dict[str, Any]]:
        """The stack's update history, newest first (``pulumi stack history --json``): each with
        ``kind`` and ``result``. Read without selecting the stack -- selecting creates a stack that
        does not exist and writes its ``encryptionsalt`` into the stack file; a read never writes."""
        done = self._cli("stack", "history", "--json", check=False)
        if done.returncode != 0:
            if f"no stack named '{self.stack_name}' found" in done.stderr:
                return []
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        return list(json.loads(done.stdout or "[]") or [])


def translate(exc: auto.CommandError, stack: str, *, during_update: bool = False) -> EngineError:
    """Turn an Automation API failure into one message with the next step; ``during_update``: an
    :class:`UpdateFailed`, which may have applied part of its change."""
    text = f"{getattr(exc, 'stdout', '')}\n{getattr(exc, 'stderr', '')}\n{exc}"
    if isinstance(exc, _auto().ConcurrentUpdateError):
        failed = translate_text("the stack is currently locked", stack)
    elif isinstance(exc, _auto().StackNotFoundError):
        failed = translate_text(f"no stack named '{stack}' found", stack)
    else:
        failed = translate_text(text, stack)
    return UpdateFailed(failed.message, fix=failed.fix) if during_update else failed
