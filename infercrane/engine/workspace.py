"""The real Pulumi engine, driven through the Automation API on *the* program.

The program is :func:`infercrane.shell.program.run` -- the steps of the ``main`` that
``__main__.py`` calls, yielding to the SDK's event loop between registrations -- run by the
Python SDK's in-process language server (the Go ``pulumi-language-python`` host is not served by
the module proxy here; see docs/engine.md). Project settings and stack files come
from the project directory (``Pulumi.yaml``, ``stacks/``); state lives in a local file backend.
Engine layer.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, cast

from infercrane.core.errors import EngineError
from infercrane.core.events import Note, Sink, discard
from infercrane.engine.backend import Vouch, clear_stale_locks, repair_torn_writes
from infercrane.project.paths import project_root
from infercrane.project.tools import find_tool, pinned_tool, tool_dirs
from infercrane.shell.channel import Channel

if TYPE_CHECKING:
    from pulumi import automation as auto


@cache
def _auto() -> ModuleType:
    """The Automation API, imported on first use: ``destroy`` and the proven ``plan`` never run an
    engine operation, and ``pulumi``'s import (~0.2 s) would sit on their critical path."""
    from pulumi import automation

    return automation


# The local stack's passphrase protects no secret (the stack has none); other stacks need
# PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) from the environment.
LOCAL_PASSPHRASE: Final = "infercrane-local"
LOCAL_STACKS: Final = ("local", "local-kserve")


def pulumi_root() -> Path:
    """The Pulumi CLI's installation root (``<root>/bin/pulumi``): the checkout's pinned build, else
    the ``pulumi`` on PATH."""
    pulumi = find_tool("pulumi").resolve()
    if pulumi.parent.name != "bin":
        raise EngineError(
            f"the Pulumi CLI at {pulumi} is not in a bin/ directory of an installation.",
            fix="install Pulumi with its installer (or put <root>/bin on PATH)",
        )
    return pulumi.parent.parent


PROVIDER_BINARY: Final = "pulumi-resource-kubernetes"


