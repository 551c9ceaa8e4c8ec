"""Deciding what to submit from the workloads a task already has."""

from __future__ import annotations

from pathways_airflow.state.submission import finished_as, plan_submission


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
