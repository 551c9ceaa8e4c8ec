"""Chip-hours, the goodput split and the timeline of a task's workloads, from the times its waits saw."""

from __future__ import annotations

import pytest

from pathways_airflow.run.goodput import goodput_of
from pathways_airflow.state.model import Phase, WorkloadState
from pathways_airflow.run.records import JOBSET_RESTART, Disruption, PhaseSeen, Submission, WorkloadRun
from pathways_airflow.run.result import workload_result
from pathways_airflow.run.timeline import MAX_PHASES, phases_with, timeline_of
from pathways_airflow.run.timeline import duration

pytestmark = [pytest.mark.unit, pytest.mark.pure]

# Two v5e 4x4 slices (32 chips); maintenance ends the first workload at step 120 with step 100
# committed, the second resumes from it and succeeds. Times as the trigger and operator saw them.
MAINTENANCE = Disruption(
    time=1078.0,
    kind="MAINTENANCE",
    evidence=("node gke-tpu-a1: cloud.google.com/active-node-maintenance=ONGOING", "pod train-x-0-worker-0-1: DisruptionTarget"),
    workload="train-x-0",
    reached_step=120,
    resumed_from_step=100,
    steps_recomputed=20,
    seconds_lost=10.4,  # as run.outcome.disruption_of records it: 63 s since it ran × 20 / 121 steps
)
FIRST = WorkloadRun(
    "train-x-0",
    submitted=1000.0,
    phases=(
        PhaseSeen(1000.4, "QUEUED"),
        PhaseSeen(1003.0, "PROVISIONING", 0, 2),
        PhaseSeen(1010.0, "PROVISIONING", 1, 2),
        PhaseSeen(1015.0, "RUNNING", 2, 2),
        PhaseSeen(1075.0, "FAILED"),
    ),
    ended=1078.0,
    deleted=1080.0,
)
SECOND = WorkloadRun(
    "train-x-1",
    submitted=1081.0,
    phases=(PhaseSeen(1081.3, "QUEUED"), PhaseSeen(1084.0, "PROVISIONING", 0, 2), PhaseSeen(1092.0, "RUNNING", 2, 2), PhaseSeen(1192.0, "SUCCEEDED")),
    ended=1193.0,
    deleted=1195.0,
)


def test_one_maintenance_splits_the_held_time_into_parts_that_add_up():
    split = goodput_of([FIRST, SECOND], [MAINTENANCE], chips=32, now=2000.0)
    assert split.queued == pytest.approx(3.0 + 3.0)  # submission → admission, twice: no chips held
    assert split.provisioning == pytest.approx(12.0)  # admitted → running on both slices, first workload only
    assert split.detection == pytest.approx(3.0)  # FAILED seen → the verdict reached the task
    assert split.restart == pytest.approx(2.0 + 8.0)  # deleting the disrupted workload + the next one's provisioning
    assert split.recomputed == pytest.approx(10.4)  # what the disruption's record says its 20 recomputed steps cost
    assert split.productive == pytest.approx(60.0 - 10.4 + 100.0)
    assert split.cleanup == pytest.approx(1.0 + 2.0)
    # Held = admission → deletion of each workload; every part is in it once.
    assert split.held == pytest.approx((1080.0 - 1003.0) + (1195.0 - 1084.0))
    assert split.held == pytest.approx(split.provisioning + split.productive + split.lost + split.cleanup)
    assert split.chip_hours == pytest.approx(32 * 188.0 / 3600)
    assert split.goodput == pytest.approx(split.productive / 188.0)
    reported = split.to_dict()
    assert reported["lost"] == {"detection_seconds": 3.0, "restart_seconds": 10.0, "recomputed_seconds": 10.4}
    assert (reported["held_seconds"], reported["chips"], reported["goodput"]) == (188.0, 32, 0.7957)
    assert split.summary() == (
        "goodput 80% of 1.67 chip-hours (32 chips held 3 min 08 s): productive 2 min 30 s, provisioning 12 s, "
        "lost 23 s to 1 disruption (detection 3.0 s, restart 10 s, recomputed 10 s), cleanup 3.0 s; queued 6.0 s unheld"
    )


