"""After the wait: one rule for what every task does, pinned as a table on real states and verdicts."""

import pytest

from pathways_airflow.exceptions import (
    BadSpecError,
    InfrastructureError,
    RetryableUserCodeError,
    UserCodeError,
    WorkloadDeletedError,
    WorkloadEndedError,
)
from pathways_airflow.state.disruption import Classification, Verdict
from pathways_airflow.state.model import FailureCause, Phase, WorkloadState
from pathways_airflow.run.outcome import NextStep, disruption_of, next_step, over_budget, verdict_of, workload_failure
from pathways_airflow.run.records import JOBSET_RESTART, Disruption, Submission

MAINTENANCE = Classification(Verdict.MAINTENANCE, ("node gke-tpu-1: cloud.google.com/active-node-maintenance=ONGOING",))
SLICE_LOST = Classification(Verdict.SLICE_FAILURE, ("pod train-1-worker-0-0: DisruptionTarget (TerminationByKubelet)",))
NO_EVIDENCE = Classification(Verdict.UNKNOWN_INFRA, ("no pod shows why it stopped",))
BUG = Classification(Verdict.USER_ERROR, ("container main exited with 1",), exit_code=1)


def failed(cause: FailureCause | None, exit_code: int | None = None) -> WorkloadState:
    return WorkloadState(Phase.FAILED, "JobSet failed", cause=cause, exit_code=exit_code)


@pytest.mark.parametrize(
    "state,classification,expected",
    [
        (WorkloadState(Phase.SUCCEEDED), None, NextStep.SUCCEED),
        (failed(FailureCause.DISRUPTION), MAINTENANCE, NextStep.RESUBMIT),
        (failed(FailureCause.USER_CODE, 1), SLICE_LOST, NextStep.RESUBMIT),  # exit 1 after losing its slice
        (failed(FailureCause.UNKNOWN), NO_EVIDENCE, NextStep.RESUBMIT),
        (failed(FailureCause.USER_CODE, 1), NO_EVIDENCE, NextStep.FAIL),  # a bug, with no disruption in sight
        (failed(FailureCause.USER_CODE, 1), BUG, NextStep.FAIL),
        (failed(FailureCause.BAD_SPEC), MAINTENANCE, NextStep.FAIL),
        (failed(FailureCause.QUOTA), MAINTENANCE, NextStep.FAIL),
        (failed(FailureCause.DELETED), MAINTENANCE, NextStep.FAIL),
        (failed(FailureCause.DISRUPTION), None, NextStep.FAIL),  # nobody classified it: nothing to resubmit on
    ],
)
def test_what_a_task_does_after_the_wait(state, classification, expected):
    assert next_step(state, classification) is expected


@pytest.mark.parametrize(
    "state,classification,retry_user_errors,owned,expected",
    [
        (failed(FailureCause.USER_CODE, 3), None, False, True, UserCodeError),
        (failed(FailureCause.USER_CODE, 3), None, True, True, RetryableUserCodeError),
        (failed(FailureCause.UNKNOWN), BUG, False, True, UserCodeError),
        (failed(FailureCause.BAD_SPEC), None, False, True, BadSpecError),
        (failed(FailureCause.QUOTA), None, False, True, BadSpecError),
        (failed(FailureCause.DELETED), None, False, True, WorkloadDeletedError),
        (failed(FailureCause.DISRUPTION), MAINTENANCE, False, True, InfrastructureError),
        (failed(None), None, False, True, InfrastructureError),
        # A sensor watching someone else's workload: retrying cannot change how it ended.
        (failed(FailureCause.USER_CODE, 3), None, False, False, UserCodeError),
        (failed(FailureCause.BAD_SPEC), None, False, False, BadSpecError),
        (failed(FailureCause.DELETED), None, False, False, WorkloadEndedError),
        (failed(FailureCause.DISRUPTION), None, False, False, WorkloadEndedError),
    ],
)
def test_which_exception_a_failed_workload_raises(state, classification, retry_user_errors, owned, expected):
    error = workload_failure(state, "it failed", classification, retry_user_errors=retry_user_errors, owned=owned)
    assert type(error) is expected
    if expected in (UserCodeError, RetryableUserCodeError):
        assert error.exit_code == (state.exit_code if state.exit_code is not None else BUG.exit_code)


def test_jobset_restarts_in_place_do_not_count_against_the_budget():
    restart = Disruption(100.0, "MAINTENANCE", ("node drained",), reached_step=40, handled_by=JOBSET_RESTART)
    resubmitted = disruption_of(MAINTENANCE, workload="train-0", reached_step=60, resumed_from_step=50, now=200.0, running_since=120.0)
    submission = Submission("train-1", "default", "pathwaysjob", 1, 10.0, (restart, restart, resubmitted))
    assert submission.resubmissions == 1
    assert not over_budget(submission, 1)
    assert over_budget(submission.with_disruptions(resubmitted), 1)


