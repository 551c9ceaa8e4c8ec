"""Storage: one look at a checkpoint directory on ``gs://`` or a local path, and the small objects beside it.

The I/O half of the checkpoint rules; what counts as committed, and how a look is described,
is the pure :mod:`pathways_airflow.checkpoints`. The cost of one look does not grow with the
checkpoint: one delimiter listing of the directory (step prefixes only), then one marker read per
step, newest first, stopping at the first committed one. The google client is imported inside the
functions, so importing an operator or a trigger stays cheap for the DAG processor.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from pathways_airflow.checkpoints import (
    Checkpoint,
    CheckpointScan,
    gcs_object_prefix,
    is_gcs,
    is_temporary,
    marker_name,
    newest_committed,
    newest_step_seen,
    split_gcs_uri,
)

DEFAULT_GCP_CONN_ID = "google_cloud_default"


def storage_client(gcp_conn_id: str = DEFAULT_GCP_CONN_ID) -> Any:
    """A ``google.cloud.storage.Client`` from the Google connection (honours ``STORAGE_EMULATOR_HOST``)."""
    from airflow.providers.google.cloud.hooks.gcs import GCSHook

    return GCSHook(gcp_conn_id=gcp_conn_id).get_conn()


def object_exists_if_permitted(client: Any, uri: str) -> bool | None:
    """Whether the ``gs://`` object ``uri`` exists; ``None`` when the connection may not look."""
    from google.api_core.exceptions import Forbidden

    try:
        return gcs_exists(client, uri)
    except Forbidden:
        return None


def bucket_exists_if_permitted(client: Any, bucket: str) -> bool | None:
    """Whether ``bucket`` exists (one listing of at most one object, which ``storage.objects.list``
    allows where ``storage.buckets.get`` may not be granted); ``None`` when the connection may not look."""
    from google.api_core.exceptions import Forbidden, NotFound

    try:
        next(iter(client.list_blobs(bucket, max_results=1)), None)
    except NotFound:
        return False
    except Forbidden:
        return None
    return True


def read_object(client: Any, uri: str) -> bytes | None:
    """The content of the ``gs://`` object ``uri``; ``None`` when it does not exist."""
    from google.api_core.exceptions import NotFound

    try:
        return _blob(client, uri).download_as_bytes()
    except NotFound:
        return None



def _blob(client: Any, uri: str) -> Any:
    bucket, name = split_gcs_uri(uri)
    return client.bucket(bucket).blob(name)


def gcs_exists(client: Any, uri: str) -> bool:
    """Whether the object ``uri`` exists (a commit marker, a result)."""
    return bool(_blob(client, uri).exists())


def gcs_has_objects(client: Any, directory: str) -> bool:
    """Whether anything at all is stored under ``directory`` (one listing of at most one object)."""
    bucket, name = split_gcs_uri(directory)
    prefix = f"{name.strip('/')}/" if name.strip("/") else ""
    return any(True for _ in client.list_blobs(bucket, prefix=prefix, max_results=1))


