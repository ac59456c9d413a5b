"""The read-only plan's comparison (``infercrane/core/plan/fields.py``) against Kubernetes' own
server-side apply field manager (``tools/go/ssa-oracle``: k8s.io/apimachinery's managedfields with
client-go's schema of the built-in types) over generated cases (``tests/fields_cases.py``): for
every case the comparison, given the live object a history left, names the conflicts the field
manager refuses and says "same" exactly when the apply changes nothing. No plane: the oracle is
the API server's own code, run as a program. ``make check-fields`` runs 10^5 cases."""

from __future__ import annotations

import json
import os
import re

from infercrane.core.plan import fields
from infercrane.core.plan.actions import Action
from infercrane.project.tools import find_tool
from tests import fields_cases

CASES = int(os.environ.get("INFERCRANE_FIELDS_CASES", "10000"))  # `make check-fields`: 100000
SEED = int(os.environ.get("INFERCRANE_FIELDS_SEED", "0"))
BATCH = 2000
CONFLICT = re.compile(r'^conflict with "(?P<manager>[^"]*)" \([^)]*\): (?P<field>.*)$')


def disagreements(n: int, seed: int = 0) -> tuple[list[str], int]:
    """Where the comparison and the field manager disagree (at most 10 described), and how many
    cases were judged."""
    oracle = find_tool("ssa-oracle")
    generated = list(fields_cases.cases(n, seed))
    found: list[str] = []
    judged = 0
    for start in range(0, len(generated), BATCH):
        batch = generated[start : start + BATCH]
        for i, (c, answer) in enumerate(zip(batch, fields_cases.ask(oracle, batch), strict=True)):
            where = f"case {start + i} (seed {seed})"
            if answer.error:
                found.append(f"{where}: the oracle could not run it: {answer.error}")
                continue
            judged += 1
            mine = fields.compare(c["final"]["object"], answer.live, fields_cases.OURS)
            conflicts = frozenset(
                (m["manager"], m["field"]) for m in (CONFLICT.match(x) for x in mine.conflicts) if m is not None
            )
            said = []
            if conflicts != answer.conflicts:
                said.append(f"conflicts: ours {sorted(conflicts)}, the field manager's {sorted(answer.conflicts)}")
            elif not conflicts and (mine.action == Action.SAME) == answer.changed:
                said.append(
                    f"ours says {mine.action.value} ({', '.join(mine.why) or 'nothing differs'}); the field manager "
                    + ("changed the object" if answer.changed else "changed nothing")
                )
            if said and len(found) < 10:
                history = ", ".join(f"{h['op']} by {h['manager']}" for h in c["history"])
                found.append(f"{where}, {c['kind']} after [{history}]: {'; '.join(said)}")
                if len(found) == 1:  # the first, whole: to replay it (ssa-oracle reads it as it is)
                    found.append(f"    the case, whole: {json.dumps(c, sort_keys=True)}")
            elif said:
                found.append(where)
    return found, judged


def test_the_read_only_comparison_agrees_with_the_api_servers_field_manager_on_generated_cases() -> None:
    found, judged = disagreements(CASES, SEED)
    assert judged == CASES, found[:10]
    disagree = sum(not line.startswith("    ") for line in found)  # the first case's whole line aside
    assert not found, f"{disagree} of {CASES} disagree; the first:\n" + "\n".join(found[:11])


def test_a_quantity_is_compared_in_the_form_the_api_server_stores_it() -> None:
    """The comparison's canonical quantity (``core.model.quantity.canonical``) against the API
    server's own ``resource.Quantity`` over generated texts: the form it keeps (16384Mi as 16Gi,
    17179869184 as it is) decides whether an apply changes a stored quantity."""
    from infercrane.core.model import quantity

    texts = fields_cases.quantities(20_000)
    theirs = fields_cases.stored(find_tool("ssa-oracle"), texts)
    ours = [quantity.canonical(t) or "invalid" for t in texts]
    wrong = [f"{t!r}: ours {o}, the API server's {s}" for t, o, s in zip(texts, ours, theirs, strict=True) if o != s]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ; the first: {wrong[:10]}"


def test_the_comparisons_schema_table_is_kubernetes_own() -> None:
    """infercrane/core/plan/ssa_schema.py is what the field manager's schema says of every list and
    atomic map of the kinds we render (regenerate: ``make ssa-schema``)."""
    import sys
    from pathlib import Path

    from infercrane.core.plan import ssa_schema

    tools = Path(__file__).resolve().parents[2] / "tools"
    sys.path.insert(0, str(tools))
    try:
        import ssa_schema as generator  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tools))
    table = generator.table(str(find_tool("ssa-oracle")))
    assert table == ssa_schema.RULES, "the committed table differs from the schema: run `make ssa-schema`"
