"""One memory per wait: what a workload's trigger remembers between looks, and what each look writes. Pure.

The looks are the recorded status fixtures (``fixtures/status/``, what the local cluster's API
returned), in the order a wait sees them; what the trigger reads besides (a log, a verdict) is
given as it would have read it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pathways_airflow.run.annotations import (
    DISRUPTION_SEEN_ANNOTATION,
    PHASES_ANNOTATION,
    RESTARTS_ANNOTATION,
    disruption_seen,
    ended_by_annotation,
    phases_written,
    restarts_written,
)
from pathways_airflow.run.records import JOBSET_RESTART, Disruption, PhaseSeen
from pathways_airflow.run.wait_memory import (
    Readings,
    WaitMemory,
    creation_check_due,
    disruption_to_classify,
    failure_to_read,
    head_log_to_read,
    line_to_log,
    live_jobs_with,
    remembered,
    restart_held_up,
    restarts_known,
    top_of,
)
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS
from pathways_airflow.state.creation import CHECK_EVERY_SECONDS
from pathways_airflow.state.disruption import Classification, Verdict
from pathways_airflow.state.model import Observation, Phase, WorkloadState
from pathways_airflow.state.ran_on import RAN_ON_ANNOTATION
from pathways_airflow.state.status import workload_state
from pathways_airflow.triggers.workload import PathwaysJobTrigger

pytestmark = pytest.mark.pure

FIXTURES = Path(__file__).parent / "fixtures" / "status"
T0 = 1_795_000_000.0
MAINTENANCE = Classification(
    Verdict.MAINTENANCE, ("node gke-local-tpu-v5e-2x4-0-0: cloud.google.com/active-node-maintenance=ONGOING",)
)
TRAINING_LOG = ["completed step: 39, seconds: 1.204, TFLOP/s/device: 98.1", "completed step: 40, seconds: 1.198, TFLOP/s/device: 98.4"]


def look(name: str) -> tuple[Observation, WorkloadState]:
    """A recorded observation and the state the trigger computes from it."""
    fields = json.loads((FIXTURES / f"{name}.json").read_text())["observation"]
    observation = Observation(**{**fields, "pods": tuple(fields["pods"]), "jobs": tuple(fields.get("jobs") or ())})
    return observation, workload_state(observation)


def carrying(observation: Observation, notes: dict[str, str]) -> Observation:
    """The observation once the API server has merged ``notes`` into the workload's annotations."""
    top = copy.deepcopy(top_of(observation))
    assert top is not None
    top["metadata"]["annotations"] = {**(top["metadata"].get("annotations") or {}), **notes}
    return replace(observation, pathwaysjob=top) if observation.backend == "pathwaysjob" else replace(observation, jobset=top)


def last_seen_running(slices: int) -> WaitMemory:
    """The first memory of a trigger re-created while the workload ran (its ``last_state``)."""
    return WaitMemory.starting({"phase": "RUNNING", "slices_ready": slices, "slices_total": slices}, T0)


def test_a_first_look_writes_where_the_workers_run_and_a_look_with_nothing_new_writes_nothing():
    observation, state = look("running_two_slices")
    start = WaitMemory.starting(None, T0)
    assert line_to_log(start, state, T0 + 1) == "RUNNING 2/2 slices"
    first, notes = remembered(start, observation, state, T0 + 1)
    assert json.loads(notes.pop(RAN_ON_ANNOTATION)) == {
        "restart": 0,
        "since": "2026-11-22T07:40:46Z",
        "nodes": ["gke-local-tpu-v5e-2x4-0-0", "gke-local-tpu-v5e-2x4-0-1", "gke-local-tpu-v5e-2x4-1-0", "gke-local-tpu-v5e-2x4-1-1"],
    }
    assert json.loads(notes.pop(PHASES_ANNOTATION)) == [{"at": T0 + 1, "phase": "RUNNING", "slices_ready": 2, "slices_total": 2}]
    assert notes == {}
    assert first.phases == (PhaseSeen(T0 + 1, "RUNNING", 2, 2),) and first.running_since == T0 + 1
    assert (first.phase_since, first.said_at, first.where_recorded) == (T0 + 1, T0 + 1, frozenset({(0, 0, "")}))

    second, again = remembered(first, observation, state, T0 + 2)
    assert again == {}
    assert line_to_log(first, state, T0 + 2) is None
    assert second == replace(first, state=state)


def test_what_the_workload_already_carries_is_not_written_again():
    observation, state = look("running_two_slices")
    _, notes = remembered(WaitMemory.starting(None, T0), observation, state, T0 + 1)
    _, again = remembered(last_seen_running(2), carrying(observation, notes), state, T0 + 2)
    assert notes and again == {}


