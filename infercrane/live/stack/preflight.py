"""The live preflight, run by the program before any resource is registered (preview and up).

(a) A live object with our target name but without our exact ownership metadata is refused and
left untouched (pulumi-kubernetes would adopt it). (b) Every object is applied server-side as a
strict dry run (``fieldValidation=Strict``), as ``infercrane-provider-v1`` with force off; every
conflict is collected with the other manager and the field path (pulumi-kubernetes would silently
take over ``kubectl``'s fields), every unknown or duplicate field with the server's message --
except a Service whose live form proves the apply a no-op (:func:`_proven_unchanged`).
(0) Before rendering, :func:`verify_cache` checks the mapped model caches (one LIST of claims).
(c) The dry run's Pod Security warnings (``would violate PodSecurity "restricted:latest": …``; a
namespace warns at the level it enforces) are refused too -- the ReplicaSet's pods would be
rejected after the apply -- unless ``podSecurityWarnings: report``. All problems are reported
together; nothing is mutated.

Cost at fleet size: one LIST per kind (not a GET per object) for the ownership check, and the dry
runs in parallel on a bounded pool -- 200 objects take about what 16 sequential requests take.
The result also says, per object, whether applying would change the live object (drift or a new
intent): what ``plan`` shows. Live-cluster layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from lightkube import ApiError

from infercrane.core import naming
from infercrane.core.errors import CacheRefused, ClusterError, PreflightRefused, bullets
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE, WORKLOADS
from infercrane.core.plan import cache
from infercrane.core.plan.actions import Action
from infercrane.core.plan.fields import NOT_CHECKABLE, compare
from infercrane.core.plan.workload import claims_differ, restarts_pods
from infercrane.live.client import cluster, failures
from infercrane.live.client.api import Live

POD_SECURITY_WARNING: Final = "would violate PodSecurity"


def _where(m: Mapping[str, Any]) -> str:
    meta = m["metadata"]
    return f"{m['kind']} {meta['namespace']}/{meta['name']}"


def conflict_lines(manifest: Mapping[str, Any], exc: ApiError) -> list[str]:
    """``Kind ns/name: conflict with "manager" using api: .field`` for each cause of a 409 (the
    server's answer a :class:`~infercrane.live.client.failures.Conflict` carries)."""
    details = exc.status.details
    causes = (details.causes if details else None) or []
    lines = [
        f"{_where(manifest)}: {c.message}" + (f": {c.field}" if c.field and c.field not in (c.message or "") else "")
        for c in causes
        if c.message
    ]
    return lines or [f"{_where(manifest)}: {exc.status.message}"]


@dataclass
class Report:
    """What the preflight saw: per object ``Kind/name`` -> its :class:`~infercrane.core.plan.actions.Action` (create, update, same); the
    workloads whose pods applying would restart (their pod template changes); and every live
    object of the listed kinds, keyed by ``(kind, name)`` (ours or not), for the rollout."""

    actions: dict[str, Action] = field(default_factory=dict)
    restarts: set[str] = field(default_factory=set)  # object names
    live: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # the API server's, to show (podSecurityWarnings: report)
    #: KServe: the predictor Deployments by name, which decide each InferenceService's state
    #: (verdicts.judged); None: not KServe, or this identity may not list Deployments.
    predictors: dict[str, dict[str, Any]] | None = None
    #: What this preflight could not check (read-only: what only a dry run says).
    unchecked: list[str] = field(default_factory=list)

    @property
    def drift(self) -> list[str]:
        return sorted(k for k, a in self.actions.items() if a is not Action.SAME)

    def notes(self, config: InferCraneConfig) -> list[str]:
        """What the command says of how it judged the replicas: under KServe without the predictor
        reads, by each InferenceService's own status (the weaker rule); read-only, what it could not check."""
        unchecked = [f"note: {u}" for u in self.unchecked]
        if not config.kubernetes.api.judged_by_predictor or self.predictors is not None:
            return unchecked
        return unchecked + [
            "note: this identity may not list Deployments, so each InferenceService is judged by its own status, "
            "whose counter KServe copies from its predictor (after a predictor restart it can vouch for a stale "
            "Ready); apply deploy/kubernetes/optional/kserve-predictor-reader.yaml to judge each by its predictor"
        ]


_VOLATILE_META: Final = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_META}
    return {"metadata": meta, "spec": obj.get("spec")}


