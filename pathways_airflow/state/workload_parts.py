"""The parts of a workload as the API shows them: its restart attempt, head pod, slices, containers. Pure.

The readers every rule about a workload is built from, apart from the rules themselves
(:mod:`pathways_airflow.state.status`, the state machine): which pods belong to the JobSet's
current run (labels ``jobset.sigs.k8s.io/restart-attempt`` and ``job-restart-attempt``, and where
JobSet counts them, the annotation ``jobset.sigs.k8s.io/execution-attempt``), which one is the head,
how many slices are ready, which container is the user's and how it exited, and which pods the
infrastructure ended. The operator and the triggers use them for logs and XCom values too.

Which replicated job is the head and which holds the slices is read from the JobSet itself
(:func:`head_job_name`, :func:`worker_job_name`): the Pathways layout this provider, gcluster and
xpk write (``pathways-head`` and ``worker``), or a plain multislice JobSet as JobSet's TPU
tutorial writes it, one replicated job of TPU pods that all run the program, whose head is the
coordinator pod (job 0, pod 0 unless ``spec.coordinator`` says otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pathways_airflow import well_known
from pathways_airflow.spec.render import HEAD_JOB, WORKER_JOB, replicated_pod_spec
from pathways_airflow.spec.workload import RESERVED_CONTAINER_NAMES
from pathways_airflow.state.conditions import condition, is_true
from pathways_airflow.state.model import Observation

Obj = Mapping[str, Any]
Nodes = Iterable[Obj] | Mapping[str, Obj]
"""Nodes as a list (a listing) or by name (a triggerer's node cache): see :func:`nodes_by_name`."""


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

_ELASTIC_FLAG = re.compile(r"^--num_elastic_slices=(\d+)$")


# --- reading API objects -----------------------------------------------------------------------


def status_of(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("status") or {}


def metadata_of(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def labels_of(obj: Obj | None) -> Mapping[str, str]:
    return metadata_of(obj).get("labels") or {}


def annotations_of(obj: Obj | None) -> Mapping[str, str]:
    return metadata_of(obj).get("annotations") or {}


def name_of(obj: Obj | None) -> str:
    return str(metadata_of(obj).get("name", ""))


def as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class NodesByName(Mapping[str, Obj]):
    """Nodes by name that also know which of them show a disruption now (``disrupted``). A
    triggerer's node cache keeps that list current as each node changes
    (:func:`~pathways_airflow.triggers.workload.nodes_watch`), so a verdict that asks whether any
    node of a slice shape is disrupted looks at those few, not at a fleet's 20,000
    (:func:`~pathways_airflow.state.disruption.disrupted_nodes`)."""

    def __init__(self, by_name: Mapping[str, Obj], disrupted: Callable[[], Iterable[Obj]]) -> None:
        self._by_name, self._disrupted = by_name, disrupted

    def __getitem__(self, name: str) -> Obj:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def disrupted(self) -> Iterable[Obj]:
        return self._disrupted()


def nodes_by_name(nodes: Nodes) -> Mapping[str, Obj]:
    """Nodes by name. A mapping is taken as it is: a triggerer's node cache already keeps them by
    name, and indexing a fleet's 20,000 nodes again for every verdict cost more than the verdict."""
    return nodes if isinstance(nodes, Mapping) else {name_of(n): n for n in nodes}


def is_being_deleted(obj: Obj | None) -> bool:
    return bool(metadata_of(obj).get("deletionTimestamp"))


# --- restart attempts, head and slices ---------------------------------------------------------


def _job_restarts(jobset: Obj | None) -> dict[tuple[str, str], int]:
    """Each child Job's own restarts, by (replicated job, job index): JobSet ≥ 0.12's
    ``status.replicatedJobsStatus[].jobRestarts`` (``api/jobset/v1alpha2/jobset_types.go``), bumped
    by the ``RestartJob`` and ``RestartJobAndIgnoreMaxRestarts`` failure policy actions."""
    counts: dict[tuple[str, str], int] = {}
    for entry in status_of(jobset).get("replicatedJobsStatus") or ():
        for index, restarts in enumerate((entry or {}).get("jobRestarts") or ()):
            counts[(str(entry.get("name", "")), str(index))] = as_int(restarts, 0)
    return counts


def restarts_of(jobset: Obj | None) -> int:
    """Every in-place restart so far, counted towards ``maxRestarts`` or not: the JobSet's own
    (``status.restarts``, every child Job recreated) and each child Job's alone (``jobRestarts``)."""
    return as_int(status_of(jobset).get("restarts"), 0) + sum(_job_restarts(jobset).values())


def _attempt_label(pod: Obj) -> int | None:
    value = labels_of(pod).get(well_known.RESTART_ATTEMPT)
    return as_int(value, -1) if value is not None else None


def execution_attempts_of(jobset: Obj | None) -> int | None:
    """The JobSet's ``status.executionAttempts``: how many times it started running anew, counting
    each suspend → resume (Kueue evicted it and admitted it again) and each restart of every Job
    (kubernetes-sigs/jobset ``keps/1282-execution-attempts/README.md``). ``None`` when the JobSet
    does not count them: before JobSet 0.13, with its alpha gate ``ExecutionAttemptsTracking`` off,
    or before it first ran."""
    return _count_or_none(status_of(jobset).get("executionAttempts"))


def _execution_attempt_of(obj: Obj) -> int | None:
    """The ``execution-attempt`` annotation JobSet puts on a child Job and its pods (KEP-1282), or ``None``."""
    return _count_or_none(annotations_of(obj).get(well_known.EXECUTION_ATTEMPT))


def _count_or_none(value: Any) -> int | None:
    """A counter as the API writes it (an integer, or its text in an annotation); ``None`` for
    none, or for one that is no count: what cannot be read is not evidence against an object."""
    if value is None or isinstance(value, bool):
        return None
    count = as_int(value, -1)
    return count if count >= 0 else None


def is_of_an_earlier_execution(obj: Obj, jobset: Obj) -> bool:
    """Whether a child Job or pod was made for an execution the JobSet has left behind: its
    ``execution-attempt`` below the JobSet's ``status.executionAttempts`` (KEP-1282).

    After a Kueue eviction and re-admission ``restart-attempt`` is unchanged, so without this the
    pods stopped by the eviction would read as the new run's: an evicted pod as a disruption of a
    run that never met one. Only when both carry the count: an object without the annotation, or a
    JobSet without the field (an older JobSet, the gate off), is taken as current, as before."""
    own, current = _execution_attempt_of(obj), execution_attempts_of(jobset)
    return own is not None and current is not None and own < current


def is_of_current_restart_attempt(obj: Obj, jobset: Obj) -> bool:
    """Whether a child Job or pod carries the JobSet's ``restart-attempt`` (or none: older JobSets),
    and is of no execution the JobSet has left behind since (:func:`is_of_an_earlier_execution`).

    Jobs restarted alone within it count: a head that ran through a per-Job restart lived through
    its slice's disruption, and may have died of it (a Pathways program loses its slice), so the
    disruption evidence of why the attempt ends is read here. Pods from before a Kueue eviction
    do not: the run after it started every pod anew."""
    if is_of_an_earlier_execution(obj, jobset):
        return False
    attempt = labels_of(obj).get(well_known.RESTART_ATTEMPT)
    return attempt is None or as_int(attempt, -1) == as_int(status_of(jobset).get("restarts"), 0)


def is_of_current_run(obj: Obj, jobset: Obj) -> bool:
    """Whether a child Job or pod belongs to the JobSet's current run, as JobSet's controller tells
    its own Jobs apart (``pkg/controllers/jobset_controller.go``, ``getChildJobs``): the JobSet's
    ``restart-attempt``, and a ``job-restart-attempt`` not below its Job's entry of ``jobRestarts``;
    and, where JobSet counts executions, not of an earlier one (:func:`is_of_an_earlier_execution`).
    An object without the labels counts as current (a JobSet older than the labels)."""
    if not is_of_current_restart_attempt(obj, jobset):
        return False
    labels = labels_of(obj)
    own = labels.get(well_known.JOB_RESTART_ATTEMPT)
    target = _job_restarts(jobset).get((labels.get(well_known.REPLICATED_JOB, ""), labels.get(well_known.JOB_INDEX, "0")), 0)
    return own is None or as_int(own, -1) >= target


def of_current_restart_attempt(objs: Iterable[Obj], jobset: Obj | None) -> list[Obj]:
    """The objects of the JobSet's current restart attempt, Jobs restarted alone within it included
    (:func:`is_of_current_restart_attempt`); all of them without a JobSet."""
    return [o for o in objs if jobset is None or is_of_current_restart_attempt(o, jobset)]


def of_current_run(objs: Iterable[Obj], jobset: Obj | None) -> list[Obj]:
    """The objects of the JobSet's current run (:func:`is_of_current_run`); all of them without a JobSet."""
    return [o for o in objs if jobset is None or is_of_current_run(o, jobset)]


def as_of_restart(jobset: Obj, restart: int) -> dict[str, Any]:
    """The JobSet as its run numbered ``restart`` (0: the first; :func:`restarts_of` counts them) saw
    itself, for judging why that run ended: its restart attempt, and no per-Job restart told apart
    (the pods of a Job restarted alone stay in view, the evidence of why it was).

    Without per-Job restarts the run is exactly that restart attempt. With them, the JobSet does
    not say how they interleaved with its own restarts: the run is placed in the newest restart
    attempt it can have been in. Nor does it say which execution (``executionAttempts``) that run
    was: the count is dropped, so the run's pods are told apart by restart attempt alone."""
    status = {k: v for k, v in status_of(jobset).items() if k not in ("replicatedJobsStatus", "executionAttempts")}
    status["restarts"] = max(0, min(restart, as_int(status_of(jobset).get("restarts"), 0)))
    return {**jobset, "status": status}


def current_attempt(observation: Observation) -> int:
    """The run the JobSet is on, numbered by its in-place restarts so far (:func:`restarts_of`);
    without a JobSet, the newest restart attempt any pod carries."""
    if observation.jobset is not None:
        return restarts_of(observation.jobset)
    attempts = [a for a in (_attempt_label(p) for p in observation.pods) if a is not None]
    return max(attempts, default=0)


def host_of(pod: Obj) -> tuple[str, str]:
    """The host a pod runs as: its Job and completion index (a replacement pod keeps both)."""
    labels = labels_of(pod)
    return (labels.get(well_known.JOB_NAME, ""), labels.get(well_known.JOB_COMPLETION_INDEX, name_of(pod)))


def newest_pod_per_host(workers: Iterable[Obj]) -> list[Obj]:
    """The pod each host runs as now: the newest of each Job's completion index. A slice whose
    loss the program rode out runs on replacement pods, while the lost ones may linger (a deleted
    pod's last state, or failed) beside them."""
    newest: dict[tuple[str, str], Obj] = {}
    for pod in workers:
        host = host_of(pod)
        if host not in newest or str(metadata_of(pod).get("creationTimestamp", "")) >= str(metadata_of(newest[host]).get("creationTimestamp", "")):
            newest[host] = pod
    return list(newest.values())


def pods_of_current_attempt(observation: Observation) -> tuple[Obj, ...]:
    """Pods of the JobSet's current run (:func:`is_of_current_run`); without a JobSet, those of the
    newest restart attempt any pod carries, plus any pod without an attempt label. Worked out once
    per observation (:attr:`~pathways_airflow.state.model.Observation.derived`)."""
    found = observation.derived.get("pods_of_current_attempt")
    if found is None:
        if observation.jobset is not None:
            found = tuple(of_current_run(observation.pods, observation.jobset))
        else:
            attempt = current_attempt(observation)
            found = tuple(p for p in observation.pods if _attempt_label(p) in (None, attempt))
        observation.derived["pods_of_current_attempt"] = found
    return found


def _replicated_job_of(pod: Obj) -> str:
    return labels_of(pod).get(well_known.REPLICATED_JOB, "")


def _newest_first(pods: Iterable[Obj]) -> list[Obj]:
    """Live pods before ones being deleted, then the most recently created first."""
    ordered = sorted(
        pods, key=lambda p: (str(metadata_of(p).get("creationTimestamp", "")), name_of(p)), reverse=True
    )
    return sorted(ordered, key=is_being_deleted)


def _replicated_jobs(jobset: Obj | None) -> list[Mapping[str, Any]]:
    return [r for r in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or () if isinstance(r, Mapping)]


def _requests_tpu_slices(replicated: Mapping[str, Any]) -> bool:
    """Whether a replicated job's pods select TPU nodes (the accelerator label JobSets and GKE use)."""
    return well_known.ACCELERATOR in (replicated_pod_spec(replicated).get("nodeSelector") or {})


def worker_job_name(jobset: Obj | None) -> str:
    """The replicated job whose replicas are the slices: ``worker`` in the Pathways layout, else the
    one whose pods select TPU nodes (a plain multislice JobSet's ``slice``)."""
    jobs = _replicated_jobs(jobset)
    if any(r.get("name") == WORKER_JOB for r in jobs):
        return WORKER_JOB
    return str(next((r.get("name") for r in jobs if _requests_tpu_slices(r)), WORKER_JOB))


def head_job_name(jobset: Obj | None) -> str:
    """The replicated job whose pod runs the program's head: ``pathways-head`` in the Pathways
    layout (a JobSet with a ``pathways-head`` or ``worker`` job and no other coordinator), else
    ``spec.coordinator``'s, else the slices' own job (every pod runs the program)."""
    names = [r.get("name") for r in _replicated_jobs(jobset)]
    coordinator = (((jobset or {}).get("spec") or {}).get("coordinator") or {}).get("replicatedJob")
    if HEAD_JOB in names:
        return HEAD_JOB
    if coordinator:
        return str(coordinator)
    if not names or WORKER_JOB in names:  # the Pathways layout, its head not listed
        return HEAD_JOB
    return worker_job_name(jobset)


def _heads(observation: Observation, pods: Iterable[Obj], *, any_host: bool = False) -> list[Obj]:
    """The pods of the head's job; where that job is the slices' own, only the coordinator pod, or
    any of them (``any_host``: where the program's exit is asked, every host runs it)."""
    jobset = observation.jobset
    head_job = head_job_name(jobset)
    heads = [p for p in pods if _replicated_job_of(p) == head_job]
    if not any_host and head_job == worker_job_name(jobset):
        coordinator = ((jobset or {}).get("spec") or {}).get("coordinator") or {}
        where = (str(coordinator.get("jobIndex", 0)), str(coordinator.get("podIndex", 0)))
        heads = [p for p in heads if (labels_of(p).get(well_known.JOB_INDEX, "0"), labels_of(p).get(well_known.JOB_COMPLETION_INDEX, "0")) == where]
    return _newest_first(heads)


def head_pods(observation: Observation) -> list[Obj]:
    """The head pods of the current attempt (:func:`head_job_name`), the one that matters most first."""
    return _heads(observation, pods_of_current_attempt(observation))


def head_pod(observation: Observation) -> dict[str, Any] | None:
    """The Pathways head pod of the current restart attempt (live and newest preferred), or ``None``."""
    found = head_pods(observation)
    return dict(found[0]) if found else None


def worker_replicated_job(jobset: Obj | None) -> Mapping[str, Any] | None:
    """The slices' replicated job (:func:`worker_job_name`), or ``None``."""
    worker = worker_job_name(jobset)
    return next((r for r in _replicated_jobs(jobset) if r.get("name") == worker), None)


def slices_total(jobset: Obj | None) -> int:
    """How many TPU slices the workload asks for: replicas of the slices' replicated job."""
    worker = worker_replicated_job(jobset)
    return as_int(worker.get("replicas"), 1) if worker is not None else 0


def pods_per_slice(jobset: Obj | None) -> int:
    """VMs per slice: the worker Job's ``parallelism`` (one pod per VM)."""
    worker = worker_replicated_job(jobset) or {}
    job_spec = (worker.get("template") or {}).get("spec") or {}
    return max(1, as_int(job_spec.get("parallelism"), 1))


def is_running_and_ready(pod: Obj) -> bool:
    return (
        status_of(pod).get("phase") == "Running"
        and is_true(pod, "Ready")
        and not is_being_deleted(pod)
    )


def slices_ready(observation: Observation) -> int:
    """Slices whose every worker pod of the current attempt is Running and Ready."""
    needed, worker = pods_per_slice(observation.jobset), worker_job_name(observation.jobset)
    ready_per_slice: dict[str, int] = {}
    for pod in pods_of_current_attempt(observation):
        if _replicated_job_of(pod) == worker and is_running_and_ready(pod):
            index = labels_of(pod).get(well_known.JOB_INDEX, "0")
            ready_per_slice[index] = ready_per_slice.get(index, 0) + 1
    return sum(1 for count in ready_per_slice.values() if count >= needed)


def elastic_slices(observation: Observation) -> int:
    """Slices the workload may run without: PathwaysJob ``elasticSlices``, or the proxy's flag in a JobSet."""
    controller = ((observation.pathwaysjob or {}).get("spec") or {}).get("controller") or {}
    if controller.get("elasticSlices") is not None:
        return max(0, as_int(controller.get("elasticSlices"), 0))
    for replicated in ((observation.jobset or {}).get("spec") or {}).get("replicatedJobs") or ():
        if replicated.get("name") != HEAD_JOB:
            continue
        pod_spec = replicated_pod_spec(replicated)
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
    statuses = [s for s in status_of(pod).get("containerStatuses") or () if isinstance(s, Mapping)]
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
        return as_int((state.get("terminated") or {}).get("exitCode"), 0)
    if "running" in state:
        return None
    last = (container_status.get("lastState") or {}).get("terminated")
    return as_int(last.get("exitCode"), 0) if last else None


def failed_container(observation: Observation) -> tuple[str, str, int] | None:
    """``(pod, container, exit code)`` when the current attempt's head program ended non-zero."""
    known, declared = _declared_main_container(observation)
    if known and declared is None:
        return None
    for pod in _heads(observation, pods_of_current_attempt(observation), any_host=True):
        status = main_container_status(pod, declared)
        code = exit_code_of(status)
        if status is not None and code:
            return name_of(pod), str(status.get("name")), code
    return None


# --- evidence of a disruption ------------------------------------------------------------------


def disruption_evidence(pods: Iterable[Obj]) -> tuple[str, ...]:
    """One line per pod the infrastructure ended: ``DisruptionTarget`` or a node-shutdown/eviction reason."""
    evidence = []
    for pod in sorted(pods, key=name_of):
        signs = []
        target = condition(pod, "DisruptionTarget")
        if target is not None and target.get("status") == "True":
            signs.append(f"DisruptionTarget ({target.get('reason') or 'no reason'})")
        reason = status_of(pod).get("reason")
        if reason in DISRUPTED_POD_REASONS:
            message = status_of(pod).get("message")
            signs.append(f"{reason}: {message}" if message else str(reason))
        if signs:
            evidence.append(f"pod {name_of(pod)}: {'; '.join(signs)}")
    return tuple(evidence)


# --- pods that cannot start ------------------------------------------------------------------


def is_unschedulable(pod: Obj) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and status_of(pod).get("phase") in (None, "Pending")
    )


def container_problem(pods: Iterable[Obj]) -> str | None:
    """``pod P: container C ImagePullBackOff: ...`` for the first container that cannot start by itself."""
    for pod in sorted(pods, key=name_of):
        statuses = [
            *(status_of(pod).get("initContainerStatuses") or ()),
            *(status_of(pod).get("containerStatuses") or ()),
        ]
        for item in statuses:
            waiting = (item.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in CONTAINER_PROBLEMS:
                detail = f": {waiting['message']}" if waiting.get("message") else ""
                return f"pod {name_of(pod)}: container {item.get('name')} {waiting['reason']}{detail}"
    return None
