"""The one Job-outcome rule, on Jobs as the Kubernetes Job controller (1.31+) leaves them.

The shapes follow kubernetes/api ``batch/v1/types.go`` (``JobStatus``): ``SuccessCriteriaMet`` and
``FailureTarget`` are added while the Job's pods are still terminating, ``Complete`` and
``Failed`` once they are gone. Only the terminal pair ends a wait.
"""

from __future__ import annotations

import pytest

from pathways_airflow.state.jobs import COMPLETE, FAILED, GONE, RUNNING, JobOutcome, job_outcome

T0, T1 = "2026-03-02T10:00:00Z", "2026-03-02T10:00:07Z"


def job(*conditions: dict, deleting: bool = False, **status) -> dict:
    metadata = {"name": "bench-1a2b3c4d", "namespace": "serving", "uid": "8d5f0c2e"}
    if deleting:
        metadata["deletionTimestamp"] = T1
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1},
        "status": {"startTime": T0, "uncountedTerminatedPods": {}, **status, "conditions": list(conditions)},
    }


def cond(type_: str, reason: str, message: str, status: str = "True") -> dict:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": T1,
        "lastTransitionTime": T1,
    }


SUCCESS_CRITERIA = cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
COMPLETE_ = cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
FAILURE_TARGET = cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
FAILED_ = cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")


@pytest.mark.parametrize(
    "obj, status",
    [
        (job(active=0), RUNNING),
        (job(active=1, ready=1), RUNNING),
        (job(SUCCESS_CRITERIA, active=0, terminating=1, succeeded=1), RUNNING),
        (job(SUCCESS_CRITERIA, COMPLETE_, succeeded=1, completionTime=T1), COMPLETE),
        (job(FAILURE_TARGET, active=0, terminating=1, failed=1), RUNNING),
        (job(FAILURE_TARGET, FAILED_, failed=1), FAILED),
        (job(cond("Failed", "", "", status="False"), active=1), RUNNING),
        (job(cond("Suspended", "JobSuspended", "Job suspended"), active=0), RUNNING),
        (job(active=1, deleting=True), GONE),
        (job(FAILURE_TARGET, FAILED_, failed=1, deleting=True), FAILED),
        (None, GONE),
    ],
    ids=[
        "pending",
        "active",
        "success-criteria-met-pods-terminating",
        "complete",
        "failure-target-pods-terminating",
        "failed",
        "failed-false",
        "suspended",
        "deleted-before-it-finished",
        "deleted-after-it-failed",
        "missing",
    ],
)
def test_only_complete_or_failed_end_a_job(obj, status):
    assert job_outcome(obj).status == status
    assert job_outcome(obj).finished == (status != RUNNING)


def test_the_outcome_carries_the_controllers_reason_and_reads_as_one_line():
    failed = job_outcome(job(FAILURE_TARGET, FAILED_, failed=1))
    assert (failed.reason, failed.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert failed.summary() == "failed (BackoffLimitExceeded: Job has reached the specified backoff limit)"
    assert job_outcome(job(active=2)).summary() == "running (2 active pods)"
    assert job_outcome(job()).summary() == "pending"


def test_an_outcome_survives_its_event():
    failed = job_outcome(job(FAILURE_TARGET, FAILED_, failed=1))
    event = failed.to_event("bench-1a2b3c4d", "serving")
    assert event["status"] == FAILED and event["name"] == "bench-1a2b3c4d"
    assert JobOutcome.from_event(event) == failed
