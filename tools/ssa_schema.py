"""Write infercrane/core/plan/ssa_schema.py from Kubernetes' own schema of the built-in kinds we
render, as server-side apply reads it (``ssa-oracle schema``: client-go's embedded models). Run by
``make ssa-schema`` after the oracle's pins change; tests/integration/test_fields_oracle.py fails
while the committed table differs from the oracle's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

KINDS = ("Deployment", "Service")
#: Custom resources we render, by kind: their CRD in KServe's files (``tools/build.sh kserve``), and
#: the paths of the table kept -- the ones InferCrane renders (a predictor's pod fields, not the
#: model formats' own containers nor the worker spec).
CUSTOM = {"InferenceService": "serving.kserve.io_inferenceservices.yaml"}
_NOT_RENDERED = re.compile(
    r"^\.spec\.predictor\.(huggingface|lightgbm|model|onnx|paddle|pmml|pytorch|sklearn|tensorflow|triton|xgboost|workerSpec)\b"
)
TARGET = Path(__file__).resolve().parent.parent / "infercrane" / "core" / "plan" / "ssa_schema.py"


def crds() -> list[str]:
    """The ``--crd`` arguments of the oracle: each custom kind's CRD, from KServe's files."""
    from infercrane.local.kserve import share_dir

    share = share_dir() / "crds"
    return [arg for name in CUSTOM.values() for arg in ("--crd", str(share / name))]


def _rendered(kind: str, path: str) -> bool:
    if kind not in CUSTOM:
        return True
    return path.startswith(".metadata") or (path.startswith(".spec.predictor") and not _NOT_RENDERED.match(path))


def table(oracle: str) -> dict[str, dict[str, dict[str, object]]]:
    out = subprocess.run([oracle, *crds(), "schema", *KINDS, *CUSTOM], capture_output=True, text=True, check=True).stdout
    return {kind: {p: r for p, r in rules.items() if _rendered(kind, p)} for kind, rules in json.loads(out).items()}


def source(rules: dict[str, dict[str, dict[str, object]]]) -> str:
    lines = [
        '"""How server-side apply treats each list and atomic map of the built-in kinds InferCrane renders,',
        "by dotted path (``[]`` an element): ``list`` atomic / set / map (with its ``keys``), or ``map``",
        "atomic; a map not named is granular (each key its own field). Generated from Kubernetes' own",
        "schema (``tools/go/ssa-oracle schema``, client-go's embedded models; a custom resource's from",
        "its CRD, as the API server builds it) by ``make ssa-schema``: do not edit. Pure core.",
        "",
        "A custom resource (``CUSTOM``) is stored as sent -- no Go type: a quantity keeps its text --",
        'and its lists are atomic unless its CRD says otherwise."""',
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
    lines.append(f"CUSTOM: Final = frozenset({sorted(CUSTOM)!r})")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TARGET.write_text(source(table(sys.argv[1])))
    print(f"wrote {TARGET}")
