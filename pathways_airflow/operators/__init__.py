"""Operators: submit Pathways workloads and act on their results.

The operator classes are loaded on first use (``from pathways_airflow.operators import
PathwaysJobOperator`` works as usual), so a DAG file pays only for the operators it names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathways_airflow.operators.conversion import CheckpointConversionOperator
    from pathways_airflow.operators.delete import DeletePathwaysJobOperator
    from pathways_airflow.operators.inference import (
        DeployInferenceServerOperator,
        InferenceBenchmarkOperator,
    )
    from pathways_airflow.operators.janitor import PathwaysJanitorOperator
    from pathways_airflow.operators.regression import BenchmarkRegressionOperator
    from pathways_airflow.operators.teardown import TeardownInferenceServerOperator
    from pathways_airflow.operators.workload import PathwaysJobOperator

_EXPORTS = {
    "BenchmarkRegressionOperator": "pathways_airflow.operators.regression",
    "CheckpointConversionOperator": "pathways_airflow.operators.conversion",
    "DeletePathwaysJobOperator": "pathways_airflow.operators.delete",
    "DeployInferenceServerOperator": "pathways_airflow.operators.inference",
    "InferenceBenchmarkOperator": "pathways_airflow.operators.inference",
    "PathwaysJanitorOperator": "pathways_airflow.operators.janitor",
    "PathwaysJobOperator": "pathways_airflow.operators.workload",
    "TeardownInferenceServerOperator": "pathways_airflow.operators.teardown",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
