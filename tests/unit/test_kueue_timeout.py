"""A workload Kueue stopped at its maximum execution time ends as the task's timeout, never as a disruption.

The fixture ``failed_kueue_max_exec_time`` was recorded from the local cluster (see
``fixtures/status/generate.py``); the earlier step (``DeactivationTarget`` set, not yet evicted)
and a plain preemption are hand edits of recorded Workloads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from airflow.providers.common.compat.sdk import AirflowTaskTimeout

from pathways_airflow.exceptions import WorkloadEndedError
from pathways_airflow.state.disruption import classify
from pathways_airflow.state.kueue_timeout import max_exec_time_exceeded
from pathways_airflow.state.model import FailureCause, Observation, Phase
from pathways_airflow.run.outcome import NextStep, next_step, workload_failure
from pathways_airflow.state.status import workload_state

FIXTURES = Path(__file__).parent / "fixtures" / "status"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["observation"]


def conditions_of(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in workload["status"]["conditions"]}


def test_the_recorded_deactivation_fails_the_wait_as_a_timeout_that_is_not_resubmitted():
    fields = recorded("failed_kueue_max_exec_time")
    state = workload_state(Observation(**{**fields, "pods": tuple(fields["pods"])}))
    assert (state.phase, state.cause) == (Phase.FAILED, FailureCause.TIMEOUT)
    assert "after 120s of admitted time (DeactivatedDueToMaximumExecutionTimeExceeded" in state.message
    assert "kueue.x-k8s.io/max-exec-time-seconds" in state.message and "not resubmitted" in state.message
    verdict = classify(pods=fields["pods"], nodes=(), jobset=fields["jobset"], kueue_workload=fields["kueue_workload"])
    assert next_step(state, verdict) is NextStep.FAIL
    assert isinstance(workload_failure(state, state.message, verdict), AirflowTaskTimeout)
    assert isinstance(workload_failure(state, state.message, verdict, owned=False), WorkloadEndedError)


def test_kueues_first_step_already_decides_before_the_eviction_is_written():
    workload = copy.deepcopy(recorded("failed_kueue_max_exec_time")["kueue_workload"])
    workload["spec"].update(active=True, maximumExecutionTimeSeconds=3600)
    workload["status"]["conditions"] = [c for c in workload["status"]["conditions"] if c["type"] not in ("Evicted", "Requeued")]
    workload["status"]["conditions"].append(
        {
            "type": "DeactivationTarget",
            "status": "True",
            "reason": "MaximumExecutionTimeExceeded",
            "message": "exceeding the maximum execution time",
            "lastTransitionTime": "2030-01-01T00:00:00Z",
        }
    )
    said = max_exec_time_exceeded(workload)
    assert said is not None and said.startswith("Kueue stopped it after 3600s of admitted time (MaximumExecutionTimeExceeded")


def test_other_evictions_and_deactivations_are_not_a_timeout():
    preempted = recorded("queued_evicted")["kueue_workload"]
    assert conditions_of(preempted)["Evicted"]["reason"] == "Preempted"
    assert max_exec_time_exceeded(preempted) is None
    by_hand = copy.deepcopy(recorded("failed_kueue_max_exec_time")["kueue_workload"])
    conditions_of(by_hand)["Evicted"].update(reason="Deactivated", message="The workload is deactivated")
    assert max_exec_time_exceeded(by_hand) is None
    target_cleared = copy.deepcopy(by_hand)
    target_cleared["status"]["conditions"].append(
        {"type": "DeactivationTarget", "status": "False", "reason": "MaximumExecutionTimeExceeded", "message": ""}
    )
    assert max_exec_time_exceeded(target_cleared) is None
    assert max_exec_time_exceeded(None) is None and max_exec_time_exceeded({"status": {}}) is None
