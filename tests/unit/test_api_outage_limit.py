"""When a wait stops riding out a failing Kubernetes API: after ``api_outage_seconds`` of failures, not a count."""

from __future__ import annotations

from types import SimpleNamespace

from pathways_airflow.resources import JOBSET, POD
from pathways_airflow.triggers.watch import API_OUTAGE_LIMIT_SECONDS, api_lost

NOW = 1_795_000_000.0


def watch(resource=JOBSET, failing_for: float | None = None, failures: int = 0, error: str = "ApiException: (503)"):
    return SimpleNamespace(
        resource=resource,
        failing_since=None if failing_for is None else NOW - failing_for,
        consecutive_failures=failures,
        last_error=error,
    )


def test_an_api_that_answers_or_failed_briefly_is_ridden_out():
    assert api_lost([watch(), watch(POD, failing_for=600, failures=40)], now=NOW) is None


def test_an_api_failing_for_longer_than_the_limit_ends_the_wait_saying_since_when_and_why():
    said = api_lost([watch(), watch(POD, failing_for=API_OUTAGE_LIMIT_SECONDS + 60, failures=57)], now=NOW)
    assert said is not None
    assert said.startswith("the Kubernetes API has failed for 31 min watching pods (since ")
    assert "57 failures in a row): ApiException: (503)" in said


def test_the_limit_is_the_callers():
    assert api_lost([watch(failing_for=5)], limit=3, now=NOW) is not None
    assert api_lost([watch(failing_for=5)], limit=10, now=NOW) is None
