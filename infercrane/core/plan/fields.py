"""What a server-side apply of a rendered object would do, judged without the apply: from the live
object and its ``managedFields`` alone -- the read-only plan's comparison, where the deploy's
preflight asks the API server for a strict dry run (which needs ``patch``).

- **Same**: every field the manifest renders holds that value live, and the field manager owns no
  field the manifest no longer renders (an apply would change nothing).
- **Update**: otherwise -- a rendered value differs or is absent, or an owned field would be
  removed (an apply drops what its manager owned and no longer sends).
- **Conflict**: another manager owns a field the manifest renders, with another value live: the
  apply would be refused (InferCrane never forces).

Each list and map is compared as server-side apply treats it, by Kubernetes' own schema of the
kind (:mod:`infercrane.core.plan.ssa_schema`, generated from it): an atomic list or map is applied
whole (an element or key someone else added is a change, and owned by them a conflict); a list
that is a map is matched element by element by its keys (``name``; a Service port by ``port`` and
``protocol``), a set by value, and the elements others added are theirs; a defaulted field the
API server added is not ours and changes nothing. KServe's InferenceService is in the table too,
from its CRD as the API server builds its schema: its lists are atomic unless the CRD says
otherwise (a predictor's ``containers`` is applied whole), and, as a custom resource, it is stored
as sent (a quantity keeps its text). A kind the table does not know is compared as a list of named
objects by name, else by position. What cannot be known without the API server -- an admission webhook's
mutation or refusal, defaulting that rewrites a field the manifest renders, strict validation,
Pod Security -- is the read-only plan's declared blind spot (:data:`NOT_CHECKABLE`). Pure core.

One module, past 300 lines: one comparison, read top to bottom -- what the server's field manager
would change -- with each of its rules (atomic maps and lists, quantities, defaults) beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from infercrane.core.model import quantity
from infercrane.core.model.kinds import WORKLOAD_APIS
from infercrane.core.plan import ssa_schema
from infercrane.core.plan.actions import Action

NOT_CHECKABLE: Final = (
    "not checkable read-only: admission webhooks and Pod Security (their mutations and refusals), "
    "strict field validation, and server defaulting that rewrites a field InferCrane renders -- "
    "the deploy's preflight dry run checks them"
)
# The part of a workload whose change restarts its pods (its workload API's): the Deployment's pod
# template, the InferenceService's predictor (KServe rolls its pods on a predictor change) but for how it rolls.
POD_SPEC_PATH: Final = {a.workload.name: a.pod_spec[0] for a in WORKLOAD_APIS.values()}
NOT_A_POD_CHANGE: Final = ("deploymentStrategy",)
_MISSING: Final = object()
Path = tuple[str, ...]  # FieldsV1 steps: "f:name", "k:{...}", "v:value", "i:3"
# The quantities we render: the API server stores each in its canonical form, which keeps its
# format (16384Mi as 16Gi, 0.5Gi as 512Mi, but 17179869184 as it is, though it is 16Gi), so they
# compare by that form (core.model.quantity.canonical).
_QUANTITY: Final = re.compile(
    r"\.resources\.(?:limits|requests)\..+$|\.sizeLimit$"
)  # a resource name may hold dots (nvidia.com/gpu)
#: What an admission webhook fills in an atomic field on every apply when the object does not set
#: it, by the field's dotted path: KServe's InferenceService defaulter gives a predictor container
#: the cpu and memory requests and limits of its ``inferenceservice-config`` (KServe's shipped
#: defaults: 1 CPU, 2Gi). A live value equal to one, where the manifest sets none, is the webhook's:
#: our apply would get it again, and change nothing. Another value is a change, as the server sees it.
ADMISSION_DEFAULTS: Final = {
    ".spec.predictor.containers": {"resources": {k: {"cpu": "1", "memory": "2Gi"} for k in ("requests", "limits")}}
}
#: Per kind, the dotted paths (``[]`` any element) server-side apply replaces whole: an atomic
#: list or map of Kubernetes' schema (``x-kubernetes-list-type: atomic``, ``x-kubernetes-map-type:
#: atomic``, a list of scalars by default).
ATOMIC: Final = {
    kind: frozenset(path for path, rule in rules.items() if "atomic" in (rule.get("list"), rule.get("map")))
    for kind, rules in ssa_schema.RULES.items()
}


@dataclass(frozen=True)
class Compared:
    """One rendered object against its live form."""

    action: Action
    conflicts: tuple[str, ...] = ()  # 'conflict with "manager" (operation): .spec.x'
    restarts: bool = False  # its pod template (a workload's) would change
    why: tuple[str, ...] = field(default=(), compare=False)  # the first fields that differ or would be dropped


def owned(fields: Mapping[str, Any], prefix: Path = ()) -> Iterator[Path]:
    """Every leaf path a ``fieldsV1`` tree names (a ``.`` entry names its element itself)."""
    for step, below in fields.items():
        if step == ".":
            yield prefix
        elif isinstance(below, Mapping) and below:
            yield from owned(below, (*prefix, step))
        else:
            yield (*prefix, step)


def at(obj: Any, path: Path) -> Any:
    """The value at a ``fieldsV1`` path of a plain object, or :data:`_MISSING`."""
    for step in path:
        kind, _, name = step.partition(":")
        if kind == "f" and isinstance(obj, Mapping):
            obj = obj.get(name, _MISSING)
        elif kind == "k" and isinstance(obj, list):
            keys = json.loads(name)
            obj = next((e for e in obj if isinstance(e, Mapping) and all(e.get(k) == v for k, v in keys.items())), _MISSING)
        elif kind == "v" and isinstance(obj, list):
            value = json.loads(name)
            obj = value if value in obj else _MISSING
        elif kind == "i" and isinstance(obj, list) and int(name) < len(obj):
            obj = obj[int(name)]
        else:
            return _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def _prefixes(path: Path) -> Iterator[Path]:
    """``path`` and each path above it, shortest first."""
    for i in range(1, len(path) + 1):
        yield path[:i]


def _dotted(path: Path) -> str:
    """A path as the API server prints a conflict's: ``.spec.containers[name="runtime"].args``
    (structured-merge-diff's form: a key's fields ``k=v``, a set's value ``[=v]``, an index ``[3]``)."""
    out = ""
    for step in path:
        kind, _, name = step.partition(":")
        if kind == "f":
            out += f".{name}"
        elif kind == "k":
            keys = json.loads(name)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif kind == "v":
            out += f"[={name}]"
        else:
            out += f"[{name}]"
    return out or "."


def _pattern(where: str) -> str:
    """A dotted path with every element as ``[]``: ``.spec.x[0].args`` -> ``.spec.x[].args``."""
    out, depth = "", 0
    for ch in where:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
            if not depth:
                out += "[]"
        elif not depth:
            out += ch
    return out


def differences(
    rendered: Any, live: Any, where: str = "", rules: Mapping[str, Mapping[str, Any]] | None = None, canonical: bool = True
) -> Iterator[str]:
    """Where ``live`` does not hold what ``rendered`` renders, by the kind's server-side apply
    ``rules`` (:data:`~infercrane.core.plan.ssa_schema.RULES`; None: a kind it does not know):
    fields and elements the server or others added are fine, except within an atomic field --
    applied whole, it must be whole. ``canonical``: the kind's quantities are stored in their
    canonical form (a built-in kind's; a custom resource keeps the text sent)."""
    rule = (rules or {}).get(_pattern(where), {}) if where else {}
    if "atomic" in (rule.get("list"), rule.get("map")):
        filled = ADMISSION_DEFAULTS.get(where)
        if live is _MISSING or not _whole(rendered, _unfilled(rendered, live, filled) if filled else live):
            yield where
        return
    if isinstance(rendered, Mapping):
        if not isinstance(live, Mapping):
            yield where or "."
            return
        for k, v in rendered.items():
            yield from differences(v, live.get(k, _MISSING), f"{where}.{k}", rules, canonical)
    elif isinstance(rendered, list):
        if not isinstance(live, list):
            yield where
        elif rule.get("list") == "set":
            if any(not any(_equal(e, x) for x in live) for e in rendered):
                yield where
        elif rule.get("list") == "map":
            for mine in rendered:
                theirs = _element(live, {k: mine.get(k) for k in rule["keys"]})
                label = ",".join(f"{k}={json.dumps(mine.get(k))}" for k in rule["keys"])
                yield from differences(mine, theirs, f"{where}[{label}]", rules, canonical)
        elif rules and rendered and not _whole(rendered, live):  # a list of the schema not named: atomic
            yield where
        elif not rules:
            if len(live) != len(rendered):
                yield where
                return
            for i, (mine, theirs) in enumerate(zip(rendered, _aligned(rendered, live), strict=True)):
                yield from differences(mine, theirs, f"{where}[{i}]", rules, canonical)
    elif live is _MISSING or not _equal(rendered, live, canonical and _QUANTITY.search(where) is not None):
        yield where


def _unfilled(rendered: Any, live: Any, filled: Mapping[str, Any]) -> Any:
    """``live`` without what an admission webhook filled (``filled``: its values by key, in each
    element of a list) where ``rendered`` sets nothing; an emptied map it made goes too."""
    if isinstance(live, list) and isinstance(rendered, list) and len(live) == len(rendered):
        return [_unfilled(r, x, filled) for r, x in zip(rendered, live, strict=True)]
    if not isinstance(live, Mapping) or not isinstance(rendered, Mapping):
        return live
    out = {}
    for k, v in live.items():
        if k in filled and k not in rendered and v == filled[k]:
            continue  # the webhook's value, where we set none
        if k in filled and isinstance(filled[k], Mapping) and isinstance(v, Mapping):
            v = _unfilled(rendered.get(k, {}), v, filled[k])
            if not v and k not in rendered:
                continue
        out[k] = v
    return out


def _element(live: Sequence[Any], keys: Mapping[str, Any]) -> Any:
    """The element of an associative list whose key fields are ``keys`` (:data:`_MISSING`: none)."""
    return next((e for e in live if isinstance(e, Mapping) and all(e.get(k) == v for k, v in keys.items())), _MISSING)


def _aligned(rendered: Sequence[Any], live: Sequence[Any]) -> list[Any]:
    """``live``'s elements in ``rendered``'s order: objects with a ``name`` matched by it, the rest
    by position (a kind the schema table does not know)."""
    named = {e.get("name"): e for e in live if isinstance(e, Mapping) and "name" in e}
    if named and all(isinstance(e, Mapping) and "name" in e for e in rendered):
        return [named.get(e["name"], _MISSING) for e in rendered]
    return list(live)


def _whole(rendered: Any, live: Any) -> bool:
    """An atomic field's rendered value against its live one, as a whole (scalars as :func:`_equal`)."""
    if isinstance(rendered, Mapping):
        return (
            isinstance(live, Mapping) and rendered.keys() == live.keys() and all(_whole(v, live[k]) for k, v in rendered.items())
        )
    if isinstance(rendered, list):
        return (
            isinstance(live, list)
            and len(rendered) == len(live)
            and all(_whole(a, b) for a, b in zip(rendered, live, strict=True))
        )
    return _equal(rendered, live)


def _equal(rendered: Any, live: Any, as_quantity: bool = False) -> bool:
    """Scalars as the API server returns them: a quantity (``as_quantity``) by its stored form;
    anything else as it is -- a number is not its text (an int-or-string ``targetPort: 8000`` is
    not ``"8000"``: an apply of the one over the other changes the object)."""
    if as_quantity and (mine := quantity.canonical(rendered)) is not None:
        return bool(mine == live)  # stored as the API server writes it (16384Mi as 16Gi; 17179869184 as it is)
    return bool(rendered == live) and type(rendered) is type(live) or _same_number(rendered, live)


def _same_number(rendered: Any, live: Any) -> bool:
    """An int and a float of one value (JSON has one number: 2 and 2.0 are one)."""
    numbers = (int, float)
    return (
        isinstance(rendered, numbers)
        and isinstance(live, numbers)
        and not isinstance(rendered, bool)
        and not isinstance(live, bool)
        and rendered == live
    )


def compare(manifest: Mapping[str, Any], live: Mapping[str, Any] | None, manager: str) -> Compared:
    """What applying ``manifest`` as ``manager`` would do to ``live`` (None: it does not exist)."""
    if live is None:
        return Compared(Action.CREATE)
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    kind = str(manifest.get("kind"))
    atomic = ATOMIC.get(kind, frozenset())
    differ = list(differences(body, live, rules=ssa_schema.RULES.get(kind), canonical=kind not in ssa_schema.CUSTOM))
    entries = (live.get("metadata") or {}).get("managedFields") or []
    ours = [e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply" and not e.get("subresource")]
    # A field we no longer render goes with our apply -- unless another manager owns it too (one
    # that set the same value): then only our ownership goes, and the object does not change.
    shared = {p for e in entries if not any(e is o for o in ours) for p in owned(e.get("fieldsV1") or {})}
    dropped = [
        _dotted(p) for e in ours for p in owned(e.get("fieldsV1") or {}) if at(manifest, p) is _MISSING and p not in shared
    ]
    conflicts = []
    for e in entries:
        if e.get("manager") == manager and e.get("operation") == "Apply" and not e.get("subresource"):
            continue
        # Owned through a subresource (`kubectl scale` and an autoscaler own .spec.replicas through
        # /scale) is owned all the same: the apply conflicts with it.
        how = f"{e.get('operation')}, subresource {e['subresource']}" if e.get("subresource") else e.get("operation")
        for p in owned(e.get("fieldsV1") or {}):
            whole = next((q for q in _prefixes(p) if _pattern(_dotted(q)) in atomic), None)
            if whole is not None:  # an atomic field, or a part of one: owned whole, applied whole
                mine = at(manifest, whole)
                if mine is not _MISSING and not _whole(mine, at(live, whole)):
                    conflicts.append(f'conflict with "{e.get("manager")}" ({how}): {_dotted(whole)}')
                continue
            mine, theirs = at(manifest, p), at(live, p)
            if mine is _MISSING:
                continue
            if isinstance(mine, (Mapping, list)):
                # Theirs as a leaf (an empty list or map they made, gone since): ours would add it.
                if mine and theirs is _MISSING:
                    conflicts.append(f'conflict with "{e.get("manager")}" ({how}): {_dotted(p)}')
            elif not _equal(mine, theirs):
                # By its text, not its value: the field manager compares what we send with what is
                # stored (16384Mi against a stored 16Gi is a conflict, though it changes nothing).
                conflicts.append(f'conflict with "{e.get("manager")}" ({how}): {_dotted(p)}')
    part = POD_SPEC_PATH.get(str(manifest.get("kind")))
    pods = f".spec.{part}"
    restarts = part is not None and any(
        (d == pods or d.startswith((pods + ".", pods + "["))) and not d.startswith(tuple(f"{pods}.{k}" for k in NOT_A_POD_CHANGE))
        for d in differ
    )
    changed = bool(differ or dropped)
    return Compared(
        Action.UPDATE if changed else Action.SAME, tuple(sorted(set(conflicts))), restarts, tuple((differ + dropped)[:5])
    )
