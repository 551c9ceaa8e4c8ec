"""PathwaysJob + JobSet + pods (+ Kueue Workload) → :class:`WorkloadState`. Pure: plain dicts in, data out.

Every wait of the provider reads a workload through :func:`workload_state`, so the rules of
what "queued", "running" or "failed because of whom" mean live here and nowhere else:

* The JobSet is the truth whenever it exists. A PathwaysJob mirrors only the *last* condition
  of its JobSet and keeps saying ``Running`` while the JobSet restarts; restarts, suspension and
  the failure reason are visible only on the JobSet and its pods.
* Queued is not failed: a suspended JobSet, a Kueue Workload waiting for quota and an evicted
  Workload are all QUEUED. Only a Workload Kueue can never admit (its LocalQueue does not
  exist) is a failure, because waiting cannot fix it.
* A failure is blamed on the infrastructure when any pod of the failed attempt shows a
  disruption, before the exit code of the user's program is looked at: a JAX program whose
  slice vanished exits non-zero too, and blaming the user would stop a run that should resume.
* Pods are read per restart attempt (label ``jobset.sigs.k8s.io/restart-attempt`` equal to the
  JobSet's ``status.restarts``): pods of an earlier attempt describe a past the JobSet already
  recovered from. Pods without the label are taken as current, so hand-made or trimmed
  observations still classify.

The readers of a workload's parts (head pod, restart attempt, slices, containers) are
:mod:`pathways_airflow.state.workload_parts`; this module holds the rules built on them.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from pathways_airflow import well_known
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.parse import workload_from_pathwaysjob
from pathways_airflow.spec.render import USER_ERROR_RULE_NAME
from pathways_airflow.state.conditions import condition, condition_text, conditions, is_true
from pathways_airflow.state.disruption import rode_out_slice_losses, without_replaced_pods
from pathways_airflow.state.kueue_timeout import max_exec_time_exceeded
from pathways_airflow.state.model import FailureCause, Observation, Phase, WorkloadState
from pathways_airflow.state.workload_parts import (
    Obj,
    container_problem,
    current_attempt,
    disruption_evidence,
    elastic_slices,
    execution_attempts_of,
    failed_container,
    head_pod,
    is_being_deleted,
    is_unschedulable,
    labels_of,
    metadata_of,
    name_of,
    pods_of_current_attempt,
    restarts_of,
    slices_ready,
    slices_total,
    status_of,
)



_MISSING_LOCAL_QUEUE = re.compile(r"LocalQueue \S+ doesn't exist")


def _kind_and_name(obj: Obj | None, kind: str, observation: Observation) -> str:
    return f"{kind} {observation.namespace}/{name_of(obj) or observation.name}"


def _first_of(evidence: Sequence[str]) -> str:
    more = len(evidence) - 1
    return evidence[0] + (f" (and {more} more pod{'s' if more > 1 else ''})" if more else "")


# --- the states --------------------------------------------------------------------------------


def workload_state(observation: Observation) -> WorkloadState:
    """What the workload is doing now, from one consistent read of its objects, with the JobSet's
    count of executions where it keeps one (:func:`~pathways_airflow.state.workload_parts.execution_attempts_of`):
    the one count that tells a run Kueue evicted and admitted again from one that never stopped."""
    return _state_of(observation).with_execution_attempts(execution_attempts_of(observation.jobset))


def _state_of(observation: Observation) -> WorkloadState:
    top = observation.pathwaysjob if observation.backend == "pathwaysjob" else observation.jobset
    if top is None:
        return state_of_a_missing_workload(observation)
    jobset = observation.jobset
    if jobset is None:
        return state_before_the_jobset_exists(observation)
    if is_true(jobset, "Completed") or status_of(jobset).get("terminalState") == "Completed":
        return _with_counts(
            observation, WorkloadState(Phase.SUCCEEDED, message=condition_text(condition(jobset, "Completed")))
        )
    if is_true(jobset, "Failed") or status_of(jobset).get("terminalState") == "Failed":
        return _with_counts(observation, state_of_a_failed_jobset(observation))
    deleted = state_of_a_workload_being_deleted(observation)
    if deleted is not None:
        return _with_counts(observation, deleted)
    waiting = state_from_kueue(observation) or state_of_a_suspended_jobset(observation)
    if waiting is not None:
        return _with_counts(observation, waiting)
    return state_of_a_started_jobset(observation)


def _with_counts(observation: Observation, state: WorkloadState) -> WorkloadState:
    """``state`` with the slice and restart counts every phase reports."""
    return WorkloadState(
        phase=state.phase,
        message=state.message,
        slices_ready=slices_ready(observation),
        slices_total=slices_total(observation.jobset),
        restarts=restarts_of(observation.jobset),
        cause=state.cause,
        exit_code=state.exit_code,
        container=state.container,
        pod=state.pod,
        evidence=state.evidence,
    )


def state_of_a_missing_workload(observation: Observation) -> WorkloadState:
    """No top object: deleted under us if we had submitted it, else simply not created yet."""
    kind = "PathwaysJob" if observation.backend == "pathwaysjob" else "JobSet"
    where = f"{kind} {observation.namespace}/{observation.name}"
    if not observation.submitted:
        return WorkloadState(Phase.PROVISIONING, message=f"{where} has not been created yet")
    return WorkloadState(
        Phase.FAILED,
        message=f"{where} was deleted by someone else while we waited on it",
        cause=FailureCause.DELETED,
    )


def state_before_the_jobset_exists(observation: Observation) -> WorkloadState:
    """A PathwaysJob without its JobSet: the controller has not acted yet, or refused the spec."""
    pathwaysjob = observation.pathwaysjob or {}
    where = _kind_and_name(pathwaysjob, "PathwaysJob", observation)
    terminal = status_of(pathwaysjob).get("terminalState")
    if terminal == "Failed" and condition(pathwaysjob, "Failed") is None:
        return WorkloadState(
            Phase.FAILED, message=rejected_spec_message(pathwaysjob, where), cause=FailureCause.BAD_SPEC
        )
    if terminal == "Failed":
        said = condition_text(condition(pathwaysjob, "Failed"))
        return WorkloadState(
            Phase.FAILED,
            message=f"{where} failed and its JobSet is gone, so the cause cannot be read: {said}",
            cause=FailureCause.UNKNOWN,
        )
    if terminal == "Completed":
        return WorkloadState(Phase.SUCCEEDED, message=condition_text(condition(pathwaysjob, "Completed")))
    deleted = state_of_a_workload_being_deleted(observation)
    if deleted is not None:
        return deleted
    return WorkloadState(
        Phase.PROVISIONING, message="waiting for the PathwaysJob controller to create the JobSet"
    )


def rejected_spec_message(pathwaysjob: Obj, where: str) -> str:
    """Why the PathwaysJob controller failed a job without a word: say what it checks and what was wrong."""
    text = f"the PathwaysJob controller rejected {where} (terminalState Failed, no condition, no JobSet)"
    objections = controller_objections(pathwaysjob)
    if objections:
        return f"{text}: " + "; ".join(objections)
    worker = ((((pathwaysjob.get("spec") or {}).get("workers")) or [{}])[0]) or {}
    return (
        f"{text}, as it does for a topology that is not valid for the machine type: check spec.workers[0] "
        f"(type {worker.get('type')!r}, topology {worker.get('topology')!r}) and the controller's events"
    )


def controller_objections(pathwaysjob: Obj) -> tuple[str, ...]:
    """What the PathwaysJob controller's own checks (machine type, topology) find wrong with the spec.

    A spec too malformed to read yields nothing rather than an exception: the caller still has
    general advice to give, and a status read must never crash a wait.
    """
    try:
        workload_from_pathwaysjob(pathwaysjob)
    except InvalidWorkloadSpec as error:
        return tuple(str(problem) for problem in error.problems)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        return ()
    return ()


def state_of_a_failed_jobset(observation: Observation) -> WorkloadState:
    """FAILED, blamed on the infrastructure, the user's program, or nobody we can name."""
    jobset = observation.jobset or {}
    said = condition_text(condition(jobset, "Failed")) or "terminalState Failed"
    jobset_says = f"JobSet {said}"
    pods = pods_of_current_attempt(observation)
    evidence = disruption_evidence(without_replaced_pods(pods) if rode_out_slice_losses(observation) else pods)  # not the losses it rode out
    if evidence:  # "reached max number of restarts" reads as a failure of ours: said only when the JobSet blamed the program
        blamed = (condition(jobset, "Failed") or {}).get("reason") != "ReachedMaxRestarts"
        return WorkloadState(
            Phase.FAILED,
            message=f"the infrastructure ended it: {_first_of(evidence)}" + (f"; {jobset_says}" if blamed else ""),
            cause=FailureCause.DISRUPTION,
            evidence=evidence,
        )
    failed = failed_container(observation)
    if failed is not None:
        pod, container, code = failed
        return WorkloadState(
            Phase.FAILED,
            message=f"container {container} of pod {pod} exited with code {code}; {jobset_says}",
            cause=FailureCause.USER_CODE,
            exit_code=code,
            container=container,
            pod=pod,
        )
    if failed_by_the_user_error_rule(jobset):
        return WorkloadState(
            Phase.FAILED,
            message=(
                "the head's main container exited with a user-error exit code "
                f"(rule {USER_ERROR_RULE_NAME}); its pod is gone, so the code is not known; {jobset_says}"
            ),
            cause=FailureCause.USER_CODE,
        )
    return WorkloadState(
        Phase.FAILED,
        message=f"no pod of restart attempt {restarts_of(jobset)} shows why; {jobset_says}",
        cause=FailureCause.UNKNOWN,
    )


