"""kwok's stages for the local plane's simulated pods: the built ones, or a copy with a pod-ready
delay (a model's load) and a pod-delete that honours the grace period (a drain). Local-plane layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, cast

import yaml

from infercrane.core.errors import PlaneError

#: On a plane started with a pod-ready delay, a kwok pod with this annotation (a duration, "60s")
#: becomes Ready after that long instead: one release that loads slower than the rest.
READY_DELAY_ANNOTATION: Final = "pod-ready.stage.kwok.x-k8s.io/delay"


def stages(kwok: Path, state: Path, pod_ready_delay: float, pod_grace: bool = False) -> Path:
    """kwok's stages: the built ones, or a copy in the plane's state -- with a pod-ready delay,
    whose ``pod-ready`` Stage waits that long (``spec.delay``), so a pod is Pending, and its
    Deployment unavailable, for as long as a model would take to load -- or as long as its
    :data:`READY_DELAY_ANNOTATION` says (a slower load for one release); with ``pod_grace``, whose
    ``pod-delete`` Stage waits until the pod's ``deletionTimestamp`` (its deletion + its grace)."""
    built = kwok.parent.parent / "etc" / "stages.yaml"
    if not built.is_file():
        raise PlaneError(f"kwok stages {built} are missing.", fix="run `tools/build.sh kwok`")
    if not pod_ready_delay and not pod_grace:
        return built
    docs = [d for d in yaml.safe_load_all(built.read_text(encoding="utf-8")) if d]

    def stage(name: str) -> dict[str, Any]:
        found = [d for d in docs if d.get("kind") == "Stage" and d.get("metadata", {}).get("name") == name]
        if len(found) != 1:
            raise PlaneError(f"kwok stages {built} have no single {name} Stage.", fix="rebuild: `tools/build.sh kwok`")
        return cast(dict[str, Any], found[0])  # the document itself: the caller edits it in place

    if pod_ready_delay:  # a pod may ask for a load of its own (kwok's annotation, a duration: "60s")
        stage("pod-ready")["spec"]["delay"] = {
            "durationMilliseconds": int(pod_ready_delay * 1000),
            "durationFrom": {"expressionFrom": f'.metadata.annotations["{READY_DELAY_ANNOTATION}"]'},
        }
    if pod_grace:  # a time: kwok waits until it (kwok's own general pod-delete Stage reads the same field)
        stage("pod-delete")["spec"]["delay"] = {
            "durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
        }
    delayed = state / "kwok-stages.yaml"
    delayed.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return delayed