def test_a_jobset_restart_is_recorded_once_with_its_cause_and_the_step_its_head_reached():
    running = last_seen_running(1)
    observation, state = look("restarting_after_maintenance")
    assert restarts_known(running, observation) == () and state.restarts == 1
    assert head_log_to_read(running, observation, state) == ("bumpy-pathways-head-0-0-5m5ah", "main")
    restarting, notes = remembered(
        running, observation, state, T0 + 10, Readings(head_log=TRAINING_LOG, restart_causes=(MAINTENANCE,))
    )
    seen = Disruption(T0 + 10, "MAINTENANCE", MAINTENANCE.evidence, 40, JOBSET_RESTART)
    assert restarting.restarts == (seen,) and restarting.last_step == 40
    assert list(notes) == [PHASES_ANNOTATION, RESTARTS_ANNOTATION]  # RESTARTING is a new phase
    assert restarts_written({"metadata": {"annotations": notes}}) == [seen]

    observation, state = look("running_after_restart")
    assert head_log_to_read(restarting, observation, state) is None
    assert len(restarts_known(restarting, observation)) == state.restarts
    running_again, notes = remembered(restarting, observation, state, T0 + 20)
    assert list(notes) == [RAN_ON_ANNOTATION, PHASES_ANNOTATION] and json.loads(notes[RAN_ON_ANNOTATION])["restart"] == 1
    assert running_again.restarts == (seen,) and running_again.last_step == 40
    assert [(p.at, p.phase) for p in running_again.phases] == [(T0 + 10, "RESTARTING"), (T0 + 20, "RUNNING")]
    assert running_again.running_since == T0 + 20
    assert line_to_log(restarting, state, T0 + 20) == "RESTARTING 0/1 slices → RUNNING 1/1 slices (restarts: 1)"


def test_a_disruption_seen_is_written_at_once_and_judged_once_per_attempt():
    observation, state = look("failed_disruption_jobset_last_seen")
    start = WaitMemory.starting(None, T0)
    assert disruption_to_classify(start, observation)
    lost = Classification(Verdict.MAINTENANCE, state.evidence)
    memory, notes = remembered(start, observation, state, T0 + 1, Readings(disruption=lost))
    assert json.loads(notes[DISRUPTION_SEEN_ANNOTATION]) == {"restart": 0, "verdict": "MAINTENANCE", "evidence": list(state.evidence), "at": T0 + 1}
    assert not disruption_to_classify(memory, observation)
    assert disruption_seen(top_of(carrying(observation, notes)), 0).verdict is Verdict.MAINTENANCE

    no_disruption = Classification(Verdict.USER_ERROR, ("pod fragile-js-pathways-head-0-0-0xdqi: container main exited 1",))
    judged, notes = remembered(start, observation, state, T0 + 1, Readings(disruption=no_disruption))
    assert DISRUPTION_SEEN_ANNOTATION not in notes and not disruption_to_classify(judged, observation)


def test_the_verdict_is_written_in_the_same_write_and_never_on_a_workload_someone_else_owns():
    observation, state = look("failed_user_code_jobset")
    start = WaitMemory.starting(None, T0)
    failed = failure_to_read(start, observation)
    assert failed == ("bug-js-pathways-head-0-0-mvuj7", "main", 3)
    bug = Classification(Verdict.USER_ERROR, ("pod bug-js-pathways-head-0-0-mvuj7: container main exited 3",), 3, "main", failed[0])
    read = Readings(failure=(*failed, ["Traceback (most recent call last):", "ValueError: bad config"]), verdict=bug)
    memory, notes = remembered(start, observation, state, T0 + 1, read)
    assert {k: v for k, v in notes.items() if k != PHASES_ANNOTATION} == ended_by_annotation("USER_ERROR", bug.evidence)
    assert memory.failure == {
        "pod": "bug-js-pathways-head-0-0-mvuj7", "container": "main", "exit_code": 3,
        "log_tail": ["Traceback (most recent call last):", "ValueError: bad config"],
    }
    assert failure_to_read(memory, observation) is None

    sensor = WaitMemory.starting(None, T0, writes=False)
    watched, written = remembered(sensor, observation, state, T0 + 1, read)
    assert written == {} and replace(watched, writes=True) == memory
    assert not disruption_to_classify(sensor, observation)


