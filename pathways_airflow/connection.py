"""The cluster parameters every operator and sensor takes, declared once, and the one hook built from them."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk.bases.operator import BaseOperatorMeta

if TYPE_CHECKING:
    from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook

CLUSTER_TEMPLATE_FIELDS: Sequence[str] = ("kubernetes_conn_id", "project_id", "location", "cluster_name", "gcp_conn_id")


class ClusterConnectionMixin(metaclass=BaseOperatorMeta):
    """Where a task reaches the cluster: a Kubernetes connection, or a GKE cluster.

    Put it before ``BaseOperator`` / ``BaseSensorOperator`` in the bases; its ``__init__`` takes
    the cluster keywords and hands the rest on (cooperative, as common.sql's ``BaseSQLOperator``
    takes ``conn_id`` for every SQL operator). It is built by Airflow's operator metaclass, so
    these keywords behave like any operator's own: ``default_args`` fills them, and
    ``.partial()`` / ``.expand()`` accept them.

    :param kubernetes_conn_id: Airflow connection to the cluster (a kubeconfig, in-cluster, or a
        context); ``None`` together with ``project_id`` + ``location`` + ``cluster_name`` reaches a
        GKE cluster with the credentials of ``gcp_conn_id`` instead.
    :param project_id: GKE project. :param location: GKE region or zone.
    :param cluster_name: GKE cluster name.
    :param gcp_conn_id: Google connection, for GKE and for reading checkpoints and results in GCS.
    :param impersonation_chain: service account(s) to impersonate with ``gcp_conn_id``.
    :param use_dns_endpoint: reach the GKE control plane by its DNS endpoint instead of its IP.
    """

    kubernetes_conn_id: str | None
    project_id: str | None
    location: str | None
    cluster_name: str | None
    gcp_conn_id: str
    impersonation_chain: str | Sequence[str] | None
    use_dns_endpoint: bool

    def __init__(
        self,
        *,
        kubernetes_conn_id: str | None = "kubernetes_default",
        project_id: str | None = None,
        location: str | None = None,
        cluster_name: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        use_dns_endpoint: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