def install_provider_plugin(pulumi_home: Path) -> bool:
    """Install the pinned provider binary into PULUMI_HOME's plugin cache (once), so the engine
    uses it as a regular plugin of the SDK's version instead of an "ambient" one from PATH.
    Returns False (and the caller keeps the provider on PATH) if the install fails or this is not
    a checkout with the pinned build (an installed package uses the platform's own plugins).

    The plugin is a symbolic link to the tool cache's binary, in a directory made under a
    temporary name and renamed into place (Pulumi reads a plugin directory it did not install
    itself): ``pulumi plugin install --file`` would copy its 160 MB on the first command of every
    fresh PULUMI_HOME -- 1.3 s of a CI job's first deploy. Where links cannot be made, that copy."""
    import subprocess
    import tempfile
    from importlib.metadata import version

    provider = pinned_tool(PROVIDER_BINARY)
    if provider is None:
        return False
    sdk_version = version("pulumi-kubernetes")
    folder = pulumi_home / "plugins" / f"resource-kubernetes-v{sdk_version}"
    installed = folder / PROVIDER_BINARY
    if installed.is_file():
        return True
    staging: Path | None = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        (staging / PROVIDER_BINARY).symlink_to(provider.resolve())
        if folder.exists():  # a broken install (its target gone): replaced as a whole
            shutil.rmtree(folder)
        staging.rename(folder)
    except OSError:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if installed.is_file():
            return True  # another command installed it meanwhile
    else:
        return installed.is_file()
    cmd = [
        str(find_tool("pulumi")),
        "plugin",
        "install",
        "resource",
        "kubernetes",
        f"v{sdk_version}",
        "--file",
        str(provider),
    ]
    env = dict(os.environ) | {"PULUMI_HOME": str(pulumi_home), "PULUMI_SKIP_UPDATE_CHECK": "true"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    return done.returncode == 0 and installed.is_file()


def engine_env(stack: str, project_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the Pulumi CLI and its plugins: pinned tools first, no downloads, file backend."""
    home = Path(os.environ.get("PULUMI_HOME") or project_dir / ".infercrane" / "pulumi-home")
    dirs = list(tool_dirs())
    if install_provider_plugin(home):
        dirs = [d for d in dirs if not (d / PROVIDER_BINARY).exists()]
    env = {
        "PATH": _path_with(tuple(str(d) for d in dirs), os.environ.get("PATH", "")),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "PULUMI_BACKEND_URL": os.environ.get("PULUMI_BACKEND_URL") or (project_dir / ".infercrane" / "pulumi-state").as_uri(),
        "PULUMI_HOME": str(home),
    }
    if not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
        if stack in LOCAL_STACKS:
            env["PULUMI_CONFIG_PASSPHRASE"] = LOCAL_PASSPHRASE
    env.update(extra or {})
    if env["PULUMI_BACKEND_URL"].startswith("file://"):
        Path(env["PULUMI_BACKEND_URL"].removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    return env


def _path_with(first: tuple[str, ...], path: str) -> str:
    """``first`` then the entries of ``path``, each once (in order): a shell that evals ``local
    env`` twice keeps one copy of every entry."""
    return os.pathsep.join(dict.fromkeys([*first, *(p for p in path.split(os.pathsep) if p)]))


#: What :meth:`Engine.apply` gives the Automation API for the summary it does not read.
_NO_SUMMARY: Final = object()


@dataclass
class Engine:
    """One stack of the project, ready for preview/up/refresh/destroy."""

    stack_name: str
    project_dir: Path = field(default_factory=project_root)
    env: Mapping[str, str] | None = None
    #: Checks a backup checkpoint against the live objects before a repair restores it (the
    #: operation that knows the cluster sets it: :func:`infercrane.engine.checks.vouch_for`).
    vouch: Vouch | None = None
    #: Where the engine's notes for the person go (a repair, a stale lock cleared): the caller's
    #: progress view; this layer never prints.
    sink: Sink = discard
    _stack: auto.Stack | None = None
    _repaired: bool = False

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
        if self._stack is None:
            from infercrane.shell import program

            try:
                channel = Channel()
                self._stack = _auto().create_or_select_stack(
                    stack_name=self.stack_name,
                    project_name="infercrane",
                    program=functools.partial(program.run, channel),
                    opts=self._options(),
                )
                self._channel = channel
            except _auto().CommandError as exc:
                raise translate(exc, self.stack_name) from None
        return self._stack

    def _run(self, op: str, inputs: Mapping[str, Any] | None = None, *, skip_checkpoints: bool = False, **kw: Any) -> Any:
        """Run one Automation API operation; map failures to typed, user-facing errors (the
        program's own, passed back on its channel, else the engine's translated). ``inputs`` are
        :class:`~infercrane.shell.channel.Channel` fields for this one run.

        ``skip_checkpoints``: the engine writes the state once, when the run ends (success or
        failure), instead of after every step (PULUMI_SKIP_CHECKPOINTS). Each write is the whole
        checkpoint, so per-step writes cost O(objects²) per run -- at 300 replicas the engine
        spends minutes serializing a 7.6 MB state some 2,000 times (docs/benchmarks.md). A run
        killed before its end leaves the state it started from; that is recoverable by the same
        command because the objects carry our exact ownership: the preflight verifies them, the
        provider's server-side apply on create applies to an existing object of the same name
        (pulumi-kubernetes 4.25), and the deploy deletes owned objects of keys that left the
        config even when the state does not record them (the kill sweep proves it)."""
        self.repair()
        stack = self.stack
        for note in clear_stale_locks(self.stack_name, stack.workspace.env_vars):
            self.sink(Note(note))
        channel = self._channel
        defaults = Channel()
        for name, value in (inputs or {}).items():
            setattr(channel, name, value)
        channel.error = None
        env = cast(dict[str, str], stack.workspace.env_vars)  # LocalWorkspace keeps a dict
        if skip_checkpoints:
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        try:
            return getattr(stack, op)(color="never", **kw)
        except _auto().CommandError as exc:
            if channel.error is not None:
                raise channel.error from None
            raise translate(exc, self.stack_name) from None
        finally:
            env.pop("PULUMI_SKIP_CHECKPOINTS", None)
            for name in inputs or {}:
                setattr(channel, name, getattr(defaults, name))

    def preview(
        self, on_output: Callable[[str], None] | None = None, *, inputs: Mapping[str, Any] | None = None, **kw: Any
    ) -> auto.PreviewResult:
        """``pulumi preview``: the program runs its preflight; nothing is changed."""
        result: auto.PreviewResult = self._run("preview", inputs, on_output=on_output, **kw)
        return result

    def up(
        self,
        on_output: Callable[[str], None] | None = None,
        *,
        inputs: Mapping[str, Any] | None = None,
        skip_checkpoints: bool = False,
        **kw: Any,
    ) -> auto.UpResult:
        """``pulumi up``; ``inputs`` for the program (e.g. ``deploy_record``, exported as the stack
        output ``deploys``; a rollout ``step``); ``skip_checkpoints``: see :meth:`_run`."""
        result: auto.UpResult = self._run("up", inputs, on_output=on_output, skip_checkpoints=skip_checkpoints, **kw)
        return result

    def apply(
        self,
        on_output: Callable[[str], None] | None = None,
        *,
        inputs: Mapping[str, Any] | None = None,
        skip_checkpoints: bool = False,
        **kw: Any,
    ) -> None:
        """:meth:`up` for a caller that has the run's events and needs no result object. The
        Automation API builds one after every ``up`` with three more ``pulumi`` processes -- the
        outputs twice (with and without secrets) and the last history entry -- each reading the
        whole state: 1 s after a 100-replica deploy, every time. Here those two calls return
        nothing for the one run."""
        stack = self.stack
        stack.outputs = dict  # type: ignore[method-assign]
        stack.info = lambda *a, **k: _NO_SUMMARY  # type: ignore[method-assign,assignment]
        try:
            self._run("up", inputs, on_output=on_output, skip_checkpoints=skip_checkpoints, **kw)
        finally:
            del stack.outputs, stack.info  # the class's own again

    def refresh(self, on_output: Callable[[str], None] | None = None, **kw: Any) -> auto.RefreshResult:
        result: auto.RefreshResult = self._run("refresh", on_output=on_output, **kw)
        return result

    def destroy(
        self, on_output: Callable[[str], None] | None = None, *, skip_checkpoints: bool = False, **kw: Any
    ) -> auto.DestroyResult:
        """``pulumi destroy`` (``skip_checkpoints``: see :meth:`_run`)."""
        result: auto.DestroyResult = self._run("destroy", on_output=on_output, skip_checkpoints=skip_checkpoints, **kw)
        return result

    def repair(self) -> None:
        """Repair torn checkpoint writes of this stack (a killed run), once per command, before the
        engine or a direct read sees the state (stale locks are cleared before each engine call)."""
        if self._repaired:
            return
        self._repaired = True
        for note in repair_torn_writes(self.backend_url(), self.stack_name, vouch=self.vouch):
            self.sink(Note(note))

    def state(self) -> dict[str, Any]:
        """The stack's checkpoint (secrets left encrypted): resources, outputs, pending operations.
        A stack that does not exist yet has an empty one. Read from the backend directly when it
        is a local directory or PostgreSQL (milliseconds, see :mod:`infercrane.engine.backend`), else
        with one ``pulumi stack export``."""
        from infercrane.engine import backend

        self.repair()
        store = backend.store_for(self.backend_url())
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
        -- what ``pulumi state delete --all`` leaves, for less (alone, at 200 objects: 0.27 s
        instead of 0.45 s; on 2 cores it competes with the deletes, docs/benchmarks.md)."""
        self.repair()
        for note in clear_stale_locks(self.stack_name, self.engine_env):
            self.sink(Note(note))
        empty = {k: v for k, v in recorded.items() if k not in ("resources", "pending_operations")} | {"resources": []}
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="infercrane-empty-state-") as fh:
            json.dump({"version": 3, "deployment": empty}, fh)
            fh.flush()
            self._cli("stack", "import", "--file", fh.name)

    def _cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One Pulumi CLI command on this stack outside the Automation API (no program, no
        ``pulumi version`` probe, no SDK import): state bookkeeping. Failures: EngineError."""
        env = {**os.environ, **self.check_passphrase()}
        cmd = [str(find_tool("pulumi")), *args, "--stack", self.stack_name, "--non-interactive"]
        done = subprocess.run(cmd, cwd=self.project_dir, env=env, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise translate_text(f"{done.stdout}\n{done.stderr}", self.stack_name)
        return done

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

    def outputs(self) -> dict[str, Any]:
        return {k: v.value for k, v in self.stack.outputs().items()}


# What pulumi-kubernetes reports when the API server (or its etcd) stops answering mid-update.
API_LOST_MARKERS: Final = (
    "cluster is unreachable",
    "connection refused",
    "connection reset by peer",
    "unexpected eof",
    "i/o timeout",
    "tls handshake timeout",
    "context deadline exceeded",
    "etcdserver:",
    "the server is currently unable to handle the request",
    "timeout: request did not complete",
)


def translate(exc: auto.CommandError, stack: str) -> EngineError:
    """Turn an Automation API failure into one message with the next step."""
    text = f"{getattr(exc, 'stdout', '')}\n{getattr(exc, 'stderr', '')}\n{exc}"
    if isinstance(exc, _auto().ConcurrentUpdateError):
        return translate_text("the stack is currently locked", stack)
    if isinstance(exc, _auto().StackNotFoundError):
        return translate_text(f"no stack named '{stack}' found", stack)
    return translate_text(text, stack)


def translate_text(text: str, stack: str) -> EngineError:
    """Turn the Pulumi CLI's output of a failed command into one message with the next step."""
    if "the stack is currently locked" in text:
        return EngineError(
            f"stack {stack!r} is locked by another update (a live process, or one on another host).",
            fix=f"wait for it to finish; if you are sure it is gone, run `pulumi cancel --stack {stack}`, then retry",
        )
    if f"no stack named '{stack}' found" in text:
        return EngineError(
            f"stack {stack!r} does not exist in this backend.", fix=f"run `infercrane deploy --stack {stack}` to create it"
        )
    if any(marker in text.lower() for marker in API_LOST_MARKERS):
        return EngineError(
            f"the Kubernetes API stopped answering during the update of stack {stack!r}; what was applied "
            "carries this stack's ownership and is picked up again.",
            fix="bring the cluster back (`infercrane doctor --kubernetes`; local plane: `infercrane local status`), "
            "then rerun the same command with the same --idempotency-key",
        )
    if "Server-Side Apply field conflict" in text:
        return EngineError(f"pulumi-kubernetes hit a field-manager conflict; nothing was forced.\n{_tail(text)}")
    if "forbidden" in text.lower():
        return EngineError(
            f"the Kubernetes API refused an action (RBAC).\n{_tail(text)}",
            fix="bind deploy/kubernetes/base/provider-rbac.yaml to the deploying identity",
        )
    if "passphrase" in text.lower():
        return EngineError(
            f"the secrets passphrase of stack {stack!r} is missing or wrong.", fix="export PULUMI_CONFIG_PASSPHRASE"
        )
    violations = policy_violations(text)
    if violations:
        return EngineError(
            f"the policy pack blocked the preview of stack {stack!r} ({len(violations)} violation(s)); nothing was applied:\n"
            + "\n".join(f"- {v}" for v in violations),
            fix="fix each resource as its line says; the full report is in the engine log (the command's first line)",
        )
    errors = _error_lines(text)
    return EngineError(
        f"pulumi failed for stack {stack!r}:\n" + ("\n".join(errors) if errors else _tail(text, 10)),
        fix="the full engine log is the file named on the command's first line ('pulumi log: …'; --verbose prints it); "
        "fix what it names, then rerun the same command (with the same --idempotency-key): it picks up what was applied",
    )


def policy_violations(text: str) -> list[str]:
    """``rule (type: name): what`` for each mandatory violation in a preview's ``Policies:`` report
    (``- [mandatory]  rule  (type: name)``, then the description, then the pack's message)."""
    lines = [_unwrapped(x) for x in text.splitlines()]
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^- \[mandatory\]\s+(\S+)\s+\((.*)\)$", line.strip())
        if m:
            what = lines[i + 2].strip() if i + 2 < len(lines) else ""
            out.append(f"{m.group(1)} ({m.group(2)}): {what}")
    return out


# The Automation API's own wrapping of a failed command (``code: 1`` / `` stdout:`` / `` stderr:``):
# scaffolding, never what a person needs to read.
_SCAFFOLD: Final = ("code:", "stdout:", "stderr:")


def _error_lines(text: str, limit: int = 8) -> list[str]:
    """Pulumi's own ``error:`` lines of a failed command, once each, without the scaffolding."""
    seen: list[str] = []
    for line in text.splitlines():
        body = _unwrapped(line)
        if body.startswith("error:") and body not in seen:
            seen.append(body)
    return seen[:limit]


def _unwrapped(line: str) -> str:
    body = line.strip()
    if body.startswith("code:") and body.removeprefix("code:").strip().isdigit():
        return ""
    for prefix in _SCAFFOLD[1:]:
        body = body.removeprefix(prefix).strip()
    return body


def _tail(text: str, lines: int = 25) -> str:
    body = [line for line in text.strip().splitlines() if _unwrapped(line)]
    return "\n".join(body[-lines:])
