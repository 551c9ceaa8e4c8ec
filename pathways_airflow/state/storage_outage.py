"""When GCS is out: which errors are an outage worth waiting out, and what the log says about one.

A checkpoint bucket that does not answer for a few minutes (a regional incident, a proxy being
replaced, throttling) must not fail a task whose workload has finished: its result, or the
committed checkpoint a sensor waits for, is there once GCS answers again. Throttling (429),
server errors (5xx), request timeouts (408), dropped, refused or timed-out connections and the
storage client's own exhausted retries are such outages. A refusal (403), a missing bucket or
object (404) and a failed precondition (412) are answers, not outages: waiting changes nothing.
"""

from __future__ import annotations

import datetime as dt

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


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
        return error.code in TRANSIENT_STATUSES
    if isinstance(error, (RetryError, TransportError, requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, requests.exceptions.ChunkedEncodingError):
        return True  # the connection dropped in the middle of a body
    return _status_of(error) in TRANSIENT_STATUSES


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
