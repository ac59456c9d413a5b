"""Offline rendering for the CLI and the golden tests: the same path the program takes.

Config -> render -> guards, and YAML out. Pure (no pulumi, no cluster).
"""

from __future__ import annotations

from typing import Any

import yaml

from infercrane.core import naming
from infercrane.core.errors import GuardError
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.target import KubernetesTarget
from infercrane.core.render import RenderedReplica, guards, render_all


def render_checked(config: InferCraneConfig, stack: str) -> list[RenderedReplica]:
    """Render every replica for ``stack`` and apply the guards (GuardError on any violation)."""
    return guarded(config, naming.stack_id(stack))


def guarded(config: InferCraneConfig, stack_id: str) -> list[RenderedReplica]:
    """:func:`render_checked` for the stack whose objects carry ``stack_id``."""
    rendered = render_all(config, stack_id)
    t = config.kubernetes
    violations = guards.check_all([m for r in rendered for m in r.manifests], gpus_of(t))
    if violations:
        raise GuardError(violations)
    return rendered


def gpus_of(t: KubernetesTarget) -> guards.Gpus:
    """How the target names its GPUs, for the guards."""
    return guards.Gpus(t.gpu_resource, t.gpu_product_label, t.gpu_products, t.gpu_device_class, t.gpu_product_names)


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases, keys in render order."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(manifests: list[dict[str, Any]]) -> str:
    return yaml.dump_all(manifests, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
