"""A stack's records read and written with the plain Pulumi CLI, outside the Automation API (no
program, no ``pulumi version`` probe, no SDK import): its export, tags, update history and removal.
:class:`~infercrane.engine.workspace.Engine` is one. Engine layer.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from infercrane.core.errors import EngineError
from infercrane.core.events import Note, Sink
from infercrane.engine import runs
from infercrane.engine.backend import clear_stale_locks
from infercrane.engine.recognise import translate_text
from infercrane.project.tools import find_tool

#: What :meth:`StackRecords.clear_state` leaves out of the checkpoint it imports (resources become []).
CLEARED: Final = frozenset({"resources", "pending_operations", "secrets_providers"})

# What a refused first run may have recorded without touching the cluster: the stack itself and
# its provider (registered before the program's checks finish, shell/gate.py).
_BOOKKEEPING: Final = ("pulumi:pulumi:Stack", "pulumi:providers:")


class StackRecords:
    """One stack's records through the Pulumi CLI; failures are EngineError with the next step."""

    stack_name: str
    project_dir: Path

    _stack: Any  # the stack the Automation API selected (None: not yet)
    _created: bool  # selecting the stack created it
    sink: Sink

    @property
    def engine_env(self) -> dict[str, str]:
        raise NotImplementedError  # the engine's: the environment its Pulumi processes run with

    def repair(self) -> None:
        raise NotImplementedError  # the engine's: what a killed run left, repaired

    def check_passphrase(self) -> dict[str, str]:
        raise NotImplementedError  # the engine's: the passphrase variables the CLI needs

    def backend_url(self) -> str:
        raise NotImplementedError  # the engine's: where the state lives

    def export(self) -> dict[str, Any]:
        """The checkpoint as ``pulumi stack export`` prints it (empty for a stack that does not exist)."""
        done = self._cli("stack", "export", check=False)
        if done.returncode != 0:
            if f"no stack named '{self.stack_name}' found" in done.stderr:
                return {}
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        return dict(json.loads(done.stdout).get("deployment") or {})

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
