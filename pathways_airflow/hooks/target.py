"""Which cluster a hook talks to: connection ids and the resolved GKE endpoint, never a secret.

Its own module because every layer of the shell carries one (hooks build clients from it,
triggers serialise it, operators and sensors make it from their parameters) and the client
factories in :mod:`~pathways_airflow.hooks.clients` need it without importing the hooks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from pathways_airflow.exceptions import BadSpecError


@dataclass(frozen=True)
class ClusterTarget:
    """Which cluster to talk to, in a form a trigger can carry (no secrets: connection ids)."""

    kubernetes_conn_id: str | None = "kubernetes_default"
    project_id: str | None = None
    location: str | None = None
    cluster_name: str | None = None
    gcp_conn_id: str = "google_cloud_default"
    impersonation_chain: str | tuple[str, ...] | None = None
    use_dns_endpoint: bool = False
    cluster_url: str | None = None
    """The GKE endpoint, once resolved (so triggers need not call the GKE API again)."""
    ssl_ca_cert: str | None = None
    """The GKE cluster's CA certificate (public), once resolved."""

    def __post_init__(self) -> None:
        gke = (self.project_id, self.location, self.cluster_name)
        if any(gke) and not all(gke):
            missing = [n for n, v in zip(("project_id", "location", "cluster_name"), gke) if not v]
            raise BadSpecError(f"a GKE cluster needs project_id, location and cluster_name; missing: {', '.join(missing)}")
        if isinstance(self.impersonation_chain, list):
            object.__setattr__(self, "impersonation_chain", tuple(self.impersonation_chain))

    @property
    def is_gke(self) -> bool:
        return bool(self.cluster_name)

    @property
    def key(self) -> str:
        """Identity of the cluster and credentials: clients and watches are shared per key."""
        if self.is_gke:
            return f"gke:{self.project_id}/{self.location}/{self.cluster_name}@{self.gcp_conn_id}:{self.impersonation_chain}"
        return f"conn:{self.kubernetes_conn_id}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if isinstance(data["impersonation_chain"], tuple):
            data["impersonation_chain"] = list(data["impersonation_chain"])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClusterTarget":
        return cls(**dict(data))


__all__ = ["ClusterTarget"]
