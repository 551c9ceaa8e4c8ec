"""A clear starts the task over, a retry carries on: told apart by Airflow's max_tries. Pure."""

from __future__ import annotations

from pathways_airflow.spec.names import FIRST_TRY_ANNOTATION, TaskIdentity
from pathways_airflow.run.rounds import carries_on, first_try_of, from_an_earlier_round, record_of_this_round
from pathways_airflow.run.submission import plan_submission

RETRIES = 2


def test_retries_keep_the_first_try_and_each_clear_starts_a_new_one():
    # What Airflow does with a task of retries=2: max_tries starts at 2; clear_task_instances sets
    # it to the try number at the clear plus retries; try_number counts on across clears.
    assert [first_try_of(t, RETRIES, RETRIES) for t in (1, 2, 3)] == [1, 1, 1]
    cleared_after_try_3 = 3 + RETRIES
    assert [first_try_of(t, cleared_after_try_3, RETRIES) for t in (4, 5)] == [4, 4]
    assert first_try_of(5, 4 + RETRIES, RETRIES) == 5, "a second clear, after try 4"


def test_numbers_that_do_not_add_up_say_nothing():
    assert first_try_of(1, None, RETRIES) is None  # not given (a test context, an older runtime)
    assert first_try_of(1, 2, 0) is None, "retries lowered since the round began: it would start after this try"
    assert first_try_of(1, 0, 3) is None, "retries raised since: it would start before the first try"
    assert first_try_of(True, 2, 2) is None


def workload(name: str, attempt: int, first_try: int | None, **status) -> dict:
    notes = {} if first_try is None else {FIRST_TRY_ANNOTATION: str(first_try)}
    return {
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"pathways-airflow/attempt": str(attempt)}, "annotations": notes},
        "status": status,
    }


def succeeded(name: str, attempt: int, first_try: int | None) -> dict:
    return workload(name, attempt, first_try, conditions=[{"type": "Completed", "status": "True"}])


def test_only_a_different_written_first_try_is_an_earlier_round():
    assert from_an_earlier_round(workload("a", 0, 1), 4)
    assert not from_an_earlier_round(workload("a", 0, 4), 4)
    assert not from_an_earlier_round(workload("a", 0, None), 4), "written before the annotation: as before"
    assert not from_an_earlier_round(workload("a", 0, 1), None), "Airflow does not say: as before"
    assert record_of_this_round({"first_try": 1, "result": {"name": "a"}}, 4) is None
    assert record_of_this_round({"first_try": 4, "result": {"name": "a"}}, 4) == {"first_try": 4, "result": {"name": "a"}}
    assert record_of_this_round({"result": {"name": "a"}}, 4) == {"result": {"name": "a"}}


def test_a_retry_reuses_its_success_and_a_clear_submits_again_under_a_new_name():
    done = succeeded("train", 0, first_try=1)
    retry = plan_submission([done], first_try=1)
    assert retry.reuse is done and retry.delete == ()
    cleared = plan_submission([done], first_try=4)
    assert cleared.reuse is None and cleared.adopt is None and cleared.user_error is None
    assert cleared.attempt == 1 and cleared.delete == ("train",)
    assert cleared.reason.startswith("the task was cleared: train from before the clear is deleted, not reused")


def test_after_a_clear_an_old_bug_does_not_block_and_an_old_live_workload_is_not_adopted():
    # As jobset's pkg/controllers/failure_policy.go leaves a JobSet its userErrorFailsJobSet rule failed.
    bug = workload(
        "train-1", 1, 1,
        terminalState="Failed",
        conditions=[{"type": "Failed", "status": "True", "reason": "FailJobSetFailurePolicyAction",
                     "message": "jobset failed due to FailJobSet failure policy rule userErrorFailsJobSet (first failed job: train-1-pathways-head-0)"}],
    )
    assert plan_submission([bug], first_try=1).user_error is bug, "a retry of the same round stops at the bug"
    live = workload("train-2", 2, 1)
    plan = plan_submission([bug, live], first_try=4)
    assert plan.user_error is None and plan.adopt is None
    assert plan.attempt == 3 and set(plan.delete) == {"train-1", "train-2"}
    ours = workload("train-3", 3, 4)
    again = plan_submission([bug, live, ours], first_try=4)
    assert again.adopt is ours and again.attempt == 3 and set(again.delete) == {"train-1", "train-2"}


def test_the_first_try_is_written_on_what_the_task_submits():
    assert TaskIdentity("d", "t", "r", first_try=4).annotations()[FIRST_TRY_ANNOTATION] == "4"
    assert FIRST_TRY_ANNOTATION not in TaskIdentity("d", "t", "r").annotations()
    assert TaskIdentity("d", "t", "r", first_try=4).key == TaskIdentity("d", "t", "r").key


def test_a_later_try_of_the_round_carries_on_from_its_checkpoints():
    assert not carries_on(0, 1, 1), "the round's first workload starts where the program says"
    assert carries_on(2, 1, 1), "a disruption attempt resumes"
    assert carries_on(0, 2, 1), "a retry whose workload is gone (no state store kept the attempt) resumes"
    assert not carries_on(0, 5, 5), "the first try after a clear starts the round over"
    assert not carries_on(0, 3, None) and not carries_on(0, None, 1), "what Airflow does not say is not a retry"