def test_a_resubmission_records_what_it_cost():
    lost = disruption_of(SLICE_LOST, workload="train-0", reached_step=60, resumed_from_step=50, now=200.0, running_since=120.0)
    # 61 steps (0..60) in 80 s; the 10 after step 50 are done again: 80 × 10/61 s.
    assert (lost.kind, lost.workload, lost.steps_recomputed, lost.seconds_lost) == ("SLICE_FAILURE", "train-0", 10, 13.1)
    # A second disruption: the run started at step 50 (the first one's resume), so 30 steps took the 80 s.
    again = disruption_of(SLICE_LOST, workload="train-1", reached_step=80, resumed_from_step=70, now=300.0, running_since=220.0, earlier=(lost,))
    assert (again.steps_recomputed, again.seconds_lost) == (10, 26.7)
    never_stepped = disruption_of(SLICE_LOST, workload="train-0", reached_step=None, resumed_from_step=None, now=200.0, running_since=120.0)
    assert (never_stepped.steps_recomputed, never_stepped.seconds_lost) == (0, 0.0)
    from_scratch = disruption_of(MAINTENANCE, workload="train-0", reached_step=30, resumed_from_step=None, now=200.0, running_since=120.0)
    assert from_scratch.steps_recomputed == 31, "steps 0..30 are done again"
    assert from_scratch.seconds_lost == 80.0, "everything it ran"
    at_a_checkpoint = disruption_of(MAINTENANCE, workload="train-0", reached_step=25, resumed_from_step=25, now=200.0, running_since=120.0)
    assert (at_a_checkpoint.steps_recomputed, at_a_checkpoint.seconds_lost) == (0, 0.0)


def test_a_wait_that_ended_without_an_answer_fails_for_good_only_when_a_verb_was_refused():
    from pathways_airflow.exceptions import KubernetesApiError, PermissionMissingError
    from pathways_airflow.run.outcome import lost_track
    from pathways_airflow.run.records import WorkloadEvent

    refused = lost_track("train-0", WorkloadEvent("error", "train-0", message="pods is forbidden", forbidden=True), "hint")
    assert isinstance(refused, PermissionMissingError) and "was deleted" in str(refused)
    flaky = lost_track("train-0", WorkloadEvent("error", "train-0", message="TimeoutError"), "kubectl hint")
    assert type(flaky) is KubernetesApiError and "re-attaches" in str(flaky) and str(flaky).endswith("kubectl hint")


def test_a_sensor_whose_watch_was_refused_fails_for_good_and_one_that_lost_the_api_may_retry():
    from pathways_airflow.exceptions import KubernetesApiError, PermissionMissingError
    from pathways_airflow.sensors import PathwaysJobSensor

    sensor = PathwaysJobSensor(task_id="wait", name="train-0")
    refused = {"status": "error", "name": "train-0", "message": "pods is forbidden", "forbidden": True}
    with pytest.raises(PermissionMissingError, match="pods is forbidden"):
        sensor.finish({}, refused)
    with pytest.raises(KubernetesApiError, match="TimeoutError") as flaky:
        sensor.finish({}, {"status": "error", "name": "train-0", "message": "TimeoutError"})
    assert not isinstance(flaky.value, PermissionMissingError)


def test_a_pathwaysjob_restarts_nothing_in_place_and_the_task_makes_its_restarts_after_judging_them():
    """A PathwaysJob's JobSet cannot tell a bug from a lost slice: the task renders it with no
    restart and resubmits infrastructure failures itself, ``max_restarts`` more times."""
    from pathways_airflow.run.outcome import restarts_in_place, resubmissions_allowed

    assert (restarts_in_place("jobset", 2), restarts_in_place("pathwaysjob", 2)) == (2, 0)
    assert (resubmissions_allowed("jobset", 3, 2), resubmissions_allowed("pathwaysjob", 3, 2), resubmissions_allowed("pathwaysjob", 3, 0)) == (3, 5, 3)
    assert resubmissions_allowed("pathwaysjob", 98, 10) == 99  # as many as attempt names there are

def test_the_verdict_recorded_for_a_retry_is_the_one_the_task_acts_on():
    """Seed 78028: the failure policy failed the JobSet as the user's error after its head pod was
    gone; the classifier alone saw nothing. The record a crashed worker's retry reads must say bug."""
    policy = WorkloadState(
        Phase.FAILED, "the head's main container exited with a user-error exit code (rule userErrorFailsJobSet)", cause=FailureCause.USER_CODE
    )
    nothing = Classification(Verdict.UNKNOWN_INFRA, ("no pod shows why it stopped",))
    recorded = verdict_of(policy, nothing)
    assert recorded.verdict is Verdict.USER_ERROR and recorded.evidence == (policy.message,)
    maintenance = Classification(Verdict.MAINTENANCE, ("node n: cloud.google.com/active-node-maintenance=ONGOING",))
    assert verdict_of(policy, maintenance) is maintenance, "disruption evidence still outranks the exit code"
    assert verdict_of(failed(None), nothing) is nothing, "no user's code: nothing to add"


