"""Names, label and annotation keys, the field manager and the intent hash.

The one home of every key InferCrane writes on an object: change a key here and the golden tests
show every manifest it touches. Names derive from the durable replica key only, so a lost apply
response is safe to retry: the retry targets the same objects. Pure core.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

FIELD_MANAGER: Final = "infercrane-provider-v1"
#: The field manager of a surge canary's hold (its Deployment's ``spec.minReadySeconds`` during the
#: bake, :mod:`infercrane.live.status.hold`): a field of its own, never the provider's.
HOLD_FIELD_MANAGER: Final = "infercrane-canary-hold"
PROVIDER_CONTRACT: Final = "infercrane.provider/v1"
NAME_PREFIX: Final = "infercrane-"
KEY_HASH_HEX_CHARS: Final = 24  # 12 bytes of sha256: the seed's scheme

# Labels (on objects and pod templates).
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_KEY_HASH: Final = "infercrane.dev/external-key-hash"
# On the objects only (not the pod template: moving a replica must not restart it by itself):
# routing membership, selectable (`-l infercrane.dev/endpoint=qwen`).
LABEL_ENDPOINT: Final = "infercrane.dev/endpoint"
APP_NAME: Final = "infercrane-runtime"
MANAGED_BY: Final = "infercrane"

# Annotations.
ANNOTATION_KEY: Final = "infercrane.dev/external-key"
ANNOTATION_CONTRACT: Final = "infercrane.dev/provider-contract"
ANNOTATION_INTENT: Final = "infercrane.dev/intent-hash"
ANNOTATION_STACK: Final = "infercrane.dev/stack"
KSERVE_ISVC_LABEL: Final = "serving.kserve.io/inferenceservice"  # KServe labels the pods it makes with their parent
KSERVE_DEPLOYMENT_MODE: Final = "serving.kserve.io/deploymentMode"

# pulumi-kubernetes annotations.
PULUMI_FIELD_MANAGER: Final = "pulumi.com/patchFieldManager"
PULUMI_PATCH_FORCE: Final = "pulumi.com/patchForce"
PULUMI_SKIP_AWAIT: Final = "pulumi.com/skipAwait"
PULUMI_WAIT_FOR: Final = "pulumi.com/waitFor"
PULUMI_DELETION_PROPAGATION: Final = "pulumi.com/deletionPropagationPolicy"

# Environment.
WORKER_KEY_ENV: Final = "INFERCRANE_WORKER_API_KEY"
VLLM_KEY_ENV: Final = "VLLM_API_KEY"
HF_TOKEN_ENV: Final = "HF_TOKEN"  # read by huggingface_hub in both engines
HF_HUB_CACHE_ENV: Final = "HF_HUB_CACHE"  # where huggingface_hub looks for (and would put) the weights
HF_HUB_OFFLINE_ENV: Final = "HF_HUB_OFFLINE"  # 1: never reach the Hub (a mounted cache is read-only and complete)
PATCH_FORCE_ENV: Final = "PULUMI_K8S_ENABLE_PATCH_FORCE"
# What InferCrane sets in the container: a user's extra environment never names these.
SECRET_ENV: Final = frozenset({WORKER_KEY_ENV, VLLM_KEY_ENV, HF_TOKEN_ENV})  # only ever from a secretKeyRef
#: A variable name that says it holds a secret: never given a literal value (a secretKeyRef only).
SECRET_NAME_RE: Final = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY)($|_)", re.I)
MANAGED_ENV: Final = SECRET_ENV | {HF_HUB_CACHE_ENV, HF_HUB_OFFLINE_ENV}
# Key prefixes and keys of ours: a user's extra pod labels and annotations never use them.
OWN_KEY_PREFIXES: Final = ("infercrane.dev/", "pulumi.com/")
OWN_LABELS: Final = frozenset({LABEL_NAME, LABEL_INSTANCE, LABEL_MANAGED_BY})


def managed_selector() -> dict[str, Any]:
    """The label selector of every object InferCrane manages (a superset of one stack's: ownership
    is then checked by the annotations), fresh for each LIST."""
    return {LABEL_MANAGED_BY: MANAGED_BY}


def own_key(key: str) -> bool:
    """Whether a label or annotation key is one InferCrane writes (ownership, identity, Pulumi's)."""
    return key in OWN_LABELS or key.startswith(OWN_KEY_PREFIXES)


def key_hash(key: str) -> str:
    """The 24-hex-character hash of a durable replica key (label value and name suffix)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:KEY_HASH_HEX_CHARS]


def object_name(key: str) -> str:
    """The name of every object of one replica: ``infercrane-`` + 24 hex chars of sha256(key)."""
    return NAME_PREFIX + key_hash(key)


#: The Pulumi project (Pulumi.yaml ``name``): the first part of every URN and stack identity.
PROJECT: Final = "infercrane"


def stack_identity(project: str, stack: str) -> str:
    """The value of the stack annotation: one stack never adopts another stack's object."""
    return f"{project}/{stack}"


def stack_id(stack: str) -> str:
    """This project's identity of ``stack`` (:func:`stack_identity` of :data:`PROJECT`)."""
    return stack_identity(PROJECT, stack)


def labels(key: str) -> dict[str, str]:
    """The labels on every object and pod template of one replica."""
    return {
        LABEL_NAME: APP_NAME,
        LABEL_INSTANCE: object_name(key),
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_KEY_HASH: key_hash(key),
    }


def selector(key: str) -> dict[str, str]:
    """The selector: the instance label only (a Deployment selector is immutable)."""
    return {LABEL_INSTANCE: object_name(key)}


def ownership_annotations(key: str, intent: str, stack: str) -> dict[str, str]:
    """The ownership annotations; together with :func:`labels` they are our exact ownership metadata."""
    return {
        ANNOTATION_KEY: key,
        ANNOTATION_CONTRACT: PROVIDER_CONTRACT,
        ANNOTATION_INTENT: intent,
        ANNOTATION_STACK: stack,
    }


def intent_hash(spec: dict[str, Any]) -> str:
    """``sha256:<64 hex>`` over the canonical JSON of a replica intent plus its target settings."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def not_owned(obj: dict[str, Any], *, namespace: str, stack: str) -> list[str]:
    """Why a live object found by listing is not ``stack``'s: its own key annotation is the key
    checked (empty list: ours). An object without that annotation is never ours."""
    key = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_KEY)
    if key is None:
        return [f"annotation {ANNOTATION_KEY} is missing"]
    return ownership_mismatches(obj, key=key, namespace=namespace, stack=stack)


def ownership_mismatches(obj: dict[str, Any], *, key: str, namespace: str, stack: str) -> list[str]:
    """Why a live object is *not* ours (empty list: it carries our exact ownership metadata).

    Ownership = same namespace, managed-by infercrane, key-hash label matching the key, the key
    annotation equal to the key exactly, our provider contract, and our stack identity.
    """
    meta = obj.get("metadata") or {}
    got_labels = meta.get("labels") or {}
    got_ann = meta.get("annotations") or {}
    reasons: list[str] = []
    # A controller's child is never ours: KServe copies an InferenceService's labels and
    # annotations -- our ownership among them -- onto the predictor Deployment it owns.
    owners = [f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or []]
    if owners:
        reasons.append(f"it is owned by {', '.join(owners)} (a controller's child)")
    if meta.get("namespace", namespace) != namespace:
        reasons.append(f"namespace is {meta.get('namespace')!r}, not {namespace!r}")
    checks = [
        ("label", LABEL_MANAGED_BY, got_labels, MANAGED_BY),
        ("label", LABEL_KEY_HASH, got_labels, key_hash(key)),
        ("annotation", ANNOTATION_KEY, got_ann, key),
        ("annotation", ANNOTATION_CONTRACT, got_ann, PROVIDER_CONTRACT),
        ("annotation", ANNOTATION_STACK, got_ann, stack),
    ]
    for kind, name, have, want in checks:
        if name not in have:
            reasons.append(f"{kind} {name} is missing")
        elif have[name] != want:
            reasons.append(f"{kind} {name} is {have[name]!r}, expected {want!r}")
    return reasons
