"""``workload_state`` on what the API really returns: fixtures recorded from the local cluster.

The fixtures under ``fixtures/status/`` were written by ``fixtures/status/generate.py`` (see its
docstring): each is one workload's PathwaysJob, JobSet, pods and Kueue Workload at a moment of a
scenario (quota, eviction, maintenance, a user bug...). Edge cases the cluster does not produce
are hand edits of those dicts. Nothing here starts a cluster.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pytest

from pathways_airflow.state import status as status_module
from pathways_airflow.state.model import FailureCause, Observation, Phase, WorkloadState
from pathways_airflow.run.messages import transition_line
from pathways_airflow.state.status import workload_state
from pathways_airflow.state.workload_parts import (
    exit_code_of,
    failed_container,
    head_pod,
    main_container_status,
)

FIXTURES = Path(__file__).parent / "fixtures" / "status"
ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"


@lru_cache(maxsize=None)
def _raw(name: str) -> str:
    return (FIXTURES / f"{name}.json").read_text()


def fixture(name: str) -> dict[str, Any]:
    """A fresh, editable copy of a fixture's observation fields."""
    return json.loads(_raw(name))["observation"]


def observe(fields: dict[str, Any]) -> Observation:
    return Observation(**{**fields, "pods": tuple(fields["pods"])})


def state_of(name: str, edit: Callable[[dict[str, Any]], None] | None = None) -> WorkloadState:
    fields = fixture(name)
    if edit:
        edit(fields)
    return workload_state(observe(fields))


def pods_of(fields: dict[str, Any], replicated_job: str) -> list[dict[str, Any]]:
    return [p for p in fields["pods"] if p["metadata"]["labels"][REPLICATED_JOB] == replicated_job]


