"""What a stack remembers of its canaries between commands: a stack tag per endpoint whose release
a canary rejected, and one per endpoint whose release is being judged. Kept in the stack's backend
(not the stack file, not the CI job), so a rerun, a re-run job, another machine and plain ``pulumi
up`` all find them. Pure core: the tags come in as a mapping, their values go out as text.

- ``infercrane:rejected:<endpoint>`` = ``<release> <outcome> at <time>, record <digest>``: deploying
  that release again needs ``--retry-rejected``; plain ``pulumi up`` refuses it.
- ``infercrane:judging:<endpoint>`` = ``<release> since <time>``: written before a run whose canary
  bakes, removed once that run ended with every lane done (every canary accepted) or its verdict
  rejected. Found by a later command, the run that wrote it ended without a verdict (killed during
  its bake, lost with its machine): a replica on that release proves nothing by running -- it is
  judged again before the release goes further (:func:`infercrane.core.plan.rollout.plan`'s
  ``unproven``).
- ``infercrane:gpus:<endpoint>`` = ``<product>=<GPUs>,... since <time>``: written before a run
  whose lane borrows GPUs under ``rollout.maxExtraGpus``, unless one is there; removed once a run
  ends with that endpoint's lane finished. It is the endpoint's GPUs when the change began: a run
  cut short (killed, stopped) may leave a surge's pod beside the replica it replaces, and a rerun
  that counted what runs as the endpoint's own would let another lane borrow the cap again. Found,
  the rerun counts the endpoint's own from it and what it holds beyond as borrowed already
  (:attr:`infercrane.core.plan.waves.Rollout.lent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from infercrane.core.plan.ledger import Gpus, gpus
from infercrane.core.plan.waves import Rollout

REJECTED_TAG: Final = "infercrane:rejected:"
JUDGING_TAG: Final = "infercrane:judging:"
GPUS_TAG: Final = "infercrane:gpus:"


@dataclass(frozen=True)
class Marks:
    """The stack's canary marks, per endpoint."""

    rejected: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # endpoint -> (release, the rejection in words)
    judging: Mapping[str, str] = field(default_factory=dict)  # endpoint -> the release a run began to judge
    started: Mapping[str, Gpus] = field(default_factory=dict)  # endpoint -> its GPUs when the change began

    @classmethod
    def of(cls, tags: Mapping[str, str]) -> Marks:
        rejected, judging, started = {}, {}, {}
        for name, value in tags.items():
            release, _, said = value.partition(" ")
            if name.startswith(REJECTED_TAG):
                rejected[name.removeprefix(REJECTED_TAG)] = (release, said)
            elif name.startswith(JUDGING_TAG):
                judging[name.removeprefix(JUDGING_TAG)] = release
            elif name.startswith(GPUS_TAG) and (held := _gpus_of(release)) is not None:
                started[name.removeprefix(GPUS_TAG)] = held
        return cls(rejected, judging, started)

    def rejected_in(self, rollout: Rollout | None) -> dict[str, tuple[str, str]]:
        """endpoint -> (its release, the rejection in words), for each endpoint ``rollout`` moves to
        a release a canary rejected."""
        moving = moves(rollout)
        return {e: v for e, v in self.rejected.items() if moving.get(e) == v[0]}

    def unjudged_in(self, rollout: Rollout | None) -> dict[str, str]:
        """endpoint -> its release, for each endpoint ``rollout`` moves to a release whose canary a
        run began to judge and never finished judging."""
        moving = moves(rollout)
        return {e: release for e, release in self.judging.items() if moving.get(e) == release}


def moves(rollout: Rollout | None) -> dict[str, str]:
    """endpoint -> the one release ``rollout`` moves its available replicas to (endpoints moving none, or several, left out)."""
    return {e.endpoint: e.release for e in rollout.endpoints if e.release} if rollout is not None else {}


def rejected_value(release: str, outcome: str, at: str, digest: str) -> str:
    return f"{release} {outcome} at {at}, record {digest}"


def judging_value(release: str, at: str) -> str:
    return f"{release} since {at}"


def gpus_value(held: Gpus, at: str) -> str:
    """``NVIDIA-L40S=2,NVIDIA-H100-80GB-HBM3=1 since <time>`` (``none since <time>``: no GPUs)."""
    return f"{','.join(f'{p}={n}' for p, n in held) or 'none'} since {at}"


def _gpus_of(text: str) -> Gpus | None:
    """A gpus mark's held GPUs; None for a value this version cannot read (then the endpoint is
    planned as if unmarked: from what runs)."""
    if text == "none":
        return ()
    out: dict[str, int] = {}
    for part in text.split(","):
        product, eq, n = part.rpartition("=")
        if not eq or not n.isdigit():
            return None
        out[product] = out.get(product, 0) + int(n)
    return gpus(out)