def failed_by_the_user_error_rule(jobset: Obj) -> bool:
    """The ``jobset`` backend's failure policy ruled a user error: an exit code that is not a system one."""
    failed = condition(jobset, "Failed") or {}
    by_a_rule = failed.get("reason") == "FailJobSetFailurePolicyAction"
    return by_a_rule and USER_ERROR_RULE_NAME in str(failed.get("message", ""))


def state_of_a_workload_being_deleted(observation: Observation) -> WorkloadState | None:
    """A deletion we did not ask for (ours stop watching first): the workload will not finish."""
    for obj, kind in ((observation.pathwaysjob, "PathwaysJob"), (observation.jobset, "JobSet")):
        if obj is not None and is_being_deleted(obj):
            return WorkloadState(
                Phase.FAILED,
                message=(
                    f"{_kind_and_name(obj, kind, observation)} is being deleted by someone else "
                    f"(deletionTimestamp {metadata_of(obj)['deletionTimestamp']})"
                ),
                cause=FailureCause.DELETED,
            )
    return None


def state_from_kueue(observation: Observation) -> WorkloadState | None:
    """QUEUED while Kueue has not admitted the workload (or evicted it); FAILED when it never can."""
    workload = observation.kueue_workload
    if workload is None or is_true(workload, "Finished"):
        return None
    timed_out = max_exec_time_exceeded(workload)
    if timed_out:
        return WorkloadState(Phase.FAILED, message=timed_out, cause=FailureCause.TIMEOUT)
    evicted = condition(workload, "Evicted")
    if evicted is not None and evicted.get("status") == "True" and not readmitted_since(workload, evicted):
        reason, message = evicted.get("reason") or "no reason", evicted.get("message") or "no message"
        return WorkloadState(
            Phase.QUEUED, message=f"evicted by Kueue ({reason}): {message}; waiting to be admitted again"
        )
    reserved = condition(workload, "QuotaReserved")
    if reserved is None:
        if status_of(workload).get("admission"):
            return None
        return WorkloadState(Phase.QUEUED, message=f"waiting for Kueue to consider Workload {name_of(workload)}")
    if reserved.get("status") != "True":
        message = reserved.get("message") or reserved.get("reason") or "no reason given"
        if reserved.get("reason") == "Inadmissible" and _MISSING_LOCAL_QUEUE.search(message):
            return WorkloadState(
                Phase.FAILED,
                message=(
                    f"Kueue can never admit it: {message} in namespace {observation.namespace}; "
                    "set queue_name to an existing LocalQueue (kubectl get localqueues -n "
                    f"{observation.namespace})"
                ),
                cause=FailureCause.QUOTA,
            )
        return WorkloadState(Phase.QUEUED, message=f"waiting for Kueue: {message}")
    admitted = condition(workload, "Admitted")
    if admitted is not None and admitted.get("status") != "True":
        return WorkloadState(Phase.QUEUED, message=f"quota reserved, waiting for admission: {condition_text(admitted)}")
    return None


