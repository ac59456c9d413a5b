"""The small error hierarchy of InferCrane.

Every user-facing failure is one of these. Each carries a message that says what is wrong, where
(stack file and config path, variable, or object) and how to fix it, so the CLI and the Pulumi
program can print it without a traceback. Pure core: every error class a user sees lives here or,
for a rollout's stops, in :mod:`infercrane.core.stops`; the cluster edge's typed failures (:mod:`infercrane.live.client.failures`) are ClusterErrors, and the
pods' edge's (:mod:`infercrane.live.evidence.edge`) become evidence, never a message of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where it is, what is wrong, how to fix it."""

    where: str
    what: str
    fix: str = ""

    def render(self) -> str:
        return with_fix(f"{self.where}: {self.what}", self.fix)


def with_fix(message: str, fix: str | None, *, indent: int = 4) -> str:
    """The one shape of every user-facing message: what is wrong (and where), then how to fix it."""
    return f"{message}\n{' ' * indent}fix: {fix}" if fix else message


def bullets(items: Iterable[str]) -> str:
    """The one shape of a list in a message: one ``- item`` per line."""
    return "\n".join(f"- {item}" for item in items)


class UsageError(Exception):
    """The command-line arguments contradict each other (exit 2, not 1); the message says which
    and how to call instead."""


class InferCraneError(Exception):
    """Base class: a failure whose message is safe and useful to show as is (the CLI exits 1).
    ``fix`` says how to fix it; it is rendered after the message by :func:`with_fix`.
    ``applied_nothing``: nothing reached the cluster before it was raised -- true of a failure
    before an update starts (a refusal); false, said by its class, of one raised once an update
    may have applied part of its change (the CLI then keeps a stack file edit instead of
    restoring it)."""

    applied_nothing: bool = True

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.fix = fix
        self.message = message  # without its fix
        super().__init__(with_fix(message, fix))


class ToolNotFound(InferCraneError):
    """A real tool (the Pulumi CLI, a control-plane binary) is neither built nor installed."""


class EngineError(InferCraneError):
    """The Pulumi engine failed; the message says what happened and what to do next."""


class UpdateFailed(EngineError):
    """The Pulumi engine failed during an update, which may have applied part of its change."""

    applied_nothing = False


class PartlyApplied(InferCraneError):
    """A deploy failed after its update applied its change (a step after it failed)."""

    applied_nothing = False


class PlaneError(InferCraneError):
    """The local control plane could not be started, checked or stopped."""


class TakeoverRefused(InferCraneError):
    """Some live object is not exactly the original adapter's for its key; nothing was changed."""


class IdempotencyConflict(InferCraneError):
    """The idempotency key was already used for a different intent."""


class PromotionRefused(InferCraneError):
    """The source environment is not in a state that may be promoted; nothing was written."""


class ConfigError(InferCraneError):
    """The stack configuration (file or INFERCRANE_KUBERNETES_* variables) is invalid."""

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__(
            f"invalid InferCrane configuration ({len(problems)} problem(s)); nothing was applied:\n"
            + bullets(p.render() for p in problems)
        )


