"""Sensors: wait on workload phases, TPU slice readiness and committed checkpoints.

The sensor classes are loaded on first use (``from pathways_airflow.sensors import
CheckpointSensor`` works as usual), so importing the package costs nothing until a DAG needs one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathways_airflow.sensors.checkpoint import CheckpointSensor
    from pathways_airflow.sensors.slices import TpuSliceReadinessSensor
    from pathways_airflow.sensors.workload import PathwaysJobSensor

_EXPORTS = {
    "CheckpointSensor": "pathways_airflow.sensors.checkpoint",
    "TpuSliceReadinessSensor": "pathways_airflow.sensors.slices",
    "PathwaysJobSensor": "pathways_airflow.sensors.workload",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
