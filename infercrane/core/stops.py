"""How a rollout stops, in the person's words: endpoints stopped at their stage, a canary's rejection
(and how its rollback ended), a replica still draining, a rejected release asked for again, the
deletions a run refused, a change one `pulumi up` cannot roll -- and a rollback's run ending as
it must. Each says what happened, what still serves and how to go on. Pure core.
"""

from __future__ import annotations

from collections.abc import Sequence

from infercrane.core.errors import InferCraneError, bullets


class RolloutStopped(InferCraneError):
    """Endpoints of a rollout stopped, each at its own stage with its own error; the others rolled
    to the end. ``stopped``: (endpoint, where it stopped -- ``wave 2/4`` --, its error, whose words
    and fix follow). The old replicas a stopped endpoint had not reached keep serving, and the
    same command continues from there."""

    applied_nothing = False

    def __init__(
        self,
        stopped: Sequence[tuple[str, str, InferCraneError]],
        endpoints: int,
        *,
        accepted: Sequence[str] = (),
        finished: Sequence[str] = (),
    ) -> None:
        self.stopped = list(stopped)
        self.accepted = tuple(accepted)  # endpoints whose canary was accepted before they stopped (or finished)
        self.finished = tuple(finished)  # endpoints whose lane ran to its end (a halted one did not)
        rolled = endpoints - len(self.stopped)
        back = all(isinstance(c, CanaryRejected) and c.rolled_back for _, _, c in self.stopped)
        lines = [
            f"the rollout stopped for {len(self.stopped)} of {endpoints} endpoint(s)"
            + (f"; the other {rolled} rolled to the end" if rolled else "")
            + (
                ". Each was stopped by its canary's verdict and rolled back: it serves the release it served before."
                if back
                else ". A stopped endpoint's old replicas that its rollout had not reached keep serving; fix the cause "
                "and deploy again to continue from there."
            ),
            *(f"endpoint {name} stopped at {where}: {cause.message}" for name, where, cause in self.stopped),
        ]
        fixes = list(dict.fromkeys(c.fix for _, _, c in self.stopped if c.fix))
        super().__init__("\n".join(lines), fix="; ".join(fixes) or None)


class CanaryRejected(InferCraneError):
    """A release's canary was judged and stops it: rejected by the engines' evidence, or not
    verifiable at the end of its bake where a verdict is required. Its successors are never
    started; the replicas the canary would have replaced still serve the old release. The command
    that rejected it rolls it back (:mod:`infercrane.core.plan.rollback`): ``rolled_back`` says how
    that ended (None: not tried, the engine failed first)."""

    def __init__(
        self,
        verdict_line: str,
        required: bool,
        not_verifiable: bool,
        *,
        outcome: str = "",
        digest: str = "",
        rolled_back: str | None = None,
        rollback_failed: bool = False,
    ) -> None:
        why = (
            "the canary's evidence was not enough to judge it by the end of its bake, and canary.required is true"
            if not_verifiable
            else "the release is worse than the one it replaces by the engines' own evidence"
        )
        more = "; or send the canary more traffic (minRequests) or bake it longer (bakeSeconds)" if not_verifiable else ""
        if rolled_back is not None and not rollback_failed:
            fix = (
                "change the release (image, args, env) and deploy again, or deploy again with --retry-rejected to give "
                "the same release another canary" + more
            )
        else:
            fix = (
                "roll the canary back by deploying the stack's previous config (the old release): the same command, with the image and settings it had"
                + more
            )
        said = f"\n  {rolled_back}" if rolled_back else ""
        super().__init__(f"{verdict_line}\n  {why}; no other replica of the endpoint was moved to it{said}", fix=fix)
        self.verdict_line, self.not_verifiable = verdict_line, not_verifiable
        self.rolled_back = rolled_back is not None and not rollback_failed  # back on the release it ran before
        self.required, self.outcome, self.digest = required, outcome, digest

    def after_rollback(self, said: str, *, failed: bool) -> CanaryRejected:
        """This rejection, saying how the rollback that followed it ended."""
        return CanaryRejected(
            self.verdict_line,
            self.required,
            self.not_verifiable,
            outcome=self.outcome,
            digest=self.digest,
            rolled_back=said,
            rollback_failed=failed,
        )


class RolledBack(InferCraneError):
    """Not a failure: a rollback's run ended with every lane done. The run is ended as failed on
    purpose -- a successful run would make Pulumi delete every object it did not register -- and
    this is how the program says that its lanes finished."""

    applied_nothing = False

    def __init__(self) -> None:
        super().__init__("the rollback's lanes finished")


class StillDraining(InferCraneError):
    """A stage's replica still has a pod terminating past its drain: its new template is not applied
    (the ReplicaSet would start another pod beside the one that still holds its GPUs)."""

    def __init__(self, said: str) -> None:
        super().__init__(
            f"a replica's old pod is {said}; its new template was not applied (it would start another pod beside "
            "the one still holding its GPUs)",
            fix="see why the pod does not end (kubectl describe pod: a finalizer, a node gone), then deploy again",
        )


class CanaryRetryRefused(InferCraneError):
    """A release a canary rejected is asked for again: refused before anything is applied, unless
    the deploy is told to retry it (``--retry-rejected``)."""

    def __init__(self, stack: str, rejected: Sequence[tuple[str, str]]) -> None:
        super().__init__(
            f"stack {stack}: the release of "
            + "; of ".join(f"endpoint {endpoint} was rejected by its canary before ({said})" for endpoint, said in rejected)
            + "; nothing was applied",
            fix="change the release (image, args, env), or deploy again with --retry-rejected to give the same release "
            "another canary",
        )


class DeletionsRefused(InferCraneError):
    """Every lane of a rollout finished, but an object Pulumi deletes by name at the end of the run
    has become another's meanwhile: the run stops before Pulumi's deletions (nothing is deleted)."""

    applied_nothing = False

    def __init__(self, foreign: Sequence[str]) -> None:
        super().__init__(
            "every endpoint rolled and is ready, but the run stopped before Pulumi's deletions: an object it would "
            "delete by name became another's during the rollout; nothing was deleted:\n" + bullets(list(foreign)),
            fix="InferCrane never deletes another's object: rename or delete it yourself, then deploy again "
            "(the same command finishes the deletions)",
        )


class RolloutRefused(InferCraneError):
    """One engine run doing the whole change at once would breach an endpoint's rollout policy."""

    def __init__(self, stack: str, breaches: list[str]) -> None:
        self.breaches = breaches
        super().__init__(
            "this change must roll in waves, which one `pulumi up` cannot do; nothing was applied:\n" + bullets(breaches),
            fix=f"run `infercrane deploy --stack {stack}`: it rolls each endpoint in waves under its policy "
            "(`infercrane plan` shows them); or raise the endpoint's maxUnavailable / maxSurge if the "
            "outage or the extra GPUs are acceptable",
        )
