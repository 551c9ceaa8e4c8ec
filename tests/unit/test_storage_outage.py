"""Which GCS errors are an outage to wait out, with the exception objects the real clients raise."""

from __future__ import annotations

import pytest
import requests
from google.api_core import exceptions as api
from google.auth.exceptions import TransportError

from pathways_airflow.hooks.storage import (
    describe_storage_error,
    is_transient_storage_error,
    outage_began,
    outage_outlasted_the_deadline,
)

pytestmark = pytest.mark.pure


def status_error(status: int) -> Exception:
    """What google-cloud-storage raises for an HTTP answer of ``status`` (``from_http_response``)."""
    response = requests.Response()
    response.status_code = status
    response._content = b'{"error": {"message": "answered by the test"}}'
    response.request = requests.Request("GET", "https://storage.googleapis.com/storage/v1/b/x/o").prepare()
    return api.from_http_response(response)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_throttling_timeouts_and_server_errors_are_waited_out(status):
    assert is_transient_storage_error(status_error(status))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 412])
def test_what_gcs_answered_on_purpose_is_not(status):
    assert not is_transient_storage_error(status_error(status))


@pytest.mark.parametrize(
    "error",
    [
        requests.ConnectionError("Connection refused"),
        requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead"),
        requests.Timeout("read timed out"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
        TransportError("token endpoint unreachable"),
        api.RetryError("Timeout of 120.0s exceeded", cause=requests.ConnectionError("refused")),
    ],
    ids=lambda e: type(e).__name__,
)
def test_unreachable_storage_is_waited_out(error):
    assert is_transient_storage_error(error)


@pytest.mark.parametrize(
    "error", [FileNotFoundError("gs://x"), ValueError("not JSON"), api.Forbidden("no"), api.NotFound("gone")], ids=repr
)
def test_other_failures_are_not(error):
    assert not is_transient_storage_error(error)


def test_the_log_names_the_bucket_the_error_the_start_and_when_it_gives_up():
    began = outage_began("ckpts", 43384.0, status_error(503), 43384.0 + 1800)
    assert began.startswith("GCS bucket 'ckpts' unreachable since 12:03:04 UTC (503 ")
    assert began.endswith("waiting, gives up at 12:33:04 UTC")
    gave_up = outage_outlasted_the_deadline("ckpts", 43384.0, 43384.0 + 125, requests.ConnectionError("refused"))
    assert "'ckpts' unreachable for 125s (since 12:03:04 UTC)" in gave_up and "ConnectionError: refused" in gave_up
    assert describe_storage_error(status_error(429)).startswith("429 ")
