"""Test modules share helpers through tests/support only: none imports a test module or a conftest.

A helper defined in one test module and imported by another ties the two together (collecting
one runs the other's module code and fixtures) and hides where the helper lives, so the helper
gets copied instead. The tree is parsed, not imported, so this holds for imports inside
functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def imports(tree: ast.AST, package: str) -> list[list[str]]:
    """For each import statement anywhere in ``tree``, the modules it may name (``from a import b``
    names ``a`` or ``a.b``), with relative imports resolved against ``package``."""
    found: list[list[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append([f"{base}.{alias.name}" for alias in node.names] + [base])
    return found


def forbidden(module: str, name: str) -> str | None:
    """Why ``module`` (dotted, e.g. ``tests.cluster.test_x``) must not import ``name``, if it must
    not: a test module or a conftest, from anywhere; and, for a test module or conftest, anything
    under ``tests`` outside ``tests.support``."""
    parts = name.split(".")
    if parts[0] != "tests":
        return None
    if any(part.startswith("test_") or part == "conftest" for part in parts[1:]):
        return f"{module} imports {name}"
    is_test = module.rsplit(".", 1)[-1].startswith("test_") or module.endswith("conftest")
    if is_test and len(parts) > 1 and parts[1] != "support":
        return f"{module} imports {name} (helpers live in tests.support)"
    return None


def forbidden_imports(module: str, source: str) -> list[str]:
    """One problem per import statement of ``module`` that breaks the rule."""
    package = module.rsplit(".", 1)[0]
    problems = []
    for names in imports(ast.parse(source), package):
        reasons = [reason for name in names if (reason := forbidden(module, name))]
        problems += reasons[:1]
    return problems


def modules() -> list[tuple[str, Path]]:
    return [
        (".".join(path.relative_to(TESTS.parent).with_suffix("").parts), path)
        for path in sorted(TESTS.rglob("*.py"))
    ]


def test_no_module_imports_a_test_module_or_a_conftest():
    problems = [problem for module, path in modules() for problem in forbidden_imports(module, path.read_text())]
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("tests.cluster.test_a", "from tests.cluster.test_b import TaskInstance", ["tests.cluster.test_b"]),
        ("tests.cluster.test_a", "def f():\n    from tests.cluster.test_b import when_step", ["tests.cluster.test_b"]),
        ("tests.chaos.test_a", "from tests.chaos import conftest", ["tests.chaos.conftest"]),
        ("tests.unit.test_a", "from tests.conftest import crd_dir", ["tests.conftest"]),
        ("tests.support.x", "import tests.e2e.test_b", ["tests.e2e.test_b"]),
        ("tests.cluster.test_a", "from .test_b import wait_for", ["tests.cluster.test_b"]),
        ("tests.e2e.test_a", "from tests.e2e.deployment import wait_until", ["tests.e2e.deployment"]),
        ("tests.e2e.conftest", "from tests.cluster.triggers import first_event", ["tests.cluster.triggers"]),
    ],
)
def test_the_check_names_each_kind_of_forbidden_import(module, source, expected):
    found = forbidden_imports(module, source)
    assert all(any(name in problem for problem in found) for name in expected), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("tests.cluster.test_a", "from tests.support.waiting import wait_for"),
        ("tests.cluster.test_a", "from pathways_airflow.testing import LocalCluster"),
        ("tests.support.chaos.harness", "from tests.support.chaos.plan import Plan"),
        ("tests.unit.test_a", "import json\nfrom tests.support import crds"),
    ],
)
def test_the_check_allows_imports_from_tests_support(module, source):
    assert forbidden_imports(module, source) == []