def admitted_at(workload: Obj | None) -> str:
    """When Kueue last admitted the workload (its ``Admitted`` condition's transition, on the API
    server's clock); ``""`` when it is not admitted or not queued. An eviction and re-admission
    moves it while the JobSet's restart attempt stays: the pods run elsewhere since."""
    admitted = condition(workload, "Admitted")
    return str(admitted.get("lastTransitionTime", "")) if admitted is not None and admitted.get("status") == "True" else ""


def readmitted_since(workload: Obj, evicted: Mapping[str, Any]) -> bool:
    """Kueue admitted the workload again after evicting it (the Evicted condition lags behind)."""
    admitted = condition(workload, "Admitted")
    if admitted is None or admitted.get("status") != "True":
        return False
    return str(admitted.get("lastTransitionTime", "")) > str(evicted.get("lastTransitionTime", ""))


def state_of_a_suspended_jobset(observation: Observation) -> WorkloadState | None:
    """QUEUED while the JobSet is suspended (by Kueue's webhook, or by hand)."""
    jobset = observation.jobset or {}
    if not is_suspended(jobset):
        return None
    queue = labels_of(jobset).get(well_known.QUEUE_NAME)
    if queue and observation.kueue_workload is None:
        return WorkloadState(Phase.QUEUED, message=f"suspended until Kueue admits it from LocalQueue {queue}")
    return WorkloadState(
        Phase.QUEUED,
        message=f"JobSet is suspended: {condition_text(condition(jobset, 'Suspended')) or 'spec.suspend is true'}",
    )


