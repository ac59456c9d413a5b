"""The prefetch pod of warm-first waves (``rollout.warmFirst``): before an in-place wave stops a
replica, a pod bound to that replica's node (``nodeName``: no scheduler, no GPU, no port) names
the next release's images -- the engine image as its container's, the model image as an image
volume -- so the node's kubelet pulls them while the old replica still serves. Its container's
command does not exist in any image: nothing of the release runs, the pod fails to start once
(``restartPolicy: Never``) and is deleted as soon as its kubelet says each image is on the node.

It carries none of a replica's labels (no ReplicaSet selector ever matches it, no serving wait
counts it), only :data:`LABEL` and its stack's and replica's annotations: what a later run needs to
delete one a killed run left, exactly. Pure core.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from infercrane.core import naming
from infercrane.core.model import image
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.replica import Replica
from infercrane.core.render import workloads
from infercrane.core.render.command import MODEL_IMAGE_PATH
from infercrane.core.render.volumes import MODEL_IMAGE_VOLUME

LABEL: Final = "infercrane.dev/prefetch"  # "true" on every prefetch pod
ANNOTATION_FOR: Final = "infercrane.dev/prefetch-for"  # the replica key whose successor it warms
COMMAND: Final = "/infercrane-prefetch-pulls-only"  # in no image: the container never runs
NAME_PREFIX: Final = "infercrane-prefetch-"
ROLE_FILE: Final = "deploy/kubernetes/warm-first/prefetcher.yaml"  # the opt-in right to create and delete them
#: It runs nothing; a LimitRange may still ask for figures. Its limits leave room for the runtime's
#: own start of its sandbox and container (runc's init runs in the pod's cgroup): a limit of 10m
#: throttled each to 1.5-3 s on the real node, before and after the pulls it waits for.
REQUESTS: Final = {"cpu": "10m", "memory": "16Mi"}
LIMITS: Final = {"cpu": "500m", "memory": "64Mi"}


def images(config: InferCraneConfig, replica: Replica) -> tuple[str, ...]:
    """What ``replica``'s pods pull: its engine image, then its model image (when it has one)."""
    model = config.model_image_for(replica)
    return (config.image_for(replica),) + ((image.model_reference(model),) if model else ())


def name(node: str, pulled: tuple[str, ...], stack: str) -> str:
    """One pod per node, release and stack: two replicas of one release on one node share it."""
    return NAME_PREFIX + hashlib.sha256("\n".join((stack, node, *pulled)).encode()).hexdigest()[:20]


def pod(config: InferCraneConfig, replica: Replica, node: str, stack: str) -> dict[str, Any]:
    """The prefetch pod that pulls ``replica``'s release onto ``node``."""
    t = config.kubernetes
    pulled = images(config, replica)
    settings = config.pod_for(replica)
    container: dict[str, Any] = {
        "name": "prefetch",
        "image": pulled[0],
        "imagePullPolicy": "IfNotPresent",
        "command": [COMMAND],
        "resources": {"requests": dict(REQUESTS), "limits": dict(LIMITS)},
        "securityContext": workloads.container_security(config),
    }
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "serviceAccountName": t.service_account,
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"operator": "Exists"}],  # bound to the node it warms, whatever its taints
        "securityContext": workloads.pod_security(config),  # as the replicas': a namespace's Pod Security admits it
        "containers": [container],
    }
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in settings.image_pull_secrets]
    if len(pulled) > 1:
        spec["volumes"] = [{"name": MODEL_IMAGE_VOLUME, "image": {"reference": pulled[1], "pullPolicy": "IfNotPresent"}}]
        container["volumeMounts"] = [{"name": MODEL_IMAGE_VOLUME, "mountPath": MODEL_IMAGE_PATH, "readOnly": True}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name(node, pulled, stack),
            "namespace": t.namespace,
            "labels": {LABEL: "true"},
            "annotations": {naming.ANNOTATION_STACK: stack, ANNOTATION_FOR: replica.key},
        },
        "spec": spec,
    }


def ours(pod: dict[str, Any], stack: str) -> bool:
    """Whether ``pod`` is a prefetch pod of ``stack`` (exactly: its label and its stack's annotation)."""
    meta = pod.get("metadata") or {}
    return (
        (meta.get("labels") or {}).get(LABEL) == "true"
        and (meta.get("annotations") or {}).get(naming.ANNOTATION_STACK) == stack
        and str(meta.get("name", "")).startswith(NAME_PREFIX)
    )
