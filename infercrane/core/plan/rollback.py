"""What a rejected canary's rollback does: the canary's replicas back on the release they ran
before the deploy, under the endpoint's own rollout policy, by the command that rejected it.

When a canary is rejected its lane has stopped before the bake's deletions: no replica beyond the
canary moved. Of the canary (:attr:`~infercrane.core.plan.waves.EndpointRollout.canary`):

- a key the state recorded before the deploy on another release is **restored**: registered again
  with exactly the manifests recorded then (its Deployment restarts its pod on the old release);
- an old key the canary replaced in place (deleted before the canary started) is restored too;
- a key the deploy brought (a surge's successor, a new replica: one that did not run when the
  rollout was planned) is **removed**: deleted by exact ownership and waited for until gone;
- a key that already ran the rejected release before the deploy, moved to another workload API in
  place, or ran before the deploy without a record of it in the state (the first deploy after
  ``takeover``, a lost state) has nothing recorded to return to: it is **left**, said, for the
  previous config -- never deleted.

In place the removals go first (their GPUs free), then the restored keys start, ``maxUnavailable``
at a time; with a surge the restored keys start first, ``maxSurge`` at a time (borrowing what the
canary's stage borrowed), and the removals go once they are ready. Pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infercrane.core.plan.waves import IN_PLACE, EndpointRollout, Lane, Mode, Stage


@dataclass(frozen=True)
class Rollback:
    """One endpoint's rollback of its rejected canary."""

    endpoint: str
    mode: Mode
    restore: tuple[str, ...]  # registered again with the manifests the state recorded before the deploy
    remove: tuple[str, ...]  # brought by the deploy: deleted
    left: tuple[str, ...]  # nothing recorded to return to (they ran the rejected release before, or moved)
    borrow: tuple[tuple[str, int], ...] = ()  # a surge: what the canary's stage borrowed, borrowed again
    per_wave: int = 1  # restored at a time: the policy's maxUnavailable in place, its maxSurge with a surge

    @property
    def lane(self) -> Lane:
        """The rollback as a lane of stages (:mod:`infercrane.shell.lanes` carries it out): the
        restored keys ``per_wave`` at a time -- a canary of several replicas (a rerun judging again
        the replicas a killed run left on the release) never goes back all at once."""
        remove = frozenset(self.remove)
        size = max(1, self.per_wave)
        waves = [frozenset(self.restore[i : i + size]) for i in range(0, len(self.restore), size)]
        if self.mode == IN_PLACE:
            stages = [Stage(apply=frozenset(), delete=remove)] if remove else []
            stages += [Stage(apply=wave) for wave in waves]
        elif waves:
            stages = [Stage(apply=wave, borrow=self.borrow) for wave in waves]
            stages[-1] = Stage(apply=waves[-1], delete=remove, borrow=self.borrow)
        else:
            stages = [Stage(apply=frozenset(), delete=remove)] if remove else []
        return Lane(self.endpoint, tuple(stages))

    def describe(self) -> str:
        """``qwen: it-r0 back to the release it ran before; remove it-r2 (in place)``."""
        parts = [f"{', '.join(self.restore)} back to the release recorded before this deploy"] if self.restore else []
        parts += [f"remove {', '.join(self.remove)} (brought by this deploy)"] if self.remove else []
        first = "removed first, then restored" if self.mode == IN_PLACE and self.remove and self.restore else ""
        how = f"{self.mode}{': ' + first if first else ''}"
        return f"{self.endpoint}: {'; '.join(parts) or 'nothing to return to'} ({how})"


def plan_rollback(e: EndpointRollout, lane: Lane, before: Mapping[str, str]) -> Rollback:
    """The rollback of ``e``'s canary, whose lane stopped at its bake; ``before``: key -> the release
    its workload ran by the state recorded before the deploy (keys it did not record are absent)."""
    bake = next((i for i, s in enumerate(lane.stages) if s.bake), len(lane.stages))
    deleted = {k for s in lane.stages[:bake] for k in s.delete}
    replaced = set(e.waves[e.canary_wave].down) - set(e.canary) if e.canary_wave is not None else set()
    moved = {k for k in e.canary if k in deleted}  # its old form went before its new one: in place, another workload API
    # A key that ran when the rollout was planned served before the deploy: with no record to
    # return to (the first deploy after takeover, a lost state), it is left as it is -- never deleted.
    unrecorded = {k for k in e.canary if k not in before and k in e.running}
    left = sorted(k for k in e.canary if k in moved or k in unrecorded or (k in before and before[k] == e.release))
    restore = [k for k in e.canary if k in before and k not in left] + sorted(replaced & deleted & before.keys())
    remove = sorted(k for k in e.canary if k not in before and k not in unrecorded)
    borrow = lane.stages[bake].borrow if bake < len(lane.stages) else ()
    per_wave = e.max_unavailable if e.mode == IN_PLACE else e.max_surge
    return Rollback(e.endpoint, e.mode, tuple(sorted(restore)), tuple(remove), tuple(left), borrow, per_wave)
