"""How the program names what it registers with Pulumi: one home for the component type, the
child names, the Kubernetes type tokens and the URNs built from them.

The program registers, per stack: one explicit provider, one ``infercrane:index:Replica``
component per replica, named by its durable key's object name (``infercrane-<24 hex>``, the name of
its Kubernetes objects too), and under each component its rendered objects, named
``<component>-<kind>``. Identity is the key: adding, removing or reordering replicas never renames
another replica's resources. Stacks deployed before this were named by *slot* (``<endpoint
name>-<ordinal>``); :func:`legacy_slots` gives those names for the aliases that move them without
a replacement. The components, the engine-event summary, ``destroy`` and the state-proven plan all
read these names from here. Pure core.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from infercrane.core.model.kinds import KINDS
from infercrane.core.model.target import KubernetesTarget
from infercrane.core.naming import ANNOTATION_KEY, PROJECT, object_name
from infercrane.core.render import RenderedReplica
from infercrane.core.state import times

COMPONENT_TYPE: Final = "infercrane:index:Replica"
PROVIDER_TYPE: Final = "pulumi:providers:kubernetes"
PROVIDER_NAME: Final = "infercrane"
STACK_TYPE: Final = "pulumi:pulumi:Stack"

# Kubernetes kind -> the provider's type token, and the suffix of the child's logical name.
TYPE_TOKENS: Final = {name: kind.type_token for name, kind in KINDS.items()}
KIND_OF_TOKEN: Final = {token: kind for kind, token in TYPE_TOKENS.items()}
CHILD_SUFFIXES: Final = {name: kind.child_suffix for name, kind in KINDS.items()}


def legacy_slots(rendered: Sequence[RenderedReplica]) -> list[str]:
    """The logical name the slot scheme gave each replica: ``<endpoint name>-<ordinal within that
    endpoint>``, in config order. Only for aliases of stacks deployed under that scheme."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for r in rendered:
        out.append(f"{r.replica.name}-{seen[r.replica.name]}")
        seen[r.replica.name] += 1
    return out


def child_name(component: str, kind: str) -> str:
    """A child's logical name: its component's name plus the kind's suffix. The same shape under
    both schemes, so the SDK's inherited child aliases follow a component's alias."""
    return f"{component}-{CHILD_SUFFIXES[kind]}"


def component_of(urn: str) -> str | None:
    """The component name of a component or child URN (``…::infercrane:index:Replica…::<name>``)."""
    if f"::{COMPONENT_TYPE}" not in urn:
        return None
    name = urn.rsplit("::", 1)[1]
    if f"{COMPONENT_TYPE}$" not in urn:
        return name
    for suffix in CHILD_SUFFIXES.values():
        if name.endswith(f"-{suffix}"):
            return name[: -len(suffix) - 1]
    return name


def kind_of(urn: str) -> str | None:
    """The Kubernetes kind of a child URN (``…$kubernetes:apps/v1:Deployment::<name>``), else None."""
    return KIND_OF_TOKEN.get(urn.rpartition("$")[2].partition("::")[0])


def legacy_names(state: Mapping[str, Any]) -> dict[str, str]:
    """Replica key -> the slot name its component has in ``state``, for components still named by
    slot (recorded by the slot scheme: the component's outputs carry its key)."""
    out = {}
    for res in state.get("resources") or []:
        if res.get("type") != COMPONENT_TYPE:
            continue
        name = str(res.get("urn", "")).rsplit("::", 1)[-1]
        key = (res.get("outputs") or {}).get("key")
        if isinstance(key, str) and name != object_name(key):
            out[key] = name
    return out