def job(name: str, *, failed: int, deleting: bool = False) -> dict[str, Any]:
    """A worker Job of the ``steady`` JobSet, as the triggerer caches it (``triggers.pruning.pruned_job``)."""
    metadata: dict[str, Any] = {
        "name": name, "namespace": "default", "creationTimestamp": "2026-11-22T07:40:46Z",
        "labels": {"jobset.sigs.k8s.io/jobset-name": "steady", "jobset.sigs.k8s.io/replicatedjob-name": "worker",
                   "jobset.sigs.k8s.io/restart-attempt": "0"},
    }
    if deleting:
        metadata.update(deletionTimestamp="2026-11-22T07:52:11Z", finalizers=["foregroundDeletion"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "status": {"active": 2 - failed, "failed": failed}}


def test_child_jobs_are_remembered_as_they_were_before_their_deletion_began():
    observation, state = look("running_two_slices")
    live, lost_one = job("steady-worker-0", failed=0), job("steady-worker-0", failed=1)
    first, _ = remembered(WaitMemory.starting(None, T0), replace(observation, jobs=(live,)), state, T0 + 1)
    second, _ = remembered(first, replace(observation, jobs=(job("steady-worker-0", failed=0, deleting=True),)), state, T0 + 2)
    assert second.live_jobs == {"steady-worker-0": live}
    settled, _ = remembered(second, observation, state, T0 + 3, Readings(jobs_seen_again=(lost_one,)))
    assert settled.live_jobs == {"steady-worker-0": lost_one}
    assert live_jobs_with(settled.live_jobs, (lost_one,)) is settled.live_jobs


def test_the_events_are_read_every_few_seconds_while_the_jobset_is_missing():
    observation, state = look("provisioning_no_jobset_yet")
    memory = WaitMemory.starting(None, T0)
    assert creation_check_due(memory, observation, state, T0)
    memory, _ = remembered(memory, observation, state, T0)
    assert (memory.next_creation_check, memory.without_jobset_since) == (T0 + CHECK_EVERY_SECONDS, T0)
    assert not creation_check_due(memory, observation, state, T0 + 1)
    memory, _ = remembered(memory, observation, state, T0 + 1)
    assert (memory.next_creation_check, memory.without_jobset_since) == (T0 + CHECK_EVERY_SECONDS, T0)
    assert creation_check_due(memory, observation, state, T0 + CHECK_EVERY_SECONDS)

    running, running_state = look("running_two_slices")
    memory, _ = remembered(memory, running, running_state, T0 + 6)
    assert (memory.next_creation_check, memory.without_jobset_since) == (0.0, None)


def test_a_memory_rebuilt_from_the_serialized_trigger_behaves_as_the_one_that_lived():
    observation, state = look("restarting_after_maintenance")
    read = Readings(head_log=TRAINING_LOG, restart_causes=(MAINTENANCE,))
    lived, notes = remembered(last_seen_running(1), observation, state, T0 + 10, read)
    _, kwargs = PathwaysJobTrigger(
        name="bumpy", namespace="default", backend="pathwaysjob", target={}, last_state=lived.state.to_dict()
    ).serialize()
    rebuilt = WaitMemory.starting(json.loads(json.dumps(kwargs))["last_state"], T0 + 15)

    observation, state = look("running_after_restart")
    observation = carrying(observation, notes)
    assert restarts_known(rebuilt, observation) == restarts_known(lived, observation) == lived.restarts
    for memory in (lived, rebuilt):
        assert head_log_to_read(memory, observation, state) is None and not disruption_to_classify(memory, observation)
    assert line_to_log(rebuilt, state, T0 + 20) == line_to_log(lived, state, T0 + 20)
    (after_lived, wrote), (after_rebuilt, rewrote) = (remembered(m, observation, state, T0 + 20) for m in (lived, rebuilt))
    assert wrote == rewrote and list(wrote) == [RAN_ON_ANNOTATION, PHASES_ANNOTATION]  # the rebuilt wait goes on from the phases written
    assert after_rebuilt.restarts == after_lived.restarts and after_rebuilt.running_since == after_lived.running_since


def test_a_trigger_serialized_with_recheck_seconds_is_recreated_with_its_poll_interval():
    old = {
        "name": "train", "namespace": "default", "backend": "jobset", "target": {"kubernetes_conn_id": "kubernetes_default"},
        "deadline": None, "last_state": None, "recheck_seconds": 5.0, "until_phase": None, "delete_on_timeout": True,
        "api_outage_seconds": 1800.0,
    }
    path, kwargs = PathwaysJobTrigger(**old).serialize()
    assert kwargs == {**{k: v for k, v in old.items() if k != "recheck_seconds"}, "poll_interval": 5.0, "reads_resume": False,
                      "checkpoint_dir": None, "gcp_conn_id": "google_cloud_default"}
    assert PathwaysJobTrigger(**json.loads(json.dumps(kwargs))).serialize() == (path, kwargs)
    assert PathwaysJobTrigger(name="t", namespace="d", backend="jobset", target={}).poll_interval == POLL_INTERVAL_SECONDS["workload"]


def test_the_phases_are_written_at_each_new_phase_and_a_re_created_wait_goes_on_from_them():
    """A triggerer restart or a retry that re-attaches starts with no memory: the phases on the
    workload let it count the chip time from the submission, not from its own arrival."""
    observation, state = look("running_two_slices")
    _, notes = remembered(WaitMemory.starting(None, T0), observation, state, T0 + 1)
    carried = carrying(observation, notes)
    assert phases_written(top_of(carried)) == (PhaseSeen(T0 + 1, "RUNNING", 2, 2),)
    again, notes = remembered(last_seen_running(2), carried, state, T0 + 60)
    assert again.phases == (PhaseSeen(T0 + 1, "RUNNING", 2, 2),) and PHASES_ANNOTATION not in notes
    failed = replace(state, phase=Phase.FAILED)
    later, notes = remembered(again, carried, failed, T0 + 90)
    assert [p.phase for p in later.phases] == ["RUNNING", "FAILED"] and PHASES_ANNOTATION in notes


def test_the_head_is_read_again_at_the_verdict_for_the_steps_it_logged_through_the_grace_period():
    """The first read came as the workers' DisruptionTarget showed (step 40); the head trained on
    while they stopped, so the verdict's look reads it again and the step reached is the last logged."""
    observation, state = look("failed_disruption_last_seen")
    assert state.phase is Phase.FAILED
    provisioning = replace(last_seen_running(1), state=WorkloadState(Phase.PROVISIONING, "workers stopping"), last_step=40)
    head = head_log_to_read(provisioning, observation, state)
    assert head == ("fragile-pathways-head-0-0-gq9w2", "main")
    later = [*TRAINING_LOG, "completed step: 43, seconds: 1.201, TFLOP/s/device: 98.2"]
    failed, _ = remembered(provisioning, observation, state, T0 + 5, Readings(head_log=later))
    assert failed.last_step == 43
    assert head_log_to_read(failed, observation, state) is None, "read once per phase"


# --- elastic slices: a slice loss the program rides out -------------------------------------------


def elastic_looks() -> tuple[Observation, Observation, Observation]:
    """The recorded elastic PathwaysJob (3 slices, ``elasticSlices: 1``) with all three slices
    running; then slice 1's pods disrupted by maintenance (``DisruptionTarget``, ``Failed``) and
    their replacements pending; then the replacements running."""
    base, _ = look("running_elastic_two_of_three")
    pods = [copy.deepcopy(p) for p in base.pods]
    ready = next(p for p in pods if p["metadata"]["name"].startswith("elastic-worker-0-0"))
    for pod in pods:
        if pod["metadata"]["name"].startswith("elastic-worker-2"):
            pod["status"] = copy.deepcopy(ready["status"])
    all_running = replace(base, pods=tuple(pods))

    lost = [copy.deepcopy(p) for p in pods]
    replacements = []
    for pod in lost:
        if pod["metadata"]["name"].startswith("elastic-worker-1"):
            pod["status"]["phase"] = "Failed"
            pod["status"]["conditions"] = [
                *[c for c in pod["status"]["conditions"] if c["type"] != "Ready"],
                {"type": "Ready", "status": "False"},
                {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "message": "Pod was terminated in response to imminent node shutdown."},
            ]
            again = copy.deepcopy(pod)
            again["metadata"]["name"] = pod["metadata"]["name"][:-5] + "again"
            again["metadata"]["uid"] = pod["metadata"]["uid"][:-5] + "again"
            again["status"] = {"phase": "Pending"}
            replacements.append(again)
    slice_lost = replace(base, pods=(*lost, *replacements))
    back = [copy.deepcopy(p) for p in (*lost, *replacements)]
    for pod in back:
        if pod["metadata"]["name"].endswith("again"):
            pod["status"] = copy.deepcopy(ready["status"])
    return all_running, slice_lost, replace(base, pods=tuple(back))


def test_a_slice_loss_an_elastic_workload_rides_out_is_recorded_once_its_slices_run_again():
    from pathways_airflow.run.annotations import RECOVERED_ANNOTATION
    from pathways_airflow.run.records import PROGRAM_RECOVERY
    from pathways_airflow.run.wait_memory import in_place, recovered_known

    all_running, slice_lost, back = elastic_looks()
    memory, _ = remembered(last_seen_running(3), all_running, workload_state(all_running), T0)
    assert not disruption_to_classify(memory, all_running)

    state = workload_state(slice_lost)
    assert state.phase is Phase.RUNNING and state.slices_ready == 2  # elasticSlices 1: it runs on
    assert disruption_to_classify(memory, slice_lost)
    memory, notes = remembered(memory, slice_lost, state, T0 + 10, Readings(disruption=MAINTENANCE, head_log=TRAINING_LOG))
    assert memory.recovering is not None and memory.recovering.handled_by == PROGRAM_RECOVERY and memory.recovered == ()
    assert memory.recovering.reached_step == 40 and RECOVERED_ANNOTATION not in notes
    # the same loss seen again is not judged again
    assert not disruption_to_classify(memory, slice_lost)

    memory, notes = remembered(memory, back, workload_state(back), T0 + 70)
    [ridden] = memory.recovered
    assert memory.recovering is None
    assert (ridden.kind, ridden.handled_by, ridden.seconds_lost, ridden.resubmitted) == ("MAINTENANCE", PROGRAM_RECOVERY, 60.0, False)
    assert ridden.to_dict()["seconds_lost"] == 60.0 and in_place(memory) == (ridden,)
    # written on the workload: a trigger re-created later reads it back
    again = WaitMemory.starting(None, T0 + 80)
    assert recovered_known(again, carrying(back, notes)) == (replace(ridden, evidence=ridden.evidence[:2]),)


def test_a_slice_loss_that_ends_the_elastic_workload_is_not_recorded_as_ridden_out():
    all_running, slice_lost, _ = elastic_looks()
    memory, _ = remembered(last_seen_running(3), all_running, workload_state(all_running), T0)
    memory, _ = remembered(memory, slice_lost, workload_state(slice_lost), T0 + 10, Readings(disruption=MAINTENANCE))
    assert memory.recovering is not None
    # the head failed after all (the program could not ride it out): the verdict on the failure tells it
    memory, _ = remembered(memory, slice_lost, WorkloadState(Phase.FAILED, message="jobset failed"), T0 + 40)
    assert memory.recovering is None and memory.recovered == ()


def test_without_elastic_slices_a_disruption_is_judged_once_per_attempt_as_before():
    observation, state = look("running_two_slices")
    pods = [copy.deepcopy(p) for p in observation.pods]
    worker = next(p for p in pods if "-worker-" in p["metadata"]["name"])
    worker["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"})
    disrupted = replace(observation, pods=tuple(pods))
    memory, _ = remembered(last_seen_running(2), disrupted, state, T0, Readings(disruption=MAINTENANCE))
    assert memory.recovering is None and memory.lost_pods_seen == frozenset()
    assert not disruption_to_classify(memory, disrupted)