class GuardError(InferCraneError):
    """A rendered manifest breaks one of the safety rules (defence in depth)."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__(f"rendered manifests break InferCrane's safety rules; nothing was applied:\n{bullets(violations)}")


class ClusterError(InferCraneError):
    """The cluster could not be reached or answered with an error we cannot act on."""


POD_SECURITY_FIX = (
    "the namespace enforces this Pod Security level; for restricted set infercrane:kubernetes.securityContext "
    "{runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000} (a non-root user the image runs as), or ask for the namespace's level"
)


class PreflightRefused(InferCraneError):
    """The live preflight found conflicts or foreign objects; nothing was applied."""

    def __init__(
        self,
        ownership: list[str],
        conflicts: list[str],
        invalid: list[str] | None = None,
        pod_security: list[str] | None = None,
    ) -> None:
        self.ownership = ownership
        self.conflicts = conflicts
        self.invalid = invalid or []
        self.pod_security = pod_security or []
        parts = ["preflight refused the change; nothing was applied."]
        sections = (
            (
                "Ownership errors",
                ownership,
                "InferCrane never adopts an object it does not own. Rename or delete the foreign object yourself, "
                "or change the replica key",
            ),
            (
                "Field-manager conflicts",
                conflicts,
                "InferCrane never forces a conflict. Remove the other manager's fields (or give them back with "
                "`kubectl apply --server-side` from a manifest without them), or stop the controller that owns "
                "them, then retry",
            ),
            (
                "Strict server-side validation",
                self.invalid,
                "the API server does not know a field InferCrane renders (an older Kubernetes or KServe schema?). "
                "Upgrade the CRD/cluster, or for KServe set kserveDeploymentMode for older controllers",
            ),
            (
                "Pod Security admission (the API server's warnings for this namespace)",
                self.pod_security,
                f"{POD_SECURITY_FIX}. A namespace warns at the level it enforces unless told otherwise, so the "
                "ReplicaSet's pods would be rejected; if it only warns (a lower enforce level), set "
                "infercrane:kubernetes.podSecurityWarnings: report to deploy with the warnings shown",
            ),
        )
        parts += [with_fix(f"{title}:\n{bullets(items)}", fix) for title, items, fix in sections if items]
        super().__init__("\n".join(parts))


class CacheRefused(InferCraneError):
    """``artifactCache.policy: required`` and a mapped model cache could not be verified."""

    def __init__(self, lines: list[str], *, unreadable: bool = False) -> None:
        self.lines = lines
        super().__init__(
            "the model cache is required and could not be verified; nothing was applied:\n" + bullets(lines),
            fix="grant this identity the optional read (kubectl apply -f deploy/kubernetes/optional/pvc-reader.yaml, "
            "bound to it), or set artifactCache.policy: prefer to download without a verified cache"
            if unreadable
            else "have the platform team prepare each claim (Bound, ReadOnlyMany or ReadWriteMany, in the target "
            "namespace) or fix its name in infercrane:kubernetes.artifactCache.pvcs; or set artifactCache.policy: "
            "prefer to download where no verified cache exists",
        )


#: A replica whose workload is ready but whose serving evidence fails it (live.served).
EVIDENCE_FAILED: Final = "ready, but "
#: A replica whose startup probe kept failing for its whole budget (readiness): the kubelet restarts
#: such an engine (its failureThreshold x period is the budget), which no wait cures.
STARTUP_FAILING: Final = "its startup probe kept failing"


class NotReady(InferCraneError):
    """Applied, but some replicas did not become ready (each with its reason)."""

    applied_nothing = False

    def __init__(self, failures: list[tuple[str, str, str]], total: int, *, api_lost: bool = False) -> None:
        self.failures, self.api_lost = failures, api_lost
        if api_lost:  # one cause for all: say it once, with how to resume
            super().__init__(
                f"the Kubernetes API stopped answering while {len(failures)} of {total} replica(s) were not yet ready: "
                f"{failures[0][2]}; what was applied carries this stack's ownership and is picked up again.",
                fix="bring the cluster back (`infercrane doctor --kubernetes`; local plane: `infercrane local status`), "
                "then rerun the same command with the same --idempotency-key",
            )
            return
        lines = [
            f"{len(failures)} of {total} replica(s) not ready; the objects were applied and are left as they are:",
            bullets(f"replica {key} ({name}): {reason}" for key, name, reason in failures),
        ]
        if any("CreateContainerConfigError" in reason for _, _, reason in failures):
            fix = (
                "create the Secret or ConfigMap the kubelet names, with the key the stack file references, in the "
                "target namespace (or fix the reference: huggingFaceToken, workerSecret), then deploy again"
            )
        elif all(reason.startswith(EVIDENCE_FAILED) for _, _, reason in failures):
            fix = "each replica's own fix is above (its serving evidence); the replicas not rolled by this run keep serving"
        elif any(STARTUP_FAILING in reason for _, _, reason in failures):
            fix = (
                "raise startupBudgetSeconds of each replica whose startup probe kept failing, if its model loads "
                "that long (the budget sizes the probe; past it the kubelet restarts the engine), or read its pod's log for why the engine never answered "
                "its health check; then deploy again"
            )
        elif any("FailedScheduling" in reason for _, _, reason in failures):
            fix = (
                "use a GPU value your nodes carry (`infercrane doctor --kubernetes` shows capacity per "
                "product label), free GPUs, or add nodes; InferCrane never substitutes the GPU"
            )
        else:
            fix = "see `infercrane inspect` for each replica's conditions, then deploy again"
        super().__init__("\n".join(lines), fix=fix)


class ReadOnlyUpdate(InferCraneError):
    """An update under the read-only plan's setting: it plans, it never applies."""

    def __init__(self, stack: str) -> None:
        super().__init__(
            f"stack {stack}: INFERCRANE_PLAN_READ_ONLY=1 is set, which plans with get and list only; nothing was applied",
            fix="unset INFERCRANE_PLAN_READ_ONLY to deploy (with the deploying identity), or run `pulumi preview` to plan",
        )
