"""Generated cases for the read-only plan's comparison (``infercrane/core/plan/fields.py``) against
Kubernetes' own server-side apply field manager (``tools/go/ssa-oracle``).

A case is what happens to one object InferCrane renders: a history -- our apply of one release,
other managers' applies and updates (an autoscaler's ``replicas``, ``kubectl edit`` of a selector,
a mutating controller's env var, a sidecar, a quantity written in another form, ...) -- then our
apply of the next release, itself changed or not. The oracle runs the history and the final apply
through the API server's field manager; the comparison, given the live object the history left
(with its ``managedFields``), must say what the field manager did: the same conflicts, and
"same" exactly when the apply changed nothing. Deterministic from a seed.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane.core import naming
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.render.manifests import render_checked

OURS = naming.FIELD_MANAGER
KINDS = ("Deployment", "Service", "InferenceService")
Patch = dict[str, Any]


def rendered() -> dict[str, dict[str, Any]]:
    """Our Deployment and Service of one replica, and its InferenceService (workloadApi: kserve),
    as InferCrane renders them."""
    out: dict[str, dict[str, Any]] = {}
    for api in ("deployment", "kserve"):
        target = {"context": "c", "namespace": "n", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64, "workloadApi": api}
        replica = {
            "key": "r0",
            "name": "qwen",
            "model": "Qwen/Qwen3-0.6B",
            "gpu": "NVIDIA-L40S",
            "args": ["--max-model-len", "4096"],
        }
        config = InferCraneConfig.model_validate({"kubernetes": target, "replicas": [replica]})
        (r,) = render_checked(config, "dev")
        out |= {m["kind"]: dict(m) for m in r.manifests if m["kind"] in KINDS}
    return out


def merged(base: Any, patch: Any) -> Any:
    """``patch`` deep-merged into ``base``: maps by key, lists of named objects by name, anything
    else replaced (an update's whole object after a person's edit)."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merged(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(e, Mapping) and "name" in e for e in base + patch):
        out_list = [dict(e) for e in base]
        for e in patch:
            at = next((i for i, b in enumerate(out_list) if b["name"] == e["name"]), None)
            if at is None:
                out_list.append(copy.deepcopy(e))
            else:
                out_list[at] = merged(out_list[at], e)
        return out_list
    return copy.deepcopy(patch)


def _container(**fields: Any) -> Patch:
    return {"spec": {"template": {"spec": {"containers": [{"name": "runtime", **fields}]}}}}


def _pod(**fields: Any) -> Patch:
    return {"spec": {"template": {"spec": fields}}}


def _args(rng: random.Random) -> list[str]:
    base = ["--model", "Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "qwen"]
    return base + rng.choice([["--max-model-len", "4096"], ["--max-model-len", "8192"], [], ["--enforce-eager"]])


_MEMORY = ["16Gi", "16384Mi", "17179869184", "8Gi", "0.5Gi", "512Mi"]


# What other managers do to a Deployment: each a patch (an Apply sends it alone, an Update sends
# the whole object with it merged in).
def _theirs_deployment(rng: random.Random) -> Patch:
    choice = rng.randrange(14)
    if choice == 0:
        return {"spec": {"replicas": rng.choice([1, 2, 3])}}
    if choice == 1:
        return {"metadata": {"labels": {"team": rng.choice(["a", "b"])}}}
    if choice == 2:
        return {"metadata": {"annotations": {"note": rng.choice(["x", "y"])}}}
    if choice == 3:
        return {"spec": {"selector": {"matchLabels": {"extra": "1"}}}}
    if choice == 4:
        return _pod(nodeSelector={"nvidia.com/gpu.product": rng.choice(["NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"])})
    if choice == 5:
        return _pod(nodeSelector={"zone": "a"})
    if choice == 6:
        return _pod(
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "spot", "operator": "Exists"},
            ]
        )
    if choice == 7:
        return _container(args=_args(rng))
    if choice == 8:
        return _container(env=[{"name": "INJECTED", "value": rng.choice(["1", "2"])}])
    if choice == 9:
        return _container(resources={"limits": {"memory": rng.choice(_MEMORY)}})
    if choice == 10:
        return {
            "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-06T00:00:00Z"}}}}
        }
    if choice == 11:
        return {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "proxy:1"}]}}}}
    if choice == 12:
        return {"spec": {"progressDeadlineSeconds": rng.choice([600, 1800])}}
    return _container(resources={"limits": {"nvidia.com/gpu": rng.choice(["1", "2"])}})


