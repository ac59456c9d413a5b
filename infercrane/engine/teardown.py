"""destroy: delete exactly this stack's objects -- all of them -- then clear the Pulumi state.

pulumi-kubernetes deletes what its state lists, checks no ownership, and waits for each Service
deletion with its own informer (without ``watch`` on services, with relists: minutes at 100
replicas). ``pulumi destroy`` is not used; instead:

1. the namespace's live objects of our kinds are listed (one LIST per kind);
2. every live object with this stack's exact ownership is deleted, in parallel, each with a
   ``uid`` precondition (only the object that was checked) and background propagation -- those
   in the state and those missing from it (lost state, a killed update, a half-done key
   change) alike; decoys (our label without our exact annotations, another stack's) are never
   touched; a state object whose live namesake lacks our ownership (replaced by a foreign
   object) is refused, named and left untouched;
3. meanwhile the state is read (from the backend directly, see ``infercrane.engine.backend``) and
   cleared (one ``pulumi stack import`` of the same checkpoint without resources: no provider, no
   program, no Automation API). Destroy finds our objects by their ownership,
   never by the state, so clearing it first loses nothing: an object whose DELETE fails, or that
   a killed run did not reach, is still ours and is deleted by the next run (and a ``deploy``
   adopts it again after its preflight);
4. the deleted objects are awaited with one LIST per kind per tick until every one is gone; the
   last tick's LIST (every kind of the stack's, our managed-by label: a superset of what the
   stack owns) proves that zero owned objects remain.

Engine layer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.errors import ClusterError, bullets
from infercrane.core.events import Deleted, Remaining, Sink, discard
from infercrane.core.model import config as cfg
from infercrane.core.state.urns import KIND_OF_TOKEN
from infercrane.engine.workspace import Engine
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live
from infercrane.live.status import gone, prefetch

GONE_TIMEOUT_SECONDS: Final = 300.0


@dataclass
class DestroyResult:
    deleted: list[str] = field(default_factory=list)  # Kind/name, state objects
    orphans: list[str] = field(default_factory=list)  # Kind/name, owned but missing from state
    refused: list[str] = field(default_factory=list)  # Kind/name: why (foreign namesake)
    remaining: list[str] = field(default_factory=list)  # owned objects still present at the end


def state_objects(state: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(kind, name) -> urn`` of every Kubernetes object in a stack's state (``Engine.state``)."""
    out = {}
    for res in state.get("resources") or []:
        kind = KIND_OF_TOKEN.get(res.get("type", ""))
        if kind and res.get("id"):
            out[(kind, str(res["id"]).split("/")[-1])] = str(res["urn"])
    return out


def _result(
    targets: Mapping[tuple[str, str], str],
    state: Collection[tuple[str, str]],
    seen: Mapping[tuple[str, str], dict[str, Any]],
    namespace: str,
    stack_id: str,
) -> DestroyResult:
    """What the deletions were: of the state's objects or orphans of it, and the state's objects
    left alone because they are not owned by this stack."""
    result = DestroyResult()
    for ref in targets:
        (result.deleted if ref in state else result.orphans).append(f"{ref[0]}/{ref[1]}")
    for kind, name in sorted(state):
        obj = seen.get((kind, name))
        reasons = naming.not_owned(obj, namespace=namespace, stack=stack_id) if obj is not None else []
        if reasons:
            result.refused.append(f"{kind}/{name}: not owned by this stack ({'; '.join(reasons)})")
    return result


def destroy(
    engine: Engine,
    config: cfg.InferCraneConfig,
    live: Live,
    on_output: Callable[[str], None] | None = None,
    *,
    sink: Sink = discard,
) -> DestroyResult:
    """See the module docstring. The person's progress goes to ``sink``: a
    :class:`~infercrane.core.events.Deleted` after each accepted DELETE, a
    :class:`~infercrane.core.events.Remaining` after each LIST of the wait."""
    t = config.kubernetes
    stack_id = naming.stack_id(engine.stack_name)
    engine.check_passphrase()  # the state will be cleared: refuse now, not after the deletes
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    targets: dict[tuple[str, str], str] = {}  # (kind, name) -> uid
    outcomes: list[tuple[tuple[str, str], str | None]] = []

    def delete(item: tuple[tuple[str, str], str]) -> tuple[tuple[str, str], str | None]:
        (kind, name), uid = item
        try:
            live.delete_exact(kind, name, uid)
            return (kind, name), None
        except failures.Conflict:  # the uid precondition failed: replaced since it was checked
            return (kind, name), "replaced by another object since it was checked; left untouched"
        except failures.LiveError as exc:
            return (kind, name), str(exc)

    def delete_owned(kinds: Iterable[str]) -> None:
        found = live.by_name(kinds)
        seen.update(found)
        owned = {
            ref: obj["metadata"]["uid"]
            for ref, obj in sorted(found.items())
            if not naming.not_owned(obj, namespace=t.namespace, stack=stack_id)
        }
        targets.update(owned)
        for outcome in pool.map(delete, owned.items()):
            outcomes.append(outcome)
            sink(Deleted(sum(why is None for _, why in outcomes), len(targets)))

    def read_then_clear() -> dict[str, Any]:
        recorded = engine.state()
        if recorded.get("resources") or recorded.get("pending_operations"):
            engine.clear_state(recorded)
        return recorded

    with ThreadPoolExecutor(max_workers=cluster.CONCURRENT_REQUESTS) as pool:
        bookkeeping = pool.submit(read_then_clear)  # in parallel with the LIST and the DELETEs
        delete_owned(t.object_kinds)
        recorded = bookkeeping.result()
        state = state_objects(recorded)
        if other := {kind for kind, _ in state} - set(t.object_kinds):  # the stack changed workload API
            delete_owned(sorted(other))
        if any(config.rollout_for(r.name).warm_first for r in config.replicas):  # a prefetch pod a killed deploy left
            prefetch.clean(live, stack_id)
    errors = [f"{k}/{n}: {why}" for (k, n), why in outcomes if why]
    if errors:
        raise ClusterError("destroy could not delete every owned object:\n" + bullets(errors))
    result = _result(targets, state, seen, t.namespace, stack_id)
    if on_output:
        on_output(f"deleted {len(targets)} owned object(s); waiting until they are gone")
    # The wait's last LIST (every kind of the stack's and the deleted objects', our managed-by label)
    # is also the proof: no owned object of this stack remains -- no second round of LISTs.
    left, listing = gone.wait_gone(
        live, targets, kinds=t.object_kinds, timeout=GONE_TIMEOUT_SECONDS, report=lambda count: sink(Remaining(count))
    )
    if left:
        raise ClusterError(
            f"{len(left)} owned object(s) still present {GONE_TIMEOUT_SECONDS:.0f} s after deletion: {', '.join(left)}",
            fix="look for finalizers on them (`kubectl get -o yaml`), then run destroy again",
        )
    result.remaining = sorted(
        f"{kind}/{name}"
        for (kind, name), obj in listing.items()
        if not naming.not_owned(obj, namespace=t.namespace, stack=stack_id)
    )
    return result