def set_condition(
    obj: dict[str, Any],
    type_: str,
    status: str,
    reason: str = "",
    message: str = "",
    when: str = "2030-01-01T00:00:00Z",
) -> None:
    conditions = [c for c in (obj.setdefault("status", {}).get("conditions") or []) if c["type"] != type_]
    conditions.append(
        {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": when}
    )
    obj["status"]["conditions"] = conditions


# --- every fixture, one expectation each -------------------------------------------------------

# fixture: (phase, cause, slices_ready, slices_total, restarts)
EXPECTED: dict[str, tuple[Phase, FailureCause | None, int, int, int]] = {
    "queued_just_created": (Phase.QUEUED, None, 0, 1, 0),
    "queued_waiting_for_quota": (Phase.QUEUED, None, 0, 1, 0),
    "queued_over_capacity": (Phase.QUEUED, None, 0, 2, 0),
    "queued_evicted": (Phase.QUEUED, None, 0, 1, 0),
    "failed_missing_local_queue": (Phase.FAILED, FailureCause.QUOTA, 0, 1, 0),
    "failed_kueue_max_exec_time": (Phase.FAILED, FailureCause.TIMEOUT, 0, 1, 0),
    "provisioning_no_jobset_yet": (Phase.PROVISIONING, None, 0, 0, 0),
    "provisioning_unschedulable": (Phase.PROVISIONING, None, 0, 1, 0),
    "provisioning_two_of_three_slices": (Phase.PROVISIONING, None, 2, 3, 0),
    "running_two_slices": (Phase.RUNNING, None, 2, 2, 0),
    "running_headless": (Phase.RUNNING, None, 1, 1, 0),
    "running_elastic_two_of_three": (Phase.RUNNING, None, 2, 3, 0),
    "restarting_after_maintenance": (Phase.RESTARTING, None, 0, 1, 1),
    "running_after_restart": (Phase.RUNNING, None, 1, 1, 1),
    "succeeded": (Phase.SUCCEEDED, None, 0, 1, 0),
    "failed_user_code_jobset": (Phase.FAILED, FailureCause.USER_CODE, 0, 1, 0),
    "failed_user_code_pathwaysjob_last_seen": (Phase.FAILED, FailureCause.USER_CODE, 1, 1, 0),
    "failed_user_code_pathwaysjob": (Phase.FAILED, FailureCause.UNKNOWN, 0, 1, 0),
    "failed_disruption_last_seen": (Phase.FAILED, FailureCause.DISRUPTION, 1, 1, 0),
    "failed_disruption_jobset_last_seen": (Phase.FAILED, FailureCause.DISRUPTION, 1, 1, 0),
    "failed_disruption": (Phase.FAILED, FailureCause.UNKNOWN, 0, 1, 0),
    "failed_bad_spec": (Phase.FAILED, FailureCause.BAD_SPEC, 0, 0, 0),
    "failed_deleted": (Phase.FAILED, FailureCause.DELETED, 0, 0, 0),
    "running_multislice": (Phase.RUNNING, None, 2, 2, 0),
    "restarting_multislice_after_maintenance": (Phase.RESTARTING, None, 1, 2, 1),
    "failed_user_code_multislice_last_seen": (Phase.FAILED, FailureCause.USER_CODE, 0, 2, 0),
}


def test_every_fixture_has_an_expectation():
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_phase_cause_and_counts(name):
    state = state_of(name)
    phase, cause, ready, total, restarts = EXPECTED[name]
    assert (state.phase, state.cause, state.slices_ready, state.slices_total, state.restarts) == (
        phase,
        cause,
        ready,
        total,
        restarts,
    ), state.summary()
    assert state.message or phase is Phase.RUNNING
    assert WorkloadState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


# --- queued ------------------------------------------------------------------------------------


def test_a_workload_waiting_for_quota_in_use_is_queued_with_kueues_words():
    state = state_of("queued_waiting_for_quota")
    assert state.message.startswith("waiting for Kueue: couldn't assign flavors to pod set worker")
    assert "insufficient unused quota for google.com/tpu" in state.message


def test_a_workload_larger_than_the_queue_quota_is_still_queued_since_quota_can_be_raised():
    state = state_of("queued_over_capacity")
    assert state.phase is Phase.QUEUED and "> maximum capacity (8)" in state.message


def test_a_jobset_just_suspended_by_kueues_webhook_waits_for_its_local_queue():
    assert (
        state_of("queued_just_created").message
        == "suspended until Kueue admits it from LocalQueue multislice-queue"
    )


def test_an_evicted_workload_is_queued_not_failed():
    state = state_of("queued_evicted")
    assert state.message.startswith("evicted by Kueue (Preempted): Preempted to accommodate a workload")
    assert state.message.endswith("waiting to be admitted again")


def test_an_evicted_workload_whose_pods_still_run_is_queued():
    def evict_while_running(fields):
        workload = copy.deepcopy(fixture("queued_evicted")["kueue_workload"])
        set_condition(workload, "Admitted", "True", "Admitted", "", when="2030-01-01T00:00:00Z")
        set_condition(workload, "QuotaReserved", "True", "QuotaReserved", "", when="2030-01-01T00:00:00Z")
        set_condition(
            workload,
            "Evicted",
            "True",
            "PodsReadyTimeout",
            "Exceeded the PodsReady timeout",
            when="2030-01-01T00:05:00Z",
        )
        fields["kueue_workload"] = workload

    state = state_of("running_two_slices", evict_while_running)
    assert state.phase is Phase.QUEUED
    assert state.message.startswith("evicted by Kueue (PodsReadyTimeout): Exceeded the PodsReady timeout")


def test_a_workload_admitted_again_after_an_eviction_is_not_queued():
    def readmitted(fields):
        workload = copy.deepcopy(fixture("queued_evicted")["kueue_workload"])
        set_condition(workload, "Evicted", "True", "Preempted", "", when="2030-01-01T00:00:00Z")
        set_condition(workload, "QuotaReserved", "True", "QuotaReserved", "", when="2030-01-01T00:10:00Z")
        set_condition(workload, "Admitted", "True", "Admitted", "", when="2030-01-01T00:10:00Z")
        fields["kueue_workload"] = workload

    assert state_of("running_two_slices", readmitted).phase is Phase.RUNNING


def test_quota_reserved_but_not_admitted_waits_for_admission_checks():
    def checks_pending(fields):
        workload = fields["kueue_workload"]
        set_condition(
            workload, "QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue"
        )
        set_condition(workload, "Admitted", "False", "NoChecks", "The workload has pending admission checks")

    state = state_of("queued_waiting_for_quota", checks_pending)
    assert state.phase is Phase.QUEUED and "pending admission checks" in state.message


def test_a_missing_cluster_queue_is_waited_on_since_an_admin_may_create_it():
    def cluster_queue_missing(fields):
        set_condition(
            fields["kueue_workload"],
            "QuotaReserved",
            "False",
            "Inadmissible",
            "ClusterQueue cluster-queue doesn't exist",
        )

    state = state_of("failed_missing_local_queue", cluster_queue_missing)
    assert state.phase is Phase.QUEUED and "ClusterQueue cluster-queue doesn't exist" in state.message


def test_a_finished_kueue_workload_does_not_hold_the_state_back():
    def finished(fields):
        set_condition(fields["kueue_workload"], "Finished", "True", "Succeeded", "")

    assert state_of("queued_waiting_for_quota", finished).phase is Phase.QUEUED  # still suspended
    fields = fixture("running_two_slices")
    fields["kueue_workload"] = fixture("queued_evicted")["kueue_workload"]
    set_condition(fields["kueue_workload"], "Finished", "True", "Succeeded", "")
    assert workload_state(observe(fields)).phase is Phase.RUNNING


def test_a_workload_without_a_quota_reserved_condition_yet_is_queued():
    def fresh(fields):
        fields["kueue_workload"]["status"] = {}

    state = state_of("queued_waiting_for_quota", fresh)
    assert state.phase is Phase.QUEUED and state.message.startswith(
        "waiting for Kueue to consider Workload jobset-waiter-"
    )


def test_a_jobset_suspended_by_hand_is_queued():
    def suspended(fields):
        fields["jobset"]["spec"]["suspend"] = True

    state = state_of("running_two_slices", suspended)
    assert state.phase is Phase.QUEUED and state.message.startswith("JobSet is suspended")


@pytest.mark.parametrize(
    ("suspended_at", "phase"),
    [("2030-01-01T00:00:00Z", Phase.QUEUED), ("2000-01-01T00:00:00Z", Phase.RUNNING)],
)
def test_a_suspended_condition_counts_only_when_it_is_the_newest(suspended_at, phase):
    def condition_only(fields):
        fields["jobset"]["spec"].pop("suspend", None)
        set_condition(
            fields["jobset"], "Suspended", "True", "SuspendedJobs", "jobset is suspended", when=suspended_at
        )

    assert state_of("running_two_slices", condition_only).phase is phase


# --- failed: quota, bad spec, deleted -----------------------------------------------------------


def test_a_missing_local_queue_fails_at_once_and_says_how_to_fix_it():
    state = state_of("failed_missing_local_queue")
    assert "LocalQueue no-such-queue doesn't exist" in state.message
    assert "kubectl get localqueues -n default" in state.message


def test_a_topology_the_controller_rejects_is_a_bad_spec_with_the_valid_choices():
    state = state_of("failed_bad_spec")
    assert "terminalState Failed, no condition, no JobSet" in state.message
    assert (
        "topology='3x3': not a valid topology for ct5lp-hightpu-4t (TPU v5e); valid: 2x2, 2x4"
        in state.message
    )


def test_a_rejected_spec_the_catalog_accepts_still_points_at_the_topology():
    def valid_topology(fields):
        fields["pathwaysjob"]["spec"]["workers"][0]["topology"] = "2x4"

    state = state_of("failed_bad_spec", valid_topology)
    assert state.cause is FailureCause.BAD_SPEC
    assert "check spec.workers[0] (type 'ct5lp-hightpu-4t', topology '2x4')" in state.message


def test_a_pathwaysjob_that_failed_and_lost_its_jobset_is_unknown_not_bad_spec():
    def jobset_gone(fields):
        fields["jobset"], fields["pods"] = None, []

    state = state_of("failed_user_code_pathwaysjob", jobset_gone)
    assert state.cause is FailureCause.UNKNOWN and "ReachedMaxRestarts" in state.message


def test_a_pathwaysjob_that_completed_and_lost_its_jobset_succeeded():
    def jobset_gone(fields):
        fields["jobset"], fields["pods"] = None, []

    assert state_of("succeeded", jobset_gone).phase is Phase.SUCCEEDED


def test_a_deleted_workload_is_blamed_on_someone_else():
    assert (
        state_of("failed_deleted").message
        == "PathwaysJob default/gone was deleted by someone else while we waited on it"
    )


def test_a_missing_workload_we_never_submitted_is_not_a_deletion():
    state = state_of("failed_deleted", lambda f: f.update(submitted=False))
    assert state.phase is Phase.PROVISIONING and state.cause is None


def test_the_jobset_backend_looks_only_at_the_jobset():
    def jobset_gone(fields):
        fields.update(backend="jobset", jobset=None)

    state = state_of("running_two_slices", jobset_gone)
    assert state.cause is FailureCause.DELETED and state.message.startswith(
        "JobSet default/steady was deleted"
    )


def test_a_pathwaysjob_deleted_while_its_jobset_is_collected_is_deleted():
    assert state_of("running_two_slices", lambda f: f.update(pathwaysjob=None)).cause is FailureCause.DELETED


@pytest.mark.parametrize("kind", ["pathwaysjob", "jobset"])
def test_a_workload_being_deleted_by_someone_else_will_not_finish(kind):
    def deleting(fields):
        fields[kind]["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"

    state = state_of("running_two_slices", deleting)
    assert state.cause is FailureCause.DELETED and "deletionTimestamp 2030-01-01T00:00:00Z" in state.message


def test_a_pathwaysjob_being_deleted_before_its_jobset_exists_is_deleted():
    def deleting(fields):
        fields["pathwaysjob"]["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"

    assert state_of("provisioning_no_jobset_yet", deleting).cause is FailureCause.DELETED


def test_a_finished_workload_being_cleaned_up_keeps_its_outcome():
    def deleting(fields):
        fields["jobset"]["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"

    assert state_of("succeeded", deleting).phase is Phase.SUCCEEDED


# --- failed: user code or disruption -----------------------------------------------------------


def test_a_user_bug_on_the_jobset_backend_names_the_container_pod_and_exit_code():
    fields = fixture("failed_user_code_jobset")
    state = workload_state(observe(fields))
    head = pods_of(fields, "pathways-head")[0]["metadata"]["name"]
    assert (state.exit_code, state.container, state.pod) == (3, "main", head)
    assert state.summary().startswith("FAILED (USER_CODE, exit 3): container main of pod ")
    assert (
        "FailJobSetFailurePolicyAction" in state.message
        and "(first failed job: bug-js-pathways-head-0)" in state.message
    )


def test_a_user_bug_on_a_pathwaysjob_is_read_from_the_last_state_of_the_restarted_container():
    state = state_of("failed_user_code_pathwaysjob_last_seen")
    assert (state.exit_code, state.container) == (3, "main")
    assert "ReachedMaxRestarts" in state.message


def test_once_the_failed_pods_are_deleted_the_cause_is_unknown():
    """Kubernetes deletes a failed Job's active pods: a watcher must keep their last state to know why."""
    for name in ("failed_user_code_pathwaysjob", "failed_disruption"):
        state = state_of(name)
        assert state.cause is FailureCause.UNKNOWN
        assert state.message.startswith("no pod of restart attempt 0 shows why; JobSet ReachedMaxRestarts")


def test_the_jobsets_user_error_rule_names_a_user_bug_even_when_the_head_pod_is_gone():
    def head_gone(fields):
        fields["pods"] = [
            p for p in fields["pods"] if p["metadata"]["labels"][REPLICATED_JOB] != "pathways-head"
        ]

    state = state_of("failed_user_code_jobset", head_gone)
    assert state.cause is FailureCause.USER_CODE and state.exit_code is None
    assert "userErrorFailsJobSet" in state.message


def test_maintenance_that_exhausts_max_restarts_is_a_disruption_though_the_head_exited_1():
    state = state_of("failed_disruption_last_seen")
    assert state.exit_code is None
    assert len(state.evidence) == 2
    assert all(
        re.fullmatch(
            r"pod fragile-worker-0-[01]-\w+: DisruptionTarget \(TerminationByKubelet\); "
            r"Terminated: Pod was terminated in response to imminent node shutdown\.",
            line,
        )
        for line in state.evidence
    ), state.evidence
    assert state.message.startswith("the infrastructure ended it: pod fragile-worker-0-")
    # The JobSet's "reached max number of restarts" (a PathwaysJob the task submits has none) is left out.
    assert "(and 1 more pod)" in state.message and "ReachedMaxRestarts" not in state.message


def test_a_disruption_wins_over_the_jobsets_own_user_error_verdict():
    """A JAX program that loses its slice exits 1, which the exit-code rule calls a user error."""
    fields = fixture("failed_disruption_jobset_last_seen")
    assert failed_container(observe(fields))[2] == 1
    state = workload_state(observe(fields))
    assert state.cause is FailureCause.DISRUPTION and "userErrorFailsJobSet" in state.message


@pytest.mark.parametrize("reason", ["Terminated", "NodeShutdown", "Evicted", "Preempting"])
def test_a_pod_the_node_ended_is_evidence_of_a_disruption_without_the_condition(reason):
    def node_ended_a_worker(fields):
        worker = pods_of(fields, "worker")[0]
        worker["status"].update(
            phase="Failed", reason=reason, message="The node was low on resource: memory."
        )

    state = state_of("failed_user_code_pathwaysjob_last_seen", node_ended_a_worker)
    assert state.cause is FailureCause.DISRUPTION and state.exit_code is None
    assert len(state.evidence) == 1
    assert re.fullmatch(
        rf"pod bug-pj-worker-0-0-\w+: {reason}: The node was low on resource: memory\.", state.evidence[0]
    )


def test_a_disruption_of_an_earlier_attempt_does_not_excuse_a_bug_in_the_current_one():
    def earlier_attempt_disrupted(fields):
        disrupted = copy.deepcopy(pods_of(fixture("failed_disruption_last_seen"), "worker")[0])
        for pod in fields["pods"]:
            pod["metadata"]["labels"][ATTEMPT] = "1"
        fields["jobset"]["status"]["restarts"] = 1
        fields["pods"].append(disrupted)

    state = state_of("failed_user_code_jobset", earlier_attempt_disrupted)
    assert state.cause is FailureCause.USER_CODE and state.exit_code == 3 and state.restarts == 1


def test_a_slice_the_jobset_restarts_alone_is_a_restart_until_it_is_back():
    """JobSet ≥ 0.12's ``RestartJob``: slice 1's Job is created again under ``job-restart-attempt`` 1
    while slice 0 runs on; the restart counts, and the old Job's pods are not the current run's."""
    def slice_1_restarted(job_attempt: str):
        def edit(fields):
            fields["jobset"]["status"]["replicatedJobsStatus"][0]["jobRestarts"] = [0, 1]
            for pod in fields["pods"]:
                index = pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
                pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-restart-attempt"] = job_attempt if index == "1" else "0"
        return edit

    coming_back = state_of("running_multislice", slice_1_restarted("0"))
    assert (coming_back.phase, coming_back.slices_ready, coming_back.restarts) == (Phase.RESTARTING, 1, 1)
    back = state_of("running_multislice", slice_1_restarted("1"))
    assert (back.phase, back.slices_ready, back.restarts) == (Phase.RUNNING, 2, 1)


def test_a_failed_headless_workload_is_never_blamed_on_user_code():
    def server_crashed(fields):
        set_condition(
            fields["jobset"],
            "Failed",
            "True",
            "ReachedMaxRestarts",
            "jobset failed (first failed job: headless-pathways-head-0)",
        )
        head = pods_of(fields, "pathways-head")[0]
        head["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "reason": "Error"}}

    state = state_of("running_headless", server_crashed)
    assert state.cause is FailureCause.UNKNOWN and state.exit_code is None


def test_a_jobset_failed_with_only_a_terminal_state_is_failed():
    def terminal_state_only(fields):
        fields["jobset"]["status"] = {"terminalState": "Failed"}
        fields["pods"] = []

    state = state_of("failed_user_code_jobset", terminal_state_only)
    assert state.phase is Phase.FAILED and state.message.endswith("JobSet terminalState Failed")


def test_a_jobset_completed_with_only_a_terminal_state_succeeded():
    assert (
        state_of("succeeded", lambda f: f["jobset"].update(status={"terminalState": "Completed"})).phase
        is Phase.SUCCEEDED
    )


# --- provisioning, running, restarting ---------------------------------------------------------


def test_pending_pods_are_explained_in_the_schedulers_words():
    state = state_of("provisioning_unschedulable")
    assert re.fullmatch(
        r"4 pods pending: 0/\d+ nodes are available: .*didn't match Pod's node affinity/selector\.",
        state.message,
    )


def test_a_pathwaysjob_before_its_jobset_waits_for_the_controller():
    assert (
        state_of("provisioning_no_jobset_yet").message
        == "waiting for the PathwaysJob controller to create the JobSet"
    )


def test_a_pathwaysjob_that_says_running_is_restarting_when_its_jobset_restarted():
    fields = fixture("restarting_after_maintenance")
    assert fields["pathwaysjob"]["status"]["conditions"][-1]["type"] == "Running"
    state = workload_state(observe(fields))
    assert state.summary().startswith("RESTARTING 0/1 slices (restarts: 1): 2 pods pending: 0/")
    assert "node(s) were unschedulable" in state.message


def test_the_pathwaysjobs_own_status_is_ignored_while_the_jobset_exists():
    def pathwaysjob_says_failed(fields):
        fields["pathwaysjob"]["status"]["terminalState"] = "Failed"
        set_condition(
            fields["pathwaysjob"], "Failed", "True", "ReachedMaxRestarts", "pathwaysJob failed: ..."
        )

    assert state_of("running_two_slices", pathwaysjob_says_failed).phase is Phase.RUNNING


def test_a_slice_is_ready_only_when_all_its_pods_are_running_and_ready():
    def one_worker_not_ready(fields):
        worker = pods_of(fields, "worker")[0]
        set_condition(worker, "Ready", "False", "ContainersNotReady")

    state = state_of("running_two_slices", one_worker_not_ready)
    assert (state.phase, state.slices_ready, state.message) == (
        Phase.PROVISIONING,
        1,
        "waiting for slices: 1/2 ready",
    )


def test_pods_of_an_earlier_attempt_do_not_make_slices_ready():
    def restarted(fields):
        fields["jobset"]["status"]["restarts"] = 1

    state = state_of("running_two_slices", restarted)
    assert (state.phase, state.slices_ready, state.restarts) == (Phase.RESTARTING, 0, 1)
    assert state.message == "waiting for the JobSet to create the pods of restart attempt 1"


def test_pods_without_an_attempt_label_count_as_current():
    def unlabelled(fields):
        for pod in fields["pods"]:
            del pod["metadata"]["labels"][ATTEMPT]

    assert state_of("running_two_slices", unlabelled).phase is Phase.RUNNING


EXECUTION = "jobset.sigs.k8s.io/execution-attempt"


def executions(jobset_count: int | None, pod_count: str | None):
    """The JobSet's ``status.executionAttempts`` and every pod's ``execution-attempt`` annotation
    (KEP-1282; ``None``: not there, as with the gate off or before JobSet 0.13)."""
    def edit(fields):
        if jobset_count is not None:
            fields["jobset"]["status"]["executionAttempts"] = jobset_count
        for pod in fields["pods"]:
            annotations = pod["metadata"].setdefault("annotations", {})
            if pod_count is not None:
                annotations[EXECUTION] = pod_count
    return edit


def test_pods_of_an_earlier_execution_are_not_the_current_runs():
    """Kueue evicted the JobSet and admitted it again: ``restart-attempt`` is still 0, but the pods
    carry the execution before it, so none of them is the new run's."""
    before_the_eviction = state_of("running_two_slices", executions(1, "0"))
    assert (before_the_eviction.phase, before_the_eviction.slices_ready) == (Phase.PROVISIONING, 0)
    assert before_the_eviction.message == "waiting for the JobSet to create the pods of restart attempt 0"
    assert before_the_eviction.execution_attempts == 1
    after = state_of("running_two_slices", executions(1, "1"))
    assert (after.phase, after.slices_ready, after.execution_attempts) == (Phase.RUNNING, 2, 1)


def test_the_current_runs_pods_are_worked_out_once_per_observation_and_anew_for_a_replaced_one():
    """A look asks for them several times; an observation made from another by ``replace`` (other
    pods, another JobSet) must not answer from the first one's."""
    from dataclasses import replace

    from pathways_airflow.state.workload_parts import pods_of_current_attempt

    earlier = fixture("running_two_slices")
    executions(1, "0")(earlier)
    observation = observe(fixture("running_two_slices"))
    current = pods_of_current_attempt(observation)
    assert current and pods_of_current_attempt(observation) is current
    assert replace(observation, pods=()).derived == {} and pods_of_current_attempt(replace(observation, pods=())) == ()
    left_behind = replace(observation, jobset=earlier["jobset"], pods=tuple(earlier["pods"]))
    assert pods_of_current_attempt(left_behind) == ()
    assert pods_of_current_attempt(observation) is current


@pytest.mark.parametrize(("jobset_count", "pod_count"), [(1, None), (None, "0"), (None, None)], ids=["pods-unannotated", "not-counted", "neither"])
def test_without_both_counts_every_pod_of_the_restart_attempt_is_current(jobset_count, pod_count):
    state = state_of("running_two_slices", executions(jobset_count, pod_count))
    assert (state.phase, state.slices_ready, state.execution_attempts) == (Phase.RUNNING, 2, jobset_count)
    assert ("execution_attempts" in state.to_dict()) is (jobset_count is not None)
    assert WorkloadState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_a_pod_disrupted_before_kueue_evicted_and_resumed_the_jobset_does_not_excuse_the_new_runs_bug():
    def evicted_before_the_resume(count: str | None):
        def edit(fields):
            stopped = copy.deepcopy(next(p for p in pods_of(fixture("failed_disruption_last_seen"), "worker") if p["status"].get("reason")))
            stopped["metadata"]["labels"][ATTEMPT] = "0"
            if count is not None:
                executions(1, "1")(fields)
                stopped["metadata"].setdefault("annotations", {})[EXECUTION] = count
            fields["pods"].append(stopped)
        return edit

    assert state_of("failed_user_code_jobset", evicted_before_the_resume(None)).cause is FailureCause.DISRUPTION  # as before KEP-1282
    state = state_of("failed_user_code_jobset", evicted_before_the_resume("0"))
    assert (state.cause, state.exit_code, state.execution_attempts) == (FailureCause.USER_CODE, 3, 1)


def test_jobs_of_an_earlier_execution_are_not_the_current_runs_and_a_past_run_is_judged_by_restart_attempt():
    from pathways_airflow.state.workload_parts import as_of_restart, execution_attempts_of, of_current_run

    jobset = {"status": {"restarts": 1, "executionAttempts": 3}}
    jobs = [
        {"metadata": {"name": name, "labels": {ATTEMPT: attempt}, "annotations": {EXECUTION: count} if count else {}}}
        for name, attempt, count in (("old", "1", "2"), ("new", "1", "3"), ("unannotated", "1", None), ("restart-0", "0", "1"))
    ]
    assert [j["metadata"]["name"] for j in of_current_run(jobs, jobset)] == ["new", "unannotated"]
    assert execution_attempts_of(jobset) == 3 and execution_attempts_of({"status": {}}) is None and execution_attempts_of(None) is None
    past = as_of_restart(jobset, 0)  # which execution that run was the JobSet does not say
    assert execution_attempts_of(past) is None
    assert [j["metadata"]["name"] for j in of_current_run(jobs, past)] == ["restart-0"]


def test_a_pod_being_deleted_is_not_ready():
    def worker_terminating(fields):
        pods_of(fields, "worker")[0]["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"

    assert state_of("running_two_slices", worker_terminating).slices_ready == 1


def test_elastic_slices_are_read_from_the_proxy_flag_of_a_jobset():
    def as_jobset_backend(fields):
        fields.update(backend="jobset", pathwaysjob=None)

    state = state_of("running_elastic_two_of_three", as_jobset_backend)
    assert (state.phase, state.slices_ready, state.slices_total) == (Phase.RUNNING, 2, 3)
    assert state.message.startswith("running without 1 elastic slice(s): 2 pods pending: ")


def test_without_elastic_slices_a_missing_slice_keeps_it_provisioning():
    state = state_of("provisioning_two_of_three_slices")
    assert state.message.startswith("2 pods pending: 0/")


def test_a_head_that_is_not_running_keeps_it_provisioning():
    def head_starting(fields):
        head = pods_of(fields, "pathways-head")[0]
        head["status"]["phase"] = "Pending"
        for item in head["status"]["containerStatuses"]:
            item["state"] = {"waiting": {"reason": "ContainerCreating"}}

    state = state_of("running_two_slices", head_starting)
    assert state.phase is Phase.PROVISIONING and state.slices_ready == 2
    assert re.fullmatch(
        r"waiting for the head to start \(steady-pathways-head-0-0-\w+ is Pending\)", state.message
    )


def test_a_container_that_cannot_start_is_named():
    def bad_image(fields):
        head = pods_of(fields, "pathways-head")[0]
        head["status"]["phase"] = "Pending"
        head["status"]["containerStatuses"][0]["state"] = {
            "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "python:3.11x"'}
        }

    state = state_of("running_two_slices", bad_image)
    assert re.fullmatch(
        r"pod steady-pathways-head-0-0-\w+: container main ImagePullBackOff: "
        r'Back-off pulling image "python:3.11x"',
        state.message,
    )


def test_no_head_pod_yet_keeps_it_provisioning():
    state = state_of("running_two_slices", lambda f: f.update(pods=pods_of(f, "worker")))
    assert (state.phase, state.message) == (Phase.PROVISIONING, "waiting for the head pod to be created")


def test_a_restarting_jobset_condition_means_restarting():
    def restarting(fields):
        set_condition(fields["jobset"], "RestartingJobSet", "True", "Restarting", "")

    assert state_of("running_two_slices", restarting).phase is Phase.RESTARTING


def test_missing_status_and_unknown_conditions_are_tolerated():
    def bare(fields):
        fields["jobset"].pop("status")
        fields["pathwaysjob"].pop("status")
        fields["pods"] = []

    state = state_of("running_two_slices", bare)
    assert (state.phase, state.slices_total, state.restarts) == (Phase.PROVISIONING, 2, 0)

    def odd(fields):
        set_condition(fields["jobset"], "SomethingNewInV2", "True", "Whatever", "")
        fields["jobset"]["status"]["conditions"].append({"type": "NoStatusAtAll"})
        fields["jobset"]["status"]["restarts"] = "not a number"
        for pod in fields["pods"]:
            pod["status"]["conditions"].append({"type": "example.com/Custom", "status": "True"})

    assert state_of("running_two_slices", odd).phase is Phase.RUNNING


def test_a_jobset_without_a_worker_replicated_job_has_no_slices():
    def no_workers(fields):
        fields["jobset"]["spec"]["replicatedJobs"] = [
            r for r in fields["jobset"]["spec"]["replicatedJobs"] if r["name"] != "worker"
        ]
        fields["pods"] = pods_of(fields, "pathways-head")

    state = state_of("running_two_slices", no_workers)
    assert (state.phase, state.slices_total) == (Phase.RUNNING, 0)


# --- helpers ------------------------------------------------------------------------------------


def test_head_pod_is_the_current_attempts_head():
    fields = fixture("running_after_restart")
    head = head_pod(observe(fields))
    assert head is not None and head["metadata"]["labels"][ATTEMPT] == "1"
    older = copy.deepcopy(head)
    older["metadata"].update(name="bumpy-pathways-head-0-0-older", creationTimestamp="2000-01-01T00:00:00Z")
    older["metadata"]["labels"][ATTEMPT] = "0"
    fields["pods"].append(older)
    assert head_pod(observe(fields))["metadata"]["name"] == head["metadata"]["name"]
    assert head_pod(observe({**fields, "pods": []})) is None


def test_head_pod_prefers_a_live_pod_to_one_being_deleted():
    fields = fixture("running_two_slices")
    head = pods_of(fields, "pathways-head")[0]
    leaving = copy.deepcopy(head)
    leaving["metadata"].update(
        name="steady-pathways-head-0-0-zzzzz",
        deletionTimestamp="2030-01-01T00:00:00Z",
        creationTimestamp="2031-01-01T00:00:00Z",
    )
    fields["pods"].append(leaving)
    assert head_pod(observe(fields))["metadata"]["name"] == head["metadata"]["name"]


def test_main_container_status_finds_the_users_container_and_not_a_pathways_server():
    head = head_pod(observe(fixture("running_two_slices")))
    assert main_container_status(head)["name"] == "main"
    assert main_container_status(head, "main")["name"] == "main"
    assert main_container_status(head, "no-such-container") is None
    assert main_container_status(head_pod(observe(fixture("running_headless")))) is None
    assert main_container_status(None) is None

    renamed = copy.deepcopy(head)
    renamed["spec"]["containers"][0]["name"] = renamed["status"]["containerStatuses"][0]["name"] = "jax-tpu"
    assert main_container_status(renamed)["name"] == "jax-tpu"


def test_exit_code_of_reads_the_current_then_the_last_termination():
    assert exit_code_of({"state": {"running": {}}, "lastState": {"terminated": {"exitCode": 3}}}) is None
    assert (
        exit_code_of(
            {
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 3}},
            }
        )
        == 3
    )
    assert (
        exit_code_of({"state": {"terminated": {"exitCode": 0}}, "lastState": {"terminated": {"exitCode": 3}}})
        == 0
    )
    assert exit_code_of({"state": {"waiting": {"reason": "ContainerCreating"}}}) is None
    assert exit_code_of(None) is None


def test_failed_container_is_none_while_the_program_runs_or_after_it_succeeded():
    for name in ("running_two_slices", "succeeded", "running_headless"):
        assert failed_container(observe(fixture(name))) is None
    pod, container, code = failed_container(observe(fixture("failed_user_code_jobset")))
    assert pod.startswith("bug-js-pathways-head-0-0-") and (container, code) == ("main", 3)


# --- transition lines ---------------------------------------------------------------------------


def test_the_first_state_is_always_logged():
    assert transition_line(None, state_of("running_two_slices")) == "RUNNING 2/2 slices"


def test_a_changed_message_alone_is_not_logged():
    before = state_of("provisioning_unschedulable")
    after = WorkloadState(**{**before.__dict__, "message": "4 pods pending: something new"})
    assert transition_line(before, after) is None
    assert transition_line(before, before) is None


def test_a_restart_is_one_line_from_the_old_state_to_the_new():
    running = WorkloadState(Phase.RUNNING, slices_ready=1, slices_total=1)
    line = transition_line(running, state_of("restarting_after_maintenance"))
    assert line is not None
    assert line.startswith("RUNNING 1/1 slices → RESTARTING 0/1 slices (restarts: 1): 2 pods pending: 0/")
    back = transition_line(state_of("restarting_after_maintenance"), state_of("running_after_restart"))
    assert back == "RESTARTING 0/1 slices → RUNNING 1/1 slices (restarts: 1)"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            WorkloadState(Phase.PROVISIONING, slices_total=2),
            WorkloadState(Phase.RUNNING, slices_ready=2, slices_total=2),
            "PROVISIONING 0/2 slices → RUNNING 2/2 slices",
        ),
        (
            WorkloadState(Phase.RUNNING, slices_ready=3, slices_total=3),
            WorkloadState(
                Phase.RUNNING, message="running without 1 elastic slice(s)", slices_ready=2, slices_total=3
            ),
            "RUNNING 3/3 slices → RUNNING 2/3 slices: running without 1 elastic slice(s)",
        ),
        (
            WorkloadState(Phase.RUNNING, slices_ready=1, slices_total=1),
            WorkloadState(Phase.RUNNING, slices_ready=1, slices_total=1, restarts=1),
            "RUNNING 1/1 slices → RUNNING 1/1 slices (restarts: 1)",
        ),
        (
            WorkloadState(Phase.RUNNING, slices_ready=1, slices_total=1),
            WorkloadState(
                Phase.FAILED, message="m", slices_total=1, cause=FailureCause.USER_CODE, exit_code=3
            ),
            "RUNNING 1/1 slices → FAILED (USER_CODE, exit 3): m",
        ),
        (
            WorkloadState(Phase.FAILED, slices_total=1, cause=FailureCause.UNKNOWN),
            WorkloadState(Phase.FAILED, slices_total=1, cause=FailureCause.DISRUPTION),
            "FAILED → FAILED (DISRUPTION)",
        ),
        (
            WorkloadState(Phase.QUEUED, message="waiting for Kueue: a"),
            WorkloadState(Phase.QUEUED, message="waiting for Kueue: b"),
            None,
        ),
    ],
)
def test_transition_lines(before, after, expected):
    assert transition_line(before, after) == expected


# --- purity -------------------------------------------------------------------------------------


def test_status_imports_neither_airflow_nor_kubernetes():
    tree = ast.parse(Path(status_module.__file__).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {"__future__", "re", "typing", "pathways_airflow"}, imported


def test_workload_state_does_not_change_its_input():
    fields = fixture("failed_disruption_last_seen")
    before = json.dumps(fields, sort_keys=True)
    workload_state(observe(fields))
    assert json.dumps(fields, sort_keys=True) == before


def test_a_kueue_workload_belongs_to_its_jobset_by_owner_or_by_label():
    from pathways_airflow.state.model import kueue_workload_of

    owned = {"metadata": {"name": "jobset-train-1a2b3", "ownerReferences": [{"kind": "JobSet", "uid": "u-1"}]}}
    labelled = {"metadata": {"name": "jobset-train-4c5d6", "labels": {"kueue.x-k8s.io/job-uid": "u-2"}}}
    other = {"metadata": {"name": "jobset-other", "ownerReferences": [{"kind": "JobSet", "uid": "u-9"}]}}
    assert kueue_workload_of("u-1", [other, owned, labelled]) is owned
    assert kueue_workload_of("u-2", [other, owned, labelled]) is labelled
    assert kueue_workload_of("u-3", [other, owned, labelled]) is None
    assert kueue_workload_of("", [owned]) is None


def test_a_workload_that_waits_says_again_what_holds_it_every_five_minutes():
    from pathways_airflow.run.messages import STUCK_LOG_EVERY_SECONDS, still_waiting_line

    queued = state_of("queued_waiting_for_quota")
    start = 1_795_000_000.0
    assert still_waiting_line(queued, start, start, start + 60) is None
    line = still_waiting_line(queued, start, start, start + 14 * 60)
    assert line == f"still QUEUED after 14 min: {queued.message}"
    assert still_waiting_line(queued, start, start + 14 * 60, start + 14 * 60 + STUCK_LOG_EVERY_SECONDS - 1) is None
    assert still_waiting_line(state_of("running_two_slices"), start, start, start + 3600) is None


# --- a plain multislice JobSet: no Pathways head, every host runs the program ----------------------


def test_a_plain_multislice_jobsets_head_is_its_coordinator_pod_and_its_slices_are_its_one_job():
    from pathways_airflow.state.ran_on import RAN_ON_ANNOTATION, where_workers_run
    from pathways_airflow.state.workload_parts import head_job_name, pods_of_current_attempt, worker_job_name

    observation = observe(fixture("running_multislice"))
    assert (head_job_name(observation.jobset), worker_job_name(observation.jobset)) == ("slice", "slice")
    assert head_pod(observation)["metadata"]["name"].startswith("spmd-slice-0-0-")
    where = where_workers_run(pods_of_current_attempt(observation), 0, worker_job_name(observation.jobset))
    assert where is not None and len(json.loads(where[RAN_ON_ANNOTATION])["nodes"]) == 8
    pathways = observe(fixture("running_two_slices"))
    assert (head_job_name(pathways.jobset), worker_job_name(pathways.jobset)) == ("pathways-head", "worker")


def test_a_bug_on_any_host_of_a_plain_multislice_jobset_is_the_users_and_names_that_host():
    """The coordinator was still running when its neighbour exited 3 and the JobSet failed."""
    from pathways_airflow.state.disruption import Verdict, classify

    fields = fixture("failed_user_code_multislice_last_seen")
    state = workload_state(observe(fields))
    assert (state.cause, state.exit_code, state.container) == (FailureCause.USER_CODE, 3, "jax-tpu")
    assert state.pod and state.pod.startswith("spmd-bug-slice-") and "its pod is gone" not in state.message
    verdict = classify(pods=fields["pods"], nodes=[], jobset=fields["jobset"])
    assert (verdict.verdict, verdict.exit_code) == (Verdict.USER_ERROR, 3)


def test_a_plain_multislice_jobset_restarted_by_maintenance_waits_for_its_lost_slice():
    observation = observe(fixture("restarting_multislice_after_maintenance"))
    state = workload_state(observation)
    assert (state.phase, state.slices_ready, state.slices_total, state.restarts) == (Phase.RESTARTING, 1, 2, 1)
    assert head_pod(observation)["metadata"]["labels"][ATTEMPT] == "1"


@pytest.mark.parametrize(("name", "proven"), [
    ("failed_disruption_last_seen", True),  # the workers' DisruptionTarget, as last seen
    ("failed_disruption_jobset_last_seen", True),
    ("failed_disruption", False),  # its pods are gone: only the nodes can still vouch
    ("failed_user_code_jobset", False),
    ("failed_user_code_multislice_last_seen", False),
])
def test_a_verdict_waits_for_the_nodes_only_where_the_pods_do_not_prove_a_disruption_already(name, proven):
    from pathways_airflow.state.disruption import shown_without_nodes

    fields = fixture(name)
    assert shown_without_nodes(fields["pods"], fields.get("jobs") or (), fields["jobset"]) is proven


def test_evidence_still_seen_is_not_repeated_as_seen_while_it_ran():
    from pathways_airflow.state.disruption import Classification, Verdict, classify

    fields = fixture("failed_disruption_last_seen")
    live = classify(pods=fields["pods"], nodes=[], jobset=fields["jobset"])
    pod_line = next(e for e in live.evidence if e.startswith("pod "))
    recorded = Classification(Verdict.MAINTENANCE, (f"seen while it ran: {pod_line}", "seen while it ran: node n-1: maintenance"))
    both = classify(pods=fields["pods"], nodes=[], jobset=fields["jobset"], recorded=recorded)
    assert both.verdict is Verdict.MAINTENANCE
    assert f"seen while it ran: {pod_line}" not in both.evidence and both.evidence.count(pod_line) == 1
    assert "seen while it ran: node n-1: maintenance" in both.evidence  # what is no longer seen stays


def test_nodes_that_could_not_be_read_are_not_nodes_that_are_gone():
    from pathways_airflow.state.disruption import Verdict, classify

    fields = fixture("failed_disruption_last_seen")
    unread = classify(pods=fields["pods"], nodes=None, jobset=fields["jobset"])
    assert unread.verdict is Verdict.UNKNOWN_INFRA and not any("node is gone" in e for e in unread.evidence)
    listed_none = classify(pods=fields["pods"], nodes=[], jobset=fields["jobset"])  # listed, and none of them there
    assert listed_none.verdict is Verdict.SLICE_FAILURE and "node is gone" in listed_none.evidence
