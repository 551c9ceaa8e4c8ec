"""An anonymous client of the local cluster's GCS emulator: the test's own view of a bucket."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

BUCKET = "pathways-demo"
"""The bucket the local cluster creates and the example DAGs write to."""


@contextmanager
def gcs_bucket(cluster: Any, name: str = BUCKET) -> Iterator[Any]:
    """``name`` on ``cluster``'s emulator, through a client of its own, closed afterwards."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": cluster.gcs_endpoint}
    )
    try:
        yield client.bucket(name)
    finally:
        client.close()


@contextmanager
def gcs_behind_an_outage_proxy(cluster: Any, monkeypatch: Any) -> Iterator[Any]:
    """The provider's GCS clients (``STORAGE_EMULATOR_HOST``) reach ``cluster``'s emulator through an
    :class:`~pathways_airflow_testing.outage.OutageProxy` (yielded), while the workloads and the test's
    own :func:`gcs_bucket` still reach it directly. Outages are waited out with short backoff."""
    from pathways_airflow_testing.outage import OutageProxy

    from pathways_airflow.hooks import storage

    monkeypatch.setattr(storage, "OUTAGE_BACKOFF_INITIAL", 0.2)
    monkeypatch.setattr(storage, "OUTAGE_BACKOFF_MAX", 1.0)
    with OutageProxy(cluster.gcs_endpoint) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        yield proxy
