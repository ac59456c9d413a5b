"""The rules that span fields of a stack's config, checked once every field is valid on its own:
endpoints and their rollout policies, scaling, pod settings against the target, and the model
cache mapping. Each broken rule is a :class:`~infercrane.core.errors.Problem` with where it is and
how to fix it. Pure core.
"""

from __future__ import annotations

from infercrane.core.errors import Problem
from infercrane.core.model import gpu
from infercrane.core.model.config import KEY_ENDPOINTS, KEY_REPLICAS, KEY_TARGET, InferCraneConfig
from infercrane.core.model.engines import ENGINES
from infercrane.core.model.schema import ARTIFACT_KEY_RE


def endpoint_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """Endpoint settings that name no endpoint, or whose merged rollout policy can never progress."""
    problems = []
    names = {r.name for r in config.replicas}
    for name in config.endpoints:
        where = f"{source}: {KEY_ENDPOINTS}.{name}"
        if name not in names:
            problems.append(
                Problem(
                    where,
                    f"no replica is named {name!r}",
                    f"use an endpoint name of {KEY_REPLICAS} ({', '.join(sorted(names)) or 'none'})",
                )
            )
            continue
        try:
            config.rollout_for(name)
        except ValueError:
            problems.append(
                Problem(
                    f"{where}.rollout",
                    "maxUnavailable 0 with maxSurge 0 (with the target's defaults) can never replace a replica",
                    "allow one replica down (maxUnavailable: 1) or one extra (maxSurge: 1)",
                )
            )
    return problems


def scaling_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """``scaling: external`` is a Deployment's field left to an HPA; KServe scales by itself."""
    if not config.kubernetes.api.scaled_by_controller:
        return []
    return [
        Problem(
            f"{source}: {KEY_REPLICAS}[{i}].scaling (replica {r.key!r})",
            "external scaling leaves a Deployment's spec.replicas to an HPA; an InferenceService is scaled by KServe",
            "leave scaling out (fixed) under workloadApi kserve, or use workloadApi deployment",
        )
        for i, r in enumerate(config.replicas)
        if r.scaling == "external"
    ]


def pod_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """The GPU product label is the replica's ``gpu``, never a pod setting (it is never substituted)."""
    label = config.kubernetes.gpu_product_label
    fix = f"set the GPU with {KEY_REPLICAS}[].gpu; remove {label} from nodeSelector"
    what = f"sets the GPU product label {label}, which comes from each replica's gpu"
    problems = []
    if label in config.kubernetes.pod.node_selector:
        problems.append(Problem(f"{source}: {KEY_TARGET}.pod.nodeSelector", what, fix))
    for i, r in enumerate(config.replicas):
        if label in r.pod.node_selector:
            problems.append(Problem(f"{source}: {KEY_REPLICAS}[{i}].pod.nodeSelector (replica {r.key!r})", what, fix))
    return problems


def cache_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """Under ``artifactCache.policy: required`` every replica loads from a mapped claim: its
    revision is pinned (a commit: a cache entry never changes) and its ``model@revision`` mapped."""
    cache = config.kubernetes.artifact_cache
    if cache.policy != "required":
        return []
    problems = []
    for i, r in enumerate(config.replicas):
        where = f"{source}: {KEY_REPLICAS}[{i}].modelRevision (replica {r.key!r})"
        if config.model_image_for(r) is not None:  # its weights are a model image, pinned by digest
            continue
        if not r.model_revision:
            problems.append(
                Problem(
                    where,
                    "has no pinned revision, but infercrane:kubernetes.artifactCache.policy is required",
                    'pin the model\'s 40-hex commit (modelRevision: "<commit>") and map <model>@<commit> to its PVC',
                )
            )
        elif not ARTIFACT_KEY_RE.match(f"{r.model}@{r.model_revision}"):
            problems.append(
                Problem(
                    where,
                    f"{r.model_revision!r} is not a commit, but artifactCache.policy is required (a cache entry never changes)",
                    'pin the model\'s 40-hex commit: modelRevision: "<commit>"',
                )
            )
        elif cache.claim_for(r.model, r.model_revision) is None:
            problems.append(
                Problem(
                    where,
                    f"no model cache is mapped for {r.model}@{r.model_revision} (artifactCache.policy is required)",
                    f'add "{r.model}@{r.model_revision}": <pvc> to infercrane:kubernetes.artifactCache.pvcs, '
                    "or use policy prefer to download what has no cache",
                )
            )
    return problems


def compile_cache_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """With ``compileCache`` the cache's variables are InferCrane's (they point at the key's own
    directory): a pod env of the same name would point an engine at another key's artifacts."""
    if config.kubernetes.compile_cache is None:
        return []
    problems = []
    for i, r in enumerate(config.replicas):
        if config.compile_key(r) is None:
            continue
        own = set(ENGINES[r.engine].cache_env)
        for where, env in (
            (f"{KEY_TARGET}.pod.env", config.kubernetes.pod.env),
            (f"{KEY_REPLICAS}[{i}].pod.env (replica {r.key!r})", r.pod.env),
        ):
            clash = sorted(own & {e.name for e in env})
            if clash:
                problems.append(
                    Problem(
                        f"{source}: {where}",
                        f"sets {', '.join(clash)}, which compileCache points at the replica's own cache directory",
                        f"remove {', '.join(clash)} from the env, or leave {KEY_TARGET}.compileCache out",
                    )
                )
    return list(dict.fromkeys(problems))


def dra_problems(config: InferCraneConfig, source: str) -> list[Problem]:
    """Under ``gpuAllocation: dra`` every replica's GPU has a productName in the table (never
    derived from the label value: the spellings differ in more than spaces)."""
    t = config.kubernetes
    if not t.allocation.claims:
        return []
    problems = []
    for i, r in enumerate(config.replicas):
        problem = gpu.dra_problem(r.gpu, t.gpu_product_names)
        if problem is None:
            continue
        fix = (
            f"add {r.gpu}: '<the productName your DRA driver publishes>' to {KEY_TARGET}.gpuProductNames"
            if r.gpu in t.gpu_products
            else "use the whole GPU's label value, or gpuAllocation label for a shared or MIG GPU"
        )
        problems.append(Problem(f"{source}: {KEY_REPLICAS}[{i}].gpu (replica {r.key!r})", problem, fix))
    return problems
