"""Deployment, Service and InferenceService manifests for one replica (docs/configure.md says what each field renders).

Deployment: one replica, Recreate (a surge would need twice the GPUs) unless the endpoint's rollout
policy allows a surge, progress deadline and
startup probe sized from the startup budget, explicit engine command, key only by Secret
reference, GPU limits = requests, product-label nodeSelector, GPU toleration, in-memory /dev/shm,
no privilege escalation, no automounted token; a verified model cache read-only at the Hugging Face
cache path with offline mode on.

Under ``gpuAllocation: dra`` a replica's GPUs are a claim instead: its own ResourceClaimTemplate
(named like its other objects) asks for ``gpuCount`` devices of the GPU DeviceClass whose
``productName`` is the replica's GPU's, and the pod claims it -- no GPU resource, no product
nodeSelector. Pure core.
"""

from __future__ import annotations

import math
from typing import Any

from infercrane.core import naming
from infercrane.core.model import gpu
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.kinds import DEPLOYMENT, INFERENCE_SERVICE, RESOURCE_CLAIM_TEMPLATE, SERVICE
from infercrane.core.model.replica import Replica
from infercrane.core.render import volumes
from infercrane.core.render.command import command_and_args
from infercrane.core.render.intent import pod_intent

HEALTH_PATH = "/health"
READINESS = {"periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 12}
LIVENESS = {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6}
CONTAINER_NAME = "runtime"
KSERVE_CONTAINER_NAME = "kserve-container"
GPU_CLAIM = "gpus"  # the pod's claim, the container's and the template's request: one name


def _metadata(config: InferCraneConfig, replica: Replica, intent: str, stack: str) -> dict[str, Any]:
    return {
        "name": naming.object_name(replica.key),
        "namespace": config.kubernetes.namespace,
        "labels": {**naming.labels(replica.key), naming.LABEL_ENDPOINT: replica.name},
        "annotations": {
            **naming.ownership_annotations(replica.key, intent, stack),
            naming.PULUMI_FIELD_MANAGER: naming.FIELD_MANAGER,
        },
    }


def _probe(port_name: str, **timing: int) -> dict[str, Any]:
    return {"httpGet": {"path": HEALTH_PATH, "port": port_name}, **timing}


def _token_env(config: InferCraneConfig, replica: Replica) -> list[dict[str, Any]]:
    token = config.token_for(replica)
    if token is None:
        return []
    return [{"name": naming.HF_TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": token.name, "key": token.key}}}]


def _extra_env(config: InferCraneConfig, replica: Replica) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in config.pod_for(replica).env:
        if e.secret_key_ref is not None:
            out.append(
                {"name": e.name, "valueFrom": {"secretKeyRef": {"name": e.secret_key_ref.name, "key": e.secret_key_ref.key}}}
            )
        else:
            out.append({"name": e.name, "value": e.value})
    return out


def _container(config: InferCraneConfig, replica: Replica, name: str) -> dict[str, Any]:
    t = config.kubernetes
    drain = config.drain_for(replica)
    command, args = command_and_args(replica, drain.shutdown_seconds, config.model_image_for(replica) is not None)
    gpus = {t.gpu_resource: str(replica.gpu_count)} if t.allocation.device_plugin else {}
    secret_ref = {"secretKeyRef": {"name": t.worker_secret.name, "key": t.worker_secret.key}}
    return {
        "name": name,
        "image": config.image_for(replica),
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "args": args,
        "env": [
            {"name": naming.WORKER_KEY_ENV, "valueFrom": secret_ref},
            {"name": naming.VLLM_KEY_ENV, "valueFrom": secret_ref},
            *_token_env(config, replica),
            *volumes.cache_env(config, replica),
            *_extra_env(config, replica),
        ],
        "ports": [{"name": "http", "containerPort": replica.port, "protocol": "TCP"}],
        "startupProbe": _probe(
            "http",
            periodSeconds=replica.startup_probe_period_seconds,
            timeoutSeconds=min(2, replica.startup_probe_period_seconds),
            failureThreshold=math.ceil(replica.startup_budget_seconds / replica.startup_probe_period_seconds),
        ),
        "readinessProbe": _probe("http", **READINESS),
        "livenessProbe": _probe("http", **LIVENESS),
        "resources": _resources(config, replica, gpus),
        "securityContext": container_security(config),
        "volumeMounts": volumes.mounts(config, replica),
        # Deleted, the pod is marked terminating in its EndpointSlices at once, but routers follow
        # them late: it keeps serving this long before its engine gets SIGTERM (no binary needed).
        **({"lifecycle": {"preStop": {"sleep": {"seconds": drain.pre_stop_seconds}}}} if drain.pre_stop_seconds else {}),
    }


def _resources(config: InferCraneConfig, replica: Replica, gpus: dict[str, str]) -> dict[str, Any]:
    """GPU limits = requests (or, under DRA, the claim instead), plus CPU and memory
    (:meth:`InferCraneConfig.resources_for`)."""
    own = config.resources_for(replica)
    claims = {"claims": [{"name": GPU_CLAIM}]} if config.kubernetes.allocation.claims else {}
    if own is None:  # no resources setting: GPUs only
        plain = {"limits": dict(gpus), "requests": dict(gpus)}
    else:
        plain = {"limits": {**gpus, **own["limits"]}, "requests": {**gpus, **own["requests"]}}
    return {**{k: v for k, v in plain.items() if v}, **claims}


def _pod_placement(config: InferCraneConfig, replica: Replica) -> dict[str, Any]:
    t = config.kubernetes
    pod = config.pod_for(replica)
    placement: dict[str, Any] = {
        "serviceAccountName": t.service_account,
        "automountServiceAccountToken": False,
        "nodeSelector": {**pod.node_selector, **({t.gpu_product_label: replica.gpu} if t.allocation.device_plugin else {})},
        "tolerations": [
            {"key": t.gpu_toleration_key, "operator": "Exists", "effect": "NoSchedule"},
            *(x.model_dump(by_alias=True, exclude_none=True) for x in pod.tolerations),
        ],
        # The preStop wait, the engine's shutdown and a margin (Drain.grace_seconds): never a SIGKILL mid-drain.
        "terminationGracePeriodSeconds": config.drain_for(replica).grace_seconds,
    }
    if not placement["nodeSelector"]:
        del placement["nodeSelector"]
    if t.allocation.claims:
        placement["resourceClaims"] = [{"name": GPU_CLAIM, "resourceClaimTemplateName": naming.object_name(replica.key)}]
    if pod.priority_class_name:
        placement["priorityClassName"] = pod.priority_class_name
    if pod.image_pull_secrets:
        placement["imagePullSecrets"] = [{"name": n} for n in pod.image_pull_secrets]
    # Hardened whatever the identity: the runtime's default seccomp profile (and, per container, no
    # capabilities and no privilege escalation) needs no uid; a pod identity adds restricted's
    # non-root rule.
    placement["securityContext"] = pod_security(config)
    return placement


def pod_security(config: InferCraneConfig) -> dict[str, Any]:
    """The pod's securityContext: the runtime's default seccomp profile, and the target's identity
    (non-root, its uid, gid and fsGroup) when it sets one -- a prefetch pod's too."""
    who = config.kubernetes.security_context
    identity = {} if who is None else {"runAsNonRoot": True, "runAsUser": who.run_as_user, "runAsGroup": who.run_as_group}
    return {**identity, **({} if who is None else {"fsGroup": who.fs_group}), "seccompProfile": {"type": "RuntimeDefault"}}


def container_security(config: InferCraneConfig) -> dict[str, Any]:
    """No privilege escalation and no capabilities, with or without a pod identity (an inference
    server binds an unprivileged port and opens the GPU device nodes the device plugin hands it)."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _strategy(config: InferCraneConfig, replica: Replica) -> dict[str, Any]:
    """Recreate unless the endpoint may surge: then the new pod starts (on a free GPU set) and the
    old one stops only once it is ready. Never a surge the policy does not allow."""
    if config.rollout_for(replica.name).max_surge >= 1:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    return {"type": "Recreate"}


def deployment(config: InferCraneConfig, replica: Replica, intent: str, stack: str) -> dict[str, Any]:
    meta = _metadata(config, replica, intent, stack)
    # pulumi-kubernetes' own await watches ReplicaSets and Pods (rights the seed's Role does not
    # grant) with informers per object; the program waits instead, for the whole stack with one
    # LIST per tick (infercrane.live.status.readiness). skipAwait also keeps refresh to a plain GET.
    meta["annotations"][naming.PULUMI_SKIP_AWAIT] = "true"
    # With skipAwait Pulumi does not wait for a deletion, and its default (foreground) keeps the
    # Deployment until its pods are gone: plain `pulumi destroy` would return with it still there.
    # Background (kubectl's default, and infercrane destroy's) removes the object at once; the
    # garbage collector removes its ReplicaSets and Pods after.
    meta["annotations"][naming.PULUMI_DELETION_PROPAGATION] = "background"
    pod = config.pod_for(replica)
    deployment: dict[str, Any] = {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.name,
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": naming.selector(replica.key)},
            "strategy": _strategy(config, replica),
            "progressDeadlineSeconds": replica.startup_budget_seconds,
            "revisionHistoryLimit": 3,
            "template": {
                "metadata": {
                    "labels": {**pod.labels, **naming.labels(replica.key)},
                    "annotations": {
                        **pod.annotations,
                        naming.ANNOTATION_KEY: replica.key,
                        naming.ANNOTATION_INTENT: pod_intent(config, replica),
                    },
                },
                "spec": {
                    **_pod_placement(config, replica),
                    "containers": [_container(config, replica, CONTAINER_NAME)],
                    "volumes": volumes.volumes(config, replica),
                },
            },
        },
    }
    if replica.scaling == "external":
        # Left out of what we apply, spec.replicas is no field of ours: an HPA's /scale writes
        # (another field manager) are then no server-side-apply conflict, and we never reset them.
        del deployment["spec"]["replicas"]
    return deployment


def service(config: InferCraneConfig, replica: Replica, intent: str, stack: str) -> dict[str, Any]:
    meta = _metadata(config, replica, intent, stack)
    # Readiness is the Deployment's (available replicas); waiting again for the Service's
    # endpoints would only repeat it and needs extra read rights.
    meta["annotations"][naming.PULUMI_SKIP_AWAIT] = "true"
    return {
        "apiVersion": SERVICE.api_version,
        "kind": SERVICE.name,
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": naming.selector(replica.key),
            "ports": [{"name": "http", "port": replica.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _predictor_strategy(config: InferCraneConfig, replica: Replica) -> dict[str, Any]:
    """KServe's own default is a rolling update that surges a pod (a GPU set) per change; in
    Standard mode (KServe >= 0.16, whose predictor has ``deploymentStrategy``) the endpoint's policy
    decides instead, as for a Deployment. Older controllers (RawDeployment) keep KServe's default."""
    if config.kubernetes.kserve_deployment_mode != "Standard":
        return {}
    return {"deploymentStrategy": _strategy(config, replica)}


def _predictor_metadata(config: InferCraneConfig, replica: Replica) -> dict[str, Any]:
    """The extra pod labels and annotations: KServe puts the predictor's on its pods. Under
    ``gpuAllocation: dra`` the pods also carry their intent, as a Deployment's do: the GPUs they
    claim are in their claim template, not in the predictor, so another claim restarts them."""
    pod = config.pod_for(replica)
    annotations = dict(pod.annotations) | (
        {naming.ANNOTATION_INTENT: pod_intent(config, replica)} if config.kubernetes.allocation.claims else {}
    )
    return {k: v for k, v in (("labels", pod.labels), ("annotations", annotations)) if v}


def inference_service(config: InferCraneConfig, replica: Replica, intent: str, stack: str) -> dict[str, Any]:
    meta = _metadata(config, replica, intent, stack)
    meta["annotations"][naming.KSERVE_DEPLOYMENT_MODE] = config.kubernetes.kserve_deployment_mode
    return {
        "apiVersion": INFERENCE_SERVICE.api_version,
        "kind": INFERENCE_SERVICE.name,
        "metadata": meta,
        "spec": {
            "predictor": {
                **_predictor_metadata(config, replica),
                "minReplicas": 1,
                "maxReplicas": 1,
                **_predictor_strategy(config, replica),
                **_pod_placement(config, replica),
                "containers": [_container(config, replica, KSERVE_CONTAINER_NAME)],
                "volumes": volumes.volumes(config, replica),
            }
        },
    }


def resource_claim_template(config: InferCraneConfig, replica: Replica, intent: str, stack: str) -> dict[str, Any]:
    """The replica's GPUs under ``gpuAllocation: dra``: ``gpuCount`` devices of the GPU DeviceClass
    whose productName is the replica's GPU's, in the table -- never another product. Each pod's
    claim (made by the resource claim controller, deleted with the pod) carries the pod's labels."""
    t = config.kubernetes
    request = {
        "deviceClassName": t.gpu_device_class,
        "allocationMode": "ExactCount",
        "count": replica.gpu_count,
        "selectors": [{"cel": {"expression": gpu.selector(t.product_name(replica.gpu))}}],
    }
    return {
        "apiVersion": RESOURCE_CLAIM_TEMPLATE.api_version,
        "kind": RESOURCE_CLAIM_TEMPLATE.name,
        "metadata": _metadata(config, replica, intent, stack),
        "spec": {
            "metadata": {"labels": naming.labels(replica.key)},
            "spec": {"devices": {"requests": [{"name": GPU_CLAIM, "exactly": request}]}},
        },
    }
