"""Deciding what to submit from the workloads a task already has."""

from __future__ import annotations

from pathways_airflow.run.submission import finished_as, plan_submission
from pathways_airflow.run.annotations import ended_by, ended_by_annotation


def jobset(name: str, attempt: int, condition: str | None = None, deleting: bool = False) -> dict:
    meta = {"name": name, "labels": {"pathways-airflow/attempt": str(attempt)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    status = {"conditions": [{"type": condition, "status": "True"}]} if condition else {}
    return {"kind": "JobSet", "metadata": meta, "status": status}


def pathwaysjob(name: str, attempt: int, terminal: str | None = None) -> dict:
    status = {"terminalState": terminal, "conditions": [{"type": "Running", "status": "True"}]} if terminal else {}
    return {"kind": "PathwaysJob", "metadata": {"name": name, "labels": {"pathways-airflow/attempt": str(attempt)}}, "status": status}


def test_nothing_yet_submits_the_recorded_attempt_or_the_first():
    assert plan_submission([]).attempt == 0
    assert plan_submission([], recorded_attempt=2).attempt == 2


def test_a_live_workload_is_reattached_and_duplicates_are_deleted():
    plan = plan_submission([jobset("a", 0), jobset("a-1", 1)])
    assert plan.adopt["metadata"]["name"] == "a-1" and plan.attempt == 1 and plan.delete == ("a",)


def test_a_success_is_reused_and_a_failure_moves_to_the_next_attempt():
    done = plan_submission([jobset("a", 0, "Completed")])
    assert done.reuse is not None and done.attempt == 0
    failed = plan_submission([jobset("a", 0, "Failed"), jobset("a-1", 1, "Failed")])
    assert failed.attempt == 2 and failed.delete == ("a", "a-1") and failed.adopt is None


def test_an_object_being_deleted_is_not_live():
    plan = plan_submission([jobset("a", 0, deleting=True)])
    assert plan.adopt is None and plan.attempt == 1


def test_pathwaysjob_terminal_state_counts_only_when_set():
    assert finished_as(pathwaysjob("p", 0, "Completed")) == "Completed"
    assert finished_as(pathwaysjob("p", 0)) is None
    assert finished_as(jobset("j", 0, "Suspended")) is None


def with_verdict(obj: dict, verdict: str, *evidence: str) -> dict:
    obj["metadata"].setdefault("annotations", {}).update(ended_by_annotation(verdict, list(evidence)))
    return obj


def test_a_failure_the_trigger_classified_as_the_users_bug_is_not_resubmitted_on_retry():
    failed = with_verdict(pathwaysjob("t-1", 1, "Failed"), "USER_ERROR", "pod t-1-pathways-head-0-0-x: container main exited 1")
    plan = plan_submission([pathwaysjob("t", 0, "Failed"), failed])
    assert plan.user_error is failed
    assert plan.attempt == 1 and plan.delete == ("t", "t-1")
    assert "failed in an earlier try with the user's error: pod t-1-pathways-head-0-0-x: container main exited 1" in plan.reason


def test_a_failure_classified_as_a_disruption_or_not_classified_moves_to_the_next_attempt():
    for failed in (with_verdict(jobset("t", 0, "Failed"), "MAINTENANCE", "node n: active maintenance"), jobset("t", 0, "Failed")):
        plan = plan_submission([failed])
        assert plan.user_error is None and plan.attempt == 1 and plan.delete == ("t",)


def test_only_the_resubmission_after_a_disruption_an_earlier_try_left_undone_resumes_at_once():
    """It minds no announced maintenance (chaos seed 960099 waited 2 minutes for a slice under
    maintenance while two others were free); a first submission, a re-attach, a reuse, a bug and a
    cleared task's fresh round do."""
    assert plan_submission([jobset("t", 0, "Failed")]).after_a_disruption
    bug = with_verdict(pathwaysjob("t", 0, "Failed"), "USER_ERROR", "pod t-pathways-head-0-0-x: container main exited 1")
    for plan in (plan_submission([]), plan_submission([jobset("t", 0)]), plan_submission([jobset("t", 0, "Completed")]), plan_submission([bug])):
        assert not plan.after_a_disruption


def test_the_verdict_annotation_round_trips_and_garbage_is_no_verdict():
    obj = {"metadata": {"annotations": ended_by_annotation("USER_ERROR", ["a" * 1000, "b", "c", "d"])}}
    verdict, evidence = ended_by(obj)
    assert verdict == "USER_ERROR" and evidence == ["a" * 300, "b", "c"]
    assert ended_by({"metadata": {"annotations": {"pathways-airflow/ended-by": "{not json"}}}) is None
    assert ended_by({"metadata": {"annotations": {"pathways-airflow/ended-by": '["USER_ERROR"]'}}}) is None
    assert ended_by({"metadata": {}}) is None


def failed_by_the_user_error_rule(name: str, attempt: int) -> dict:
    """A JobSet as its controller leaves it when the userErrorFailsJobSet rule fails it (jobset's
    pkg/controllers/failure_policy.go: reason FailJobSetFailurePolicyAction, the rule in the message)."""
    obj = jobset(name, attempt)
    obj["status"] = {
        "terminalState": "Failed",
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailJobSetFailurePolicyAction",
                "message": f"jobset failed due to FailJobSet failure policy rule userErrorFailsJobSet (first failed job: {name}-pathways-head-0)",
            }
        ],
    }
    return obj


def test_a_bug_that_struck_while_no_trigger_watched_is_still_not_resubmitted():
    unwatched = failed_by_the_user_error_rule("t-1", 1)
    plan = plan_submission([jobset("t", 0, "Failed"), unwatched])
    assert plan.user_error is unwatched and plan.attempt == 1
    assert "userErrorFailsJobSet (first failed job: t-1-pathways-head-0)" in plan.reason


def test_a_jobset_failed_by_another_rule_or_by_restarts_moves_to_the_next_attempt():
    restarts = failed_by_the_user_error_rule("t", 0)
    restarts["status"]["conditions"][0].update(reason="ReachedMaxRestarts", message="jobset failed due to reaching max number of restarts")
    assert plan_submission([restarts]).user_error is None and plan_submission([restarts]).attempt == 1
