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
