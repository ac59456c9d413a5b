"""pydantic's validation errors as InferCrane problems: where (stack file and key path, or the
variable the value came from), what, and how to fix it -- one :class:`Problem` per error, worded
for a person (no pydantic jargon). Pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from infercrane.core.errors import Problem
from infercrane.core.model import image
from infercrane.core.model.config import KEY_ENDPOINTS, KEY_REPLICAS, KEY_TARGET
from infercrane.core.model.kinds import WORKLOAD_APIS
from infercrane.core.model.target import ENV_FIELDS

# How to fix a bad value, by field (alias). The message itself names the bad value.
FIX: Final[dict[str, str]] = {
    "context": "name a context of your kubeconfig explicitly (InferCrane never uses the current-context)",
    "namespace": "use a DNS label: lowercase letters, digits and '-', at most 63 characters",
    "workloadApi": "use " + " or ".join(repr(name) for name in WORKLOAD_APIS),
    "serviceAccount": "use a DNS label, e.g. infercrane-runtime",
    "name": "use a DNS label: lowercase letters, digits and '-', at most 63 characters",
    "workerSecret.key": "use letters, digits, '-', '_' and '.' only",
    "huggingFaceToken.key": "name the Secret's data key holding the token: letters, digits, '-', '_' and '.'",
    "huggingFaceToken.name": "name a Secret in the target namespace (a DNS label), e.g. hf-token",
    "key": "use 1-253 printable characters without surrounding whitespace; keep it durable",
    "model": "name the model to serve, e.g. Qwen/Qwen3-8B",
    "imageDigest": f"pin the image by digest: {image.EXAMPLE} (e.g. from `crane digest` or your registry)",
    "image": f"pin the image by digest: {image.EXAMPLE}",
    "modelImage": f"pin the model image by digest: {image.MODEL_EXAMPLE} (or drop modelRevision: one pin is enough)",
    "modelImages": f"map each model id to its model image by digest: {image.MODEL_EXAMPLE}",
    "compileCache.claimName": "name a PersistentVolumeClaim in the target namespace (a DNS subdomain), e.g. engine-compile-cache",
    "gpuResource": "use an extended resource name such as nvidia.com/gpu",
    "gpuProductLabel": "use a node label key such as nvidia.com/gpu.product",
    "gpu": "use a product-label value exactly as your nodes carry it, or add it to infercrane:kubernetes.gpuProducts",
    "gpuCount": "use a whole number of GPUs from 1 to 16",
    "port": "use a port from 1024 to 65535",
    "startupBudgetSeconds": "use seconds from 60 to 86400; size it to the model's load time",
    "engine": "use 'vllm' or 'sglang'",
    "args": "remove flags that InferCrane sets itself or that would carry a secret",
    "cloud": "use 'kubernetes' (or leave it out)",
    "kserveDeploymentMode": "use 'Standard' (KServe >= 0.16) or 'RawDeployment' (older controllers)",
    "rollout": "write rollout: {maxUnavailable: 1, maxSurge: 0} (the defaults); at least one of them must be above 0",
    "maxUnavailable": "use a whole number >= 0 (default 1: one replica of the endpoint down at a time)",
    "maxSurge": "use a whole number >= 0 (default 0: never more GPUs than the endpoint holds)",
    "maxExtraGpus": "use a whole number >= 0 (the extra GPUs of each product all endpoints' surges may hold at once), "
    "or leave it out: no stack limit",
    "canary": "write canary: {replicas: 1, bakeSeconds: 300, minRequests: 100} (the defaults), or leave it out: no canary",
    "canary.replicas": "use a whole number >= 1 (the replicas of the endpoint in the first wave; default 1)",
    "bakeSeconds": "use seconds >= 1 (how long the canary serves before its verdict; default 300)",
    "minRequests": "use a whole number >= 1 (requests the canary and the baseline must each answer; default 100)",
    "maxTtftP95Ratio": "use a number >= 1 (the canary's time-to-first-token p95 over the baseline's; default 1.5)",
    "maxE2eP95Ratio": "use a number >= 1 (the canary's end-to-end latency p95 over the baseline's; default 1.5)",
    "maxErrorRatioIncrease": "use a share from 0 to 1 (0.01: the canary may fail 1 % more requests; default 0.01)",
    "canary.required": "use true (no release without an ACCEPT) or false",
    "golden": "write golden: [{prompt: 'The capital of France is', maxTokens: 8}] (answers must equal the baseline's)",
    "prompt": "write the prompt as a non-empty string",
    "maxTokens": "use a whole number of tokens from 1 to 4096",
    "canaryMetrics.prometheus": "give the base URL of a Prometheus that scrapes the pods, e.g. "
    "http://prometheus.monitoring:9090 (no credentials in it), or leave it out: each pod's /metrics is read",
    "match": "use a Python regular expression every answer must match (searched), or leave it out: equal answers",
    "shmSize": "use a Kubernetes quantity such as 8Gi",
    "cpuPerGpu": "use a CPU quantity such as 4 or 3500m (per GPU of the replica)",
    "memoryPerGpu": "use a memory quantity such as 32Gi (per GPU of the replica; the limit adds shmSize)",
    "resources.cpu": "use a CPU quantity such as 8 or 7500m (this replica's total)",
    "resources.memory": "use a memory quantity such as 64Gi (this replica's total; the limit adds shmSize)",
    "guaranteed": "use true or false",
    "imagePullSecrets": "list Secret names in the target namespace, e.g. [registry-mirror]",
    "priorityClassName": "name an existing PriorityClass (a DNS subdomain), e.g. gpu-inference",
    "tolerations": "write {key: dedicated, operator: Equal, value: inference, effect: NoSchedule}",
    "nodeSelector": "map node label keys to values, e.g. {topology.kubernetes.io/zone: us-east-1a}",
    "env": "write [{name: VLLM_LOGGING_LEVEL, value: INFO}] or [{name: X, secretKeyRef: {name: s, key: k}}]",
    "labels": "map label keys to values; keys under infercrane.dev/ and pulumi.com/ are InferCrane's",
    "annotations": "map annotation keys to strings; keys under infercrane.dev/ and pulumi.com/ are InferCrane's",
    "artifactCache": "set artifactCache.policy to prefer or required to use the mapping, or remove artifactCache.pvcs",
    "artifactCache.policy": "use 'disabled', 'prefer' or 'required'",
    "artifactCache.pvcs": 'map "<model>@<40-hex commit>" (a pinned revision, never a branch) to a PVC name in the namespace',
    "podSecurityWarnings": "use 'refuse' (the default) or 'report'",
    "providerClient.qps": "use requests per second above 0, e.g. 500 (the default) or 50 (pulumi-kubernetes' own)",
    "providerClient.burst": "use a whole number of requests of at least 1, e.g. 1000 (the default) or 120 (pulumi-kubernetes' own)",
    "securityContext": "write securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000} (a non-root user the image can run as)",
}


def problem_from(err: Any, *, source: str, replicas: list[Any], from_env: dict[tuple[str, ...], str]) -> Problem:
    loc: tuple[Any, ...] = tuple(err["loc"])
    # pydantic reports aliases in loc (alias generator); map the top-level name back to the stack key.
    top, rest = loc[0], loc[1:]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "is required"
    elif err["type"] == "extra_forbidden":
        msg = "is not a known setting"
    elif err["type"] == "literal_error":
        msg = f"{err.get('input')!r} is not allowed: {msg.removeprefix('Input should be ')}"
    elif "input" in err and err["type"] not in ("value_error",) and not isinstance(err.get("input"), (dict, list)):
        msg = f"{err['input']!r}: {msg}"
    fix = _fix_for(loc)
    if err["type"] == "extra_forbidden":
        fix = "remove it or check its spelling (keys are camelCase)"
        if top == "endpoints" and loc[-1] == "maxExtraGpus":
            fix = f"maxExtraGpus is the whole stack's: set it under {KEY_TARGET}.rollout"
    if top == "kubernetes":
        path = tuple(str(p) for p in rest)
        if path in from_env:
            var = from_env[path]
            if err["type"] == "missing":
                msg = "is required"
            return Problem(f"{var} (environment)", msg, fix)
        where = f"{source}: {KEY_TARGET}" + (f".{_loc_text(rest)}" if rest else "")
        if err["type"] == "missing" and len(path) == 1:
            env_var = next((v for v, p in ENV_FIELDS.items() if p == path), None)
            if env_var:
                fix = f"set {KEY_TARGET}.{path[0]} in {source} or {env_var}; " + fix
        return Problem(where, msg, fix)
    if top == "endpoints":
        return Problem(f"{source}: {KEY_ENDPOINTS}" + (f".{_loc_text(rest)}" if rest else ""), msg, fix)
    where = f"{source}: {KEY_REPLICAS}"
    if rest and isinstance(rest[0], int):
        where += f"[{rest[0]}]"
        tail = rest[1:]
        if tail:
            where += "." + _loc_text(tail)
        r = replicas[rest[0]] if rest[0] < len(replicas) else None
        if isinstance(r, Mapping) and isinstance(r.get("key"), str):
            where += f" (replica {r['key']!r})"
    return Problem(where, msg, fix)


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def _fix_for(loc: tuple[Any, ...]) -> str:
    names = [p for p in loc if isinstance(p, str)]
    if len(names) >= 2 and ".".join(names[-2:]) in FIX:
        return FIX[".".join(names[-2:])]
    for part in reversed(loc):
        if isinstance(part, str) and part in FIX:
            return FIX[part]
    return ""
