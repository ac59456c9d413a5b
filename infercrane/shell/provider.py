"""The one explicit Kubernetes provider: explicit context and namespace, SSA on, force off.

Pulumi shell: imports pulumi and pulumi_kubernetes, nothing from the live-cluster layer.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infercrane.core.model.target import KubernetesTarget
from infercrane.core.state.urns import PROVIDER_NAME


def make_provider(
    target: KubernetesTarget, opts: pulumi.ResourceOptions | None = None, *, read_only: bool = False
) -> k8s.Provider:
    """A provider pinned to ``target.context`` and ``target.namespace``; never the current-context.

    Patch force is never enabled: the SDK of this provider version has no ``enable_patch_force``
    argument, and config validation refuses ``kubernetes:enablePatchForce`` and
    ``PULUMI_K8S_ENABLE_PATCH_FORCE`` before this runs.
    The kubeconfig path is passed only when configured, so state never records a machine path.
    Its client's rate is the target's ``providerClient`` (:class:`~infercrane.core.model.target.ProviderClient`).
    """
    rate = target.provider_client
    return k8s.Provider(
        PROVIDER_NAME,
        context=target.context,
        namespace=target.namespace,
        kubeconfig=target.kubeconfig,
        enable_server_side_apply=True,
        kube_client_settings=k8s.KubeClientSettingsArgs(qps=rate.qps, burst=rate.burst),
        opts=opts,
    )
