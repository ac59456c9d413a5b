"""What a rollout is, as :mod:`infercrane.core.plan.rollout` plans it: per endpoint its waves and the
lowest point on the way (:class:`EndpointRollout`), and how one engine run carries it out: per
endpoint a :class:`Lane` of :class:`Stage` s, each lane at its own pace (:class:`Rollout`). Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from infercrane.core.model.endpoints import CanaryPolicy
from infercrane.core.plan import ledger
from infercrane.core.plan.ledger import Gpus

Mode = Literal["in place", "surge"]


IN_PLACE: Final = "in place"


SURGE: Final = "surge"


#: How a stage deletes what it ends by deleting. Foreground: the workload object stays, with its
#: ReplicaSets, until its pods are gone -- drained, their GPUs free -- so waiting for the object to
#: vanish waits for the drain (the deploying identity may not read pods). Background would let the
#: next stage start while the predecessor's pod still drains and holds its GPUs.
STAGE_DELETION: Final = "Foreground"


@dataclass(frozen=True)
class Wave:
    """One wave of an endpoint: ``down`` stop (deleted, or restarted in place), ``up`` start
    and are ready before the next wave begins."""

    down: tuple[str, ...]
    up: tuple[str, ...]


@dataclass(frozen=True)
class EndpointRollout:
    """What a change does to one endpoint: its waves and the lowest point on the way."""

    endpoint: str
    max_unavailable: int
    max_surge: int
    mode: Mode
    waves: tuple[Wave, ...]
    ready_before: int
    ready_after: int
    lowest_ready: int
    gpus_before: int
    gpus_after: int
    peak_gpus: int  # the sum over GPU products of each product's peak on the way
    peak_by_product: tuple[tuple[str, int], ...] = ()  # each GPU product's peak, when the change spans several
    extra_gpus: int = 0  # per product, GPUs above both what the endpoint holds of it before and after: what a surge borrows
    updates: int = 0  # available replicas whose pods restart
    replacements: int = 0  # new keys taking available old keys' places
    moves: int = 0  # keys moving to another workload API (their old form goes, their new one starts)
    deleted_idle: tuple[str, ...] = ()  # leave while not available: deleted in the first step
    idle_first: bool = False  # ... in a stage of their own, before new replicas of the first step take GPUs
    replaced_first: tuple[str, ...] = ()  # in place: the first wave's old replicas, deleted before it starts
    repaired_first: tuple[str, ...] = ()  # not available now: applied and ready before the first wave starts
    #: Of those, the ones that restart under a surge: their workload object is deleted, then created
    #: again (Pulumi's delete-before-replace), so the old pod goes before the new one starts -- a
    #: rolling update would keep it, and its GPU, until the new one is available.
    recreated: tuple[str, ...] = ()
    settling_first: tuple[str, ...] = ()  # available, their own rollout under way: settled before the first wave starts
    retired_first: tuple[str, ...] = ()  # available replicas without a successor the GPU budget retires before the waves
    deleted_last: tuple[str, ...] = ()  # available replicas that leave without a successor
    canary: tuple[str, ...] = ()  # the first wave of the release, judged before the rest (core.plan.canary)
    baseline: tuple[str, ...] = ()  # the replicas still on the old release while the canary bakes
    canary_wave: int | None = None  # the canary's wave (0-based)
    canary_first: bool = False  # the canary is brought back first (a killed run left it down): judged then
    release: str = ""  # the release its available replicas move to (core.plan.workload.release_of; "" none, or several)
    canary_policy: CanaryPolicy | None = None  # the endpoint's canary policy, when its release has units
    warm_first: bool = False  # in place, under rollout.warmFirst: each wave's release pulled onto its nodes first

    canary_unneeded: str = ""  # why a release under a canary policy needs none: it already serves on a replica
    running: tuple[str, ...] = ()  # the keys that ran when it was planned: a rollback never deletes one (core.plan.rollback)
    #: The keys not available when it was planned: the plan spends no unavailability on them. One
    #: that serves again before its stage applies or deletes it stops the lane (shell.lanes): taken
    #: down then, it would take the endpoint below its floor; a rerun plans with it serving.
    down: tuple[str, ...] = ()
    #: Per GPU product, what it held when the change began: what it holds now, or, after a run cut
    #: short, the stack's record of the change's start (core.plan.marks). Its own is this or the
    #: config's, whichever is more; a run cut short may have left it holding more (``lent``).
    started: Gpus = ()
    lent: Gpus = ()  # per GPU product, what it holds now beyond its own: borrowed already when the run begins

    @property
    def held(self) -> tuple[str, ...]:
        """The canary's keys its own Deployment's rolling update moves -- a same-key update under a
        surge: their old pod is held serving beside the canary until the verdict
        (:mod:`infercrane.live.status.hold`), so a REJECT restarts nothing and an ACCEPT costs no
        load more than the release's own."""
        if self.mode != SURGE or self.canary_wave is None or self.canary_first:
            return ()
        wave = self.waves[self.canary_wave]
        return tuple(k for k in self.canary if k in wave.up and k in wave.down)

    @property
    def no_canary(self) -> str:
        """Why a release under a canary policy has no canary though it needs one ("" it has one,
        needs none, or none is asked)."""
        if self.canary_policy is None or self.canary or self.canary_unneeded:
            return ""
        if not self.ready_before:
            return "none of its replicas serves now, so none is left on the old release to compare the canary with"
        return "no replica would stay on the old release to compare the canary with"

    @property
    def stages_needed(self) -> int:
        """Stages this endpoint needs, one after the other: one per wave, and one before the first
        wave when in place replacements must free their GPUs first or replicas that do not serve
        must serve again first; a canary's bake is a step of its own. More than one is more than
        one plain ``pulumi up`` can do."""
        staged = int(self.idle_first) + int(self.first_before_waves) + max(1, len(self.waves))
        return max(staged, 2) if self.canary else staged  # a canary's bake comes before anything after it

    @property
    def first_before_waves(self) -> bool:
        """Whether something must happen before the first wave: replicas brought back or let
        settle, a surplus retired, in place the first wave's old replicas stopped."""
        return bool(self.replaced_first or self.repaired_first or self.retired_first or self.settling_first)

    def describe(self, stage: Stage) -> str:
        """``qwen wave 2/2 (down a1; up b1)`` -- what one stage of this endpoint's lane does."""
        if stage.wave is not None:
            wave = self.waves[stage.wave]
            canary = (
                f"; the canary: bakes {self.canary_policy.bake_seconds} s beside {', '.join(self.baseline)}"
                if stage.bake and self.canary_policy is not None
                else ""
            )
            return (
                f"{self.endpoint} wave {stage.wave + 1}/{len(self.waves)} "
                f"(down {', '.join(wave.down)}; up {', '.join(wave.up)}{canary})"
            )
        if not stage.apply and self.idle_first and stage.delete == frozenset(self.deleted_idle):
            return f"{self.endpoint}: delete {', '.join(self.deleted_idle)} first (not available: frees GPUs for new replicas)"
        first = (
            [f"bring back {', '.join(self.repaired_first)} first (not available: the waves wait for it)"]
            if self.repaired_first
            else []
        )
        first += (
            [f"recreate {', '.join(self.recreated)} (down: its old pod goes before its new one starts, no GPU more)"]
            if self.recreated
            else []
        )
        first += (
            [f"let {', '.join(self.settling_first)} settle first (available, its own rollout under way: the waves wait for it)"]
            if self.settling_first
            else []
        )
        first += (
            [f"retire {', '.join(self.retired_first)} first (no successor; frees GPUs for the surge)"]
            if self.retired_first
            else []
        )
        first += [f"stop {', '.join(self.replaced_first)} first (in place: frees its GPUs)"] if self.replaced_first else []
        if stage.bake and self.canary_policy is not None:
            first.append(
                f"bake the canary {', '.join(self.canary)} {self.canary_policy.bake_seconds} s beside {', '.join(self.baseline)}"
            )
        return f"{self.endpoint}: {', then '.join(first) or 'apply'}"

    def where(self, stage: Stage) -> str:
        """Where in this endpoint's rollout ``stage`` is: ``wave 2/4``, or before its first wave."""
        return f"wave {stage.wave + 1}/{len(self.waves)}" if stage.wave is not None else "the stage before its first wave"

    def all_at_once(self) -> str:
        """What one engine run doing this endpoint's whole change at once would do to it."""
        parts = [f"the canary {', '.join(self.canary)} would not bake nor be judged before the rest"] if self.canary else []
        if self.updates:
            parts.append(f"{self.updates} available replica(s) would restart together")
        if self.replacements:
            parts.append(f"{self.replacements} new replica(s) would need GPUs beside the ones they replace")
        if self.moves:
            parts.append(f"{self.moves} replica(s) would move to the new workload API together, each beside its old form")
        return " and ".join(parts)