def recorded_objects(state: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Replica key -> the manifests the state records for its objects (inputs as applied), in the
    order they were registered: what holding a replica as it is registers again."""
    out: dict[str, list[dict[str, Any]]] = {}
    for res in state.get("resources") or []:
        if res.get("type") not in KIND_OF_TOKEN or res.get("delete"):
            continue
        inputs = _inputs(res)
        key = ((inputs.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_KEY)
        if isinstance(key, str):
            out.setdefault(key, []).append(inputs)
    return out


def recorded_summaries(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Replica key -> the facts its component recorded as outputs (shell.outputs.summary_of, without
    the objects' ids): what registering the replica again exactly as recorded registers with it."""
    out: dict[str, dict[str, Any]] = {}
    for res in state.get("resources") or []:
        outputs = res.get("outputs") or {}
        if res.get("type") == COMPONENT_TYPE and not res.get("delete") and isinstance(outputs.get("key"), str):
            out[outputs["key"]] = {k: v for k, v in outputs.items() if k != "ids"}
    return out


def stack_outputs(state: Mapping[str, Any]) -> dict[str, Any]:
    """The stack outputs a state records: the root Stack resource's outputs."""
    root: Mapping[str, Any] = next((r for r in state.get("resources") or [] if r.get("type") == "pulumi:pulumi:Stack"), {})
    return dict(root.get("outputs") or {})


def recorded_namespaces(state: Mapping[str, Any]) -> set[str]:
    """The namespaces the state records this stack's objects in."""
    return {
        str((m.get("metadata") or {}).get("namespace"))
        for ms in recorded_objects(state).values()
        for m in ms
        if (m.get("metadata") or {}).get("namespace")
    }


def unrecorded_before(checkpoint: Mapping[str, Any], live: Mapping[tuple[str, str], str]) -> list[str]:
    """``Kind/name`` of the live objects (``(kind, name) -> creationTimestamp``, this stack's own)
    that existed when ``checkpoint`` (Pulumi's ``{"latest": {...}}``) was written but that it
    records neither as a resource nor as a pending operation: proof that it is older than what
    the cluster shows. An object created after it was written (the interrupted write's own work)
    is no such proof. A checkpoint without a time is never proven older."""
    latest = checkpoint.get("latest") or {}
    written = times.parse((latest.get("manifest") or {}).get("time"))
    if written is None:
        return []
    recorded = set()
    for res in [*(latest.get("resources") or []), *(op.get("resource") or {} for op in latest.get("pending_operations") or [])]:
        kind = KIND_OF_TOKEN.get(res.get("type", ""))
        name = (_inputs(res).get("metadata") or {}).get("name")
        if kind is not None and name is not None:
            recorded.add((kind, name))
    older = []
    for (kind, name), created in sorted(live.items()):
        at = times.parse(created)
        if (kind, name) not in recorded and at is not None and at < written - CLOCK_SLACK:
            older.append(f"{kind}/{name}")
    return older


#: Server timestamps are whole seconds; the checkpoint's is the engine's clock.
CLOCK_SLACK: Final = timedelta(seconds=2)


def provider_inputs(target: KubernetesTarget, sdk_version: str) -> dict[str, Any]:
    """The inputs the state records for the one explicit provider (``provider.make_provider``):
    explicit context and namespace, SSA on, its client's rate (as the SDK sends an object: JSON, in
    the order of its arguments), the kubeconfig path only when configured, and the
    pulumi-kubernetes SDK's version."""
    rate = target.provider_client
    inputs = {
        "context": target.context,
        "enableServerSideApply": "true",
        "kubeClientSettings": json.dumps({"burst": rate.burst, "qps": rate.qps}),
        "namespace": target.namespace,
        "version": sdk_version,
    }
    if target.kubeconfig is not None:
        inputs["kubeconfig"] = target.kubeconfig
    return inputs


def _urn(stack: str, type_path: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_path}::{name}"


@dataclass(frozen=True)
class Registration:
    """One resource the program registers: its URN, type and (for custom resources) inputs."""

    urn: str
    type: str
    inputs: Mapping[str, Any] | None  # None: a component (no inputs recorded)


def registrations(stack: str, rendered: Sequence[RenderedReplica], provider_inputs: Mapping[str, Any]) -> list[Registration]:
    """Everything one run of the program registers for ``rendered``, in order (the root Stack
    resource excluded): the provider, then per replica the component and its objects."""
    out = [Registration(_urn(stack, PROVIDER_TYPE, PROVIDER_NAME), PROVIDER_TYPE, provider_inputs)]
    for r in rendered:
        out.append(Registration(_urn(stack, COMPONENT_TYPE, r.name), COMPONENT_TYPE, None))
        for m in r.manifests:
            token = TYPE_TOKENS[m["kind"]]
            out.append(Registration(_urn(stack, f"{COMPONENT_TYPE}${token}", child_name(r.name, m["kind"])), token, m))
    return out


def state_matches(state: Mapping[str, Any], expected: Sequence[Registration]) -> list[str]:
    """Why a stack's checkpoint (``pulumi stack export``) is *not* exactly what ``expected`` would
    leave: pending operations, a resource missing or extra, or inputs that differ. Empty when
    the checkpoint records exactly these resources with exactly these inputs -- then a
    ``pulumi preview`` of the same program has nothing to change unless a live object drifted."""
    reasons: list[str] = []
    if state.get("pending_operations"):
        reasons.append(f"{len(state['pending_operations'])} pending operation(s) in the state")
    recorded = {str(r.get("urn")): r for r in state.get("resources") or [] if r.get("type") != STACK_TYPE}
    for reg in expected:
        res = recorded.pop(reg.urn, None)
        if res is None:
            reasons.append(f"{reg.urn}: not in the state")
        elif res.get("type") != reg.type or res.get("delete"):
            reasons.append(f"{reg.urn}: recorded as {res.get('type')}{' (pending delete)' if res.get('delete') else ''}")
        elif reg.inputs is not None and _inputs(res) != dict(reg.inputs):
            reasons.append(f"{reg.urn}: recorded inputs differ")
    reasons.extend(f"{urn}: in the state, not in the config" for urn in sorted(recorded))
    return reasons


def stale_records(
    state: Mapping[str, Any], expected: Sequence[Registration], drift: Iterable[str], gone: Iterable[str] = ()
) -> list[str]:
    """``Kind/name`` of the objects whose record would mislead the run, so it needs ``--refresh``
    (which reads every recorded object back, one GET each):

    - drifted (missing or different live, ``drift``) and recorded with exactly the inputs the
      program registers now: Pulumi's diff, against the recorded outputs, sees no change;
    - ``gone`` from the cluster (a subset of ``drift``) and recorded with any inputs: Pulumi would
      update it, and the provider's update reads the live object first and fails when it is gone
      (``not found``) -- as after a rollback removed a replica its run could not forget.

    An object recorded with other inputs that still exists is applied anyway, the whole manifest by
    server-side apply, and one the state does not record is created."""
    recorded = {str(r.get("urn")): r for r in state.get("resources") or [] if not r.get("delete")}
    trusted, known = set(), set()
    for reg in expected:
        res = recorded.get(reg.urn)
        if reg.type not in KIND_OF_TOKEN or reg.inputs is None or res is None:
            continue
        name = f"{reg.inputs['kind']}/{reg.inputs['metadata']['name']}"
        known.add(name)
        if _inputs(res) == dict(reg.inputs):
            trusted.add(name)
    return sorted(trusted.intersection(drift) | known.intersection(gone))


def _inputs(resource: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (resource.get("inputs") or {}).items() if k != "__internal"}