def test_a_run_after_a_resubmission_reads_where_its_program_resumed_until_it_says_then_never_again():
    from pathways_airflow.run.wait_memory import RESUME_READ_EVERY_SECONDS, resume_log_to_read

    observation, state = look("running_two_slices")
    memory = WaitMemory.starting(None, T0, reads_resume=True)
    head = resume_log_to_read(memory, observation, T0)
    assert head is not None and "pathways-head" in head[0] and head[1] == "main"
    # Not said yet (still printing its configuration): asked again only after a while.
    memory, _ = remembered(memory, observation, state, T0, Readings(resume_log=["checkpoint manager exists so trying to load this run's existing checkpoint"]))
    assert memory.resumed_from is None and resume_log_to_read(memory, observation, T0 + 1) is None
    assert resume_log_to_read(memory, observation, T0 + RESUME_READ_EVERY_SECONDS) == head
    memory, _ = remembered(memory, observation, state, T0 + 10, Readings(resume_log=["restoring from this run's directory step 24"]))
    assert memory.resumed_from == 24 and resume_log_to_read(memory, observation, T0 + 60) is None
    # A run nobody resubmitted, and a head not started yet, are not read.
    assert resume_log_to_read(WaitMemory.starting(None, T0), observation, T0) is None
    queued, _ = look("queued_waiting_for_quota")
    assert resume_log_to_read(WaitMemory.starting(None, T0, reads_resume=True), queued, T0) is None


