"""What plain ``pulumi`` reads for itself, where no ``infercrane`` command hands it over: the stack's
state and its tags (each with one Pulumi CLI call from inside the program), and the refusals a
change in one run gets -- one beyond an endpoint's rollout policy, a release a canary rejected.
Pulumi shell.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from infercrane.core.errors import InferCraneError
from infercrane.core.plan.ledger import Gpus
from infercrane.core.plan.marks import Marks, moves
from infercrane.core.plan.waves import Rollout
from infercrane.core.stops import CanaryRetryRefused, RolloutRefused


def _pulumi(stack: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One Pulumi CLI command on ``stack`` from inside the program (plain ``pulumi`` runs it: the
    CLI is on PATH), its output captured."""
    cli = shutil.which("pulumi") or "pulumi"
    return subprocess.run(
        [cli, *args, "--stack", stack, "--non-interactive"], capture_output=True, text=True, check=False, timeout=120
    )


def own_state(stack: str) -> dict[str, Any]:
    """The stack's own state, read with ``pulumi stack export`` -- under plain ``pulumi``, where no
    caller hands over what it says: the slot names of components still named by slot (never
    computed from the current config: removing, reordering or moving a replica changes the slots
    a config gives, and an alias to another key's slot would delete that key's objects), and the
    namespaces its replicas run in (a ``namespace`` switch counts them)."""
    done = _pulumi(stack, "stack", "export")
    if done.returncode != 0:
        raise InferCraneError(
            f"could not read the state of stack {stack!r} to find how its replicas are named; nothing was applied: "
            + (done.stderr.strip().splitlines() or ["pulumi stack export failed"])[-1],
            fix=f"run `infercrane deploy --stack {stack}`, which reads the state itself",
        )
    return dict(json.loads(done.stdout or "{}").get("deployment") or {})


def own_tags(stack: str) -> dict[str, str]:
    """The stack's tags, read with ``pulumi stack tag ls`` -- under plain ``pulumi``. Fails closed:
    a backend that cannot say them refuses the run (a rejection is never taken as absent)."""
    done = _pulumi(stack, "stack", "tag", "ls", "--output", "json")
    try:
        found = json.loads(done.stdout or "{}") if done.returncode == 0 else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise InferCraneError(
            f"could not read the tags of stack {stack!r}, where its canaries' verdicts are kept; nothing was applied: "
            + (done.stderr.strip().splitlines() or ["pulumi stack tag ls failed"])[-1],
            fix=f"run `infercrane deploy --stack {stack}`, or check the stack's backend (`pulumi stack tag ls --stack {stack}`)",
        )
    return {str(k): str(v) for k, v in found.items()}


def judged(stack: str, plan: Rollout, replan: Callable[[frozenset[str], Mapping[str, Gpus]], Rollout | None]) -> Rollout:
    """Plain ``pulumi up`` and the stack's canary marks (:mod:`infercrane.core.plan.marks`), read
    only when the plan moves a release: a release a canary rejected is refused (``pulumi preview``
    warns), and one whose judging a deploy began and never ended is planned as unproven -- its
    replicas on it prove nothing, so it needs a canary again, which plain ``pulumi up`` refuses as
    it refuses any canary (``infercrane deploy`` bakes it). Under ``rollout.maxExtraGpus`` the marks
    are read too for each endpoint's GPUs at the change's start (a run cut short left them): its own
    is counted from them, never from what a cut surge left running (plain ``pulumi up`` reads these
    marks; only ``infercrane deploy`` writes them)."""
    if not moves(plan) and plan.max_extra_gpus is None:
        return plan
    found = Marks.of(own_tags(stack))
    rejected = found.rejected_in(plan)
    if rejected:
        refusal = CanaryRetryRefused(stack, [(e, said) for e, (_, said) in rejected.items()])
        if not pulumi.runtime.is_dry_run():
            raise refusal
        pulumi.log.warn(f"`pulumi up` will refuse: {refusal}")
    unjudged = found.unjudged_in(plan)
    started = {e.endpoint: found.started[e.endpoint] for e in plan.endpoints if e.endpoint in found.started}
    return (replan(frozenset(unjudged.values()), started) or plan) if unjudged or started else plan


def refuse_beyond_policy(stack: str, plan: Rollout) -> None:
    """Plain ``pulumi up`` does a change in one run: refuse one that would breach an endpoint's
    rollout policy (preview only warns), naming the command that rolls it in waves."""
    breaches = [
        f"endpoint {e.endpoint} rolls in {len(e.waves)} wave(s) under maxUnavailable {e.max_unavailable}, "
        f"maxSurge {e.max_surge}; at once {e.all_at_once()}"
        for e in plan.beyond_one_step()
    ]
    cap = plan.max_extra_gpus
    breaches += [
        f"the endpoints' surges would borrow {n} GPU(s) of {product or 'their GPU product'} at once; "
        f"rollout.maxExtraGpus {cap} lends them in turns"
        for product, n in sorted(plan.borrowed_at_once().items())
        if cap is not None and n > cap
    ]
    if breaches:
        refusal = RolloutRefused(stack, breaches)
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(f"`pulumi up` will refuse: {refusal}")
        else:
            raise refusal
