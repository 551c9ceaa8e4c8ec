"""Operator extra links: the workload's page in the GKE console and its logs in Cloud Logging.

The operator pushes its workload's name, namespace and GKE cluster to XCom (key
``pathways_workload``) when it submits, so the links work while the task is still deferred.
For a cluster reached through a plain Kubernetes connection there is no console to link to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.providers.common.compat.sdk import XCom
from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.sdk import BaseOperator

XCOM_KEY = "pathways_workload"


def gke_workload_url(record: dict[str, Any]) -> str:
    """The GKE console page of a JobSet or PathwaysJob workload."""
    if not record.get("cluster_name"):
        return ""
    kind = "pathwaysjob" if record.get("backend") == "pathwaysjob" else "jobset"
    return (
        f"https://console.cloud.google.com/kubernetes/{kind}/{quote(record['location'])}/"
        f"{quote(record['cluster_name'])}/{quote(record['namespace'])}/{quote(record['name'])}/details"
        f"?project={quote(record['project_id'])}"
    )


def cloud_logging_url(record: dict[str, Any]) -> str:
    """A Cloud Logging query for every container of the workload's pods."""
    if not record.get("cluster_name"):
        return ""
    query = "\n".join(
        [
            'resource.type="k8s_container"',
            f'resource.labels.project_id="{record["project_id"]}"',
            f'resource.labels.location="{record["location"]}"',
            f'resource.labels.cluster_name="{record["cluster_name"]}"',
            f'resource.labels.namespace_name="{record["namespace"]}"',
            f'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{record["name"]}"',
        ]
    )
    return f"https://console.cloud.google.com/logs/query;query={quote(query, safe='')}?project={quote(record['project_id'])}"


def _record(ti_key: TaskInstanceKey) -> dict[str, Any]:
    value = XCom.get_value(key=XCOM_KEY, ti_key=ti_key)
    return value if isinstance(value, dict) else {}


class GkeWorkloadLink(BaseOperatorLink):
    name = "GKE workload"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return gke_workload_url(_record(ti_key))


class CloudLoggingLink(BaseOperatorLink):
    name = "Cloud Logging"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return cloud_logging_url(_record(ti_key))