# --- the step the next run's program says it restored ------------------------------------------

def _resubmitted(reached: int = 27, resumed: int | None = 20, seconds: float = 14.0) -> Submission:
    """A task resubmitted once at ``reached``, recorded resuming from the newest GCS step ``resumed``."""
    steps = None if resumed is None else reached - resumed
    disruption = Disruption(100.0, "MAINTENANCE", ("node x: maintenance",), reached_step=reached, workload="t-a0",
                            resumed_from_step=resumed, steps_recomputed=steps, seconds_lost=seconds)
    restart = Disruption(90.0, "MAINTENANCE", (), reached_step=5, handled_by=JOBSET_RESTART)
    return Submission("t-a1", "default", "pathwaysjob", attempt=1, disruptions=(restart, disruption))


def test_a_newer_step_the_program_restored_from_a_local_copy_replaces_the_gcs_step_and_scales_the_time_lost():
    from pathways_airflow.run.outcome import with_resume_logged

    fixed = with_resume_logged(_resubmitted(), 26).disruptions[-1]
    assert (fixed.resumed_from_step, fixed.steps_recomputed, fixed.seconds_lost, fixed.resume_source) == (26, 1, 2.0, "program_log")
    assert fixed.to_dict()["resume_source"] == "program_log"
    # A step saved past the one read as the disruption began (the grace period): it got that far.
    further = with_resume_logged(_resubmitted(), 30).disruptions[-1]
    assert (further.reached_step, further.resumed_from_step, further.steps_recomputed, further.seconds_lost) == (30, 30, 0, 0.0)


def test_a_program_that_restored_nothing_recomputed_every_step_and_a_silent_log_changes_nothing():
    from pathways_airflow.run.outcome import with_resume_logged
    from pathways_airflow.run.progress import FROM_SCRATCH

    record = _resubmitted()
    assert with_resume_logged(record, None) is record
    scratch = with_resume_logged(record, FROM_SCRATCH).disruptions[-1]
    assert (scratch.resumed_from_step, scratch.steps_recomputed) == (None, 28)
    assert scratch.seconds_lost == pytest.approx(14.0 * 28 / 7, abs=0.1)
    # Read once: a later read (another look of the same run) does not move it again.
    once = with_resume_logged(record, 26)
    assert with_resume_logged(once, 24) is once
    # The JobSet restart in place before it is left alone; a record without a resubmission too.
    assert with_resume_logged(record, 26).disruptions[0] == record.disruptions[0]
    alone = Submission("t-a0", "default", "pathwaysjob", disruptions=(record.disruptions[0],))
    assert with_resume_logged(alone, 26) is alone


def test_a_later_try_s_workload_does_not_speak_for_a_resubmission_it_did_not_make():
    """Chaos 1040074: maintenance ended t-a0 and the task submitted t-a1 in its stead; t-a1 failed,
    and a later try submitted t-a2, whose program restored step 37. That is not where t-a1 resumed."""
    from dataclasses import replace

    from pathways_airflow.run.outcome import with_resume_logged

    record = _resubmitted()
    named = replace(record, disruptions=(record.disruptions[0], replace(record.disruptions[-1], resubmitted_as="t-a1")))
    assert Disruption.from_dict(named.disruptions[-1].to_dict()).resubmitted_as == "t-a1"
    later_try = replace(named, name="t-a2", attempt=2)
    assert with_resume_logged(later_try, 37) is later_try
    own = with_resume_logged(named, 26).disruptions[-1]
    assert (own.resumed_from_step, own.resume_source, own.resubmitted_as) == (26, "program_log", "t-a1")


def test_a_record_written_before_the_resume_source_existed_reads_as_the_newest_committed_step():
    old = {k: v for k, v in _resubmitted().disruptions[-1].to_dict().items() if k != "resume_source"}
    assert Disruption.from_dict(old).resume_source == "newest_committed"
    assert Disruption.from_dict(old).to_dict() == old  # and is written back as it was


def test_a_resubmission_names_the_workload_submitted_in_its_stead_unless_it_spends_the_budget():
    from pathways_airflow.run.outcome import with_disruption_resubmitted

    record = _resubmitted()
    ended = Disruption(200.0, "SLICE_FAILURE", ("node y: gone",), reached_step=30, workload="t-a1", resumed_from_step=28)
    within = with_disruption_resubmitted(record, ended, "t-a2", max_disruptions=2)
    assert within.disruptions[-1].resubmitted_as == "t-a2" and within.resubmissions == 2
    spent = with_disruption_resubmitted(record, ended, "t-a2", max_disruptions=1)
    assert spent.disruptions[-1].resubmitted_as is None and spent.resubmissions == 2