def test_a_run_that_never_committed_a_checkpoint_lost_all_it_ran():
    lost_everything = Disruption(
        1078.0, "MAINTENANCE", workload="train-x-0", reached_step=120, resumed_from_step=None, steps_recomputed=121, seconds_lost=63.0
    )
    split = goodput_of([FIRST, SECOND], [lost_everything], chips=32, now=2000.0)
    assert split.recomputed == pytest.approx(60.0)
    assert split.productive == pytest.approx(100.0)


def test_an_in_place_restart_is_restart_time_and_a_requeue_holds_no_chips():
    restarted = WorkloadRun(
        "train-x-0",
        submitted=0.0,
        phases=(
            PhaseSeen(0.2, "PROVISIONING", 0, 1),
            PhaseSeen(4.0, "RUNNING", 1, 1),
            PhaseSeen(40.0, "RESTARTING", 0, 1),
            PhaseSeen(52.0, "QUEUED"),  # Kueue evicted it: back in the queue, pods gone
            PhaseSeen(60.0, "PROVISIONING", 0, 1),
            PhaseSeen(63.0, "RUNNING", 1, 1),
            PhaseSeen(100.0, "SUCCEEDED"),
        ),
        ended=100.5,
        deleted=101.0,
    )
    restart = Disruption(41.0, "PREEMPTION", ("pod p: Preempting",), 30, JOBSET_RESTART)
    split = goodput_of([restarted], [restart], chips=4, now=200.0)
    assert (split.provisioning, split.restart, split.queued) == pytest.approx((4.0, 12.0 + 3.0, 8.0))
    assert split.productive == pytest.approx(36.0 + 37.0)
    assert split.cleanup == pytest.approx(1.0)
    assert split.held == pytest.approx(101.0 - 8.0)
    assert split.disruptions == 1


def test_a_workload_never_admitted_held_nothing():
    waiting = WorkloadRun("train-x-0", submitted=0.0, phases=(PhaseSeen(0.5, "QUEUED"),), ended=300.0, deleted=301.0)
    split = goodput_of([waiting], [], chips=16, now=400.0)
    assert (split.held, split.goodput, split.queued) == (0.0, None, 301.0)  # queued until deleted
    assert split.summary().startswith("goodput n/a (never admitted)")


def test_a_wait_re_created_mid_run_counts_from_its_first_look():
    # A triggerer restart: the new trigger's first look already saw RUNNING.
    late = WorkloadRun("train-x-0", submitted=0.0, phases=(PhaseSeen(500.0, "RUNNING", 1, 1), PhaseSeen(900.0, "SUCCEEDED")), ended=900.0, deleted=905.0)
    split = goodput_of([late], [], chips=8, now=1000.0)
    assert (split.productive, split.cleanup, split.held) == pytest.approx((900.0, 5.0, 905.0))


def test_phases_are_noted_when_they_change_and_stay_bounded():
    seen: tuple[PhaseSeen, ...] = ()
    for at, state in enumerate([WorkloadState(Phase.QUEUED), WorkloadState(Phase.QUEUED), WorkloadState(Phase.PROVISIONING, slices_total=2)]):
        seen = phases_with(seen, state, float(at))
    seen = phases_with(seen, WorkloadState(Phase.PROVISIONING, slices_ready=1, slices_total=2), 3.0)
    assert [(p.at, p.phase, p.slices_ready) for p in seen] == [(0.0, "QUEUED", 0), (2.0, "PROVISIONING", 0), (3.0, "PROVISIONING", 1)]
    for at in range(4, 400):
        seen = phases_with(seen, WorkloadState(Phase.RUNNING if at % 2 else Phase.RESTARTING, slices_total=2), float(at))
    assert len(seen) == MAX_PHASES and seen[0].at == 0.0 and seen[-1].at == 399.0