def test_where_the_program_resumed_is_written_once_and_a_re_created_wait_never_reads_a_later_head():
    """Chaos 1040129: a triggerer restart after the first wait read "restored step 3"; a Kueue
    eviction later re-admitted the run, whose new head restored step 18. The re-created wait read
    that as where the resubmission resumed; step 18's commit was younger than the resubmission."""
    from pathways_airflow.run.annotations import RESUMED_FROM_ANNOTATION
    from pathways_airflow.run.wait_memory import resume_log_to_read

    observation, state = look("running_two_slices")
    _, notes = remembered(WaitMemory.starting(None, T0, reads_resume=True), observation, state, T0,
                          Readings(resume_log=["restoring from this run's directory step 3"]))
    assert notes[RESUMED_FROM_ANNOTATION] == "3"
    top = copy.deepcopy(observation.pathwaysjob)
    top["metadata"].setdefault("annotations", {})[RESUMED_FROM_ANNOTATION] = "3"
    written = replace(observation, pathwaysjob=top)
    again = WaitMemory.starting(None, T0 + 60, reads_resume=True)  # the re-created wait
    assert resume_log_to_read(again, written, T0 + 60) is None
    again, notes = remembered(again, written, state, T0 + 60)
    assert again.resumed_from == 3 and RESUMED_FROM_ANNOTATION not in notes
    # Nor does a wait that never read it read the head of an in-place restart: it restores anew.
    jobset = copy.deepcopy(observation.jobset)
    jobset["status"]["restarts"] = 1
    restarted = replace(observation, jobset=jobset)
    assert resume_log_to_read(WaitMemory.starting(None, T0, reads_resume=True), restarted, T0) is None


def test_the_trigger_of_a_resubmitted_run_keeps_asking_for_the_resume_step_after_a_triggerer_restart():
    trigger = PathwaysJobTrigger(name="t-a1", namespace="default", backend="pathwaysjob", target={}, reads_resume=True)
    _, kwargs = trigger.serialize()
    assert PathwaysJobTrigger(**json.loads(json.dumps(kwargs))).reads_resume is True
    older = {k: v for k, v in kwargs.items() if k != "reads_resume"}  # serialized before the argument existed
    assert PathwaysJobTrigger(**older).reads_resume is False