def gcs_read_json(client: Any, uri: str) -> Any:
    """The object's JSON, or ``None`` when it is missing or not JSON."""
    data = read_object(client, uri)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def gcs_write_json(client: Any, uri: str, data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON (small records: provenance, results)."""
    text = json.dumps(data, indent=2, sort_keys=True)
    _blob(client, uri).upload_from_string(text, content_type="application/json")


class ObjectChanged(Exception):
    """Another writer changed the object between our read and our conditional write."""


def read_with_generation(client: Any, uri: str) -> tuple[bytes | None, int]:
    """The object's bytes and the generation they are of; ``(None, 0)`` when it does not exist.

    The bytes are read with ``if_generation_match``, so they belong to the generation returned:
    a write in between raises :class:`ObjectChanged` rather than pairing old bytes with a new
    generation.
    """
    from google.api_core.exceptions import NotFound, PreconditionFailed

    bucket, name = split_gcs_uri(uri)
    blob = client.bucket(bucket).get_blob(name)
    if blob is None:
        return None, 0
    try:
        return blob.download_as_bytes(if_generation_match=blob.generation), int(blob.generation)
    except (PreconditionFailed, NotFound):
        raise ObjectChanged(uri) from None


def write_if_generation(client: Any, uri: str, text: str, content_type: str, generation: int) -> None:
    """Write ``uri`` only if it is still at ``generation`` (0: only if it does not exist), else :class:`ObjectChanged`."""
    from google.api_core.exceptions import PreconditionFailed

    try:
        _blob(client, uri).upload_from_string(text, content_type=content_type, if_generation_match=generation)
    except PreconditionFailed:
        raise ObjectChanged(uri) from None


def missing_buckets(client: Any, uris: list[str]) -> list[str]:
    """The buckets of the ``gs://`` URIs that do not exist, each once, in order.

    A credential that may not look (403) gets the benefit of the doubt: its bucket is not
    reported, and the write itself will say what is wrong.
    """
    buckets = dict.fromkeys(split_gcs_uri(uri)[0] for uri in uris if is_gcs(uri))
    return [bucket for bucket in buckets if bucket_exists_if_permitted(client, bucket) is False]


def write_file(client: Any, uri: str, data: bytes, content_type: str) -> None:
    """Write ``data`` to a ``gs://`` object or a local file; locally atomically (a reader never sees half a PNG)."""
    if is_gcs(uri):
        _blob(client, uri).upload_from_string(data, content_type=content_type)
        return
    directory = os.path.dirname(uri)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, uri)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def scan_checkpoints(
    checkpoint_dir: str,
    *,
    newer_than: int | None = None,
    min_step: int | None = None,
    gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
    client: Any = None,
) -> CheckpointScan:
    """Look at ``checkpoint_dir`` once: the newest committed step within the bounds, and what else is there.

    ``client`` is a ``google.cloud.storage.Client`` to reuse across looks (one is made from
    ``gcp_conn_id`` when omitted). A missing bucket raises ``FileNotFoundError``: no training run
    will ever create it. A missing local directory is simply empty: Orbax creates it on the
    first save.
    """
    if is_gcs(checkpoint_dir):
        return _scan_gcs(checkpoint_dir, newer_than, min_step, client or storage_client(gcp_conn_id), gcp_conn_id)
    return _scan_local(checkpoint_dir, newer_than, min_step)


def newest_committed_checkpoint(
    checkpoint_dir: str,
    *,
    newer_than: int | None = None,
    min_step: int | None = None,
    gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
    client: Any = None,
) -> Checkpoint | None:
    """The newest committed step of ``checkpoint_dir`` (``> newer_than``, ``>= min_step``), or ``None``.

    Costs one listing of step prefixes plus one marker read per uncommitted step newer than the
    answer, however many files each step holds.
    """
    return scan_checkpoints(
        checkpoint_dir, newer_than=newer_than, min_step=min_step, gcp_conn_id=gcp_conn_id, client=client
    ).found


def _scan_gcs(
    checkpoint_dir: str, newer_than: int | None, min_step: int | None, client: Any, gcp_conn_id: str
) -> CheckpointScan:
    from google.api_core.exceptions import NotFound

    bucket_name, _ = split_gcs_uri(checkpoint_dir)
    prefix = gcs_object_prefix(checkpoint_dir)
    try:
        listing = client.list_blobs(bucket_name, prefix=prefix, delimiter="/", fields="prefixes,nextPageToken")
        for _page in listing.pages:
            pass
    except NotFound:
        raise FileNotFoundError(
            f"checkpoint_dir={checkpoint_dir!r}: bucket {bucket_name!r} does not exist "
            f"(or is not visible to gcp_conn_id={gcp_conn_id!r})"
        ) from None
    entries = sorted(listing.prefixes)
    bucket = client.bucket(bucket_name)
    partial: list[int] = []

    def is_committed(name: str) -> bool:
        if bucket.blob(prefix + marker_name(name)).exists():
            return True
        partial.append(int(name))
        return False

    found = newest_committed(
        checkpoint_dir.rstrip("/"), entries, is_committed=is_committed, newer_than=newer_than, min_step=min_step
    )
    return CheckpointScan(checkpoint_dir, found, tuple(partial), newest_step_seen(entries))


def _scan_local(checkpoint_dir: str, newer_than: int | None, min_step: int | None) -> CheckpointScan:
    try:
        with os.scandir(checkpoint_dir) as listing:
            entries = [entry.name for entry in listing if entry.is_dir()]
    except FileNotFoundError:
        entries = []
    found = newest_committed(
        checkpoint_dir.rstrip("/") or "/",
        entries,
        is_committed=lambda name: True,  # an integer-named directory has been renamed into place
        newer_than=newer_than,
        min_step=min_step,
    )
    return CheckpointScan(checkpoint_dir, found, (), newest_step_seen(entries), sum(1 for e in entries if is_temporary(e)))
