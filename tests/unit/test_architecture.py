"""The layers stay layered: a functional core, an imperative shell that only fetches, asks and acts.

Every import of the package's own modules is read with ``ast``, at the top of a module and inside
functions alike (a function-level import is still a dependency). The rules:

* the core (``spec``, ``state``, ``run``, ``checkpoints``, ``resources``, ``well_known``,
  ``benchmark_history``) imports no shell module, and ``state`` (how to read the cluster) does not
  import ``run`` (the task's own books), which reads it;
* hooks import no triggers, operators, sensors or UI; triggers no sensors or operators; sensors and
  operators not each other; an operator module imports no other operator module except a shared base
  (``operators.base``, ``operators.lineage``, ``operators.manifest``, ``operators.maintenance``); the
  ``operators`` package itself re-exports them;
* the local cluster and everything else of ``pathways-airflow-testing`` (``pathways_airflow_testing``)
  stays out of the provider: no provider module imports it, nor the ``pathways_airflow.testing``
  shim that re-exports it, except that shim itself; the provider reaches the rest only through
  entry points (``pathways_airflow.extensions``).

* no module imports itself back through others: no cycle, counting imports inside functions and
  under ``TYPE_CHECKING`` alike.

``KNOWN_VIOLATIONS`` would list edges tolerated for a while; it is empty, and an edge listed
there that no longer exists fails too. The size allowances may only shrink, against the budgets
below.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pathways_airflow"
CORE = ("spec", "state", "run", "checkpoints", "resources", "well_known", "benchmark_history")
SHELL = (
    "hooks", "triggers", "operators", "sensors", "links", "connection", "cli", "testing", "retry", "plots", "extensions",
    "ui", "lineage",
)
FORBIDDEN = {
    "state": ("run",),
    "hooks": ("triggers", "operators", "sensors", "ui"),
    "triggers": ("sensors", "operators", "ui"),
    "sensors": ("operators", "ui"),
    "operators": ("sensors", "ui"),
}
SHARED_OPERATOR_BASES = ("operators.base", "operators.lineage", "operators.manifest", "operators.maintenance")
TESTING_PACKAGES = ("pathways_airflow_testing", "pathways_airflow.testing")
TESTING_SHIM = "testing"

KNOWN_VIOLATIONS: set[tuple[str, str]] = set()
"""Wrong-way edges tolerated for now: none (the templating helper lives in ``spec.arguments`` and
the checkpoint I/O in ``hooks.storage``, where every importer reaches them downward)."""

MODULE_BUDGET = 600
MODULE_ALLOWANCES: dict[str, int] = {}
"""Modules over the budget today (lines); each may only shrink."""


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imported_names(path: Path) -> set[str]:
    """Every dotted name this file imports, anywhere in it (``from a import b`` gives ``a`` and ``a.b``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return found


def own_imports(path: Path) -> set[str]:
    """The package's modules this file imports (relative to ``pathways_airflow``), anywhere in it."""
    found = {n.removeprefix("pathways_airflow.") for n in imported_names(path) if n.startswith("pathways_airflow.")}
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    return {n for n in found if n in modules}


def is_testing_code(name: str) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in TESTING_PACKAGES)


def imports_of_testing_code() -> set[tuple[str, str]]:
    """(provider module, testing module) for every import of testing code outside the shim."""
    return {
        (module_name(path), name)
        for path in PACKAGE.rglob("*.py")
        if module_name(path) != TESTING_SHIM
        for name in imported_names(path)
        if is_testing_code(name)
    }


def layer(module: str) -> str:
    return module.split(".")[0]


def breaks_a_rule(importer: str, imported: str) -> bool:
    source, target = layer(importer), layer(imported)
    if source in CORE and target in SHELL:
        return True
    if target in FORBIDDEN.get(source, ()):
        return True
    if source == "operators" and target == "operators" and importer not in (imported, "operators"):
        return imported not in SHARED_OPERATOR_BASES and importer not in SHARED_OPERATOR_BASES
    return False


def violations() -> set[tuple[str, str]]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        importer = module_name(path)
        for imported in own_imports(path):
            if breaks_a_rule(importer, imported):
                found.add((importer, imported))
    return found


def test_no_import_runs_the_wrong_way_beyond_the_known_ones():
    found = violations()
    assert not found - KNOWN_VIOLATIONS, f"new wrong-way imports: {sorted(found - KNOWN_VIOLATIONS)}"
    assert not KNOWN_VIOLATIONS - found, f"fixed, so delete from KNOWN_VIOLATIONS: {sorted(KNOWN_VIOLATIONS - found)}"