def test_the_timeline_lists_workloads_phases_and_disruptions_with_their_evidence_in_order():
    entries = timeline_of([FIRST, SECOND], [MAINTENANCE])
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    kinds = [(e["workload"], e["kind"]) for e in entries]
    assert kinds[:6] == [("train-x-0", "submitted"), ("train-x-0", "queued"), ("train-x-0", "provisioning"), ("train-x-0", "provisioning"), ("train-x-0", "running"), ("train-x-0", "failed")]
    (disruption,) = [e for e in entries if e["kind"] == "disruption"]
    assert disruption["label"] == "maintenance: resubmitted (step 120 reached, resumed from step 100)"
    assert disruption["evidence"][0].startswith("node gke-tpu-a1: cloud.google.com/active-node-maintenance")
    assert [e["label"] for e in entries if e["kind"] == "running"] == ["RUNNING 2/2 slices", "RUNNING 2/2 slices"]
    assert [(e["slices_ready"], e["slices_total"]) for e in entries if e["kind"] in ("provisioning", "running")][:3] == [(0, 2), (1, 2), (2, 2)]
    assert "slices_total" not in next(e for e in entries if e["kind"] == "failed")
    assert [e["at"] for e in entries if e["kind"] == "deleted"] == [1080.0, 1195.0]
    assert entries[-1]["kind"] == "deleted" and entries[-2]["kind"] == "succeeded"


def test_the_result_of_a_task_with_one_maintenance_carries_its_timeline_and_goodput():
    record = Submission("train-x-1", "ml", "pathwaysjob", attempt=1, started=1000.0, disruptions=(MAINTENANCE,), runs=(FIRST, SECOND))
    tpu = {"machine_type": "ct5lp-hightpu-4t", "topology": "4x4", "slices": 2, "chips": 32}
    result = workload_result(record, WorkloadState(Phase.SUCCEEDED), checkpoint={"step": 200, "uri": "gs://b/ckpt/200"}, tpu=tpu, uid="5f0c", now=1195.5)
    assert result["goodput"]["held_seconds"] == 188.0 and result["goodput_summary"].startswith("goodput 80%")
    assert result["checkpoint"] == {"step": 200, "uri": "gs://b/ckpt/200"}
    assert [e["kind"] for e in result["timeline"]].count("disruption") == 1
    assert result["disruption_summary"].startswith("1 disruption (1 maintenance): 20 steps recomputed")
    # One definition of time lost: the summary says what goodput counts (detection, restart, recomputed).
    lost = duration(result["goodput"]["lost_seconds"])
    assert result["disruption_summary"].endswith(f", {lost} lost") and f"lost {lost} to 1 disruption" in result["goodput_summary"]
    assert (result["uid"], result["tpu"]) == ("5f0c", tpu)
    assert "checkpoint" not in workload_result(record, WorkloadState(Phase.SUCCEEDED), tpu=tpu, now=1195.5)
    # JobSet's count of executions (KEP-1282) only where the cluster keeps one
    assert "execution_attempts" not in result
    assert workload_result(record, WorkloadState(Phase.SUCCEEDED, execution_attempts=1), tpu=tpu, now=1195.5)["execution_attempts"] == 1
    # A success a retry found was judged without a look at the JobSet: the count is read off it then.
    from pathways_airflow.run.result import counted_state
    from pathways_airflow.state.model import Observation

    reused = WorkloadState(Phase.SUCCEEDED, "succeeded in an earlier try")
    counting = Observation("jobset", "w", "default", None, {"metadata": {"name": "w"}, "status": {"restarts": 1, "executionAttempts": 2}}, ())
    assert counted_state(reused, counting).execution_attempts == 2
    assert counted_state(WorkloadState(Phase.SUCCEEDED, execution_attempts=3), counting).execution_attempts == 3
    assert counted_state(reused, Observation("jobset", "w", "default", None, {"metadata": {"name": "w"}, "status": {}}, ())).execution_attempts is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.42, "0.4 s"), (41.84, "42 s"), (192, "3 min 12 s"), (7380, "2 h 03 min"), (None, "–"), (float("inf"), "–")]
)
def test_durations_read_as_a_person_says_them(seconds, text):
    assert duration(seconds) == text


