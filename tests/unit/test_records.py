"""The records that cross processes keep one shape, and read what earlier versions wrote."""

from pathways_airflow.state.disruption import Classification, Verdict
from pathways_airflow.state.model import FailureCause, Phase, WorkloadState
from pathways_airflow.run.records import JOBSET_RESTART, Disruption, PhaseSeen, Submission, WorkloadEvent, WorkloadRun

# A submission record as the task state store and XCom hold it, with one resubmission and one
# restart the JobSet made in place.
STORED = {
    "name": "train-a1b2c3-1",
    "namespace": "ml",
    "backend": "jobset",
    "attempt": 1,
    "started": 1763900000.5,
    "disruptions": [
        {"time": 1763900100.0, "kind": "MAINTENANCE", "evidence": ["node n1: drained"], "handled_by": JOBSET_RESTART, "reached_step": 20},
        {
            "time": 1763900200.0,
            "kind": "SLICE_FAILURE",
            "evidence": ["pod w-0: DisruptionTarget"],
            "workload": "train-a1b2c3-0",
            "reached_step": 42,
            "resumed_from_step": 40,
            "steps_recomputed": 2,
            "seconds_lost": 93.4,
        },
    ],
}


def test_a_stored_submission_reads_and_writes_back_unchanged():
    submission = Submission.from_dict(STORED)
    assert submission.to_dict() == STORED
    assert Submission.from_dict({**STORED, "first_try": 4}).to_dict() == {**STORED, "first_try": 4}
    assert submission.resubmissions == 1
    assert [d.resubmitted for d in submission.disruptions] == [False, True]


def test_a_record_missing_keys_takes_the_tasks_own_values():
    submission = Submission.from_dict({"name": "train-x-0"}, namespace="ml", backend="jobset")
    assert (submission.namespace, submission.backend, submission.attempt, submission.disruptions) == ("ml", "jobset", 0, ())


def test_a_finished_event_round_trips_through_its_payload():
    event = WorkloadEvent(
        "finished",
        "train-x-0",
        state=WorkloadState(Phase.FAILED, "JobSet failed", cause=FailureCause.USER_CODE, exit_code=1),
        failure={"pod": "train-x-0-pathways-head-0-0", "container": "main", "exit_code": 1, "log_tail": ["Traceback"]},
        classification=Classification(Verdict.USER_ERROR, ("container main exited with 1",), 1, "main", "p"),
        last_step=12,
        restarts=(Disruption(5.0, "PREEMPTION", ("pod p: Preempting",), 8, JOBSET_RESTART),),
        running_since=1.0,
        phases=(PhaseSeen(0.5, "PROVISIONING", 0, 2), PhaseSeen(1.0, "RUNNING", 2, 2), PhaseSeen(6.0, "FAILED")),
    )
    payload = event.to_payload()
    assert set(payload) == {"status", "name", "state", "failure", "classification", "last_step", "restarts", "running_since", "phases"}
    assert WorkloadEvent.from_payload(payload) == event


def test_restarts_an_earlier_trigger_sent_are_read_as_jobset_restarts():
    payload = {
        "status": "finished",
        "name": "train-x-0",
        "state": WorkloadState(Phase.SUCCEEDED).to_dict(),
        "restarts": [{"time": 5.0, "kind": "MAINTENANCE", "evidence": ["e"], "last_step": 8}],
    }
    (restart,) = WorkloadEvent.from_payload(payload).restarts
    assert (restart.reached_step, restart.handled_by, restart.resubmitted) == (8, JOBSET_RESTART, False)


def test_timeout_and_error_events_carry_only_their_own_fields():
    timeout = WorkloadEvent("timeout", "w", state=WorkloadState(Phase.RUNNING), deleted=True).to_payload()
    assert set(timeout) == {"status", "name", "state", "deleted"} and timeout["deleted"] is True
    error = WorkloadEvent("error", "w", message="ApiException: 500").to_payload()
    assert error == {"status": "error", "name": "w", "message": "ApiException: 500"}


def test_a_refused_verb_travels_with_the_error_event():
    refused = WorkloadEvent("error", "w", message='pods is forbidden: User "system:serviceaccount:default:pathways-airflow" cannot watch resource "pods"', forbidden=True)
    assert refused.to_payload()["forbidden"] is True
    assert WorkloadEvent.from_payload(refused.to_payload()) == refused


def test_the_workloads_a_submission_ran_travel_with_it_and_keep_their_deletion():
    first = Submission("train-x-0", "ml", "jobset", started=100.0)
    ended = first.ended((PhaseSeen(101.0, "QUEUED"), PhaseSeen(103.0, "RUNNING", 1, 1)), at=150.0).deleted(152.0)
    second = ended.next_attempt("train-x-1", submitted=153.0)
    assert second.runs == (WorkloadRun("train-x-0", 100.0, ended.runs[0].phases, ended=150.0, deleted=152.0),)
    assert Submission.from_dict(second.to_dict()) == second
    # The same workload ending twice (a resumed wait) is one run, the newest reading.
    again = second.ended((PhaseSeen(154.0, "RUNNING", 1, 1),), at=160.0).ended((PhaseSeen(154.0, "RUNNING", 1, 1),), at=161.0)
    assert [(r.workload, r.submitted, r.ended) for r in again.runs] == [("train-x-0", 100.0, 150.0), ("train-x-1", 153.0, 161.0)]
    # A record an older version wrote has no runs and no submission time.
    assert Submission.from_dict({"name": "train-x-0", "started": 5.0}).runs == ()


def test_only_the_phases_alone_may_wait_to_be_written():
    from pathways_airflow.run.annotations import PHASES_ANNOTATION, PHASES_EVERY_SECONDS, write_within
    from pathways_airflow.state.ran_on import where_workers_run

    phases = {PHASES_ANNOTATION: '[{"at":1.0,"phase":"RUNNING","slices_ready":1,"slices_total":1}]'}
    worker = {
        "metadata": {"name": "train-worker-0-0-abcde", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "worker"}},
        "spec": {"nodeName": "gke-tpu-v5e-node-a"}, "status": {"phase": "Running", "startTime": "2026-11-28T10:00:00Z"},
    }
    where = where_workers_run([worker], 0, "worker")
    assert where is not None
    assert write_within(phases) == PHASES_EVERY_SECONDS
    assert write_within({**phases, **where}) == 0.0
    assert write_within(where) == 0.0


def test_only_a_success_tells_its_task_before_its_phases_are_written():
    from pathways_airflow.run.annotations import PHASES_ANNOTATION, ended_by_annotation, written_before_the_event

    phases = {PHASES_ANNOTATION: '[{"at":1.0,"phase":"SUCCEEDED","slices_ready":0,"slices_total":1}]'}
    verdict = ended_by_annotation("USER_ERROR", ["the head exited 1"])
    assert not written_before_the_event(phases, succeeded=True)
    assert written_before_the_event(phases, succeeded=False), "a failure's or a reached phase's notes, for the next try"
    assert written_before_the_event({**phases, **verdict}, succeeded=False)
    assert written_before_the_event({**phases, **verdict}, succeeded=True), "anything beside the phases goes at once"
    assert not written_before_the_event({}, succeeded=False)