def verify_cache(config: InferCraneConfig, live: Live) -> cache.CacheVerdict:
    """The model cache's verdict from one LIST of the namespace's claims (none when nothing is
    mapped). A LIST this identity may not make (the read is optional) verifies nothing: ``prefer``
    downloads, ``required`` refuses. Raises CacheRefused, or ClusterError for other failures."""
    if not cache.wanted(config):
        return cache.CacheVerdict(config)
    from lightkube.resources.core_v1 import PersistentVolumeClaim

    claims: dict[str, dict[str, Any]] | None
    try:
        action = f"list persistentvolumeclaims in namespace {live.namespace}"
        claims = {raw["metadata"]["name"]: raw for raw in live.list(PersistentVolumeClaim, action=action, retry=True)}
    except failures.Forbidden:
        claims = None
    verdict = cache.judge(config, claims)
    if verdict.refusals:
        raise CacheRefused(verdict.refusals, unreadable=verdict.unreadable)
    return verdict


def _sorted(
    manifests: list[dict[str, Any]], live: Mapping[tuple[str, str], dict[str, Any]], namespace: str, stack_id: str
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """The manifests by what their live namesakes say: not ours (why, in words), to check, replaced
    (a claim template whose claim differs: immutable, so deleted and made again in its key's wave)."""
    ownership: list[str] = []
    to_check: list[dict[str, Any]] = []
    replaced: list[dict[str, Any]] = []
    for m in manifests:
        obj = live.get((m["kind"], m["metadata"]["name"]))
        key = m["metadata"]["annotations"][naming.ANNOTATION_KEY]
        reasons = naming.ownership_mismatches(obj, key=key, namespace=namespace, stack=stack_id) if obj else []
        if reasons:
            ownership.append(f"{_where(m)} exists but is not owned by this stack: {'; '.join(reasons)}")
        elif obj is not None and claims_differ(obj, m):
            # A claim template is immutable: another claim (GPU count, product, device class) is a
            # new template, deleted and made again in the key's wave (shell.components), never updated.
            replaced.append(m)
        else:
            to_check.append(m)
    return ownership, to_check, replaced


def _judged(
    report: Report,
    to_check: list[dict[str, Any]],
    results: list[cluster.DryRun | failures.LiveError],
    live: Mapping[tuple[str, str], dict[str, Any]],
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Each dry run's outcome: its action and restart into ``report``, or a conflict, an invalid
    object, an error or a Pod Security warning (those four returned, in words). A lost API server
    raises."""
    conflicts: list[str] = []
    invalid: list[str] = []
    errors: list[str] = []
    pod_security: list[str] = []
    for m, outcome in zip(to_check, results, strict=True):
        ref = f"{m['kind']}/{m['metadata']['name']}"
        if isinstance(outcome, failures.Unreachable):
            raise outcome
        if isinstance(outcome, failures.Conflict) and outcome.api is not None:
            conflicts += conflict_lines(m, outcome.api)
            continue
        if isinstance(outcome, failures.Invalid) and outcome.api is not None:
            invalid.append(f"{_where(m)}: {outcome.api.status.message}")
            continue
        if isinstance(outcome, failures.LiveError):
            errors.append(str(outcome))
            continue
        pod_security += [f"{_where(m)}: {w}" for w in outcome.warnings if POD_SECURITY_WARNING in w]
        value = outcome.obj
        before = live.get((m["kind"], m["metadata"]["name"]))
        report.actions[ref] = (
            Action.CREATE if before is None else (Action.SAME if _comparable(before) == _comparable(value) else Action.UPDATE)
        )
        if before is not None and restarts_pods({"kind": m["kind"], **before}, value):
            report.restarts.add(m["metadata"]["name"])
    return conflicts, invalid, errors, pod_security


def run(
    config: InferCraneConfig, manifests: list[dict[str, Any]], stack_id: str, connection: Live, *, read_only: bool = False
) -> Report:
    """Raise PreflightRefused (ownership/conflicts/strict validation) or ClusterError; else the Report.
    ``read_only``: no dry run (it needs ``patch``) -- each object judged from its live form and its
    ``managedFields`` (:func:`~infercrane.core.plan.fields.compare`), with get, list and watch only;
    what only the API server can say is declared not checkable (``Report.unchecked``)."""
    target = config.kubernetes
    try:
        # The other workload API's kind too, when this identity may list it: after a `workloadApi`
        # switch the replicas still run in their old form, and the rollout counts them. Claim
        # templates likewise: after a switch from gpuAllocation dra, they say what the replicas hold.
        others = set(WORKLOADS) | {RESOURCE_CLAIM_TEMPLATE.name}
        refused: set[str] = set()
        live = connection.by_name({m["kind"] for m in manifests}, optional=others, refused=refused)
    except ClusterError as exc:
        raise ClusterError(f"preflight could not check the cluster; nothing was applied:\n- {exc}") from exc
    ownership, to_check, replaced = _sorted(manifests, live, target.namespace, stack_id)

    def dry_run(m: dict[str, Any]) -> cluster.DryRun | failures.LiveError:
        try:
            return connection.dry_run(m, action=f"server-side dry-run of {_where(m)}")
        except failures.LiveError as exc:
            return exc

    report = Report(live=live)
    if target.api.judged_by_predictor and "Deployment" not in refused:  # the one rule: by the predictors
        report.predictors = {name: obj for (kind, name), obj in live.items() if kind == "Deployment"}
    report.actions |= {f"{m['kind']}/{m['metadata']['name']}": Action.REPLACE for m in replaced}
    if read_only:
        return _judged_read_only(report, to_check, ownership)
    proven, to_check = _proven_unchanged(to_check, live)
    report.actions |= {f"{m['kind']}/{m['metadata']['name']}": Action.SAME for m in proven}
    with ThreadPoolExecutor(max_workers=cluster.CONCURRENT_REQUESTS) as pool:
        results = list(pool.map(dry_run, to_check))
    conflicts, invalid, errors, pod_security = _judged(report, to_check, results, live)
    if errors:
        forbidden = all(isinstance(r, failures.Forbidden) for r in results if isinstance(r, failures.LiveError)) and not (
            conflicts or invalid
        )
        raise ClusterError(
            "preflight could not check the cluster; nothing was applied:\n" + bullets(errors),
            # An identity that may only read (a pull request's job): the plan it can make.
            fix="to plan with get and list only, run `infercrane plan --read-only`" if forbidden else None,
        )
    if target.pod_security_warnings == "report":
        report.warnings, pod_security = pod_security, []
    if ownership or conflicts or invalid or pod_security:
        raise PreflightRefused(ownership, conflicts, invalid, pod_security)
    return report


#: Kinds an apply of which the live form can prove a no-op: no pod template (no Pod Security
#: verdict to ask for), a schema the API server does not change under a running object (core v1).
PROVEN_BY_LIVE: Final = frozenset({"Service"})


def _proven_unchanged(
    to_check: list[dict[str, Any]], live: Mapping[tuple[str, str], Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``to_check`` in two: the objects a dry run would tell nothing new, and the others. The first
    are Services whose live form has every field we apply at the value we apply, none of ours
    dropped and none held by another manager at another value
    (:func:`~infercrane.core.plan.fields.compare`): applying one changes nothing and meets no
    conflict, and the server accepted exactly those fields when it stored them. Any doubt -- a
    missing or changed field, a conflict, a field the server rewrote (it differs) -- gets the
    strict dry run."""
    proven: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for m in to_check:
        before = live.get((m["kind"], m["metadata"]["name"]))
        same = (
            m["kind"] in PROVEN_BY_LIVE
            and before is not None
            and (compared := compare(m, before, naming.FIELD_MANAGER)).action is Action.SAME
            and not compared.conflicts
        )
        (proven if same else others).append(m)
    return proven, others


def _judged_read_only(report: Report, to_check: list[dict[str, Any]], ownership: list[str]) -> Report:
    """The preflight's verdicts without a dry run: each object from its live form and its
    ``managedFields``; refused on the same ownership and field-manager conflicts a deploy meets."""
    conflicts: list[str] = []
    for m in to_check:
        before = report.live.get((m["kind"], m["metadata"]["name"]))
        compared = compare(m, before, naming.FIELD_MANAGER)
        conflicts += [f"{_where(m)}: {c}" for c in compared.conflicts]
        report.actions[f"{m['kind']}/{m['metadata']['name']}"] = compared.action
        if compared.restarts:
            report.restarts.add(m["metadata"]["name"])
    if ownership or conflicts:
        raise PreflightRefused(ownership, conflicts, [], [])
    report.unchecked.append(NOT_CHECKABLE)
    return report
