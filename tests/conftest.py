"""Shared test setup: an isolated AIRFLOW_HOME and the real CRD schemas."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Airflow reads AIRFLOW_HOME at import time: give every test run its own, never the user's.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="pathways-airflow-test-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def crd_dir() -> Path | None:
    """The published CRDs: $PATHWAYS_AIRFLOW_CRDS, or shared/crds beside the checkout."""
    candidates = [os.environ.get("PATHWAYS_AIRFLOW_CRDS"), REPO.parent / "shared" / "crds"]
    for candidate in candidates:
        if candidate and Path(candidate, "pathways-job.pathways.domain_pathwaysjobs.yaml").exists():
            return Path(candidate)
    return None


if crd_dir() is not None:
    # The local cluster validates custom resources against these (pathways_cluster fixture).
    os.environ.setdefault("PATHWAYS_AIRFLOW_CRDS", str(crd_dir()))


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
