"""Checks on rendered manifests: defence in depth behind config validation.

Whatever produced a manifest, it is applied only if every object carries a digest-pinned image,
a GPU nodeSelector with limits = requests, our exact ownership metadata and field manager, a
selector on the instance label only, and no patch-force annotation. Returns violations; never
raises. Pure core.
"""

from __future__ import annotations

from typing import Any

from infercrane.core import image, naming


def _pod_spec(manifest: dict[str, Any]) -> dict[str, Any] | None:
    kind = manifest.get("kind")
    spec = manifest.get("spec") or {}
    if kind == "Deployment":
        pod = ((spec.get("template") or {}).get("spec")) or {}
        return dict(pod)
    if kind == "InferenceService":
        return dict(spec.get("predictor") or {})
    return None


def check(manifest: dict[str, Any], *, gpu_resource: str, gpu_label: str) -> list[str]:
    """Every rule ``manifest`` breaks, as ``Kind/name: what`` lines (empty: it passes)."""
    meta = manifest.get("metadata") or {}
    where = f"{manifest.get('kind')}/{meta.get('name')}"
    out: list[str] = []
    labels = meta.get("labels") or {}
    ann = meta.get("annotations") or {}
    key = ann.get(naming.ANNOTATION_KEY)
    if not isinstance(key, str):
        out.append(f"{where}: annotation {naming.ANNOTATION_KEY} is missing")
    else:
        expected = naming.labels(key)
        for k, v in expected.items():
            if labels.get(k) != v:
                out.append(f"{where}: label {k} is {labels.get(k)!r}, expected {v!r}")
        if meta.get("name") != naming.object_name(key):
            out.append(f"{where}: name does not derive from the replica key")
    for k in (naming.ANNOTATION_CONTRACT, naming.ANNOTATION_INTENT, naming.ANNOTATION_STACK):
        if k not in ann:
            out.append(f"{where}: annotation {k} is missing")
    if ann.get(naming.PULUMI_FIELD_MANAGER) != naming.FIELD_MANAGER:
        out.append(f"{where}: field manager must be {naming.FIELD_MANAGER} ({naming.PULUMI_FIELD_MANAGER})")
    if naming.PULUMI_PATCH_FORCE in ann:
        out.append(f"{where}: {naming.PULUMI_PATCH_FORCE} is set; InferCrane never forces a conflict")

    spec = manifest.get("spec") or {}
    instance_only = {naming.LABEL_INSTANCE: labels.get(naming.LABEL_INSTANCE)}
    if manifest.get("kind") == "Deployment":
        sel = (spec.get("selector") or {}).get("matchLabels")
        if sel != instance_only or (spec.get("selector") or {}).get("matchExpressions"):
            out.append(f"{where}: selector must be the instance label only, got {sel!r}")
    if manifest.get("kind") == "Service" and spec.get("selector") != instance_only:
        out.append(f"{where}: selector must be the instance label only, got {spec.get('selector')!r}")

    pod = _pod_spec(manifest)
    if pod is not None:
        for v in pod.get("volumes") or []:
            claim = v.get("persistentVolumeClaim")
            if claim is not None and claim.get("readOnly") is not True:
                out.append(
                    f"{where}: volume {v.get('name')} mounts claim {claim.get('claimName')} writable; a model cache is read-only"
                )
        if gpu_label not in (pod.get("nodeSelector") or {}):
            out.append(f"{where}: nodeSelector {gpu_label} is missing")
        for c in pod.get("containers") or []:
            cname = f"{where} container {c.get('name')}"
            problem = image.digest_problem(str(c.get("image", "")))
            if problem:
                out.append(f"{cname}: {problem}")
            res = c.get("resources") or {}
            lim, req = (res.get("limits") or {}), (res.get("requests") or {})
            if gpu_resource not in lim or lim.get(gpu_resource) != req.get(gpu_resource):
                out.append(f"{cname}: {gpu_resource} limits must equal requests and be set")
            if not {"cpu", "memory"} <= set(req) or "memory" not in lim:
                out.append(f"{cname}: cpu and memory requests and a memory limit must be set (else the pod is BestEffort)")
            if any(str(a).split("=", 1)[0] == "--api-key" for a in c.get("args") or []):
                out.append(f"{cname}: --api-key in args would expose the worker key")
            for e in c.get("env") or []:
                if e.get("name") in (naming.WORKER_KEY_ENV, naming.VLLM_KEY_ENV, naming.HF_TOKEN_ENV) and "value" in e:
                    out.append(f"{cname}: {e['name']} must come from a secretKeyRef, not a literal value")
    return out


def check_all(manifests: list[dict[str, Any]], *, gpu_resource: str, gpu_label: str) -> list[str]:
    out: list[str] = []
    for m in manifests:
        out += check(m, gpu_resource=gpu_resource, gpu_label=gpu_label)
    return out