def test_a_slice_loss_the_program_rode_out_explains_no_later_failure_of_the_same_attempt():
    """With elastic slices a loss is seen (and written) during the attempt; once the program has
    ridden it out, a later exit of the program is judged on its own: the seen loss, and the nodes
    the slice ran on before it, are no evidence for it. A loss seen after the recovery still is."""
    from pathways_airflow.run.annotations import RECOVERED_ANNOTATION, disruption_seen_annotation, restarts_annotation
    from pathways_airflow.run.records import PROGRAM_RECOVERY

    observation, _ = look("running_elastic_two_of_three")
    lost = Classification(Verdict.SLICE_FAILURE, ("pod w-1-0: DisruptionTarget (DeletionByPodGC)",))
    ridden = Disruption(T0 + 5, "SLICE_FAILURE", lost.evidence, 12, PROGRAM_RECOVERY, seconds_lost=30.0)
    seen_then = {**disruption_seen_annotation(0, lost, T0 + 5), **restarts_annotation([ridden], RECOVERED_ANNOTATION)}
    assert disruption_seen(top_of(carrying(observation, seen_then)), None) is None
    before_the_times = {**disruption_seen_annotation(0, lost), **restarts_annotation([ridden], RECOVERED_ANNOTATION)}
    assert disruption_seen(top_of(carrying(observation, before_the_times)), None) is None
    seen_since = {**disruption_seen_annotation(0, lost, T0 + 60), **restarts_annotation([ridden], RECOVERED_ANNOTATION)}
    assert disruption_seen(top_of(carrying(observation, seen_since)), None).verdict is Verdict.SLICE_FAILURE
    assert disruption_seen(top_of(carrying(observation, disruption_seen_annotation(0, lost, T0 + 5))), None).verdict is Verdict.SLICE_FAILURE


def test_a_restart_held_up_by_the_collector_is_timed_from_the_first_look_that_saw_it():
    """The margin runs from the look that first saw the last attempt's Jobs waiting on unmarked
    pods, not from the cluster's timestamps (another clock); once nothing holds them, the memory
    forgets it; a sensor's wait never acts."""
    from pathways_airflow.state.reclaim import COLLECTOR_MARGIN_SECONDS

    running, _ = look("running_two_slices")
    owners = sorted({(r["uid"], r["name"]) for p in running.pods for r in p["metadata"]["ownerReferences"]})
    jobs = tuple({"metadata": {"name": n, "uid": u, "finalizers": ["foregroundDeletion"], "deletionTimestamp": "2026-11-22T07:41:30Z"}} for u, n in owners)
    held = replace(running, jobs=jobs)
    memory, first = restart_held_up(WaitMemory.starting(None, T0), held, T0 + 100)
    assert memory.collector_late_since == T0 + 100 and not first.to_delete
    memory, soon = restart_held_up(memory, held, T0 + 100 + COLLECTOR_MARGIN_SECONDS / 2)
    assert memory.collector_late_since == T0 + 100 and not soon.to_delete
    memory, late = restart_held_up(memory, held, T0 + 100 + COLLECTOR_MARGIN_SECONDS)
    assert late.to_delete and len(late.jobs) == 3 and len(late.pods) == len(running.pods)
    memory, after = restart_held_up(memory, running, T0 + 200)
    assert memory.collector_late_since is None and not after.to_delete
    watching = WaitMemory.starting(None, T0, writes=False)
    for now in (T0, T0 + 3600):
        watching, nothing = restart_held_up(watching, held, now)
        assert watching.collector_late_since is None and not nothing.to_delete


def test_a_wait_re_created_after_a_ridden_out_loss_reads_its_worker_jobs_failures_as_history():
    """The loss happened before this wait (a triggerer restart); its lost pods are gone and nothing
    recorded it, but the slice's worker Job still counts them as failed. Seen while every slice
    runs again, that count is history: a later exit of the head is judged on what fails since."""
    from pathways_airflow.state.disruption import failures_since, lost_workers

    _, _, back = elastic_looks()
    running = replace(back, pods=tuple(p for p in back.pods if p["status"].get("phase") != "Failed"))
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": "worker", "jobset.sigs.k8s.io/restart-attempt": "0"}
    jobs = tuple(
        {"metadata": {"name": f"elastic-worker-{i}", "uid": f"uid-{i}", "labels": labels}, "status": {"failed": 2 if i == 1 else 0, "active": 2}}
        for i in range(3)
    )
    seen = replace(running, jobs=jobs)
    state = workload_state(seen)
    assert state.phase is Phase.RUNNING and state.slices_ready == 3
    assert lost_workers(jobs, seen.pods, "worker"), "the count alone reads as lost workers"
    memory, _ = remembered(WaitMemory.starting(None, T0), seen, state, T0)
    assert memory.failures_ridden_out == {"uid-1": 2}
    assert not lost_workers(failures_since(jobs, memory.failures_ridden_out), seen.pods, "worker")
    once_more = ({**jobs[1], "status": {"failed": 3, "active": 1}},)
    assert lost_workers(failures_since(once_more, memory.failures_ridden_out), seen.pods, "worker"), "a failure since still tells"
    restarted = ({**jobs[1], "metadata": {**jobs[1]["metadata"], "uid": "uid-1-next"}},)
    assert lost_workers(failures_since(restarted, memory.failures_ridden_out), seen.pods, "worker"), "a restart's Job of the same name is new"
    # without elastic slices a failure fails the attempt: nothing is history
    plain, plain_state = look("running_two_slices")
    memory, _ = remembered(WaitMemory.starting(None, T0), replace(plain, jobs=jobs), plain_state, T0)
    assert memory.failures_ridden_out == {}


