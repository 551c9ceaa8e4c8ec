"""A workload whose child objects the API refuses is a refused spec, decided from its events. Pure."""

from __future__ import annotations

from typing import Any

from pathways_airflow.state.creation import (
    JOBSET_GRACE_SECONDS,
    children_missing,
    creation_failure,
    events_selector,
    rejected_child_job,
)

API_MESSAGE = (
    'job "train-worker-0" creation failed with error: jobs.batch "train-worker-0" is forbidden: exceeded quota: '
    "one-job, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1"
)


def event(kind: str, name: str, reason: str, message: str, *, type_: str = "Warning", when: str = "2026-11-22T07:40:50Z") -> dict[str, Any]:
    """A core/v1 Event as the API lists it (JobSet records it through events.k8s.io; core/v1 shows it so)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.18a2b3c4d5e6f708", "namespace": "default"},
        "involvedObject": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": kind, "name": name, "namespace": "default", "uid": "u-1"},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "source": {"component": "jobset-controller"},
        "reportingComponent": "jobset-controller",
    }


def jobset(restarts: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "default", "creationTimestamp": "2026-11-22T07:40:30Z"},
        "spec": {"replicatedJobs": [{"name": "pathways-head", "replicas": 1}, {"name": "worker", "replicas": 2}]},
        "status": {"restarts": restarts},
    }


def job(name: str, attempt: int = 0, created: str = "2026-11-22T07:40:31Z") -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": name, "creationTimestamp": created, "labels": {"jobset.sigs.k8s.io/restart-attempt": str(attempt)}},
    }


def test_the_newest_job_creation_failure_on_the_jobset_names_the_apis_message():
    events = [
        event("JobSet", "train", "SuccessfulCreate", "Created job: train-pathways-head-0", type_="Normal"),
        event("JobSet", "train", "JobCreationFailed", "older", when="2026-11-22T07:40:40Z"),
        event("JobSet", "train", "JobCreationFailed", API_MESSAGE),
        event("JobSet", "other", "JobCreationFailed", "not ours", when="2026-11-22T07:41:00Z"),
    ]
    head = [job("train-pathways-head-0")]
    assert rejected_child_job(jobset(), head, events) == f"rejected child Job: {API_MESSAGE}"
    assert creation_failure(jobset(), jobset(), head, events, 0.0) == f"rejected child Job: {API_MESSAGE}"
    assert rejected_child_job(jobset(), head, events[:1]) is None
    assert events_selector("JobSet", "train") == "involvedObject.kind=JobSet,involvedObject.name=train"


def test_a_refusal_the_jobset_has_since_overcome_does_not_count():
    """Events live an hour: a quota that refused a Job once, before the Job was created after all,
    must not fail a later restart whose Jobs are briefly missing."""
    refused_once = [event("JobSet", "train", "JobCreationFailed", API_MESSAGE, when="2026-11-22T07:40:50Z")]
    created_after = [job("train-pathways-head-0"), job("train-worker-0", created="2026-11-22T07:41:20Z")]
    assert rejected_child_job(jobset(restarts=1), created_after, refused_once) is None
    refused_in_the_same_second = [event("JobSet", "train", "JobCreationFailed", API_MESSAGE, when="2026-11-22T07:41:20.123456Z")]
    assert rejected_child_job(jobset(restarts=1), created_after, refused_in_the_same_second) is not None


def test_only_missing_children_of_the_current_attempt_are_worth_a_look():
    assert children_missing(jobset(), jobset(), [job("train-pathways-head-0")])
    assert not children_missing(jobset(), jobset(), [job("train-pathways-head-0"), job("train-worker-0"), job("train-worker-1")])
    stale = [job("train-pathways-head-0"), job("train-worker-0"), job("train-worker-1")]
    assert children_missing(jobset(restarts=1), jobset(restarts=1), stale), "the last attempt's Jobs do not count"
    pathwaysjob = {"kind": "PathwaysJob", "metadata": {"name": "train", "creationTimestamp": "2026-11-22T07:40:00Z"}}
    assert children_missing(pathwaysjob, None, []) and not children_missing(None, None, [])


def test_a_job_the_jobset_restarts_alone_is_missing_until_it_is_created_again():
    """JobSet ≥ 0.12 (``RestartJob``): ``jobRestarts`` counts a Job's own restarts, and its Job of an
    earlier ``job-restart-attempt`` is on its way out."""
    restarted = jobset()
    restarted["status"]["replicatedJobsStatus"] = [{"name": "worker", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0, "jobRestarts": [0, 1]}]

    def worker(index: int, job_attempt: int) -> dict[str, Any]:
        made = job(f"train-worker-{index}")
        made["metadata"]["labels"].update({
            "jobset.sigs.k8s.io/replicatedjob-name": "worker", "jobset.sigs.k8s.io/job-index": str(index),
            "jobset.sigs.k8s.io/job-restart-attempt": str(job_attempt),
        })
        return made

    head = job("train-pathways-head-0")
    assert children_missing(restarted, restarted, [head, worker(0, 0), worker(1, 0)])
    assert not children_missing(restarted, restarted, [head, worker(0, 0), worker(1, 1)])


def test_a_pathwaysjob_without_a_jobset_past_the_grace_period_is_stuck():
    pathwaysjob = {"kind": "PathwaysJob", "metadata": {"name": "train", "creationTimestamp": "2026-11-22T07:40:00Z"}}
    assert creation_failure(pathwaysjob, None, [], [], JOBSET_GRACE_SECONDS - 1) is None
    warning = event("PathwaysJob", "train", "FailedCreate", "jobsets.jobset.x-k8s.io is forbidden")
    said = creation_failure(pathwaysjob, None, [], [warning], JOBSET_GRACE_SECONDS + 5)
    assert said is not None and said.startswith("the PathwaysJob controller created no JobSet in 305 s (grace 300 s)")
    assert "its last warning: FailedCreate: jobsets.jobset.x-k8s.io is forbidden" in said