SEEN_BY_THE_FIRST_TRY = (
    PhaseSeen(1000.0, "QUEUED", 0, 2), PhaseSeen(1005.0, "PROVISIONING", 0, 2),
    PhaseSeen(1010.0, "RUNNING", 2, 2), PhaseSeen(1200.0, "SUCCEEDED", 0, 2),
)


def test_a_retry_that_re_attached_counts_the_chip_time_from_the_submission():
    """The first try's wait wrote the phases on the workload; the retry arrived at 1100 and waited for the end."""
    record = Submission("train-x", "ml", "pathwaysjob", started=1100.0).ended(SEEN_BY_THE_FIRST_TRY, at=1201.0).deleted(1203.0)
    goodput = goodput_of(record.runs, (), chips=16, now=1203.0)
    assert (goodput.provisioning, goodput.productive, goodput.cleanup) == (5.0, 190.0, 3.0)
    assert goodput.held == 198.0 and goodput.goodput == pytest.approx(190 / 198)


def test_a_success_a_retry_reuses_counts_its_own_time_not_the_retrys():
    """Found an hour after it finished: its slices were free since, and the chip time ends there."""
    record = Submission("train-x", "ml", "pathwaysjob", started=4800.0).found_finished(SEEN_BY_THE_FIRST_TRY)
    record = record.deleted(4801.0)  # the task's own delete does not move the end it already has
    goodput = goodput_of(record.runs, (), chips=16, now=4801.0)
    assert (goodput.provisioning, goodput.productive, goodput.cleanup) == (5.0, 190.0, 0.0)
    assert goodput.chip_hours == pytest.approx(16 * 195 / 3600)


def test_a_success_a_retry_reuses_reports_what_its_waits_wrote_of_the_disruptions_it_got_through():
    """The try that saw a slice loss ridden out ended before it could record it (a worker crash):
    the retry finds the workload ended and takes the loss from its notes, once (seed 960335)."""
    from pathways_airflow.run.annotations import RECOVERED_ANNOTATION, in_place_written, restarts_annotation
    from pathways_airflow.run.records import JOBSET_RESTART, PROGRAM_RECOVERY

    ridden = Disruption(1120.0, "MAINTENANCE", ("pod train-x-worker-1-0: DisruptionTarget",), 150, PROGRAM_RECOVERY, seconds_lost=30.0)
    restart = Disruption(1110.0, "SLICE_FAILURE", ("pod train-x-worker-0-0: DisruptionTarget",), 140, JOBSET_RESTART)
    workload = {"metadata": {"annotations": {**restarts_annotation([restart]), **restarts_annotation([ridden], RECOVERED_ANNOTATION)}}}
    assert in_place_written(workload) == (restart, ridden)
    record = Submission("train-x", "ml", "pathwaysjob", started=4800.0).found_finished(SEEN_BY_THE_FIRST_TRY, in_place_written(workload))
    assert record.disruptions == (restart, ridden)
    assert record.found_finished(SEEN_BY_THE_FIRST_TRY, in_place_written(workload)).disruptions == (restart, ridden), "each once"
    assert in_place_written({"metadata": {}}) == () and in_place_written(None) == ()


def test_a_slice_loss_the_program_rode_out_moves_the_time_it_waited_from_productive_to_restart():
    from pathways_airflow.run.records import PROGRAM_RECOVERY

    ridden = Disruption(time=1120.0, kind="MAINTENANCE", evidence=("pod train-x-1-worker-1-0: DisruptionTarget",), reached_step=150,
                        handled_by=PROGRAM_RECOVERY, seconds_lost=30.0)
    plain = goodput_of([SECOND], [], 32, now=1200.0)
    rode = goodput_of([SECOND], [ridden], 32, now=1200.0)
    assert rode.productive == pytest.approx(plain.productive - 30.0) and rode.restart == pytest.approx(plain.restart + 30.0)
    assert rode.held == pytest.approx(plain.held) and rode.disruptions == 1
    assert not ridden.resubmitted and ridden.to_dict()["seconds_lost"] == 30.0
    [entry] = [e for e in timeline_of([SECOND], [ridden]) if e["kind"] == "disruption"]
    assert entry["label"] == "maintenance: the program rode it out (elastic slices) (step 150 reached)"