def worker_jobs(*failed: int) -> tuple[dict[str, Any], ...]:
    """The elastic workload's worker Jobs of restart attempt 0, each with its ``status.failed``."""
    labels = {"jobset.sigs.k8s.io/replicatedjob-name": "worker", "jobset.sigs.k8s.io/restart-attempt": "0"}
    return tuple({"metadata": {"name": f"elastic-worker-{i}", "uid": f"uid-{i}", "labels": labels}, "status": {"failed": n, "active": 2}}
                 for i, n in enumerate(failed))


def test_slice_losses_no_look_saw_are_recorded_from_what_the_worker_jobs_count():
    """An outage's relist or a triggerer restart hid two losses: the lost pods are gone and nothing
    recorded them, but the worker Jobs count their pods (seeds 960112, 960280). Seen while every
    slice runs again, each loss the counts hold beyond those recorded is recorded once, as the
    program's, of a kind no one saw; a loss already recorded is not counted again."""
    from pathways_airflow.run.annotations import RECOVERED_ANNOTATION
    from pathways_airflow.run.records import PROGRAM_RECOVERY
    from pathways_airflow.state.disruption import slice_losses_counted
    from pathways_airflow.state.workload_parts import pods_per_slice

    _, _, back = elastic_looks()
    running = replace(back, pods=tuple(p for p in back.pods if p["status"].get("phase") != "Failed"))
    per_slice = pods_per_slice(running.jobset)
    # slice 1 lost twice, slice 0 once (one of its pods counted so far)
    seen = replace(running, jobs=worker_jobs(1, 2 * per_slice, 0))
    assert slice_losses_counted(seen.jobs, seen.jobset) == 3
    memory, notes = remembered(WaitMemory.starting(None, T0), seen, workload_state(seen), T0, Readings(head_log=TRAINING_LOG))
    assert [(r.kind, r.handled_by, r.reached_step, r.seconds_lost) for r in memory.recovered] == [("UNKNOWN_INFRA", PROGRAM_RECOVERY, 40, 0.0)] * 3
    assert "3 slice loss(es) more than any look saw" in memory.recovered[0].evidence[0] and RECOVERED_ANNOTATION in notes
    memory, notes = remembered(memory, seen, workload_state(seen), T0 + 10)
    assert len(memory.recovered) == 3 and RECOVERED_ANNOTATION not in notes, "recorded once"
    # a re-created wait reads them back and counts nothing new
    again, _ = remembered(WaitMemory.starting(None, T0 + 20), carrying(seen, notes), workload_state(seen), T0 + 20)
    assert len(again.recovered) == 3


