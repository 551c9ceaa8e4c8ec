"""The local JobSet controller's per-Job restarts (JobSet ≥ 0.12), and the provider reading them.

``RestartJob`` and ``RestartJobAndIgnoreMaxRestarts`` recreate only the failed child Job
(kubernetes-sigs/jobset ``pkg/controllers/failure_policy.go``): its entry of
``status.replicatedJobsStatus[].jobRestarts`` goes up, the new Job carries it as
``jobset.sigs.k8s.io/job-restart-attempt``, the other Jobs run on, and ``maxRestarts`` is compared
with the JobSet's and the Jobs' counted restarts together.

And JobSet 0.13's execution attempts (``keps/1282-execution-attempts/README.md``), behind the alpha
gate ``ExecutionAttemptsTracking``: ``status.executionAttempts`` and the ``execution-attempt``
annotation on Jobs and pods, counting resumes and restarts of every Job but not per-Job restarts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pathways_airflow.state.model import Observation
from pathways_airflow.state.status import workload_state
from pathways_airflow.state.workload_parts import of_current_run, restarts_of
from pathways_airflow_testing.cluster import LocalCluster
from pathways_airflow_testing.controllers.jobset import JobSetController
from pathways_airflow_testing.store import copy_of

from tests.support.waiting import wait_for

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
JOB = ("batch/v1", "Job")
POD = ("v1", "Pod")
NAMESPACE = "per-job"
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
EXECUTION_ATTEMPT = "jobset.sigs.k8s.io/execution-attempt"
GATE = "ExecutionAttemptsTracking"


@pytest.fixture(scope="module")
def cluster(crds: Path):
    with LocalCluster(crds=[crds], gcs=False, kueue=False, speed=100, namespaces=(NAMESPACE,)) as running:
        yield running


def two_slices(name: str, action: str, max_restarts: int) -> dict[str, Any]:
    """A JobSet of two one-pod Jobs whose every failure is met by ``action``."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "failurePolicy": {"maxRestarts": max_restarts, "rules": [{"name": "only-that-job", "action": action}]},
            "replicatedJobs": [{"name": "slice", "replicas": 2, "template": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}}}],
        },
    }


def jobs_of(cluster: LocalCluster, name: str) -> dict[str, dict[str, Any]]:
    return {j["metadata"]["name"]: j for j in cluster.list(*JOB, NAMESPACE) if j["metadata"]["name"].startswith(f"{name}-")}


