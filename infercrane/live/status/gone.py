"""The deletion wait: until the objects a command deleted are gone (or replaced by another uid),
one LIST per kind per tick of the objects carrying our managed-by label. Live-cluster layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from infercrane.core import naming
from infercrane.core.errors import ClusterError
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live
from infercrane.live.status.readiness import API_GRACE_SECONDS


def wait_gone(
    live: Live,
    objects: Mapping[tuple[str, str], str],
    *,
    kinds: Iterable[str] = (),
    timeout: float,
    poll_seconds: float = 0.5,
    report: Callable[[int], None] | None = None,
    api_grace: float = API_GRACE_SECONDS,
) -> tuple[list[str], dict[tuple[str, str], dict[str, Any]]]:
    """Wait until every ``(kind, name) -> uid`` is gone (or replaced by another uid); one LIST per
    kind per tick -- the objects' kinds and ``kinds`` -- of the objects carrying our managed-by
    label (``report`` gets the count still there after each). Returns ``Kind/name`` of what is
    still there after ``timeout`` and the last tick's listing, ``(kind, name) -> object``: the
    caller's proof of what remains, without another round of LISTs. An API server that stops
    answering is waited for ``api_grace`` seconds, then ClusterError (never a raw client error)."""
    left = dict(objects)
    every = sorted(set(kinds) | {k for k, _ in left})
    deadline = time.monotonic() + timeout
    lost_since: float | None = None  # when the API server stopped answering (a tick is then skipped)
    while True:
        listing: dict[tuple[str, str], dict[str, Any]] = {}
        try:
            for kind in every:
                try:
                    items = live.list(
                        cluster.resource_for({"kind": kind}),
                        labels=naming.managed_selector(),
                        action=f"list {kind}s in namespace {live.namespace}",
                    )
                    listing.update({(kind, o["metadata"]["name"]): o for o in items})
                except failures.NotFound:  # the kind is no longer served, nothing of it remains
                    continue
        except (failures.Unreachable, failures.Unavailable) as exc:
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since >= api_grace:
                raise ClusterError(
                    f"the Kubernetes API stopped answering while waiting for {len(left)} object(s) to be gone; "
                    f"the deletes were sent: {exc}"
                ) from exc
            time.sleep(poll_seconds)
            continue
        lost_since = None
        for ref, uid in list(left.items()):
            if (listing.get(ref) or {}).get("metadata", {}).get("uid") != uid:
                del left[ref]
        if report:
            report(len(left))
        if not left or time.monotonic() >= deadline:
            return sorted(f"{k}/{n}" for k, n in left), listing
        time.sleep(poll_seconds)
