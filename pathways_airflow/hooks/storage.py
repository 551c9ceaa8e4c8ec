"""Storage: one look at a checkpoint directory on ``gs://`` or a local path, and the small objects beside it.

The I/O half of the checkpoint rules; what counts as committed, and how a look is described,
is the pure :mod:`pathways_airflow.checkpoints`. The cost of one look does not grow with the
checkpoint: one delimiter listing of the directory (step prefixes only), then one marker read per
step, newest first, stopping at the first committed one. The google client is imported inside the
functions, so importing an operator or a trigger stays cheap for the DAG processor.

A GCS outage is waited out, not reported as a failure: every public function here retries the
whole look or write (:func:`waits_out_outages`) with capped exponential backoff while the error
is transient (:func:`~pathways_airflow.hooks.storage.is_transient_storage_error`), until
the ``deadline`` its caller passes (epoch seconds: the task's ``execution_timeout``, the sensor's
``timeout``) or :data:`DEFAULT_OUTAGE_SECONDS` from the first failure. The log says once when
an outage began and once when it ended; one that outlasts the deadline raises
:class:`~pathways_airflow.exceptions.StorageUnavailableError` naming the bucket and how long.
The storage client's own retries are turned off on each call (``retry=None``), so this is the
one retry policy, and a look is always redone whole: a scan cut short never reports a step.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import functools
import json
import logging
import os
import tempfile
import time
from typing import Any, Callable, Iterator, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential_jitter

from pathways_airflow.checkpoints import (
    Checkpoint,
    CheckpointScan,
    began_saving_at,
    gcs_object_prefix,
    is_gcs,
    is_temporary,
    marker_name,
    metadata_uri,
    newest_committed,
    newest_step_seen,
    split_gcs_uri,
)

from pathways_airflow.exceptions import StorageUnavailableError

DEFAULT_GCP_CONN_ID = "google_cloud_default"
DEFAULT_OUTAGE_SECONDS = 30 * 60.0
"""How long an outage is waited out when the caller gives no deadline."""
OUTAGE_BACKOFF_INITIAL = 1.0
OUTAGE_BACKOFF_MAX = 30.0
"""The wait between tries during an outage: doubling from the first, never more than the second."""

log = logging.getLogger(__name__)


# --- which errors are an outage worth waiting out, and what the log says of one (pure) -----------
# Throttling (429), server errors (5xx), request timeouts (408), dropped, refused or timed-out
# connections and the client's own exhausted retries are outages. A refusal (403), a missing
# bucket or object (404) and a failed precondition (412) are answers: waiting changes nothing.

TRANSIENT_STORAGE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def _status_of(error: BaseException) -> int | None:
    """The HTTP status an error carries: ``code`` (google.api_core) or ``response.status_code``."""
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return code
    status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_transient_storage_error(error: BaseException) -> bool:
    """Whether a GCS call failed because GCS could not be reached or was overloaded, not because of what it said."""
    import requests
    from google.api_core.exceptions import GoogleAPICallError, RetryError
    from google.auth.exceptions import TransportError

    if isinstance(error, GoogleAPICallError):
        return error.code in TRANSIENT_STORAGE_STATUSES
    if isinstance(error, (RetryError, TransportError, requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, requests.exceptions.ChunkedEncodingError):
        return True  # the connection dropped in the middle of a body
    return _status_of(error) in TRANSIENT_STORAGE_STATUSES


def describe_storage_error(error: BaseException) -> str:
    """A short, one-line account of the error (``503 Service Unavailable``, ``ConnectionError: ...``)."""
    status = _status_of(error)
    text = " ".join(str(getattr(error, "message", None) or error).split())
    if status is not None:
        return f"{status} {text}"[:300]
    return f"{type(error).__name__}: {text}"[:300]


def _clock(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%H:%M:%S UTC")


def outage_began(bucket: str, since: float, error: BaseException, gives_up_at: float) -> str:
    return (
        f"GCS bucket {bucket!r} unreachable since {_clock(since)} ({describe_storage_error(error)}): "
        f"waiting, gives up at {_clock(gives_up_at)}"
    )


def outage_ended(bucket: str, since: float, now: float) -> str:
    return f"GCS bucket {bucket!r} reachable again after {now - since:.0f}s (unreachable since {_clock(since)})"


def outage_outlasted_the_deadline(bucket: str, since: float, now: float, error: BaseException) -> str:
    return (
        f"GCS bucket {bucket!r} unreachable for {now - since:.0f}s (since {_clock(since)}), until the "
        f"task's deadline; the last error: {describe_storage_error(error)}. Check GCS's status and the "
        "network path to storage.googleapis.com, then clear the task"
    )

_T = TypeVar("_T")
_WAITING_OUT: contextvars.ContextVar[bool] = contextvars.ContextVar("pathways_gcs_waiting_out", default=False)
"""Set inside a call that already waits out outages: the functions it calls do not wait again."""


def _bucket_in(args: tuple[Any, ...]) -> str:
    """The bucket a call is about, for the log: the first ``gs://`` URI's, else a bare bucket name."""
    for arg in args:
        for item in arg if isinstance(arg, (list, tuple)) else (arg,):
            if isinstance(item, str) and is_gcs(item):
                return split_gcs_uri(item)[0]
    return next((a for a in args[1:] if isinstance(a, str)), "?")


