"""One ``ComponentResource`` per replica; its children are the rendered manifests, unchanged.

Children are parented to the component and use the one explicit provider. The component's
logical name is the replica's *slot* (endpoint name + ordinal), not its key: when a slot's key
changes, the objects are replaced, and ``rollout`` decides the order (recreate: delete the old
objects first, so a replacement never needs twice the GPUs). Pulumi shell.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infercrane.core.config import InferCraneConfig
from infercrane.core.render import Manifest, RenderedReplica
from infercrane.core.urns import COMPONENT_TYPE, child_name


def child_options(parent: pulumi.Resource, provider: k8s.Provider, rollout: str) -> pulumi.ResourceOptions:
    """Options of every child object. ``recreate`` => delete before replace."""
    return pulumi.ResourceOptions(parent=parent, provider=provider, delete_before_replace=(rollout == "recreate"))


def _resource(name: str, manifest: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    kind = manifest["kind"]
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(name, metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
    if kind == "InferenceService":
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
    """The objects of one replica intent and the facts about them (outputs)."""

    def __init__(
        self,
        slot: str,
        rendered: RenderedReplica,
        config: InferCraneConfig,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(COMPONENT_TYPE, slot, None, opts)
        child_opts = child_options(self, provider, config.kubernetes.rollout)
        self.objects = [_resource(child_name(slot, m["kind"]), m, child_opts) for m in rendered.manifests]
        # The object whose status says whether the replica serves (Deployment / InferenceService).
        self.workload = self.objects[0]
        self.rendered = rendered
        r = rendered.replica
        self.summary: dict[str, Any] = {
            "key": r.key,
            "slot": slot,
            "endpointName": r.name,
            "model": r.model,
            "modelRevision": r.model_revision,
            "namespace": config.kubernetes.namespace,
            "objects": [{"kind": m["kind"], "name": m["metadata"]["name"]} for m in rendered.manifests],
            "endpoint": rendered.endpoint,
            "intentHash": rendered.intent,
            "gpu": r.gpu,
            "gpuCount": r.gpu_count,
            "image": config.image_for(r),
            "ids": [o.id for o in self.objects],
        }
        self.register_outputs(self.summary)
