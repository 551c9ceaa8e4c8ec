"""Sensors: wait on workload phases, TPU slice readiness and committed checkpoints.

The sensor classes are loaded on first use (``from pathways_airflow.sensors import
CheckpointSensor`` works as usual), so importing the package costs nothing until a DAG needs one.
"""

from __future__ import annotations

import importlib
from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
    from pathways_airflow.sensors.checkpoint import CheckpointSensor
    from pathways_airflow.sensors.slices import TpuSliceReadinessSensor
    from pathways_airflow.sensors.workload import PathwaysJobSensor

_EXPORTS = {
    "CheckpointSensor": "pathways_airflow.sensors.checkpoint",
    "TpuSliceReadinessSensor": "pathways_airflow.sensors.slices",
    "PathwaysJobSensor": "pathways_airflow.sensors.workload",
}

CLUSTER_TEMPLATE_FIELDS: Sequence[str] = ("kubernetes_conn_id", "project_id", "location", "cluster_name", "gcp_conn_id")


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ClusterSensorMixin:
    """Where a sensor reads the cluster: a Kubernetes connection, or a GKE cluster, as the operator takes it."""

    kubernetes_conn_id: str | None
    project_id: str | None
    location: str | None
    cluster_name: str | None
    gcp_conn_id: str
    impersonation_chain: str | Sequence[str] | None
    use_dns_endpoint: bool

    def set_cluster(
        self,
        *,
        kubernetes_conn_id: str | None,
        project_id: str | None,
        location: str | None,
        cluster_name: str | None,
        gcp_conn_id: str,
        impersonation_chain: str | Sequence[str] | None,
        use_dns_endpoint: bool,
    ) -> None:
        self.kubernetes_conn_id = kubernetes_conn_id
        self.project_id = project_id
        self.location = location
        self.cluster_name = cluster_name
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.use_dns_endpoint = use_dns_endpoint

    def cluster_target(self) -> ClusterTarget:
        from pathways_airflow.hooks.pathways import ClusterTarget

        chain = self.impersonation_chain
        return ClusterTarget(
            kubernetes_conn_id=self.kubernetes_conn_id,
            project_id=self.project_id,
            location=self.location,
            cluster_name=self.cluster_name,
            gcp_conn_id=self.gcp_conn_id,
            impersonation_chain=tuple(chain) if isinstance(chain, (list, tuple)) else chain,
            use_dns_endpoint=self.use_dns_endpoint,
        )

    @cached_property
    def hook(self) -> PathwaysHook:
        """One hook (one API client) for the task's life, built from the rendered fields."""
        from pathways_airflow.hooks.pathways import PathwaysHook

        return PathwaysHook(self.cluster_target())


__all__ = ["CheckpointSensor", "ClusterSensorMixin", "PathwaysJobSensor", "TpuSliceReadinessSensor"]
