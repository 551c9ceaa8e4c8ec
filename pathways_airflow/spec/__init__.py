"""What to run: the TPU catalog, the workload model, names, and the manifest renderers.

Pure: no I/O and no Airflow imports, so every decision here is a function a test can call.
"""

from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import TaskIdentity
from pathways_airflow.spec.render import BACKENDS, JobSetFailurePolicy, render, render_jobset, render_pathwaysjob
from pathways_airflow.spec.tpu import MACHINE_TYPES, MachineType, SliceShape, resolve_machine_type, slice_shape
from pathways_airflow.spec.workload import CustomComponent, MainContainer, Workload, build_workload

__all__ = [
    "BACKENDS",
    "MACHINE_TYPES",
    "CustomComponent",
    "InvalidWorkloadSpec",
    "JobSetFailurePolicy",
    "MachineType",
    "MainContainer",
    "SliceShape",
    "SpecProblem",
    "TaskIdentity",
    "Workload",
    "build_workload",
    "render",
    "render_jobset",
    "render_pathwaysjob",
    "resolve_machine_type",
    "slice_shape",
]
