"""The caches a replica may mount, each field with its rule: the model cache (weights from a PVC an
admin prepared, by ``model@revision``) and the compile cache (what engines compile, by engine,
model and GPU). Pure core.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from infercrane.core.model.schema import ARTIFACT_KEY_RE, DNS_SUBDOMAIN_RE, Frozen


def artifact_key(model: str, revision: str | None) -> str | None:
    """``model@revision``, the key of a model cache entry (None: the revision is not pinned)."""
    return f"{model}@{revision}" if revision else None


class ArtifactCache(Frozen):
    """Model weights from a PersistentVolumeClaim an admin prepared (``huggingface-cli download
    --cache-dir``): mounted read-only as the engine's Hugging Face cache with offline mode on, so
    a restart loads from the volume instead of downloading again. The original adapter's contract:
    an entry is an immutable ``model@<40-hex commit>``; the preflight verifies each mapped claim
    (exists, Bound, several readers) before anything is applied -- ``required`` refuses otherwise,
    ``prefer`` warns and the replica downloads."""

    policy: Literal["disabled", "prefer", "required"] = Field(
        "disabled",
        description="disabled: always download; prefer: a verified claim, else download; required: refuse without one.",
    )
    pvcs: dict[str, str] = Field(default_factory=dict, description='"<model>@<40-hex revision>" -> PVC name in the namespace.')

    @field_validator("pvcs", mode="before")
    @classmethod
    def _pvcs(cls, v: object) -> object:
        if not isinstance(v, dict):
            raise ValueError(f"{v!r} is not a map of model@revision to PVC name")
        bad = [f"key {k!r} is not <model>@<40-hex commit>" for k in v if not isinstance(k, str) or not ARTIFACT_KEY_RE.match(k)]
        bad += [
            f"claim {c!r} (for {k}) is not a PVC name"
            for k, c in v.items()
            if not isinstance(c, str) or not DNS_SUBDOMAIN_RE.match(c)
        ]
        if bad:
            raise ValueError("; ".join(bad))
        return v

    @model_validator(mode="after")
    def _enabled(self) -> ArtifactCache:
        if self.policy == "disabled" and self.pvcs:
            raise ValueError("maps model caches while the policy is disabled: they would never be used")
        return self

    def claim_for(self, model: str, revision: str | None) -> str | None:
        """The claim mounted for ``model`` at ``revision`` (None: it downloads)."""
        key = artifact_key(model, revision)
        return None if self.policy == "disabled" or key is None else self.pvcs.get(key)


class CompileCache(Frozen):
    """Where engines keep what they compile (vLLM's torch.compile and CUDA graphs, Triton's and
    Inductor's kernels): a PersistentVolumeClaim the replicas mount read-write, each under its own
    directory named by the key (engine image digest, model digest, GPU product) -- a key's artifacts
    are never read by another key's engine. Only replicas whose model is pinned (a model image, or
    a ``modelRevision``) use it."""

    claim_name: str = Field(description="PVC in the namespace (ReadWriteMany where replicas of one key run on several nodes).")

    @field_validator("claim_name")
    @classmethod
    def _claim(cls, v: str) -> str:
        if not DNS_SUBDOMAIN_RE.match(v):
            raise ValueError(f"{v!r} is not a PVC name")
        return v