def _theirs_service(rng: random.Random) -> Patch:
    choice = rng.randrange(6)
    if choice == 0:
        return {"metadata": {"labels": {"team": rng.choice(["a", "b"])}}}
    if choice == 1:
        return {"spec": {"selector": {"extra": "1"}}}
    if choice == 2:
        return {"spec": {"ports": [{"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}]}}
    if choice == 3:
        return {"spec": {"ports": [{"name": "http", "port": rng.choice([8000, 8080]), "targetPort": "http", "protocol": "TCP"}]}}
    if choice == 4:
        return {
            "spec": {
                "ports": [{"name": "http", "port": 8000, "targetPort": rng.choice([8000, "8000", "http"]), "protocol": "TCP"}]
            }
        }
    return {"metadata": {"annotations": {"note": rng.choice(["x", "y"])}}}


# What our next release changes (applied whole: our manifest with it merged in).
def _ours_deployment(rng: random.Random) -> Patch:
    choice = rng.randrange(12)
    if choice <= 1:
        return {}
    if choice == 2:
        return _container(image="vllm/vllm-openai@sha256:" + "b" * 64)
    if choice == 3:
        return _container(args=_args(rng))
    if choice == 4:
        return {"metadata": {"annotations": {"pulumi.com/deletionPropagationPolicy": None}}}
    if choice == 5:
        return _container(env=[{"name": "HF_HOME", "value": "/cache"}])
    if choice == 6:
        return _pod(nodeSelector={"nvidia.com/gpu.product": rng.choice(["NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"])})
    if choice == 7:
        return _container(resources={"limits": {"memory": rng.choice(_MEMORY)}})
    if choice == 8:
        return {"spec": {"replicas": rng.choice([1, 2])}}
    if choice == 9:
        return _pod(
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "spot", "operator": "Exists"},
            ]
        )
    if choice == 10:  # a count of GPUs written as a number, or as text
        return _container(resources={"limits": {"nvidia.com/gpu": rng.choice([1, "1", 2, "2"])}})
    return {"spec": {"template": {"metadata": {"annotations": {"infercrane.dev/intent-hash": "sha256:" + "c" * 64}}}}}


def _ours_service(rng: random.Random) -> Patch:
    choice = rng.randrange(4)
    if choice <= 1:
        return {}
    if choice == 2:
        return {"metadata": {"labels": {"infercrane.dev/endpoint": "qwen2"}}}
    return {"spec": {"ports": [{"name": "http", "port": 8000, "targetPort": rng.choice([8000, "8000"]), "protocol": "TCP"}]}}


def _predictor(**fields: Any) -> Patch:
    return {"spec": {"predictor": fields}}


def _runtime(**fields: Any) -> Patch:
    return _predictor(containers=[{"name": "kserve-container", **fields}])


# What other managers do to an InferenceService, and what our next release changes in it.
def _theirs_inference_service(rng: random.Random) -> Patch:
    choice = rng.randrange(11)
    if choice == 0:
        return _predictor(minReplicas=rng.choice([1, 2]))
    if choice == 1:
        return {"metadata": {"labels": {"team": rng.choice(["a", "b"])}}}
    if choice == 2:
        return {"metadata": {"annotations": {"note": rng.choice(["x", "y"])}}}
    if choice == 3:
        return _predictor(nodeSelector={"nvidia.com/gpu.product": rng.choice(["NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"])})
    if choice == 4:
        return _predictor(tolerations=[{"key": "spot", "operator": "Exists"}])
    if choice == 5:
        return _runtime(args=_args(rng))
    if choice == 6:
        return _runtime(env=[{"name": "INJECTED", "value": rng.choice(["1", "2"])}])
    if choice == 7:
        return _runtime(resources={"limits": {"memory": rng.choice(_MEMORY)}})
    if choice == 8:
        return _predictor(annotations={"kubectl.kubernetes.io/restartedAt": "2026-12-06T00:00:00Z"})
    if choice == 9:
        return _predictor(containers=[{"name": "sidecar", "image": "proxy:1"}])
    return _predictor(terminationGracePeriodSeconds=rng.choice([45, 90]))


def _ours_inference_service(rng: random.Random) -> Patch:
    choice = rng.randrange(10)
    if choice <= 1:
        return {}
    if choice == 2:
        return _runtime(image="vllm/vllm-openai@sha256:" + "b" * 64)
    if choice == 3:
        return _runtime(args=_args(rng))
    if choice == 4:
        return _runtime(env=[{"name": "HF_HOME", "value": "/cache"}])
    if choice == 5:
        return _predictor(nodeSelector={"nvidia.com/gpu.product": rng.choice(["NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"])})
    if choice == 6:
        return _runtime(resources={"limits": {"memory": rng.choice(_MEMORY)}})
    if choice == 7:
        return _predictor(
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "spot", "operator": "Exists"},
            ]
        )
    if choice == 8:  # a count of GPUs written as a number, or as text
        return _runtime(resources={"limits": {"nvidia.com/gpu": rng.choice([1, "1", 2, "2"])}})
    return _predictor(annotations={"infercrane.dev/intent-hash": "sha256:" + "c" * 64})