def waits_out_outages(function: Callable[..., _T]) -> Callable[..., _T]:
    """``function`` retried through GCS outages until ``deadline=`` (a keyword of every wrapped call)."""

    @functools.wraps(function)
    def wrapper(*args: Any, deadline: float | None = None, **kwargs: Any) -> _T:
        if _WAITING_OUT.get():
            return function(*args, **kwargs)
        token = _WAITING_OUT.set(True)
        try:
            return _waiting_out(functools.partial(function, *args, **kwargs), _bucket_in(args), deadline)
        finally:
            _WAITING_OUT.reset(token)

    return wrapper


def _waiting_out(call: Callable[[], _T], bucket: str, deadline: float | None) -> _T:
    started = time.time()
    gives_up_at = deadline if deadline is not None else started + DEFAULT_OUTAGE_SECONDS
    backoff = wait_exponential_jitter(initial=OUTAGE_BACKOFF_INITIAL, max=OUTAGE_BACKOFF_MAX)
    since: list[float] = []

    def wait(state: RetryCallState) -> float:
        return max(0.0, min(backoff(state), gives_up_at - time.time()))

    def before_sleep(state: RetryCallState) -> None:
        if not since:
            since.append(time.time())
            error = state.outcome.exception() if state.outcome else None
            log.warning("%s", outage_began(bucket, since[0], error or RuntimeError("?"), gives_up_at))

    retrying = Retrying(
        retry=retry_if_exception(is_transient_storage_error),
        wait=wait,
        stop=lambda state: time.time() >= gives_up_at,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        result = retrying(call)
    except Exception as error:
        if is_transient_storage_error(error):
            message = outage_outlasted_the_deadline(bucket, since[0] if since else started, time.time(), error)
            log.error("%s", message)
            raise StorageUnavailableError(message) from error
        raise
    if since:
        log.warning("%s", outage_ended(bucket, since[0], time.time()))
    return result


def storage_client(gcp_conn_id: str = DEFAULT_GCP_CONN_ID) -> Any:
    """A ``google.cloud.storage.Client`` from the Google connection (honours ``STORAGE_EMULATOR_HOST``),
    for a caller that keeps it across calls (a trigger, a sensor); a block uses :func:`opened_storage`."""
    from airflow.providers.google.cloud.hooks.gcs import GCSHook

    return GCSHook(gcp_conn_id=gcp_conn_id).get_conn()


@contextlib.contextmanager
def opened_storage(gcp_conn_id: str = DEFAULT_GCP_CONN_ID) -> Iterator[Any]:
    """``with opened_storage(conn_id) as client``: a storage client whose connections close with the block."""
    client = storage_client(gcp_conn_id)
    try:
        yield client
    finally:
        client.close()


@waits_out_outages
def object_exists_if_permitted(client: Any, uri: str) -> bool | None:
    """Whether the ``gs://`` object ``uri`` exists; ``None`` when the connection may not look."""
    from google.api_core.exceptions import Forbidden

    try:
        return gcs_exists(client, uri)
    except Forbidden:
        return None


@waits_out_outages
def bucket_exists_if_permitted(client: Any, bucket: str) -> bool | None:
    """Whether ``bucket`` exists (one listing of at most one object, which ``storage.objects.list``
    allows where ``storage.buckets.get`` may not be granted); ``None`` when the connection may not look."""
    from google.api_core.exceptions import Forbidden, NotFound

    try:
        next(iter(client.list_blobs(bucket, max_results=1, retry=None)), None)
    except NotFound:
        return False
    except Forbidden:
        return None
    return True


@waits_out_outages
def read_object(client: Any, uri: str) -> bytes | None:
    """The content of the ``gs://`` object ``uri``; ``None`` when it does not exist."""
    from google.api_core.exceptions import NotFound

    try:
        return _blob(client, uri).download_as_bytes(retry=None)
    except NotFound:
        return None



def _blob(client: Any, uri: str) -> Any:
    bucket, name = split_gcs_uri(uri)
    return client.bucket(bucket).blob(name)


@waits_out_outages
def gcs_exists(client: Any, uri: str) -> bool:
    """Whether the object ``uri`` exists (a commit marker, a result)."""
    return bool(_blob(client, uri).exists(retry=None))


@waits_out_outages
def gcs_has_objects(client: Any, directory: str) -> bool:
    """Whether anything at all is stored under ``directory`` (one listing of at most one object)."""
    bucket, name = split_gcs_uri(directory)
    prefix = f"{name.strip('/')}/" if name.strip("/") else ""
    return any(True for _ in client.list_blobs(bucket, prefix=prefix, max_results=1, retry=None))


@waits_out_outages
def gcs_read_json(client: Any, uri: str) -> Any:
    """The object's JSON, or ``None`` when it is missing or not JSON."""
    data = read_object(client, uri)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


@waits_out_outages
def gcs_write_json(client: Any, uri: str, data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON (small records: provenance, results)."""
    text = json.dumps(data, indent=2, sort_keys=True)
    _blob(client, uri).upload_from_string(text, content_type="application/json", retry=None)


class ObjectChanged(Exception):
    """Another writer changed the object between our read and our conditional write."""


@waits_out_outages
def read_with_generation(client: Any, uri: str) -> tuple[bytes | None, int]:
    """The object's bytes and the generation they are of; ``(None, 0)`` when it does not exist.

    The bytes are read with ``if_generation_match``, so they belong to the generation returned:
    a write in between raises :class:`ObjectChanged` rather than pairing old bytes with a new
    generation.
    """
    from google.api_core.exceptions import NotFound, PreconditionFailed

    bucket, name = split_gcs_uri(uri)
    blob = client.bucket(bucket).get_blob(name, retry=None)
    if blob is None:
        return None, 0
    try:
        return blob.download_as_bytes(if_generation_match=blob.generation, retry=None), int(blob.generation)
    except (PreconditionFailed, NotFound):
        raise ObjectChanged(uri) from None


@waits_out_outages
def write_if_generation(client: Any, uri: str, text: str, content_type: str, generation: int) -> None:
    """Write ``uri`` only if it is still at ``generation`` (0: only if it does not exist), else :class:`ObjectChanged`."""
    from google.api_core.exceptions import PreconditionFailed

    try:
        _blob(client, uri).upload_from_string(text, content_type=content_type, if_generation_match=generation, retry=None)
    except PreconditionFailed:
        raise ObjectChanged(uri) from None


@waits_out_outages
def missing_buckets(client: Any, uris: list[str]) -> list[str]:
    """The buckets of the ``gs://`` URIs that do not exist, each once, in order.

    A credential that may not look (403) gets the benefit of the doubt: its bucket is not
    reported, and the write itself will say what is wrong.
    """
    buckets = dict.fromkeys(split_gcs_uri(uri)[0] for uri in uris if is_gcs(uri))
    return [bucket for bucket in buckets if bucket_exists_if_permitted(client, bucket) is False]


@waits_out_outages
def write_file(client: Any, uri: str, data: bytes, content_type: str) -> None:
    """Write ``data`` to a ``gs://`` object or a local file; locally atomically (a reader never sees half a PNG)."""
    if is_gcs(uri):
        _blob(client, uri).upload_from_string(data, content_type=content_type, retry=None)
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


@waits_out_outages
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


@waits_out_outages
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


def newest_save_began_at(checkpoint_dir: str, *, gcp_conn_id: str = DEFAULT_GCP_CONN_ID, deadline: float | None = None) -> float | None:
    """When the program began saving the newest committed step of ``checkpoint_dir`` (its
    ``_CHECKPOINT_METADATA``: :func:`~pathways_airflow.checkpoints.began_saving_at`); ``None`` when
    no step is committed or its metadata does not say. One listing, one marker read per newer
    partial step, one read of the metadata; GCS outages waited out until ``deadline``."""
    if not is_gcs(checkpoint_dir):
        found = newest_committed_checkpoint(checkpoint_dir, deadline=deadline)
        return None if found is None else began_saving_at(_read_local(metadata_uri(found.uri)))
    with opened_storage(gcp_conn_id) as client:
        found = newest_committed_checkpoint(checkpoint_dir, gcp_conn_id=gcp_conn_id, client=client, deadline=deadline)
        return None if found is None else began_saving_at(read_object(client, metadata_uri(found.uri), deadline=deadline))


def _read_local(path: str) -> bytes | None:
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError:
        return None


def _scan_gcs(
    checkpoint_dir: str, newer_than: int | None, min_step: int | None, client: Any, gcp_conn_id: str
) -> CheckpointScan:
    from google.api_core.exceptions import NotFound

    bucket_name, _ = split_gcs_uri(checkpoint_dir)
    prefix = gcs_object_prefix(checkpoint_dir)
    try:
        listing = client.list_blobs(bucket_name, prefix=prefix, delimiter="/", fields="prefixes,nextPageToken", retry=None)
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
        if bucket.blob(prefix + marker_name(name)).exists(retry=None):
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