def test_a_success_records_every_slice_loss_it_had_as_ridden_out():
    """The first look after a triggerer restart finds the workload succeeded, the lost pods beside
    their replacements and the worker Job counting them as it is deleted (seed 970367); a loss a
    wait was recovering from when the workload succeeded is ridden out too."""
    from pathways_airflow.run.records import PROGRAM_RECOVERY

    all_running, slice_lost, back = elastic_looks()
    jobset = copy.deepcopy(back.jobset)
    jobset["status"]["conditions"] = [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed successfully"}]
    jobs = tuple({**j, "metadata": {**j["metadata"], "deletionTimestamp": "deleted"}} for j in worker_jobs(0, 2, 0))
    ended = replace(back, jobset=jobset, jobs=jobs)
    state = workload_state(ended)
    assert state.phase is Phase.SUCCEEDED
    memory, _ = remembered(WaitMemory.starting(None, T0), ended, state, T0)
    assert [(r.kind, r.handled_by) for r in memory.recovered] == [("UNKNOWN_INFRA", PROGRAM_RECOVERY)]
    memory, _ = remembered(last_seen_running(3), all_running, workload_state(all_running), T0)
    memory, _ = remembered(memory, slice_lost, workload_state(slice_lost), T0 + 10, Readings(disruption=MAINTENANCE))
    memory, _ = remembered(memory, ended, state, T0 + 40)
    assert [(r.kind, r.seconds_lost) for r in memory.recovered] == [("MAINTENANCE", 30.0)], "recorded once, not counted again"


def test_a_slice_loss_a_wait_saw_is_not_counted_again_when_the_worker_job_counts_it_late():
    """The Job controller counts the lost pods after the wait recorded the loss: still one loss."""
    all_running, slice_lost, back = elastic_looks()
    memory, _ = remembered(last_seen_running(3), all_running, workload_state(all_running), T0)
    memory, _ = remembered(memory, slice_lost, workload_state(slice_lost), T0 + 10, Readings(disruption=MAINTENANCE))
    memory, _ = remembered(memory, replace(back, jobs=worker_jobs(0, 0, 0)), workload_state(back), T0 + 70)
    assert len(memory.recovered) == 1
    counted = replace(back, jobs=worker_jobs(0, 2, 0))
    memory, notes = remembered(memory, counted, workload_state(counted), T0 + 80)
    assert [r.kind for r in memory.recovered] == ["MAINTENANCE"] and not notes


def test_a_loss_an_earlier_wait_recorded_but_never_saw_ridden_out_is_recorded_once_by_the_next():
    from pathways_airflow.run.annotations import RECOVERED_ANNOTATION, disruption_seen, disruption_seen_annotation

    _, _, back = elastic_looks()
    recorded = carrying(back, disruption_seen_annotation(0, MAINTENANCE, T0 + 5))
    memory, notes = remembered(WaitMemory.starting(None, T0 + 60), recorded, workload_state(recorded), T0 + 60)
    [ridden] = memory.recovered
    assert (ridden.time, ridden.kind, ridden.resubmitted) == (T0 + 5, "MAINTENANCE", False) and RECOVERED_ANNOTATION in notes
    assert disruption_seen(top_of(recorded), 0, [r.time for r in memory.recovered]) is None, "no longer why it may stop later"
    memory, notes = remembered(memory, carrying(recorded, notes), workload_state(recorded), T0 + 70)
    assert len(memory.recovered) == 1 and RECOVERED_ANNOTATION not in notes


def test_a_wait_re_created_after_a_ridden_out_loss_does_not_judge_the_replaced_pods_again():
    """Its lost pods linger beside the running replacements: for a wait that did not see the loss
    they are history, not a second loss to record (seed 930018 recorded one loss twice)."""
    _, slice_lost, back = elastic_looks()
    fresh = WaitMemory.starting(None, T0 + 80)
    assert not disruption_to_classify(fresh, back)
    memory, notes = remembered(fresh, back, workload_state(back), T0 + 80)
    assert memory.recovered == () and memory.recovering is None and not notes.get("pathways-airflow/disruption-seen")
    assert disruption_to_classify(fresh, slice_lost), "while the replacements are not running yet, the loss is news"


def test_where_the_workers_run_is_written_again_after_kueue_admits_the_workload_again():
    """An eviction and re-admission keeps the restart attempt; the pods run elsewhere since."""
    observation, state = look("running_two_slices")
    admitted = {"status": {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-22T07:41:00Z"}]}}
    first, notes = remembered(WaitMemory.starting(None, T0), replace(observation, kueue_workload=admitted), state, T0)
    assert RAN_ON_ANNOTATION in notes
    same, notes = remembered(first, replace(observation, kueue_workload=admitted), state, T0 + 1)
    assert RAN_ON_ANNOTATION not in notes and same.where_recorded == first.where_recorded
    again = {"status": {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": "2026-11-22T07:50:00Z"}]}}
    moved, _ = remembered(same, replace(observation, kueue_workload=again), state, T0 + 2)
    assert len(moved.where_recorded) == 2, "the placement after the re-admission is written too"


def test_a_wait_looks_again_by_the_clock_only_when_a_look_is_due():
    from pathways_airflow.run.messages import STUCK_LOG_EVERY_SECONDS
    from pathways_airflow.run.wait_memory import HELD_RESTART_RETRY_SECONDS, look_again_within
    from pathways_airflow.state import creation, reclaim
    from pathways_airflow.state.model import Phase, WorkloadState

    now, recheck = 10_000.0, 300.0
    running, queued, provisioning = (WorkloadState(p) for p in (Phase.RUNNING, Phase.QUEUED, Phase.PROVISIONING))
    quiet = WaitMemory(said_at=now)
    assert look_again_within(quiet, running, now, recheck) == recheck, "a running workload: the watches say when"
    assert look_again_within(quiet, provisioning, now, recheck) == min(recheck, STUCK_LOG_EVERY_SECONDS)
    assert look_again_within(replace(quiet, said_at=now - 290), provisioning, now, recheck) == pytest.approx(10.0), "the next 'still ...' line"
    assert look_again_within(replace(quiet, said_at=now - 900), provisioning, now, recheck) == 0.0
    assert look_again_within(replace(quiet, next_queue_check=now + 12), queued, now, recheck) == pytest.approx(12.0)
    assert look_again_within(replace(quiet, next_queue_check=now + 12), running, now, recheck) == recheck, "admitted meanwhile"
    assert look_again_within(replace(quiet, next_creation_check=now + 1), running, now, recheck) == creation.CHECK_EVERY_SECONDS
    late = replace(quiet, collector_late_since=now - 2)
    assert look_again_within(late, running, now, recheck) == pytest.approx(reclaim.COLLECTOR_MARGIN_SECONDS - 2)
    assert look_again_within(replace(quiet, collector_late_since=now - 60), running, now, recheck) == HELD_RESTART_RETRY_SECONDS
    assert look_again_within(quiet, running, now, 0.5) == 0.5, "never later than the recheck (or the task's deadline) asks"
