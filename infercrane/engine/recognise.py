"""The Pulumi CLI's output of a failed command, recognised by the texts it matches -- the one place
that reads the engine's words -- and turned into one message with the next step. The program's
own failures never come this way: they come back typed on the Channel. Engine layer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from infercrane.core.errors import EngineError, UpdateFailed, bullets
from infercrane.core.model.kinds import bind_fix

if TYPE_CHECKING:
    from pulumi import automation as auto

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
    # the API server's etcd client lost its server (a request that reached storage as etcd died;
    # e.g. a Service's cluster IP allocation, reported as that Service being invalid)
    "rpc error: code = unavailable",
    "the server is currently unable to handle the request",
    "timeout: request did not complete",
)


# Pulumi's PostgreSQL backend lists keys, then reads each row: a lock row another update removes
# in between is "not found" (`could not list bucket: blob (code=NotFound): sql: no rows …`), and so
# is a lock it reads after its owner removed it. Both are the other update taking or releasing the
# lock at that moment -- this one held none and applied nothing.
LOCK_RACE_MARKERS: Final = ("could not list bucket", ".pulumi/locks/")


def translate_text(text: str, stack: str) -> EngineError:
    """Turn the Pulumi CLI's output of a failed command into one message with the next step."""
    if "the stack is currently locked" in text:
        return EngineError(
            f"stack {stack!r} is locked by another update (a live process, one on another host, or one no run "
            "on this machine started).",
            fix=f"wait for it to finish; if you are sure it is gone, run `pulumi cancel --stack {stack}`, then retry",
        )
    if "code=NotFound" in text and any(marker in text for marker in LOCK_RACE_MARKERS):
        return EngineError(
            f"stack {stack!r} is locked by another update: it took or released the lock as this one looked "
            "(the backend's lock rows changed under the read); nothing was applied.",
            fix="wait for the other update to finish, then rerun the same command",
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
            fix=bind_fix(text),
        )
    if "passphrase" in text.lower():
        return EngineError(
            f"the secrets passphrase of stack {stack!r} is missing or wrong.", fix="export PULUMI_CONFIG_PASSPHRASE"
        )
    violations = policy_violations(text)
    if violations:
        return EngineError(
            f"the policy pack blocked the preview of stack {stack!r} ({len(violations)} violation(s)); nothing was applied:\n"
            + bullets(violations),
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
    """Pulumi's own ``error:`` lines of a failed command, once each, without the scaffolding; an
    ``error: N errors occurred:`` keeps the ``* …`` items that follow it (each error is one)."""
    seen: list[str] = []
    listing = False
    for line in text.splitlines():
        body = _unwrapped(line)
        item = listing and body.startswith("* ")
        kept = f"    {body}" if item else body
        if (body.startswith("error:") or item) and kept not in seen:
            seen.append(kept)
        listing = body.endswith("errors occurred:") or (listing and (item or not body))
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


def translate(exc: auto.CommandError, stack: str, *, during_update: bool = False) -> EngineError:
    """Turn an Automation API failure into one message with the next step; ``during_update``: an
    :class:`UpdateFailed`, which may have applied part of its change."""
    from pulumi import automation

    text = f"{getattr(exc, 'stdout', '')}\n{getattr(exc, 'stderr', '')}\n{exc}"
    if isinstance(exc, automation.ConcurrentUpdateError):
        failed = translate_text("the stack is currently locked", stack)
    elif isinstance(exc, automation.StackNotFoundError):
        failed = translate_text(f"no stack named '{stack}' found", stack)
    else:
        failed = translate_text(text, stack)
    return UpdateFailed(failed.message, fix=failed.fix) if during_update else failed
