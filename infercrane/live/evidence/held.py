"""A held surge canary's evidence (:mod:`infercrane.live.status.hold`): one Service routes to the
canary's pod and to the old pod held beside it, so the bake tells them apart by their ReplicaSet --
the canary's is the one its Deployment's ``Progressing`` condition names (the current template),
every other pod behind the Service is an old pod, read as a baseline replica of its own
(:data:`OLD_PODS`). Without a named current ReplicaSet neither side has an address: the canary's
figures are missing (the verdict waits, never passes), never mixed with the old pod's.
Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Final

from infercrane.core import naming
from infercrane.core.model.replica import Replica
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.status import warnings

if TYPE_CHECKING:
    from infercrane.live.evidence.served import Checker

#: The baseline side of a held canary's old pods, in the record: ``<key> (old pod)``.
OLD_PODS: Final = "{key} (old pod)"

Address = tuple[str, int]


def current_replica_set(live: Live, key: str) -> str | None:
    """The ReplicaSet of replica ``key``'s current template, as its Deployment names it (None: not
    named yet, or not readable)."""
    from lightkube.resources.apps_v1 import Deployment

    try:
        return warnings.current_replica_set(live.get(Deployment, naming.object_name(key)))
    except failures.LiveError:
        return None


def addresses(
    checker: Checker, replicas: Mapping[str, Replica], held: Collection[str], current: Callable[[str], str | None]
) -> tuple[Callable[[Replica], list[Address]], list[str]]:
    """The bake's addresses when canaries are held: a held key's canary side is its pods of the
    current ReplicaSet, its old pods a baseline replica of their own (:data:`OLD_PODS`); every
    other replica's, the checker's. Also the old sides to bake: the held keys that have old pods
    now (a hold that ended, or none placed, leaves none)."""
    olds = {OLD_PODS.format(key=k): k for k in held}

    def split(key: str) -> tuple[list[Address], list[Address]]:
        rs = current(key)
        if rs is None:
            return [], []
        pods = checker.pods(replicas[key])
        new = [(a, p) for a, p, pod in pods if pod.startswith(rs + "-")]
        return new, [(a, p) for a, p, pod in pods if not pod.startswith(rs + "-")]

    def of(replica: Replica) -> list[Address]:
        if replica.key in held:
            return split(replica.key)[0]
        if replica.key in olds:
            return split(olds[replica.key])[1]
        return checker.addresses(replica)

    return of, [side for side, k in olds.items() if split(k)[1]]
