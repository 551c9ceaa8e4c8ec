"""Shared test setup: an isolated AIRFLOW_HOME, the real CRD schemas, and a marker per directory.

Every test is marked with its directory (``unit``, ``testing``, ``cluster``, ``e2e``, ``chaos``,
``benchmarks``), so ``-m`` picks a layer without listing paths; a module that starts nothing
outside the process says so with ``pytestmark = pytest.mark.pure``. ``scripts/test --fast`` runs
``-m "unit or pure"``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.support.crds import crd_dir

TESTS = Path(__file__).resolve().parent
DIRECTORY_MARKERS = ("unit", "testing", "cluster", "e2e", "chaos", "benchmarks")
"""The directories under tests/ whose name is also the marker of every test in them."""

# Airflow reads AIRFLOW_HOME at import time: give every test run its own, never the user's, and
# every pytest-xdist worker its own too (a worker inherits the home its controller made).
MADE_HOME = "PATHWAYS_AIRFLOW_TEST_HOME"
if os.environ.get("AIRFLOW_HOME") in (None, os.environ.get(MADE_HOME)):
    os.environ["AIRFLOW_HOME"] = os.environ[MADE_HOME] = tempfile.mkdtemp(prefix="pathways-airflow-test-home-")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


if crd_dir() is not None:
    # The local cluster validates custom resources against these (pathways_cluster fixture).
    os.environ.setdefault("PATHWAYS_AIRFLOW_CRDS", str(crd_dir()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the directory it is in (tests/<directory>/...)."""
    for item in items:
        try:
            directory = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if directory in DIRECTORY_MARKERS:
            item.add_marker(directory)


@pytest.fixture(scope="session")
def crds() -> Path:
    found = crd_dir()
    if found is None:
        message = "CRD schemas not found: set PATHWAYS_AIRFLOW_CRDS to a directory of CRD YAML files"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def schema_validator(crds: Path):
    from pathways_airflow_testing.crds import SchemaValidator

    return SchemaValidator.from_paths([crds])


@pytest.fixture(scope="session")
def upstream_samples(crds: Path) -> Path:
    return crds / "upstream-samples"
