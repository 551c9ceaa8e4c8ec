"""Where the published CRD schemas are, for the local cluster's validation and the schema tests."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def crd_dir() -> Path | None:
    """The published CRDs: $PATHWAYS_AIRFLOW_CRDS, or shared/crds beside the checkout."""
    candidates = [os.environ.get("PATHWAYS_AIRFLOW_CRDS"), REPO.parent / "shared" / "crds"]
    for candidate in candidates:
        if candidate and Path(candidate, "pathways-job.pathways.domain_pathwaysjobs.yaml").exists():
            return Path(candidate)
    return None