THEIRS: dict[str, Callable[[random.Random], Patch]] = {
    "Deployment": _theirs_deployment,
    "Service": _theirs_service,
    "InferenceService": _theirs_inference_service,
}
MINE: dict[str, Callable[[random.Random], Patch]] = {
    "Deployment": _ours_deployment,
    "Service": _ours_service,
    "InferenceService": _ours_inference_service,
}
OTHERS = [
    ("kubectl-edit", "update"),
    ("hpa-controller", "update"),
    ("platform-apply", "apply"),
    ("mutator", "update"),
    ("kubectl-scale", "scale"),
]


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {"name": obj["metadata"]["name"], "namespace": "n"}}


def case(rng: random.Random, base: Mapping[str, dict[str, Any]], kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """One case: a history on one of our objects (of ``kinds``), and our next apply."""
    kind = rng.choice(
        [k for k in ("Deployment", "Deployment", "Deployment", "Service", "InferenceService", "InferenceService") if k in kinds]
    )
    ours = merged(base[kind], MINE[kind](rng))  # the release that runs
    whole = copy.deepcopy(ours)  # the object as an Update would send it
    history = [] if rng.random() < 0.05 else [{"op": "apply", "manager": OURS, "object": ours}]
    if not history:  # made by someone else first (takeover): their whole object
        history.append({"op": "update", "manager": "kubectl-create", "object": whole})
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        manager, op = rng.choice(OTHERS)
        patch = THEIRS[kind](rng)
        if op == "scale":  # `kubectl scale`: the replicas through the /scale subresource
            if kind != "Deployment":
                continue
            whole = merged(whole, {"spec": {"replicas": rng.choice([1, 2, 3])}})
            history.append({"op": "update", "manager": manager, "object": whole, "subresource": "scale"})
        elif op == "apply":
            # another team applying its own part, taking what it changes (`--force-conflicts`)
            history.append({"op": "apply", "manager": manager, "object": merged(_identity(ours), patch), "force": True})
        else:
            whole = merged(whole, patch)
            history.append({"op": "update", "manager": manager, "object": whole})
    final = merged(base[kind], MINE[kind](rng)) if rng.random() < 0.6 else ours
    return {"kind": kind, "history": history, "final": {"op": "apply", "manager": OURS, "object": final}}


def cases(n: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> Iterator[dict[str, Any]]:
    rng, base = random.Random(seed), rendered()
    for _ in range(n):
        yield case(rng, base, kinds)


def quantities(n: int, seed: int = 0) -> list[str]:
    """Quantity texts of every form: whole and fractional, every suffix, exponents, signs."""
    rng = random.Random(seed)
    suffixes = ["", "", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "n", "u", "e3", "E6", "e-3"]
    out = []
    for _ in range(n):
        whole = rng.choice([0, 1, 2, 3, 5, 7, 8, 16, 100, 512, 1000, 1023, 1024, 1536, 2048, 4096, 16384, rng.randrange(10**6)])
        frac = rng.choice(["", "", "", ".5", ".25", ".1", ".125", ".001", ".0"])
        sign = rng.choice(["", "", "", "+", "-"])
        out.append(f"{sign}{whole}{frac}{rng.choice(suffixes)}")
    return out


def stored(oracle: Path, texts: list[str]) -> list[str]:
    """Each quantity as the API server stores it (``invalid``: it refuses it)."""
    run = subprocess.run(
        [str(oracle), "quantity"], input="".join(t + "\n" for t in texts), capture_output=True, text=True, check=True
    )
    return run.stdout.splitlines()


@dataclass(frozen=True)
class Answer:
    """What the field manager did: the live object before our apply, its conflicts, whether it changed it."""

    live: dict[str, Any]
    conflicts: frozenset[tuple[str, str]]  # (manager, field)
    changed: bool
    error: str


def crds() -> list[str]:
    """The oracle's ``--crd`` arguments: the CRDs of the custom kinds we render (KServe's, from
    ``tools/build.sh kserve``), as ``make ssa-schema`` reads them."""
    from infercrane.local.kserve import share_dir

    share = share_dir() / "crds"
    return ["--crd", str(share / "serving.kserve.io_inferenceservices.yaml")]


def ask(oracle: Path, batch: list[dict[str, Any]]) -> list[Answer]:
    """The oracle's answers to ``batch``, in order (one process for the whole batch)."""
    out = subprocess.run(
        [str(oracle), *crds()], input="".join(json.dumps(c) + "\n" for c in batch), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    answers = []
    for line in out:
        doc = json.loads(line)
        conflicts = frozenset(
            (c["manager"].removeprefix('conflict with "').split('"')[0], c["field"])  # 'conflict with "m" using apps/v1'
            for c in doc["conflicts"] or []
        )
        answers.append(Answer(doc.get("live") or {}, conflicts, bool(doc.get("changed")), doc.get("error") or ""))
    return answers