def is_suspended(jobset: Obj) -> bool:
    """``spec.suspend``, or a ``Suspended=True`` condition newer than every other true condition."""
    if ((jobset.get("spec") or {}).get("suspend")) is True:
        return True
    suspended = condition(jobset, "Suspended")
    if suspended is None or suspended.get("status") != "True":
        return False
    since = str(suspended.get("lastTransitionTime", ""))
    others = [
        str(c.get("lastTransitionTime", ""))
        for c in conditions(jobset)
        if c.get("type") != "Suspended" and c.get("status") == "True"
    ]
    return all(since >= other for other in others)


def state_of_a_started_jobset(observation: Observation) -> WorkloadState:
    """RUNNING once the head runs and enough slices are ready; before that PROVISIONING, or RESTARTING."""
    jobset = observation.jobset or {}
    total, ready, restarts = slices_total(jobset), slices_ready(observation), restarts_of(jobset)
    head = head_pod(observation)
    needed = max(0, total - elastic_slices(observation))
    head_runs = head is not None and status_of(head).get("phase") == "Running" and not is_being_deleted(head)
    head_done = head is not None and status_of(head).get("phase") == "Succeeded"
    restarting = is_true(jobset, "RestartingJobSet")
    if head_done and not restarting:
        # The program exited 0; the JobSet marks itself Completed a moment later.
        return WorkloadState(
            Phase.RUNNING,
            message="the program finished; waiting for the JobSet to complete",
            slices_ready=ready,
            slices_total=total,
            restarts=restarts,
        )
    if head_runs and ready >= needed and not restarting:
        message = (
            ""
            if ready >= total
            else f"running without {total - ready} elastic slice(s): {waiting_message(observation)}"
        )
        return WorkloadState(
            Phase.RUNNING, message=message, slices_ready=ready, slices_total=total, restarts=restarts
        )
    phase = Phase.RESTARTING if restarts > 0 or restarting else Phase.PROVISIONING
    return WorkloadState(
        phase, message=waiting_message(observation), slices_ready=ready, slices_total=total, restarts=restarts
    )


def waiting_message(observation: Observation) -> str:
    """The most useful thing to tell a human about a workload that is not running yet."""
    pods = [p for p in pods_of_current_attempt(observation) if not is_being_deleted(p)]
    if not pods:
        return f"waiting for the JobSet to create the pods of restart attempt {current_attempt(observation)}"
    unschedulable = [p for p in sorted(pods, key=name_of) if is_unschedulable(p)]
    if unschedulable:
        scheduler = condition(unschedulable[0], "PodScheduled") or {}
        why = scheduler.get("message") or scheduler.get("reason") or "unschedulable"
        count = len(unschedulable)
        return f"{count} pod{'s' if count > 1 else ''} pending: {why}"
    stuck = container_problem(pods)
    if stuck:
        return stuck
    head = head_pod(observation)
    if head is None:
        return "waiting for the head pod to be created"
    if status_of(head).get("phase") != "Running":
        return f"waiting for the head to start ({name_of(head)} is {status_of(head).get('phase') or 'Pending'})"
    total = slices_total(observation.jobset)
    return f"waiting for slices: {slices_ready(observation)}/{total} ready"


def has_reached(state: WorkloadState, phase: str) -> bool:
    """Whether a sensor waiting for ``phase`` is done: ``RUNNING`` is running with every slice ready (or
    already succeeded); ``SUCCEEDED`` is succeeded."""
    every_slice_ready = state.phase is Phase.RUNNING and state.slices_ready >= state.slices_total
    return state.phase is Phase.SUCCEEDED or (phase == Phase.RUNNING.value and every_slice_ready)
