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

The small helpers (:func:`head_pod`, :func:`main_container_status`, :func:`failed_container`,
:func:`transition_line`) are public because the operator and triggers reuse them for logs and
XCom values.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow import well_known
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.parse import workload_from_pathwaysjob
from pathways_airflow.spec.render import HEAD_JOB, USER_ERROR_RULE_NAME, WORKER_JOB
from pathways_airflow.spec.workload import RESERVED_CONTAINER_NAMES
from pathways_airflow.state.conditions import condition, conditions, is_true
from pathways_airflow.state.kueue_timeout import max_exec_time_exceeded
from pathways_airflow.state.model import FailureCause, Observation, Phase, WorkloadState

Obj = Mapping[str, Any]


DISRUPTED_POD_REASONS = ("Terminated", "NodeShutdown", "Evicted", "Preempting")
"""``status.reason`` of a pod its node ended: graceful shutdown, refused in shutdown, pressure eviction."""

CONTAINER_PROBLEMS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
    "RunContainerError",
)
"""Waiting reasons that keep a pod from ever becoming ready on its own; worth a line in the message."""

_MISSING_LOCAL_QUEUE = re.compile(r"LocalQueue \S+ doesn't exist")
_ELASTIC_FLAG = re.compile(r"^--num_elastic_slices=(\d+)$")


# --- reading API objects -----------------------------------------------------------------------


