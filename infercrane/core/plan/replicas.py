"""What the rollout planner plans from: a replica that runs now (:class:`LiveReplica`, read from
the live objects) and a replica of the config (:class:`Target`). Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercrane.core.plan.states import ReplicaState


@dataclass(frozen=True)
class LiveReplica:
    """A replica that runs now: its live workload object, owned by this stack, in its rollout state."""

    key: str
    endpoint: str
    state: ReplicaState
    gpus: int
    product: str = ""  # the GPU product its pods are placed on (the product label's value)
    release: str = ""  # what its pods run (core.plan.workload.release_of; "" unknown)
    #: Its pods hold more than its own count now (live.status.verdicts.holds_more): a rolling
    #: update's old pod beside the new one, a pod still terminating.
    surplus: bool = False

    @property
    def available(self) -> bool:
        """A pod answers now, settled or not: never counted down."""
        return self.state.available


@dataclass(frozen=True)
class Target:
    """A replica of the config, and whether applying it restarts a live replica's pods."""

    key: str
    endpoint: str
    gpus: int
    restarts: bool = False
    moves: bool = False  # it runs in another form (another workload kind): its old form goes, its new one starts
    product: str = ""  # the GPU product it asks for
    release: str = ""  # what its pods will run (core.plan.workload.release_of; "" unknown)
