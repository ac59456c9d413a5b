"""The architecture's rules, read from the source: what the import contracts (``make lint``) do not
say -- how many arrows join live/'s groups, where the rollout is planned, that no code outside
the tables compares a workload API or a GPU allocation by name, that no caught exception is
changed, and that a long module says why it is one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "infercrane"
SIZE_LIMIT = 300  # a module a newcomer reads in one sitting
SIZE_REASON = "One module, past 300 lines:"
SIZE_CEILING = 400  # none past it, whatever its reason
LONG_MODULES_AT_MOST = 3
FUNCTION_LIMIT = 80  # lines of a function or method, its docstring included


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every infercrane module ``path`` imports (at any depth, type-checking imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("infercrane")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("infercrane"):
            found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
    return found


def live_group(module: str) -> str | None:
    """live/'s group of ``module``: its subpackage, or the command module on top."""
    parts = module.split(".")
    if parts[:2] != ["infercrane", "live"] or len(parts) < 3:
        return None
    return parts[2]


def test_live_is_at_most_six_groups_joined_by_at_most_ten_arrows() -> None:
    groups: set[str] = set()
    arrows: set[tuple[str, str]] = set()
    for path in (PACKAGE / "live").rglob("*.py"):
        source = live_group(dotted(path))
        if source is None:
            continue
        groups.add(source)
        for target in filter(None, map(live_group, imported(path))):
            if target != source:
                arrows.add((source, target))
    on_top = {"inspect", "doctor", "takeover"}  # one module per command, one group on top
    counted = {g for g in groups if g not in on_top} | ({"commands"} if groups & on_top else set())
    joined = {(("commands" if a in on_top else a), ("commands" if b in on_top else b)) for a, b in arrows}
    assert len(counted) <= 6, sorted(counted)
    assert len(joined) <= 10, sorted(joined)


def test_the_rollout_is_planned_in_one_place_for_commands_and_plain_pulumi() -> None:
    callers = [
        dotted(p) for p in modules() if re.search(r"\bplan_rollout\(", p.read_text()) and "def plan_rollout(" not in p.read_text()
    ]
    assert callers == ["infercrane.live.stack.context"]


def test_no_code_outside_the_tables_compares_a_workload_api_or_a_gpu_allocation_by_name() -> None:
    by_name = re.compile(
        r"""(workload_api|gpu_allocation|workloadApi|gpuAllocation)["')\]]*\s*[!=]=|[!=]=\s*["'](kserve|deployment|dra|label)["']"""
        r"""|[!=]=\s*["']InferenceService["']|["']InferenceService["']\s*(==|!=|in\b|not in\b)"""
    )
    found = [
        f"{p.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for p in modules()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if by_name.search(line)
    ]
    assert not found, "\n".join(found)


def test_no_caught_exception_is_changed() -> None:
    changed = []
    for path in modules():
        for handler in ast.walk(ast.parse(path.read_text())):
            if not isinstance(handler, ast.ExceptHandler) or handler.name is None:
                continue
            for node in ast.walk(handler):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AugAssign | ast.AnnAssign)
                    else []
                )
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == handler.name:
                        changed.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not changed, changed


def test_a_module_past_300_lines_says_at_its_top_why_it_is_one() -> None:
    long = [p for p in modules() if len(p.read_text().splitlines()) > SIZE_LIMIT]
    silent = [
        f"{p.relative_to(PACKAGE)} ({len(p.read_text().splitlines())} lines)"
        for p in long
        if SIZE_REASON not in (ast.get_docstring(ast.parse(p.read_text())) or "")
    ]
    assert not silent, silent


