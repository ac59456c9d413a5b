"""Proof of the weights a replica's pods mounted: the digest each pod's kubelet reports for its model
image volume (``status.containerStatuses[].volumeMounts[].volumeStatus.image.imageRef``, Kubernetes'
``ImageVolumeWithDigest``, alpha from 1.35) against the digest the stack pins.

Three answers: ``proven`` (every pod reports the pinned digest), ``mismatch`` (one reports
another: evidence against the replica, which never counts as serving) and ``unreported`` (the
kubelet says nothing -- the gate off, or a runtime that does not fill it -- or this identity may
not read pods): the image volume's reference is by digest, so the runtime itself verified what it
pulled, and the evidence says the proof is missing rather than failing the replica. Pure rule over
the pods as read; the reading is the serving evidence's (:mod:`infercrane.live.evidence.served`).
Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from infercrane.core.model import image
from infercrane.core.render.volumes import MODEL_IMAGE_VOLUME

GATE: Final = "ImageVolumeWithDigest"

State = Literal["proven", "mismatch", "unreported"]


@dataclass(frozen=True)
class Mounted:
    """What the pods of one replica say they mounted as its model image."""

    state: State
    pinned: str  # sha256:<hex>
    mounted: tuple[str, ...] = ()  # the digests reported, one per pod that reported one
    reason: str = ""

    def as_output(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "pinned": self.pinned, "mounted": list(self.mounted)}
        return out | ({"reason": self.reason} if self.reason else {})


def reported(pod: Mapping[str, Any]) -> str | None:
    """The digest the pod's kubelet reports for its model image volume (None: none reported)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for mount in status.get("volumeMounts") or []:
            if mount.get("name") != MODEL_IMAGE_VOLUME:
                continue
            ref = str((((mount.get("volumeStatus") or {}).get("image")) or {}).get("imageRef") or "")
            if ref:
                return ref.rsplit("@", 1)[-1] if "@" in ref else ref
    return None


def judge(model_image: str, pods: Mapping[str, Mapping[str, Any]], unread: str = "") -> Mounted:
    """The proof for a replica whose pinned model image is ``model_image`` (``oci://…@sha256:…``),
    from its ready pods as read (``pods``: name -> pod); ``unread``: why they could not be read."""
    pinned = image.digest_of(image.model_reference(model_image))
    if unread:
        return Mounted("unreported", pinned, reason=unread)
    found = {name: reported(pod) for name, pod in sorted(pods.items())}
    other = {name: d for name, d in found.items() if d is not None and d != pinned}
    digests = tuple(d for d in found.values() if d is not None)
    if other:
        name, digest = next(iter(other.items()))
        return Mounted("mismatch", pinned, digests, f"pod {name} mounted model image {digest}, but the stack pins {pinned}")
    if not found or None in found.values():
        silent = ", ".join(n for n, d in found.items() if d is None) or "no pod"
        return Mounted(
            "unreported",
            pinned,
            digests,
            f"the kubelet reported no mounted digest for {silent} ({GATE}, alpha from Kubernetes 1.35; the image "
            "volume's reference is the pinned digest, which the runtime verifies as it pulls)",
        )
    return Mounted("proven", pinned, digests)
