"""A replica's rollout state: one word per state, defined once from the workload object's own
status, read by the planner, membership and the waits alike. Pure core.

=============  ==========================================================  =========  ===========
state          the workload object says                                    available  holds GPUs
=============  ==========================================================  =========  ===========
``starting``   no pod available (a first start, an in-place restart, a      no         maybe
               crash loop, a pod Pending on a full pool)
``available``  a pod available, but not settled: a surge, an autoscaler's   yes        yes
               scale-up or a terminating pod is still under way
``settled``    the current template rolled out, every pod available,       yes        yes
               nothing terminating (the readiness wait's own rule)
``draining``   the object is being deleted: its pods stop and drain          no         until gone
=============  ==========================================================  =========  ===========

A replica that is *absent* has no object and is no member. *Available* is what the rollout
policy counts: a replica with an available pod is never counted down, whether it is settled or
not. *Settled* is what a wave waits for: the readiness wait's verdict *ready* is this state, one
word each side of the wait (:func:`~infercrane.live.status.verdicts.judged`). Whether the engine answers what it should (serving
evidence) is judged on top of these, by the readiness wait and routing membership.
"""

from __future__ import annotations

from enum import StrEnum


class ReplicaState(StrEnum):
    STARTING = "starting"
    AVAILABLE = "available"
    SETTLED = "settled"
    DRAINING = "draining"

    @property
    def available(self) -> bool:
        """A pod answers now: the replica counts as up for the rollout policy."""
        return self in (ReplicaState.AVAILABLE, ReplicaState.SETTLED)


def replica_state(*, deleting: bool, settled: bool, available: bool) -> ReplicaState:
    """The one rule: a replica being deleted drains; one the readiness rule calls ready is
    settled; one with an available pod is available; any other is starting."""
    if deleting:
        return ReplicaState.DRAINING
    if settled:
        return ReplicaState.SETTLED
    return ReplicaState.AVAILABLE if available else ReplicaState.STARTING