def _status(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("status") or {}


def _metadata(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def _labels(obj: Obj | None) -> Mapping[str, str]:
    return _metadata(obj).get("labels") or {}


def _name(obj: Obj | None) -> str:
    return str(_metadata(obj).get("name", ""))


def _as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _is_being_deleted(obj: Obj | None) -> bool:
    return bool(_metadata(obj).get("deletionTimestamp"))


def _kind_and_name(obj: Obj | None, kind: str, observation: Observation) -> str:
    return f"{kind} {observation.namespace}/{_name(obj) or observation.name}"


def _said(found: Mapping[str, Any] | None) -> str:
    """``Reason: message`` of a condition, as a human reads it in ``kubectl describe``."""
    if not found:
        return ""
    reason, message = found.get("reason") or "", found.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


# --- restart attempts, head and slices ---------------------------------------------------------


def restarts_of(jobset: Obj | None) -> int:
    """``status.restarts`` of a JobSet: every restart so far, counted towards ``maxRestarts`` or not."""
    return _as_int(_status(jobset).get("restarts"), 0)


def _attempt_label(pod: Obj) -> int | None:
    value = _labels(pod).get(well_known.RESTART_ATTEMPT)
    return _as_int(value, -1) if value is not None else None


def current_attempt(observation: Observation) -> int:
    """The restart attempt the JobSet is on; without a JobSet, the newest attempt any pod carries."""
    if observation.jobset is not None:
        return restarts_of(observation.jobset)
    attempts = [a for a in (_attempt_label(p) for p in observation.pods) if a is not None]
    return max(attempts, default=0)


def pods_of_current_attempt(observation: Observation) -> list[Obj]:
    """Pods of the attempt the JobSet is on, plus any pod without an attempt label."""
    attempt = current_attempt(observation)
    return [p for p in observation.pods if _attempt_label(p) in (None, attempt)]


def _replicated_job_of(pod: Obj) -> str:
    return _labels(pod).get(well_known.REPLICATED_JOB, "")


def _newest_first(pods: Iterable[Obj]) -> list[Obj]:
    """Live pods before ones being deleted, then the most recently created first."""
    ordered = sorted(
        pods, key=lambda p: (str(_metadata(p).get("creationTimestamp", "")), _name(p)), reverse=True
    )
    return sorted(ordered, key=_is_being_deleted)


def head_pods(observation: Observation) -> list[Obj]:
    """The ``pathways-head`` pods of the current attempt, the one that matters most first."""
    return _newest_first(p for p in pods_of_current_attempt(observation) if _replicated_job_of(p) == HEAD_JOB)


def head_pod(observation: Observation) -> dict[str, Any] | None:
    """The Pathways head pod of the current restart attempt (live and newest preferred), or ``None``."""
    found = head_pods(observation)
    return dict(found[0]) if found else None


def _worker_replicated_job(jobset: Obj | None) -> Mapping[str, Any] | None:
    for replicated in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or ():
        if isinstance(replicated, Mapping) and replicated.get("name") == WORKER_JOB:
            return replicated
    return None


def slices_total(jobset: Obj | None) -> int:
    """How many TPU slices the workload asks for: replicas of the ``worker`` replicated job."""
    worker = _worker_replicated_job(jobset)
    return _as_int(worker.get("replicas"), 1) if worker is not None else 0


def pods_per_slice(jobset: Obj | None) -> int:
    """VMs per slice: the worker Job's ``parallelism`` (one pod per VM)."""
    worker = _worker_replicated_job(jobset) or {}
    job_spec = (worker.get("template") or {}).get("spec") or {}
    return max(1, _as_int(job_spec.get("parallelism"), 1))


def is_running_and_ready(pod: Obj) -> bool:
    return (
        _status(pod).get("phase") == "Running"
        and is_true(pod, "Ready")
        and not _is_being_deleted(pod)
    )


def slices_ready(observation: Observation) -> int:
    """Slices whose every worker pod of the current attempt is Running and Ready."""
    needed = pods_per_slice(observation.jobset)
    ready_per_slice: dict[str, int] = {}
    for pod in pods_of_current_attempt(observation):
        if _replicated_job_of(pod) == WORKER_JOB and is_running_and_ready(pod):
            index = _labels(pod).get(well_known.JOB_INDEX, "0")
            ready_per_slice[index] = ready_per_slice.get(index, 0) + 1
    return sum(1 for count in ready_per_slice.values() if count >= needed)


def elastic_slices(observation: Observation) -> int:
    """Slices the workload may run without: PathwaysJob ``elasticSlices``, or the proxy's flag in a JobSet."""
    controller = ((observation.pathwaysjob or {}).get("spec") or {}).get("controller") or {}
    if controller.get("elasticSlices") is not None:
        return max(0, _as_int(controller.get("elasticSlices"), 0))
    for replicated in ((observation.jobset or {}).get("spec") or {}).get("replicatedJobs") or ():
        if replicated.get("name") != HEAD_JOB:
            continue
        pod_spec = (((replicated.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        for container in [*(pod_spec.get("initContainers") or ()), *(pod_spec.get("containers") or ())]:
            for arg in container.get("args") or ():
                match = _ELASTIC_FLAG.match(str(arg))
                if match:
                    return int(match.group(1))
    return 0


# --- containers --------------------------------------------------------------------------------


def _declared_main_container(observation: Observation) -> tuple[bool, str | None]:
    """``(known, name)``: what the PathwaysJob says the main container is (``None`` when headless)."""
    if observation.pathwaysjob is None:
        return False, None
    controller = (observation.pathwaysjob.get("spec") or {}).get("controller") or {}
    if not controller.get("template"):
        return True, None
    return True, str(controller.get("mainContainerName") or "main")


def main_container_status(pod: Obj | None, container_name: str | None = None) -> dict[str, Any] | None:
    """The status of the user's container in a head pod, or ``None`` (headless head, not started).

    Without ``container_name`` the main container is the pod's first container that is not one
    of the Pathways servers the layout adds: a headless head runs only those, and has none.
    """
    if not pod:
        return None
    statuses = [s for s in _status(pod).get("containerStatuses") or () if isinstance(s, Mapping)]
    if container_name is None:
        declared = [c.get("name") for c in ((pod.get("spec") or {}).get("containers") or ())]
        names = declared or [s.get("name") for s in statuses]
        container_name = next((n for n in names if n and n not in RESERVED_CONTAINER_NAMES), None)
        if container_name is None:
            return None
    found = next((s for s in statuses if s.get("name") == container_name), None)
    return dict(found) if found is not None else None


def exit_code_of(container_status: Mapping[str, Any] | None) -> int | None:
    """How a container ended: its current termination, or its last one while it waits to restart."""
    if not container_status:
        return None
    state = container_status.get("state") or {}
    if "terminated" in state:
        return _as_int((state.get("terminated") or {}).get("exitCode"), 0)
    if "running" in state:
        return None
    last = (container_status.get("lastState") or {}).get("terminated")
    return _as_int(last.get("exitCode"), 0) if last else None


def failed_container(observation: Observation) -> tuple[str, str, int] | None:
    """``(pod, container, exit code)`` when the current attempt's head program ended non-zero."""
    found = _head_exit(observation, head_pods(observation), restarted_too=False)
    return found[:3] if found else None


def head_exit_seen(observation: Observation) -> tuple[str, str, int, int] | None:
    """``(pod, container, exit code, restart attempt)`` of the newest non-zero exit of a head
    program, also one it was already restarted in place after (its ``lastState``: the Job counts
    that restart as its failure). Any attempt's: the JobSet may restart within the same second,
    before a watcher has seen the exit on the attempt it happened in."""
    return _head_exit(observation, _newest_first(p for p in observation.pods if _replicated_job_of(p) == HEAD_JOB), restarted_too=True)


def _head_exit(observation: Observation, heads: Iterable[Obj], *, restarted_too: bool) -> tuple[str, str, int, int] | None:
    known, declared = _declared_main_container(observation)
    if known and declared is None:
        return None
    for pod in heads:
        status = main_container_status(pod, declared)
        code = exit_code_of(status)
        if not code and restarted_too and status is not None:
            code = _as_int(((status.get("lastState") or {}).get("terminated") or {}).get("exitCode"), 0)
        if status is not None and code:
            attempt = _attempt_label(pod)
            return _name(pod), str(status.get("name")), code, current_attempt(observation) if attempt is None else attempt
    return None


# --- evidence of a disruption ------------------------------------------------------------------


def disruption_evidence(pods: Iterable[Obj]) -> tuple[str, ...]:
    """One line per pod the infrastructure ended: ``DisruptionTarget`` or a node-shutdown/eviction reason."""
    evidence = []
    for pod in sorted(pods, key=_name):
        signs = []
        target = condition(pod, "DisruptionTarget")
        if target is not None and target.get("status") == "True":
            signs.append(f"DisruptionTarget ({target.get('reason') or 'no reason'})")
        reason = _status(pod).get("reason")
        if reason in DISRUPTED_POD_REASONS:
            message = _status(pod).get("message")
            signs.append(f"{reason}: {message}" if message else str(reason))
        if signs:
            evidence.append(f"pod {_name(pod)}: {'; '.join(signs)}")
    return tuple(evidence)


def _first_of(evidence: Sequence[str]) -> str:
    more = len(evidence) - 1
    return evidence[0] + (f" (and {more} more pod{'s' if more > 1 else ''})" if more else "")


# --- the states --------------------------------------------------------------------------------


def workload_state(observation: Observation) -> WorkloadState:
    """What the workload is doing now, from one consistent read of its objects."""
    top = observation.pathwaysjob if observation.backend == "pathwaysjob" else observation.jobset
    if top is None:
        return state_of_a_missing_workload(observation)
    jobset = observation.jobset
    if jobset is None:
        return state_before_the_jobset_exists(observation)
    if is_true(jobset, "Completed") or _status(jobset).get("terminalState") == "Completed":
        return _with_counts(
            observation, WorkloadState(Phase.SUCCEEDED, message=_said(condition(jobset, "Completed")))
        )
    if is_true(jobset, "Failed") or _status(jobset).get("terminalState") == "Failed":
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
    terminal = _status(pathwaysjob).get("terminalState")
    if terminal == "Failed" and condition(pathwaysjob, "Failed") is None:
        return WorkloadState(
            Phase.FAILED, message=rejected_spec_message(pathwaysjob, where), cause=FailureCause.BAD_SPEC
        )
    if terminal == "Failed":
        said = _said(condition(pathwaysjob, "Failed"))
        return WorkloadState(
            Phase.FAILED,
            message=f"{where} failed and its JobSet is gone, so the cause cannot be read: {said}",
            cause=FailureCause.UNKNOWN,
        )
    if terminal == "Completed":
        return WorkloadState(Phase.SUCCEEDED, message=_said(condition(pathwaysjob, "Completed")))
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
    said = _said(condition(jobset, "Failed")) or "terminalState Failed"
    jobset_says = f"JobSet {said}"
    evidence = disruption_evidence(pods_of_current_attempt(observation))
    if evidence:
        return WorkloadState(
            Phase.FAILED,
            message=f"the infrastructure ended it: {_first_of(evidence)}; {jobset_says}",
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
        if obj is not None and _is_being_deleted(obj):
            return WorkloadState(
                Phase.FAILED,
                message=(
                    f"{_kind_and_name(obj, kind, observation)} is being deleted by someone else "
                    f"(deletionTimestamp {_metadata(obj)['deletionTimestamp']})"
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
        if _status(workload).get("admission"):
            return None
        return WorkloadState(Phase.QUEUED, message=f"waiting for Kueue to consider Workload {_name(workload)}")
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
        return WorkloadState(Phase.QUEUED, message=f"quota reserved, waiting for admission: {_said(admitted)}")
    return None


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
    queue = _labels(jobset).get(well_known.QUEUE_NAME)
    if queue and observation.kueue_workload is None:
        return WorkloadState(Phase.QUEUED, message=f"suspended until Kueue admits it from LocalQueue {queue}")
    return WorkloadState(
        Phase.QUEUED,
        message=f"JobSet is suspended: {_said(condition(jobset, 'Suspended')) or 'spec.suspend is true'}",
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
    head_runs = head is not None and _status(head).get("phase") == "Running" and not _is_being_deleted(head)
    head_done = head is not None and _status(head).get("phase") == "Succeeded"
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
    pods = [p for p in pods_of_current_attempt(observation) if not _is_being_deleted(p)]
    if not pods:
        return f"waiting for the JobSet to create the pods of restart attempt {current_attempt(observation)}"
    unschedulable = [p for p in sorted(pods, key=_name) if is_unschedulable(p)]
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
    if _status(head).get("phase") != "Running":
        return f"waiting for the head to start ({_name(head)} is {_status(head).get('phase') or 'Pending'})"
    total = slices_total(observation.jobset)
    return f"waiting for slices: {slices_ready(observation)}/{total} ready"


def is_unschedulable(pod: Obj) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and _status(pod).get("phase") in (None, "Pending")
    )


def container_problem(pods: Iterable[Obj]) -> str | None:
    """``pod P: container C ImagePullBackOff: ...`` for the first container that cannot start by itself."""
    for pod in sorted(pods, key=_name):
        statuses = [
            *(_status(pod).get("initContainerStatuses") or ()),
            *(_status(pod).get("containerStatuses") or ()),
        ]
        for item in statuses:
            waiting = (item.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in CONTAINER_PROBLEMS:
                detail = f": {waiting['message']}" if waiting.get("message") else ""
                return f"pod {_name(pod)}: container {item.get('name')} {waiting['reason']}{detail}"
    return None


def has_reached(state: WorkloadState, phase: str) -> bool:
    """Whether a sensor waiting for ``phase`` is done: ``RUNNING`` is running with every slice ready (or
    already succeeded); ``SUCCEEDED`` is succeeded."""
    every_slice_ready = state.phase is Phase.RUNNING and state.slices_ready >= state.slices_total
    return state.phase is Phase.SUCCEEDED or (phase == Phase.RUNNING.value and every_slice_ready)