def imports_by_module() -> dict[str, set[str]]:
    """module -> the infercrane modules it imports (type-only and function-level imports
    included), each name resolved to the module that defines it."""
    known = {dotted(p) for p in modules()}

    def resolve(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for path in modules():
        here = dotted(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            found |= {r for n in names if n.startswith("infercrane") and (r := resolve(n)) and r != here}
        graph[here] = found
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's circles: its strongly connected parts of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while (w := stack.pop()) != v:
                part.append(w)
            if part:
                found.append(sorted([v, *part]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_others_not_even_for_types() -> None:
    assert circles(imports_by_module()) == []


#: Python outside the package that imports it: the tools, the benches, the policy pack, the program's entry.
SCRIPTS = ("tools/*.py", "bench/*.py", "policy/*.py", "__main__.py", "tests/integration/bench_*.py")


def test_every_script_outside_the_package_imports_names_that_exist() -> None:
    """A module split or a name moved is followed outside the package too (a tool once imported a
    name the bootstrap no longer had, and only an integration test found it)."""
    import importlib

    root = PACKAGE.parent
    missing = []
    for path in sorted(p for pattern in SCRIPTS for p in root.glob(pattern)):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("infercrane"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name):
                        try:
                            importlib.import_module(f"{node.module}.{alias.name}")
                        except ImportError:
                            missing.append(f"{path.relative_to(root)}:{node.lineno}: {node.module}.{alias.name}")
    assert not missing, missing


def test_at_most_three_modules_are_past_300_lines_and_none_past_400() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in modules()}
    long = sorted(f"{m} ({n} lines)" for m, n in sizes.items() if n > SIZE_LIMIT)
    assert len(long) <= LONG_MODULES_AT_MOST, long
    assert all(n <= SIZE_CEILING for n in sizes.values()), long


def long_functions(source: str, where: str = "") -> list[str]:
    """Every function or method of ``source`` of :data:`FUNCTION_LIMIT` lines or more."""
    return [
        f"{where}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 >= FUNCTION_LIMIT
    ]


def test_every_function_is_under_80_lines() -> None:
    found = [f for p in modules() for f in long_functions(p.read_text(), str(p.relative_to(PACKAGE)))]
    assert not found, found


def test_the_rules_above_can_fail(tmp_path: Path) -> None:
    """Each rule's reader finds what it looks for: a comparison by name, a changed exception, an
    import circle, a function of 80 lines (79 pass)."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    body = "def f() -> None:\n" + "    pass\n" * 78
    assert long_functions(body) == []
    assert long_functions(body + "    pass\n") == [":1 f (80 lines)"]
    sample = tmp_path / "sample.py"
    sample.write_text(
        'try:\n    pass\nexcept ValueError as exc:\n    exc.note = 1\nif t.workload_api == "kserve":\n    pass\n'
        'if kind == "InferenceService" or "InferenceService" in found:\n    pass\n'
    )
    tree = ast.parse(sample.read_text())
    handler = next(n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler))
    assert any(isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Attribute) for n in ast.walk(handler))
    assert re.search(r"""(workload_api)["')\]]*\s*[!=]=""", sample.read_text().splitlines()[4])
    kserve_by_kind = sample.read_text().splitlines()[6]
    assert re.search(r"""[!=]=\s*["']InferenceService["']""", kserve_by_kind)
    assert re.search(r"""["']InferenceService["']\s*(==|!=|in\b|not in\b)""", kserve_by_kind)


#: Unit test files of several modules at once, beside the package they read.
ACROSS_MODULES = {"core/test_properties.py"}


def test_each_unit_test_file_sits_where_its_module_is_in_the_package() -> None:
    """``tests/unit/<package path>/test_<module>.py`` (a module's further file: ``test_<module>_<aspect>.py``;
    a package's: ``test_<package>.py`` beside it)."""
    units = Path(__file__).resolve().parent
    astray = []
    for test in sorted(units.rglob("test_*.py")):
        relative = test.relative_to(units)
        if len(relative.parts) == 1 or relative.as_posix() in ACROSS_MODULES:
            continue  # the project's own rules (README, manifests, architecture), at the top
        words = test.stem.removeprefix("test_").split("_")
        candidates = ["_".join(words[:n]) for n in range(len(words), 0, -1)]
        if not any(
            (PACKAGE / relative.parent / f"{name}.py").is_file() or (PACKAGE / relative.parent / name / "__init__.py").is_file()
            for name in candidates
        ):
            astray.append(relative.as_posix())
    assert not astray, astray