@dataclass(frozen=True)
class Stage:
    """One stage of an endpoint's lane: ``apply`` keys are registered with their new manifests and
    waited for (ready, and serving what they should); once they are, ``delete`` keys -- all of a
    key that leaves, only the old form of a key that moves -- are deleted by exact ownership and
    waited for until gone. Only then does the lane's next stage begin."""

    apply: frozenset[str]
    delete: frozenset[str] = frozenset()
    borrow: tuple[tuple[str, int], ...] = ()  # per GPU product, what it holds beyond the endpoint's own while it runs
    keep: tuple[tuple[str, int], ...] = ()  # ... and still holds once its deletions are gone (core.plan.ledger)
    wave: int | None = None  # the endpoint's wave this stage rolls (0-based); None: before the first wave
    bake: bool = False  # the canary's stage: once ready, it bakes and is judged before its deletions
    #: Of ``apply``, the keys whose workload object is deleted and created again rather than updated
    #: (down, restarting under a surge: :attr:`EndpointRollout.recreated`).
    recreate: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Lane:
    """One endpoint's stages, in order: it moves at its own pace, whatever the other endpoints do."""

    endpoint: str
    stages: tuple[Stage, ...]

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(k for s in self.stages for k in s.apply)


@dataclass(frozen=True)
class Rollout:
    endpoints: tuple[EndpointRollout, ...]
    lanes: tuple[Lane, ...]
    max_extra_gpus: int | None = None  # rollout.maxExtraGpus: the lanes borrow from one ledger (core.plan.ledger)
    #: The live keys whose pod template the rollout changes: only these can start a pod beside one
    #: still draining, so only these wait for a drain before they are applied. None: every key.
    restarts: frozenset[str] | None = None

    def never_lent(self) -> list[str]:
        """Each stage that borrows more of a GPU product at once than ``max_extra_gpus`` can ever
        lend -- beyond what its endpoint holds borrowed already (``lent``): its lane could never start it."""
        stages = {
            f"endpoint {e.endpoint} {e.where(s)}": tuple((p, n) for p, n in s.borrow if n > dict(e.lent).get(p, 0))
            for e, lane in zip(self.endpoints, self.lanes, strict=True)
            for s in lane.stages
        }
        return ledger.too_large(self.max_extra_gpus, stages)

    @property
    def lent(self) -> tuple[tuple[str, Gpus], ...]:
        """endpoint -> what it holds beyond its own when the run begins (a run cut short left it):
        the ledger's start, so no lane borrows it again."""
        return tuple((e.endpoint, e.lent) for e in self.endpoints if e.lent)

    def started(self) -> dict[str, Gpus]:
        """endpoint -> what it held when the change began, for each endpoint whose lane borrows:
        what the stack records before the run (core.plan.marks), so a rerun counts the same own."""
        borrowing = {lane.endpoint for lane in self.lanes if any(s.borrow for s in lane.stages)}
        return {e.endpoint: e.started for e in self.endpoints if e.endpoint in borrowing or e.lent}

    def borrowed_at_once(self) -> dict[str, int]:
        """Per GPU product, what every lane's most borrowing stage takes together: what one engine
        run doing every lane at once (plain ``pulumi up``) would hold beyond the endpoints' own."""
        out: dict[str, int] = {}
        for lane in self.lanes:
            for product in {p for s in lane.stages for p, _ in s.borrow}:
                out[product] = out.get(product, 0) + max(dict(s.borrow).get(product, 0) for s in lane.stages)
        return out

    @property
    def waves(self) -> int:
        return max((len(e.waves) for e in self.endpoints), default=0)

    @property
    def stages(self) -> int:
        """The longest lane's stages: what the slowest endpoint waits for, one after the other."""
        return max((len(lane.stages) for lane in self.lanes), default=0)

    def restarts_in_place(self) -> frozenset[str]:
        """The keys whose new pod starts only once their own old pod has drained: in place, a
        restarted key (its Deployment recreates), and a recreated one -- a wave's wait includes
        that drain."""
        return frozenset(
            k
            for e in self.endpoints
            for k in (
                [*e.repaired_first, *(k for w in e.waves for k in w.up if k in w.down)] if e.mode == IN_PLACE else e.recreated
            )
        )

    @property
    def recreated(self) -> frozenset[str]:
        """Every endpoint's keys whose workload object is deleted and created again (:attr:`EndpointRollout.recreated`)."""
        return frozenset(k for e in self.endpoints for k in e.recreated)

    def beyond_one_step(self) -> list[EndpointRollout]:
        """The endpoints that one engine run doing everything at once would take outside their
        policy (more replicas down, or more GPUs, than allowed): they need several stages."""
        return [e for e in self.endpoints if e.stages_needed > 1]
