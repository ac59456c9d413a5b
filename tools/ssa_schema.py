"""Write infercrane/core/plan/ssa_schema.py from Kubernetes' own schema of the built-in kinds we
render, as server-side apply reads it (``ssa-oracle schema``: client-go's embedded models). Run by
``make ssa-schema`` after the oracle's pins change; tests/integration/test_fields_oracle.py fails
while the committed table differs from the oracle's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KINDS = ("Deployment", "Service")
TARGET = Path(__file__).resolve().parent.parent / "infercrane" / "core" / "plan" / "ssa_schema.py"


def table(oracle: str) -> dict[str, dict[str, dict[str, object]]]:
    out = subprocess.run([oracle, "schema", *KINDS], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def source(rules: dict[str, dict[str, dict[str, object]]]) -> str:
    lines = [
        '"""How server-side apply treats each list and atomic map of the built-in kinds InferCrane renders,',
        "by dotted path (``[]`` an element): ``list`` atomic / set / map (with its ``keys``), or ``map``",
        "atomic; a map not named is granular (each key its own field). Generated from Kubernetes' own",
        "schema (``tools/go/ssa-oracle schema``, client-go's embedded models) by ``make ssa-schema``: do",
        'not edit. Pure core."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Final",
        "",
        "RULES: Final[dict[str, dict[str, dict[str, Any]]]] = {",
    ]
    for kind in sorted(rules):
        lines.append(f"    {kind!r}: {{")
        for path in sorted(rules[kind]):
            lines.append(f"        {path!r}: {json.dumps(rules[kind][path], sort_keys=True)},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TARGET.write_text(source(table(sys.argv[1])))
    print(f"wrote {TARGET}")
