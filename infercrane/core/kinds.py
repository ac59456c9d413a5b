"""The Kubernetes kinds InferCrane renders: one home for each kind's API version, resource
plural, Pulumi type token and child-name suffix, and for which kinds each workload API uses.

Everything else derives from this table: the renderer's ``apiVersion``, the URNs and type tokens
(:mod:`~infercrane.core.urns`), the live client's resources (:mod:`~infercrane.live.cluster`).
Pure core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Kind:
    name: str
    api_version: str  # group/version, or "v1" for the core group
    plural: str
    child_suffix: str  # the child's logical name under its component: <slot>-<suffix>

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def type_token(self) -> str:
        """pulumi-kubernetes' type token (``core`` for the core group)."""
        return f"kubernetes:{self.group or 'core'}/{self.version}:{self.name}"


DEPLOYMENT: Final = Kind("Deployment", "apps/v1", "deployments", "deployment")
SERVICE: Final = Kind("Service", "v1", "services", "service")
INFERENCE_SERVICE: Final = Kind("InferenceService", "serving.kserve.io/v1beta1", "inferenceservices", "inferenceservice")
KINDS: Final = {k.name: k for k in (DEPLOYMENT, SERVICE, INFERENCE_SERVICE)}

# The objects of one replica, per workload API, the workload (readiness) first.
WORKLOAD_KINDS: Final[dict[str, tuple[str, ...]]] = {
    "deployment": (DEPLOYMENT.name, SERVICE.name),
    "kserve": (INFERENCE_SERVICE.name,),
}