def running_pod(cluster: LocalCluster, job: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        pods = [p for p in cluster.list(*POD, NAMESPACE, labels={"batch.kubernetes.io/job-name": job})
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None

    return wait_for(found, timeout=30)


def fail(cluster: LocalCluster, job: str) -> None:
    assert cluster.fail_pod(NAMESPACE, running_pod(cluster, job)["metadata"]["name"], exit_code=1)


def recreated(cluster: LocalCluster, name: str, job: str, job_attempt: int) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        made = jobs_of(cluster, name).get(job)
        return made if made and made["metadata"]["labels"].get(JOB_RESTART_ATTEMPT) == str(job_attempt) else None

    return wait_for(found, timeout=30)


def test_restart_job_recreates_only_the_failed_job_and_counts_towards_max_restarts(cluster):
    name = "restart-job"
    cluster.apply(two_slices(name, "RestartJob", max_restarts=1), namespace=NAMESPACE)
    running_pod(cluster, f"{name}-slice-0")
    first = jobs_of(cluster, name)
    assert {j["metadata"]["labels"][JOB_RESTART_ATTEMPT] for j in first.values()} == {"0"}
    unannotated = [*first.values(), running_pod(cluster, f"{name}-slice-1")]  # the gate is off, as upstream by default
    assert not any(EXECUTION_ATTEMPT in (o["metadata"].get("annotations") or {}) for o in unannotated)

    fail(cluster, f"{name}-slice-1")
    again = recreated(cluster, name, f"{name}-slice-1", 1)
    kept = jobs_of(cluster, name)[f"{name}-slice-0"]
    assert kept["metadata"]["uid"] == first[f"{name}-slice-0"]["metadata"]["uid"], "the other Job runs on"
    assert again["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"
    jobset = wait_for(lambda: (j := cluster.get(*JOBSET, name, NAMESPACE)) and j["status"]["replicatedJobsStatus"][0].get("jobRestarts") and j, timeout=10)
    status = jobset["status"]
    assert status["restarts"] == 0 and status.get("restartsCountTowardsMax", 0) == 0 and "executionAttempts" not in status
    [entry] = status["replicatedJobsStatus"]
    assert (entry["jobRestarts"], entry["jobRestartsCountTowardsMax"]) == ([0, 1], [0, 1])
    reasons = [e["reason"] for e in cluster.list("v1", "Event", NAMESPACE) if e["involvedObject"]["name"] == name]
    assert "RestartJobFailurePolicyAction" in reasons

    # What the provider reads of it: one in-place restart, and the re-created Job is the current one.
    assert restarts_of(jobset) == 1
    seen = {j["metadata"]["uid"]: j for j in (*first.values(), *jobs_of(cluster, name).values())}  # the replaced Job too
    assert len(seen) == 3
    current = of_current_run(seen.values(), jobset)
    assert sorted(j["metadata"]["uid"] for j in current) == sorted([kept["metadata"]["uid"], again["metadata"]["uid"]])
    pods = tuple(cluster.list(*POD, NAMESPACE, labels={"jobset.sigs.k8s.io/jobset-name": name}))
    assert workload_state(Observation("jobset", name, NAMESPACE, jobset=jobset, pods=pods)).restarts == 1

    fail(cluster, f"{name}-slice-0")  # the one counted restart maxRestarts allows is spent
    failed = wait_for(lambda: (j := cluster.get(*JOBSET, name, NAMESPACE)) and j["status"].get("terminalState") and j, timeout=30)
    [condition] = [c for c in failed["status"]["conditions"] if c["type"] == "Failed"]
    assert condition["reason"] == "ReachedMaxRestarts" and f"(first failed job: {name}-slice-0)" in condition["message"]


def test_restart_job_and_ignore_max_restarts_restarts_the_job_at_no_cost(cluster):
    name = "restart-job-free"
    cluster.apply(two_slices(name, "RestartJobAndIgnoreMaxRestarts", max_restarts=0), namespace=NAMESPACE)
    for attempt in (1, 2):
        fail(cluster, f"{name}-slice-0")
        recreated(cluster, name, f"{name}-slice-0", attempt)
    jobset = wait_for(lambda: (j := cluster.get(*JOBSET, name, NAMESPACE)) and j["status"]["replicatedJobsStatus"][0].get("jobRestarts") == [2, 0] and j, timeout=10)
    [entry] = jobset["status"]["replicatedJobsStatus"]
    assert entry["jobRestartsCountTowardsMax"] == [0, 0] and not jobset["status"].get("terminalState")
    assert restarts_of(jobset) == 2


# --- execution attempts (KEP-1282) -------------------------------------------------------------


@pytest.fixture(scope="module")
def tracked(crds: Path):
    with LocalCluster(
        crds=[crds], gcs=False, kueue=False, speed=100, namespaces=(NAMESPACE,), jobset_feature_gates=(GATE,)
    ) as running:
        yield running


def set_suspend(cluster: LocalCluster, name: str, suspend: bool) -> None:
    """``spec.suspend`` as Kueue writes it on an eviction (``True``) and an admission (``False``)."""
    kind = cluster.kinds.by_kind(*JOBSET)

    def write() -> None:
        jobset = copy_of(cluster.store.get(kind, NAMESPACE, name))
        jobset["spec"]["suspend"] = suspend
        jobset["metadata"].pop("resourceVersion", None)
        cluster.store.replace(kind, jobset)

    cluster.call(write)


def executions(cluster: LocalCluster, name: str, count: int) -> dict[str, Any]:
    """The JobSet once it counts ``count`` executions and every Job of it carries the count."""
    def found() -> dict[str, Any] | None:
        jobset = cluster.get(*JOBSET, name, NAMESPACE)
        jobs = jobs_of(cluster, name)
        counted = jobset and (jobset.get("status") or {}).get("executionAttempts") == count
        annotated = len(jobs) == 2 and all((j["metadata"].get("annotations") or {}).get(EXECUTION_ATTEMPT) == str(count) for j in jobs.values())
        return jobset if counted and annotated else None

    return wait_for(found, timeout=30, what=f"{name}: execution attempt {count}")


def annotated(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(EXECUTION_ATTEMPT)


def test_execution_attempts_count_resumes_and_full_restarts_but_not_a_job_restarted_alone(tracked):
    name = "executions"
    manifest = two_slices(name, "RestartJob", max_restarts=5)
    manifest["spec"]["suspend"] = True  # as Kueue's webhook creates it
    manifest["spec"]["replicatedJobs"].append({**manifest["spec"]["replicatedJobs"][0], "name": "whole", "replicas": 1})
    manifest["spec"]["replicatedJobs"][0]["replicas"] = 1
    manifest["spec"]["failurePolicy"]["rules"] = [
        {"name": "alone", "action": "RestartJob", "targetReplicatedJobs": ["slice"]},
        {"name": "all", "action": "RestartJobSet", "targetReplicatedJobs": ["whole"]},
    ]
    tracked.apply(manifest, namespace=NAMESPACE)
    wait_for(lambda: len(jobs_of(tracked, name)) == 2, timeout=10)
    assert "executionAttempts" not in (tracked.get(*JOBSET, name, NAMESPACE).get("status") or {}), "never ran: nil"

    set_suspend(tracked, name, False)  # first admission
    executions(tracked, name, 0)
    assert annotated(running_pod(tracked, f"{name}-slice-0")) == "0"

    set_suspend(tracked, name, True)  # evicted ...
    wait_for(lambda: all(j["spec"].get("suspend") for j in jobs_of(tracked, name).values()), timeout=10)
    set_suspend(tracked, name, False)  # ... and admitted again
    jobset = executions(tracked, name, 1)
    assert jobset["status"]["restarts"] == 0, "restart-attempt does not move on a resume"
    pod = running_pod(tracked, f"{name}-slice-0")
    assert annotated(pod) == "1" and pod["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"

    fail(tracked, f"{name}-slice-0")  # RestartJob: that Job alone, the same execution
    again = recreated(tracked, name, f"{name}-slice-0", 1)
    assert annotated(again) == "1" and tracked.get(*JOBSET, name, NAMESPACE)["status"]["executionAttempts"] == 1

    fail(tracked, f"{name}-whole-0")  # RestartJobSet: every Job anew, a new execution
    jobset = executions(tracked, name, 2)
    assert jobset["status"]["restarts"] == 1
    assert annotated(running_pod(tracked, f"{name}-whole-0")) == "2"
    pods = tuple(tracked.list(*POD, NAMESPACE, labels={"jobset.sigs.k8s.io/jobset-name": name}))
    assert workload_state(Observation("jobset", name, NAMESPACE, jobset=jobset, pods=pods)).execution_attempts == 2


def test_a_running_jobset_the_controller_did_not_count_starts_at_its_restarts(tracked):
    """KEP-1282 §1: the gate turned on under a running JobSet (``nil``, child Jobs running or restarts
    made) gives it ``status.restarts``; one that never ran stays ``nil`` until it runs."""
    controller = JobSetController(tracked, feature_gates=(GATE,))
    running = {"metadata": {}, "status": {}}
    active = [{"metadata": {}, "spec": {"suspend": False}, "status": {"active": 1}}]
    for restarts, children, suspended, expected in ((2, [], True, 2), (0, active, False, 0), (3, active, False, 3), (0, [], True, None)):
        status = {"restarts": restarts}
        assert controller._count_execution_attempts(running, status, children, suspended, "2026-01-01T00:00:00Z") is False
        assert status.get("executionAttempts") == expected, (restarts, children, suspended)
    with pytest.raises(ValueError, match="unknown JobSet feature gates"):
        JobSetController(tracked, feature_gates=("ExecuteAttempts",))
