"""The Airflow connections and environment variables that point clients at a local cluster.

The ``pathways_cluster`` fixture already sets them for the session; a module sets them again
when it runs against a cluster of its own, a different identity (a service account's
kubeconfig), or needs them back after a test changed them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

GOOGLE_CLOUD_CONNECTION = json.dumps(
    {"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}
)
"""``google_cloud_default``: anonymous, which the GCS emulator accepts."""


def kubernetes_connection(*, path: str | None = None, content: str | None = None) -> str:
    """A Kubernetes connection (as ``AIRFLOW_CONN_*`` JSON) to a kubeconfig file or to inline
    kubeconfig text."""
    if (path is None) == (content is None):
        raise ValueError("give the kubeconfig's path or its content")
    extra = {"kube_config_path": path} if path is not None else {"kube_config": content}
    return json.dumps({"conn_type": "kubernetes", "extra": extra})


def cluster_environment(cluster: Any, kubeconfig: str | None = None) -> dict[str, str]:
    """The cluster's own :meth:`~pathways_airflow_testing.LocalCluster.client_environment`,
    authenticating with ``kubeconfig`` (default: the cluster's admin)."""
    return cluster.client_environment(kubeconfig)


def connect(monkeypatch: pytest.MonkeyPatch, cluster: Any, kubeconfig: str | None = None) -> None:
    """Set :func:`cluster_environment` for one test (undone by ``monkeypatch`` after it)."""
    for key, value in cluster_environment(cluster, kubeconfig).items():
        monkeypatch.setenv(key, value)
