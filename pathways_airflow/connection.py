"""The cluster parameters every operator and sensor takes, and the one hook built from them."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook

CLUSTER_TEMPLATE_FIELDS: Sequence[str] = ("kubernetes_conn_id", "project_id", "location", "cluster_name", "gcp_conn_id")


class ClusterConnectionMixin:
    """Where a task reaches the cluster: a Kubernetes connection, or a GKE cluster (every operator and sensor)."""

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