def import_cycles() -> list[list[str]]:
    """Every set of modules that import each other, directly or round about (Tarjan's algorithm)."""
    graph = {module_name(p): sorted(own_imports(p) - {module_name(p)}) for p in PACKAGE.rglob("*.py")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                cycles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_modules_import_each_other():
    assert not import_cycles(), f"import cycles: {import_cycles()}"


def test_no_provider_module_but_the_shim_imports_testing_code():
    assert not imports_of_testing_code(), f"the provider imports testing code: {sorted(imports_of_testing_code())}"


def test_the_shim_is_all_that_is_left_of_testing_in_the_provider():
    assert [p.name for p in (PACKAGE / "testing").rglob("*.py")] == ["__init__.py"]
    assert imported_names(PACKAGE / "testing" / "__init__.py") & {"pathways_airflow_testing.LocalCluster"}


def test_the_rules_catch_what_they_are_for():
    assert breaks_a_rule("state.status", "hooks.pathways")
    assert breaks_a_rule("triggers.workload", "sensors.workload")
    assert breaks_a_rule("operators.inference", "operators.workload")
    assert breaks_a_rule("state.status", "run.outcome") and not breaks_a_rule("run.outcome", "state.status")
    assert breaks_a_rule("hooks.storage", "ui.app") and not breaks_a_rule("ui.app", "hooks.storage")
    assert not breaks_a_rule("operators.workload", "operators.base")
    assert not breaks_a_rule("triggers.workload", "state.status")
    assert is_testing_code("pathways_airflow_testing.cluster") and is_testing_code("pathways_airflow.testing")
    assert not is_testing_code("pathways_airflow.testing_helpers") and not is_testing_code("pathways_airflow.operators")


def test_no_module_grows_past_its_budget():
    sizes = {module_name(p): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    over = {m: n for m, n in sizes.items() if n > MODULE_ALLOWANCES.get(m, MODULE_BUDGET)}
    assert not over, f"over budget ({MODULE_BUDGET} lines, or the module's allowance): {over}"
    shrunk = {m: sizes.get(m, 0) for m, allowed in MODULE_ALLOWANCES.items() if sizes.get(m, 0) <= MODULE_BUDGET}
    assert not shrunk, f"within the budget now, so delete from MODULE_ALLOWANCES: {shrunk}"


BEHAVIOUR_BUDGET = {"operators": 150, "sensors": 100}
"""Lines of behaviour per operator / sensor class: its methods, the parameter declaration
(``__init__``) excepted. What is over is either a decision (it belongs in ``spec``/``state``) or
I/O (it belongs in a hook)."""
BEHAVIOUR_ALLOWANCES = {
    # Submit, wait (here or deferred), resubmit after a disruption, report: the longest life of
    # any task here, and every step of it is an act on a decision made in run.outcome.
    "operators.workload.PathwaysJobOperator": 254,
    # Reuse check, commit check, create or re-attach, wait, verify the output's commit marker.
    "operators.conversion.CheckpointConversionOperator": 198,
}
"""Classes over the behaviour budget, with why; each may only shrink."""


def behaviour_lines() -> dict[str, int]:
    found = {}
    for layer in BEHAVIOUR_BUDGET:
        for path in (PACKAGE / layer).glob("*.py"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                    lines = sum(m.end_lineno - m.lineno + 1 for m in methods if m.name != "__init__")
                    found[f"{module_name(path)}.{node.name}"] = lines
    return found


def test_no_operator_or_sensor_holds_more_behaviour_than_its_budget():
    found = behaviour_lines()
    budget = {name: BEHAVIOUR_ALLOWANCES.get(name, BEHAVIOUR_BUDGET[name.split(".")[0]]) for name in found}
    over = {name: lines for name, lines in found.items() if lines > budget[name]}
    assert not over, f"more behaviour than the budget ({BEHAVIOUR_BUDGET}, or the class's allowance): {over}"
    within = {name: found.get(name, 0) for name in BEHAVIOUR_ALLOWANCES if found.get(name, 0) <= BEHAVIOUR_BUDGET[name.split(".")[0]]}
    assert not within, f"within the budget now, so delete from BEHAVIOUR_ALLOWANCES: {within}"
