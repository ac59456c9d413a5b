"""The model cache's verdict: which mapped claims a replica may mount, judged from the live PVCs.

A claim serves several replicas at once only if it exists in the namespace, is ``Bound`` (a Pending
claim keeps every pod that mounts it Pending) and allows several readers (``ReadOnlyMany`` or
``ReadWriteMany``; a ``ReadWriteOnce`` volume attaches to one node). Under ``required`` anything
else refuses the deploy; under ``prefer`` the claim is dropped and its replicas download the
weights, with a warning. Pure core: the live claims are an argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core.model.caches import ArtifactCache
from infercrane.core.model.config import InferCraneConfig

MANY_READERS: Final = frozenset({"ReadOnlyMany", "ReadWriteMany"})
PVC_READER: Final = "deploy/kubernetes/optional/pvc-reader.yaml"


@dataclass(frozen=True)
class CacheVerdict:
    """The config to render (only verified claims mapped) and what to tell, or refuse."""

    config: InferCraneConfig
    warnings: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    unreadable: bool = False  # refused because the claims may not be read at all


def wanted(config: InferCraneConfig) -> dict[str, list[str]]:
    """Mapped claim -> the keys of the replicas that would mount it, in config order."""
    out: dict[str, list[str]] = {}
    for r in config.replicas:
        claim = config.cache_for(r)
        if claim is not None:
            out.setdefault(claim, []).append(r.key)
    return out


def claim_problem(pvc: Mapping[str, Any] | None) -> str | None:
    """Why one live claim cannot serve as a shared, read-only model cache (None: it can)."""
    if pvc is None:
        return "does not exist"
    status = pvc.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase != "Bound":
        return f"is {phase}, not Bound (pods that mount it would stay Pending)"
    modes = set(status.get("accessModes") or (pvc.get("spec") or {}).get("accessModes") or [])
    if not modes & MANY_READERS:
        return f"allows {', '.join(sorted(modes)) or 'no access mode'} only: replicas on several nodes need ReadOnlyMany or ReadWriteMany"
    return None


def judge(config: InferCraneConfig, live: Mapping[str, Mapping[str, Any]] | None) -> CacheVerdict:
    """The verdict for ``config`` from the namespace's claims by name (None: they may not be read)."""
    claims = wanted(config)
    cache = config.kubernetes.artifact_cache
    if not claims:
        return CacheVerdict(config)
    namespace = config.kubernetes.namespace
    if live is None:
        line = (
            f"model cache claim(s) {', '.join(claims)} cannot be verified: this identity may not list "
            f"persistentvolumeclaims in {namespace} (an optional read: {PVC_READER} grants it)"
        )
        if cache.policy == "required":
            return CacheVerdict(config, refusals=[line], unreadable=True)
        return CacheVerdict(_without(config, set(claims)), warnings=[f"{line}; every replica downloads the weights instead"])
    problems = {claim: why for claim in claims if (why := claim_problem(live.get(claim)))}
    if not problems:
        return CacheVerdict(config)
    lines = [
        f"model cache PersistentVolumeClaim {namespace}/{claim} {why} (for replica(s) {', '.join(claims[claim])})"
        for claim, why in problems.items()
    ]
    if cache.policy == "required":
        return CacheVerdict(config, refusals=lines)
    return CacheVerdict(
        _without(config, set(problems)), warnings=[f"{line}: they download the weights instead" for line in lines]
    )


def _without(config: InferCraneConfig, claims: set[str]) -> InferCraneConfig:
    """``config`` with ``claims`` no longer mapped: their replicas render as without a cache."""
    cache = config.kubernetes.artifact_cache
    kept = ArtifactCache(policy=cache.policy, pvcs={k: c for k, c in cache.pvcs.items() if c not in claims})
    return config.model_copy(update={"kubernetes": config.kubernetes.model_copy(update={"artifact_cache": kept})})
