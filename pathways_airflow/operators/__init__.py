"""Operators: submit Pathways workloads and act on their results."""

from pathways_airflow.operators.conversion import CheckpointConversionOperator
from pathways_airflow.operators.delete import DeletePathwaysJobOperator
from pathways_airflow.operators.inference import (
    DeployInferenceServerOperator,
    InferenceBenchmarkOperator,
    TeardownInferenceServerOperator,
)
from pathways_airflow.operators.regression import BenchmarkRegressionOperator
from pathways_airflow.operators.workload import PathwaysJobOperator

__all__ = [
    "BenchmarkRegressionOperator",
    "CheckpointConversionOperator",
    "DeletePathwaysJobOperator",
    "DeployInferenceServerOperator",
    "InferenceBenchmarkOperator",
    "PathwaysJobOperator",
    "TeardownInferenceServerOperator",
]
