"""The event a wait on a batch Job hands its task, and the one rule for what its end means (pure)."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowTaskTimeout

from pathways_airflow.exceptions import InfrastructureError, KubernetesApiError, UserCodeError, WorkloadDeletedError
from pathways_airflow.run.outcome import job_end_exception
from pathways_airflow.state.jobs import FAILED, JobEvent, JobOutcome

WHERE = "Job serving/convert-1a2b"


@pytest.mark.parametrize(
    "payload",
    [
        {"status": "complete", "name": "j", "namespace": "ns", "reason": "Completed", "message": "done"},
        {"status": "failed", "name": "j", "namespace": "ns", "reason": "BackoffLimitExceeded", "message": "limit"},
        {"status": "gone", "name": "j", "namespace": "ns", "reason": "NotFound", "message": "the Job no longer exists"},
        {"status": "timeout", "name": "j", "namespace": "ns", "message": "running (1 active pod)", "deleted": True},
        {"status": "error", "name": "j", "namespace": "ns", "message": "10 reads in a row failed; the last: boom"},
    ],
    ids=["complete", "failed", "gone", "timeout", "error"],
)
def test_an_event_of_an_earlier_trigger_reads_back_to_the_very_same_payload(payload):
    assert JobEvent.from_payload(payload).to_payload() == payload
    assert list(JobEvent.from_payload(payload).to_payload()) == list(payload)


def test_an_outcome_travels_as_its_event():
    outcome = JobOutcome(FAILED, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    event = JobEvent.from_payload(outcome.to_event("bench", "serving"))
    assert (event.name, event.namespace, event.outcome) == ("bench", "serving", outcome)


def test_a_completed_job_is_no_failure_and_a_failed_one_raises_what_its_pods_said():
    assert job_end_exception(JobEvent("complete", "j", "ns"), WHERE, limit="") is None
    said = UserCodeError("exited with code 3", exit_code=3)
    assert job_end_exception(JobEvent("failed", "j", "ns"), WHERE, limit="", failure=said) is said
    unexplained = job_end_exception(JobEvent("failed", "j", "ns", "BackoffLimitExceeded"), WHERE, limit="")
    assert type(unexplained) is InfrastructureError and str(unexplained) == f"{WHERE} failed (BackoffLimitExceeded)"


def test_running_out_of_the_tasks_time_is_airflows_timeout_and_of_the_jobs_own_the_systems():
    late = JobEvent("timeout", "j", "ns", message="running (1 active pod)", deleted=True)
    task = job_end_exception(late, WHERE, limit="execution_timeout (0:10:00)")
    assert isinstance(task, AirflowTaskTimeout)
    assert str(task) == f"{WHERE} did not finish within execution_timeout (0:10:00); it was deleted. Last seen: running (1 active pod)"
    own = job_end_exception(late, WHERE, limit="3900s")
    assert type(own) is InfrastructureError and "did not finish within 3900s" in str(own)


def test_a_lost_track_a_deletion_and_an_unknown_status_each_say_so():
    lost = job_end_exception(JobEvent("error", "j", "ns", message="boom"), WHERE, limit="", lost_hint="Look with kubectl.")
    assert isinstance(lost, KubernetesApiError) and str(lost) == f"lost track of {WHERE}: boom. Look with kubectl."
    assert str(job_end_exception(JobEvent("error", "j", "ns", message="boom"), WHERE, limit="")) == f"lost track of {WHERE}: boom"
    gone = job_end_exception(JobEvent("gone", "j", "ns", message="the Job no longer exists"), WHERE, limit="")
    assert isinstance(gone, WorkloadDeletedError) and "deleted before it finished (the Job no longer exists)" in str(gone)
    odd = job_end_exception(JobEvent("running", "j", "ns"), WHERE, limit="")
    assert isinstance(odd, KubernetesApiError) and "unexpected event" in str(odd)
