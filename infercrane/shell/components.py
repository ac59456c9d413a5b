"""One ``ComponentResource`` per replica; its children are the replica's manifests, unchanged.

The component's logical name is the replica's object name, derived from its durable key
(:mod:`infercrane.core.state.urns`): the key is the identity in Pulumi as in Kubernetes, so no change of
the replica list renames -- and so replaces -- another replica's resources. ``legacy`` is the slot
name a stack deployed under the old scheme gave the replica: an alias moves it without a
replacement (the children follow through the SDK's inherited aliases; their names keep the
``<component>-<kind>`` shape). Children are parented to the component and use the one explicit
provider. Pulumi shell.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

# Imported here, not on first use: the SDK's modules of these kinds take ~0.3 s to import, which
# the deploy spends beside its preflight (the engine's start imports this module) instead of in
# the program, where it would delay the first apply. InferenceService's module stays lazy.
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import Service

from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE, WORKLOADS
from infercrane.core.state.urns import COMPONENT_TYPE, child_name


def _resource(name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    kind = manifest["kind"]
    if kind == "Deployment":
        return Deployment(name, metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
    if kind == "Service":
        return Service(name, metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
    if kind in ("InferenceService", "ResourceClaimTemplate"):  # the SDK has no resource.k8s.io/v1 class
        return k8s.apiextensions.CustomResource(
            name,
            api_version=manifest["apiVersion"],
            kind=kind,
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=opts,
        )
    raise ValueError(f"no Pulumi resource for kind {kind!r}")  # unreachable: render emits only these kinds


class ReplicaComponent(pulumi.ComponentResource):
    """The objects of one replica and the facts about them (outputs).

    ``manifests`` are what is applied: the rendered ones, or -- for a replica held during a
    rollout -- exactly the ones the state records, so Pulumi leaves its objects alone.
    ``recreate``: its workload object is deleted and then created again when its spec changes
    (a replica that is down, restarting under a surge: :attr:`~infercrane.core.plan.waves.EndpointRollout.recreated`)."""

    def __init__(
        self,
        name: str,
        manifests: Sequence[Mapping[str, Any]],
        summary: Mapping[str, Any],
        provider: k8s.Provider,
        *,
        legacy: str | None = None,
        recreate: bool = False,
    ) -> None:
        aliases = [pulumi.Alias(name=legacy)] if legacy else None
        super().__init__(COMPONENT_TYPE, name, None, pulumi.ResourceOptions(aliases=aliases))
        child_opts = pulumi.ResourceOptions(parent=self, provider=provider)
        # A claim template is immutable: another claim replaces it -- deleted, then made again under
        # its name (the pods' claims already made stay theirs) -- and the replica's other objects
        # are applied after it, so a new pod's claim is made from the new template.
        claim_opts = pulumi.ResourceOptions.merge(
            child_opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )
        templates = {
            i: _resource(child_name(name, m["kind"]), m, claim_opts)
            for i, m in enumerate(manifests)
            if m["kind"] == RESOURCE_CLAIM_TEMPLATE.name
        }
        after = pulumi.ResourceOptions.merge(child_opts, pulumi.ResourceOptions(depends_on=list(templates.values())))
        # Recreated, the old pod goes before the new one starts: its rolling update would keep it.
        anew = pulumi.ResourceOptions.merge(
            after, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )
        self.objects = [
            templates.get(i) or _resource(child_name(name, m["kind"]), m, anew if recreate and m["kind"] in WORKLOADS else after)
            for i, m in enumerate(manifests)
        ]
        # The object whose status says whether the replica serves (Deployment / InferenceService),
        # wherever it is among the manifests (a replica registered as the state recorded it keeps
        # the state's order, where its Service may come first).
        self.workload = next(o for o, m in zip(self.objects, manifests, strict=True) if m["kind"] in WORKLOADS)
        self.name = name
        self.summary: dict[str, Any] = {**summary, "ids": [o.id for o in self.objects]}
        self.register_outputs(self.summary)


#: How many replicas the program registers ahead of the engine's answers (see :class:`Ahead`).
AHEAD: Final = 32


class Ahead:
    """The program's registrations, at most ``limit`` replica components ahead of the engine.

    The SDK sends each registration from a thread pool, first come first served, and a child
    (a Deployment, a Service) leaves only once its component's URN is back. Registered all at
    once, 1,000 components queue ahead of every child: the engine applied nothing for ~6.5 s
    after the preflight at 1,000 replicas, the program's own CPU time (docs/engine.md). With at
    most ``limit`` components waiting for their URN, the first objects are applied while the
    rest are still being built; the total work is the same.

    A registration ``first`` (a replica a rollout changes: its new pod is the run's long pole)
    takes the next free place before any that waits without it (a replica carried over as it
    is, which the engine passes as the same); in the order they came within each."""

    def __init__(self, limit: int = AHEAD) -> None:
        self._free = limit
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap: (0 first / 1 not, arrival, its turn)
        self._arrivals = itertools.count()

    async def register(self, build: Callable[[], ReplicaComponent], *, first: bool = False) -> ReplicaComponent:
        await self._turn(first)
        try:
            component = build()
        except BaseException:
            self._release()
            raise
        answered = asyncio.ensure_future(component.urn.future())
        answered.add_done_callback(self._answered)
        await asyncio.sleep(0)  # the registration leaves for the engine while the next is built
        return component

    async def _turn(self, first: bool) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        turn = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (0 if first else 1, next(self._arrivals), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given its place, then cancelled: the place goes on
                self._release()
            raise

    def _release(self) -> None:
        while self._waiting:
            turn = heapq.heappop(self._waiting)[2]
            if not turn.done():  # a cancelled wait gave up its turn
                turn.set_result(None)
                return
        self._free += 1

    def _answered(self, done: asyncio.Future[Any]) -> None:
        self._release()
        if not done.cancelled():
            done.exception()  # a failed registration is the engine's to report, not this pacing's
