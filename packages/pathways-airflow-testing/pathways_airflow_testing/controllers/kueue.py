"""Kueue v0.19 for JobSets and batch Jobs: Workloads, ``google.com/tpu`` quota, admission, eviction.

A JobSet (or a batch Job no JobSet owns) labelled ``kueue.x-k8s.io/queue-name`` is created
suspended by the admission step; this controller gives it a ``kueue.x-k8s.io/v1beta2`` Workload
(named as Kueue names it, ``jobset-<name>-<5 hex>``, owned by the job, label
``kueue.x-k8s.io/job-uid``), queues it through its LocalQueue to a ClusterQueue, and admits it
when the ClusterQueue's quota of the first matching ResourceFlavor allows: conditions
``QuotaReserved`` and ``Admitted``, ``status.admission``, the flavor's node labels merged into the
pod templates, the job unsuspended. A finished job finishes its Workload and frees its quota. An
evicted Workload (:meth:`KueueController.evict`) suspends its job, gives the quota back once
the job's pods are gone, and is requeued. A job labelled ``kueue.x-k8s.io/max-exec-time-seconds``
has its Workload deactivated once it has been admitted that long (counting earlier admissions):
``DeactivationTarget`` (reason ``MaximumExecutionTimeExceeded``), then ``spec.active: false`` and
``Evicted`` (reason ``DeactivatedDueToMaximumExecutionTimeExceeded``); the job is suspended, its
pods go, and it is not requeued.

What is deliberately left out, because an orchestrator never sees it on a TPU cluster: resources
other than ``google.com/tpu`` (real Kueue refuses a pod requesting a resource its ClusterQueue
does not cover; here CPU and memory are simply not accounted, so the default queue admits
Pathways heads), cohorts and borrowing, automatic preemption by priority, admission checks,
topology-aware scheduling, partial admission, flavor taints. Kueue's scheduler never looks at
nodes, and neither does this one: an admitted workload whose slice is busy or broken has
Pending pods, as on GKE.

Kueue's decisions are the pure functions of this module (:func:`admit`, :func:`assign_flavors`,
:func:`queue_order`, :func:`new_workload`, :func:`queue_statuses`...); the controller reads the
store, calls them and writes the differences.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow_testing.admission import QUEUE_NAME_LABEL
from pathways_airflow_testing.controllers.base import (
    Controller,
    Key,
    condition,
    is_true,
    owner_reference,
    set_condition,
)
from pathways_airflow_testing.errors import ApiError
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.scheduling import tpu_request
from pathways_airflow_testing.store import StoreEvent, copy_of

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API = f"{KUEUE_GROUP}/v1beta2"
PRIORITY_CLASS_LABEL = f"{KUEUE_GROUP}/priority-class"
MAX_EXEC_TIME_LABEL = f"{KUEUE_GROUP}/max-exec-time-seconds"
MAX_EXEC_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
JOB_UID_LABEL = f"{KUEUE_GROUP}/job-uid"
INJECTED_NODE_SELECTOR = f"{KUEUE_GROUP}/injected-node-selector"
RESOURCE_IN_USE_FINALIZER = f"{KUEUE_GROUP}/resource-in-use"
TPU = "google.com/tpu"
JOB_POD_SET = "main"
MAX_WORKLOAD_NAME = 253
HASH_LENGTH = 5

JOBSET_GROUP = "jobset.x-k8s.io"
_ALL: Key = ("", "*")

# Eviction reasons the scenario accepts → whether Kueue requeues the workload afterwards.
EVICTION_REASONS: Mapping[str, bool] = {
    "Preempted": True,
    "NodeFailures": True,
    "PodsReadyTimeout": True,
    "Deactivated": False,
}
PREEMPTION_REASON = "InClusterQueue"


# --- Workload objects ------------------------------------------------------------------------


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """Kueue's Workload name for a job: ``<kind>-<name>-<first 5 hex of sha1(kind, group, name, uid)>``.

    Deterministic, so tests and users can predict it from the job's uid as Kueue's own
    ``GetWorkloadNameForOwnerWithGVK`` does.
    """
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()[:HASH_LENGTH]
    prefix = f"{kind.lower()}-{name}"[: MAX_WORKLOAD_NAME - 1 - HASH_LENGTH]
    return f"{prefix}-{digest}"


def _pods_per_replica(job_spec: Mapping[str, Any]) -> int:
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def pod_sets(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Workload pod sets of a JobSet (one per replicated job) or of a batch Job (``main``)."""
    if job["kind"] == "JobSet":
        return [
            {
                "name": replicated["name"],
                "count": replicated.get("replicas", 1)
                * _pods_per_replica(replicated["template"].get("spec") or {}),
                "template": copy_of(replicated["template"]["spec"].get("template") or {}),
            }
            for replicated in job["spec"].get("replicatedJobs") or ()
        ]
    return [
        {
            "name": JOB_POD_SET,
            "count": _pods_per_replica(job["spec"]),
            "template": copy_of(job["spec"].get("template") or {}),
        }
    ]


@dataclass(frozen=True)
class Priority:
    """Where a workload's priority came from (``spec.priorityClassRef``) and its value."""

    value: int = 0
    group: str | None = None
    kind: str | None = None
    name: str | None = None

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"priority": self.value}
        if self.name:
            spec["priorityClassRef"] = {"group": self.group, "kind": self.kind, "name": self.name}
        return spec


def resolve_priority(
    job: Mapping[str, Any],
    workload_priority_classes: Mapping[str, Mapping[str, Any]],
    priority_classes: Mapping[str, Mapping[str, Any]],
) -> Priority:
    """The priority Kueue gives a job's Workload; ``LookupError`` names a missing class.

    The job label ``kueue.x-k8s.io/priority-class`` names a WorkloadPriorityClass; without it the
    first pod template's ``priorityClassName`` names a PriorityClass; without that the
    ``globalDefault`` PriorityClass counts; else 0.
    """
    wanted = (job["metadata"].get("labels") or {}).get(PRIORITY_CLASS_LABEL)
    if wanted:
        found = workload_priority_classes.get(wanted)
        if found is None:
            raise LookupError(f'workloadpriorityclasses.kueue.x-k8s.io "{wanted}" not found')
        return Priority(int(found.get("value", 0)), KUEUE_GROUP, "WorkloadPriorityClass", wanted)
    for pod_set in pod_sets(job):
        name = (pod_set["template"].get("spec") or {}).get("priorityClassName")
        if name:
            found = priority_classes.get(name)
            if found is None:
                raise LookupError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
            return Priority(int(found.get("value", 0)), "scheduling.k8s.io", "PriorityClass", name)
    for name, found in sorted(priority_classes.items()):
        if found.get("globalDefault"):
            return Priority(int(found.get("value", 0)), "scheduling.k8s.io", "PriorityClass", name)
    return Priority()


def max_exec_time(job: Mapping[str, Any]) -> int | None:
    """The job's ``kueue.x-k8s.io/max-exec-time-seconds``, read as Kueue reads it: a positive
    int32, else no limit (kueue pkg/controller/jobframework/utils.go MaximumExecutionTimeSecondsForObject)."""
    text = (job["metadata"].get("labels") or {}).get(MAX_EXEC_TIME_LABEL) or ""
    value = int(text) if re.fullmatch(r"[+-]?[0-9]{1,19}", text) else 0
    return value if 0 < value < 2**31 else None


def exec_time_left(workload: Mapping[str, Any], now: str) -> float | None:
    """Seconds of admitted time the Workload has left; ``None`` without a limit or an admission.

    Kueue counts from the ``Admitted`` transition plus ``status.accumulatedPastExecutionTimeSeconds``
    (earlier admissions), as reconcileMaxExecutionTime in pkg/controller/core/workload_controller.go.
    """
    limit = workload["spec"].get("maximumExecutionTimeSeconds")
    admitted = condition(dict(workload), "Admitted")
    if limit is None or admitted is None or admitted.get("status") != "True":
        return None
    past = int((workload.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
    return limit - past - _seconds_between(admitted.get("lastTransitionTime", now), now)


def new_workload(job: Mapping[str, Any], priority: Priority) -> dict[str, Any]:
    """The Workload Kueue's job reconciler creates for a queued JobSet or Job."""
    meta = job["metadata"]
    group = job["apiVersion"].rpartition("/")[0]
    limit = max_exec_time(job)
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job["kind"], group, meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "finalizers": [RESOURCE_IN_USE_FINALIZER],
            "ownerReferences": [owner_reference(dict(job))],
        },
        "spec": {
            "active": True,
            "queueName": (meta.get("labels") or {}).get(QUEUE_NAME_LABEL, ""),
            "podSets": pod_sets(job),
            **priority.to_spec(),
            **({"maximumExecutionTimeSeconds": limit} if limit else {}),
        },
    }


def job_finished(job: Mapping[str, Any]) -> tuple[bool, str] | None:
    """``(succeeded, message)`` once a JobSet is Completed/Failed or a Job Complete/Failed."""
    success, failure = ("Completed", "Failed") if job["kind"] == "JobSet" else ("Complete", "Failed")
    for type_, succeeded in ((success, True), (failure, False)):
        found = condition(dict(job), type_)
        if found and found.get("status") == "True":
            return succeeded, found.get("message") or found.get("reason", type_)
    return None


def job_active(job: Mapping[str, Any]) -> bool:
    """Whether the job still has running pods, the moment Kueue waits for before freeing quota."""
    status = job.get("status") or {}
    if job["kind"] == "JobSet":
        return any(item.get("active", 0) > 0 for item in status.get("replicatedJobsStatus") or ())
    return status.get("active", 0) > 0


# --- admission: flavors and quota -------------------------------------------------------------


@dataclass(frozen=True)
class FlavorQuota:
    """One ResourceFlavor of a ClusterQueue: its ``google.com/tpu`` nominal quota and node labels."""

    name: str
    nominal: int
    node_labels: Mapping[str, str]


@dataclass(frozen=True)
class QueueView:
    """What admission needs of a ClusterQueue."""

    name: str
    flavors: tuple[FlavorQuota, ...]
    strategy: str = "BestEffortFIFO"


@dataclass(frozen=True)
class PodSetRequest:
    """One pod set as admission sees it: how many pods, TPU chips each, where they must run."""

    name: str
    count: int
    chips_per_pod: int
    pod_spec: Mapping[str, Any]

    @property
    def chips(self) -> int:
        return self.count * self.chips_per_pod


@dataclass(frozen=True)
class QueuedWorkload:
    namespace: str
    name: str
    pod_sets: tuple[PodSetRequest, ...]


@dataclass(frozen=True)
class PodSetAssignment:
    name: str
    count: int
    flavor: str | None
    chips: int

    def to_api(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "flavors": {TPU: self.flavor} if self.flavor else {},
            "resourceUsage": {TPU: str(self.chips)} if self.flavor else {},
        }


@dataclass(frozen=True)
class Decision:
    """Admission's verdict on one workload: assignments when admitted, else why not.

    ``message`` is ``None`` for a workload that was not tried (behind the head in StrictFIFO).
    """

    workload: QueuedWorkload
    assignments: tuple[PodSetAssignment, ...] | None
    message: str | None

    @property
    def admitted(self) -> bool:
        return self.assignments is not None


def queue_view(
    cluster_queue: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> tuple[QueueView, list[str]]:
    """The ClusterQueue's ``google.com/tpu`` flavors in order, and the flavors it names that do not exist."""
    found: list[FlavorQuota] = []
    missing: list[str] = []
    spec = cluster_queue.get("spec") or {}
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            if flavor["name"] not in flavors:
                missing.append(flavor["name"])
                continue
            for resource in flavor.get("resources") or ():
                if resource.get("name") == TPU:
                    labels = (flavors[flavor["name"]].get("spec") or {}).get("nodeLabels") or {}
                    found.append(
                        FlavorQuota(flavor["name"], quantity(resource.get("nominalQuota", 0)), dict(labels))
                    )
    return QueueView(
        cluster_queue["metadata"]["name"], tuple(found), spec.get("queueingStrategy", "BestEffortFIFO")
    ), missing


def quantity(value: Any) -> int:
    """A whole-number Kubernetes quantity (``8``, ``"8"``, ``"1k"``) as an int."""
    text = str(value).strip()
    for suffix, factor in (
        ("Ki", 1024),
        ("Mi", 1024**2),
        ("Gi", 1024**3),
        ("k", 1000),
        ("M", 1000**2),
        ("G", 1000**3),
    ):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text or 0))


def _required_terms(pod_spec: Mapping[str, Any]) -> list[list[Mapping[str, Any]]]:
    required = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    ) or []
    return [list(term.get("matchExpressions") or ()) for term in required]


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    return {
        "In": lambda: labels.get(key) in values,
        "NotIn": lambda: labels.get(key) not in values,
        "Exists": lambda: key in labels,
        "DoesNotExist": lambda: key not in labels,
    }.get(operator, lambda: False)()


def flavor_matches(
    pod_spec: Mapping[str, Any], node_labels: Mapping[str, str], label_keys: frozenset[str]
) -> bool:
    """Whether pods of ``pod_spec`` could run on a flavor's nodes, as Kueue's flavor assigner decides.

    Only the selector keys some flavor of the queue defines count (``label_keys``): a pod's
    ``cloud.google.com/gke-nodepool`` selector says nothing about flavors keyed by accelerator.
    """
    selector = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in label_keys}
    if any(node_labels.get(k) != v for k, v in selector.items()):
        return False
    terms = [[e for e in term if e["key"] in label_keys] for term in _required_terms(pod_spec)]
    return not terms or any(all(_expression_holds(e, node_labels) for e in term) for term in terms)


def assign_flavors(
    workload: QueuedWorkload, queue: QueueView, used: Mapping[str, int]
) -> tuple[tuple[PodSetAssignment, ...] | None, str]:
    """Each pod set's flavor (the first that matches and has quota), or Kueue's message why not."""
    label_keys = frozenset(k for f in queue.flavors for k in f.node_labels)
    assumed: dict[str, int] = {}
    assignments: list[PodSetAssignment] = []
    failures: list[str] = []
    for pod_set in workload.pod_sets:
        request = pod_set.chips
        if request == 0:
            assignments.append(PodSetAssignment(pod_set.name, pod_set.count, None, 0))
            continue
        reasons: list[str] = []
        chosen: FlavorQuota | None = None
        for flavor in queue.flavors:
            if not flavor_matches(pod_set.pod_spec, flavor.node_labels, label_keys):
                reasons.append(f"flavor {flavor.name} doesn't match node affinity")
                continue
            previous = assumed.get(flavor.name, 0)
            total = previous + request
            if total > flavor.nominal:
                reasons.append(
                    f"insufficient quota for {TPU} in flavor {flavor.name}, previously considered podsets requests "
                    f"({previous}) + current podset request ({request}) > maximum capacity ({flavor.nominal})"
                )
                continue
            available = flavor.nominal - used.get(flavor.name, 0)
            if total > available:
                reasons.append(
                    f"insufficient unused quota for {TPU} in flavor {flavor.name}, {total - available} more needed"
                )
                continue
            chosen = flavor
            break
        if not queue.flavors:
            reasons.append(f"resource {TPU} unavailable in ClusterQueue")
        if chosen is None:
            failures.append(
                f"couldn't assign flavors to pod set {pod_set.name}: {', '.join(sorted(reasons))}"
            )
            continue
        assumed[chosen.name] = assumed.get(chosen.name, 0) + request
        assignments.append(PodSetAssignment(pod_set.name, pod_set.count, chosen.name, request))
    if failures:
        return None, "; ".join(failures)
    return tuple(assignments), ""


def admit(workloads: Sequence[QueuedWorkload], queue: QueueView, used: Mapping[str, int]) -> list[Decision]:
    """Admit ``workloads`` (already in queue order) while the ClusterQueue's quota allows.

    BestEffortFIFO lets a later, smaller workload in when the head does not fit; StrictFIFO
    stops at the first workload that does not fit and leaves the rest untried.
    """
    usage = dict(used)
    decisions: list[Decision] = []
    blocked = False
    for workload in workloads:
        if blocked:
            decisions.append(Decision(workload, None, None))
            continue
        assignments, message = assign_flavors(workload, queue, usage)
        decisions.append(Decision(workload, assignments, message or None))
        if assignments is None:
            blocked = queue.strategy == "StrictFIFO"
            continue
        for assignment in assignments:
            if assignment.flavor:
                usage[assignment.flavor] = usage.get(assignment.flavor, 0) + assignment.chips
    return decisions


def queued_workload(workload: Mapping[str, Any]) -> QueuedWorkload:
    meta = workload["metadata"]
    return QueuedWorkload(
        meta["namespace"],
        meta["name"],
        tuple(
            PodSetRequest(
                p["name"],
                int(p.get("count", 1)),
                tpu_request({"spec": (p.get("template") or {}).get("spec") or {}}),
                (p.get("template") or {}).get("spec") or {},
            )
            for p in workload["spec"].get("podSets") or ()
        ),
    )


def queue_order(workload: Mapping[str, Any], arrival: int | None) -> tuple[int, str, int, str]:
    """Sort key of Kueue's queues: higher priority first, then the order the jobs were created."""
    meta = workload["metadata"]
    return (
        -int(workload["spec"].get("priority") or 0),
        meta.get("creationTimestamp", ""),
        arrival if arrival is not None else 1 << 62,
        meta["name"],
    )


# --- Workload status ---------------------------------------------------------------------------


def has_reservation(workload: Mapping[str, Any]) -> bool:
    return bool((workload.get("status") or {}).get("admission"))


def is_finished(workload: Mapping[str, Any]) -> bool:
    return is_true(dict(workload), "Finished")


def reserved_chips(workload: Mapping[str, Any]) -> dict[str, int]:
    """``{flavor: chips}`` a workload's admission holds."""
    usage: dict[str, int] = {}
    for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        flavor = (assignment.get("flavors") or {}).get(TPU)
        if flavor:
            usage[flavor] = usage.get(flavor, 0) + quantity(
                (assignment.get("resourceUsage") or {}).get(TPU, 0)
            )
    return usage


def _deactivate_condition(
    conditions: list[dict[str, Any]], type_: str, reason: str, now: str
) -> list[dict[str, Any]]:
    """A True condition turned False with ``Previously: <message>``, as Kueue resets Evicted/Preempted."""
    found = next((c for c in conditions if c["type"] == type_), None)
    if found is None or found["status"] != "True":
        return conditions
    return set_condition(conditions, type_, "False", reason, f"Previously: {found.get('message', '')}", now)


def admitted_status(
    status: Mapping[str, Any], cluster_queue: str, assignments: Sequence[PodSetAssignment], now: str
) -> dict[str, Any]:
    """The Workload status once quota is reserved and (no admission checks) the workload admitted."""
    result = copy_of(dict(status))
    result["admission"] = {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [a.to_api() for a in assignments],
    }
    conditions = set_condition(
        result.get("conditions") or [],
        "QuotaReserved",
        "True",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cluster_queue}",
        now,
    )
    conditions = _deactivate_condition(conditions, "Evicted", "QuotaReserved", now)
    conditions = _deactivate_condition(conditions, "Preempted", "QuotaReserved", now)
    result["conditions"] = set_condition(
        conditions, "Admitted", "True", "Admitted", "The workload is admitted", now
    )
    return result


def pending_status(status: Mapping[str, Any], reason: str, message: str, now: str) -> dict[str, Any]:
    """The Workload status of a workload that is waiting: QuotaReserved False, no admission."""
    result = copy_of(dict(status))
    result.pop("admission", None)
    result["conditions"] = set_condition(
        result.get("conditions") or [], "QuotaReserved", "False", reason, message, now
    )
    admitted = condition({"status": result}, "Admitted")
    if admitted is not None:
        if admitted["status"] == "True":  # admitted time counts toward a maximum execution time
            past = int(result.get("accumulatedPastExecutionTimeSeconds") or 0)
            result["accumulatedPastExecutionTimeSeconds"] = past + int(
                _seconds_between(admitted.get("lastTransitionTime", now), now)
            )
        result["conditions"] = set_condition(
            result["conditions"], "Admitted", "False", "NoReservation", "The workload has no reservation", now
        )
    return result


def evicted_status(status: Mapping[str, Any], reason: str, message: str, now: str) -> dict[str, Any]:
    result = copy_of(dict(status))
    conditions = set_condition(result.get("conditions") or [], "Evicted", "True", reason, message, now)
    if reason == "Preempted":
        conditions = set_condition(conditions, "Preempted", "True", PREEMPTION_REASON, message, now)
    result["conditions"] = conditions
    return result


def requeued_status(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """An evicted workload whose job has stopped: quota given back, requeued if the reason allows."""
    evicted = condition({"status": dict(status)}, "Evicted") or {}
    reason, message = evicted.get("reason", "Preempted"), evicted.get("message", "")
    result = pending_status(status, "Pending", message, now)
    result["conditions"] = set_condition(
        result["conditions"],
        "Requeued",
        "True" if EVICTION_REASONS.get(reason, False) else "False",
        reason,
        message,
        now,
    )
    if condition({"status": result}, "Admitted") is None:
        result["conditions"] = set_condition(
            result["conditions"], "Admitted", "False", "NoReservation", "The workload has no reservation", now
        )
    return result


def deactivation_target_status(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """Kueue's mark on a Workload past its maximum execution time, before it deactivates it."""
    result = copy_of(dict(status))
    result.pop("accumulatedPastExecutionTimeSeconds", None)
    result["conditions"] = set_condition(
        result.get("conditions") or [],
        "DeactivationTarget",
        "True",
        MAX_EXEC_TIME_EXCEEDED,
        "exceeding the maximum execution time",
        now,
    )
    return result


def deactivated_status(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The deactivated Workload evicted: reason and message joined with the target's cause, the
    target removed (pkg/controller/core/workload_controller.go, pkg/workload/evict/evict.go)."""
    result = copy_of(dict(status))
    target = condition({"status": result}, "DeactivationTarget") or {}
    cause = target.get("reason", "")
    result["conditions"] = [c for c in result.get("conditions") or () if c["type"] != "DeactivationTarget"]
    reason = f"DeactivatedDueTo{cause}" if cause else "Deactivated"
    message = f"The workload is deactivated due to {target['message']}" if cause else "The workload is deactivated"
    return evicted_status(result, reason, message, now)


OWNER_NOT_FOUND = "OwnerNotFound"
"""The ``Finished`` reason of a Workload whose job is being deleted or gone
(apis/kueue/v1beta2/workload_types.go, WorkloadFinishedReasonOwnerNotFound)."""
OWNER_NOT_FOUND_MESSAGE = "The workload's owner no longer exists"


def finished_status(status: Mapping[str, Any], succeeded: bool, message: str, now: str, reason: str | None = None) -> dict[str, Any]:
    result = copy_of(dict(status))
    result["conditions"] = set_condition(
        result.get("conditions") or [],
        "Finished",
        "True",
        reason or ("Succeeded" if succeeded else "Failed"),
        message,
        now,
    )
    return result


# --- job mutation on start and stop ------------------------------------------------------------


def _pod_templates(job: dict[str, Any]) -> list[dict[str, Any]]:
    if job["kind"] == "JobSet":
        return [
            r["template"].setdefault("spec", {}).setdefault("template", {})
            for r in job["spec"].get("replicatedJobs") or ()
        ]
    return [job["spec"].setdefault("template", {})]


def started_job(
    job: Mapping[str, Any], assignments: Sequence[PodSetAssignment], flavors: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """The job Kueue unsuspends: each pod set's flavor node labels merged into its pod template.

    For a JobSet the labels every pod set shares are also recorded in the annotation
    ``kueue.x-k8s.io/injected-node-selector``, which the local JobSet controller merges into
    child Jobs created before admission. A pod set without TPU (a Pathways head) gets no
    flavor, so a JobSet mixing CPU and TPU pod sets gets no annotation.
    """
    updated = copy_of(dict(job))
    updated["spec"]["suspend"] = False
    injected: list[dict[str, str]] = []
    for template, assignment in zip(_pod_templates(updated), assignments):
        labels = dict(flavors.get(assignment.flavor or "", {})) if assignment.flavor else {}
        injected.append(labels)
        if labels:
            pod_spec = template.setdefault("spec", {})
            pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **labels}
    if updated["kind"] == "JobSet":
        common = dict(injected[0]) if injected else {}
        for labels in injected[1:]:
            common = {k: v for k, v in common.items() if labels.get(k) == v}
        if common:
            updated["metadata"].setdefault("annotations", {})[INJECTED_NODE_SELECTOR] = json.dumps(
                common, sort_keys=True
            )
        else:
            (updated["metadata"].get("annotations") or {}).pop(INJECTED_NODE_SELECTOR, None)
    return updated


def stopped_job(job: Mapping[str, Any], workload: Mapping[str, Any]) -> dict[str, Any]:
    """The job Kueue suspends: node selectors restored to what the Workload recorded at creation."""
    updated = copy_of(dict(job))
    updated["spec"]["suspend"] = True
    originals = [
        ((p.get("template") or {}).get("spec") or {}).get("nodeSelector")
        for p in workload["spec"].get("podSets") or ()
    ]
    for template, original in zip(_pod_templates(updated), originals):
        pod_spec = template.setdefault("spec", {})
        if original:
            pod_spec["nodeSelector"] = dict(original)
        else:
            pod_spec.pop("nodeSelector", None)
    (updated["metadata"].get("annotations") or {}).pop(INJECTED_NODE_SELECTOR, None)
    return updated


# --- queue statuses ----------------------------------------------------------------------------


def _flavor_usage(
    flavor_names: Iterable[str], workloads: Iterable[Mapping[str, Any]], *, borrowed: bool
) -> list[dict[str, Any]]:
    totals = {name: 0 for name in flavor_names}
    for workload in workloads:
        for flavor, chips in reserved_chips(workload).items():
            if flavor in totals:
                totals[flavor] += chips
    return [
        {
            "name": name,
            "resources": [{"name": TPU, "total": str(total), **({"borrowed": "0"} if borrowed else {})}],
        }
        for name, total in totals.items()
    ]


def queue_statuses(
    cluster_queue: Mapping[str, Any] | None,
    flavor_names: Sequence[str],
    missing_flavors: Sequence[str],
    workloads: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Any],
    now: str,
    *,
    local: bool,
) -> dict[str, Any]:
    """A ClusterQueue's (or, with ``local``, a LocalQueue's) status from the workloads queued to it."""
    live = [w for w in workloads if not is_finished(w) and not w["metadata"].get("deletionTimestamp")]
    reserving = [w for w in live if has_reservation(w)]
    admitted = [w for w in reserving if is_true(dict(w), "Admitted")]
    status = copy_of(dict(previous))
    status.update(
        pendingWorkloads=len(live) - len(reserving),
        reservingWorkloads=len(reserving),
        admittedWorkloads=len(admitted),
        flavorsReservation=_flavor_usage(flavor_names, reserving, borrowed=not local),
        flavorsUsage=_flavor_usage(flavor_names, admitted, borrowed=not local),
    )
    conditions = status.get("conditions") or []
    if local:
        if cluster_queue is None:
            conditions = set_condition(
                conditions,
                "Active",
                "False",
                "ClusterQueueDoesNotExist",
                "Can't submit new workloads to clusterQueue",
                now,
            )
        elif missing_flavors:
            conditions = set_condition(
                conditions,
                "Active",
                "False",
                "ClusterQueueIsInactive",
                "Can't submit new workloads to clusterQueue",
                now,
            )
        else:
            conditions = set_condition(
                conditions, "Active", "True", "Ready", "Can submit new workloads to localQueue", now
            )
    elif missing_flavors:
        message = (
            f"Can't admit new workloads: references missing ResourceFlavor(s): {','.join(missing_flavors)}."
        )
        conditions = set_condition(conditions, "Active", "False", "FlavorNotFound", message, now)
    else:
        conditions = set_condition(conditions, "Active", "True", "Ready", "Can admit new workloads", now)
    status["conditions"] = conditions
    return status


def _seconds_between(earlier: str, later: str) -> float:
    try:
        start = dt.datetime.strptime(earlier, "%Y-%m-%dT%H:%M:%SZ")
        end = dt.datetime.strptime(later, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, (end - start).total_seconds())


# --- the controller ----------------------------------------------------------------------------


class KueueController(Controller):
    """Kueue's job reconciler, workload reconciler, scheduler and queue status writers in one.

    Every change to a queued job, a Workload or a queue object triggers one pass over the whole
    Kueue state (level-triggered, like the scheduler's cycle), so decisions always see every
    workload of a ClusterQueue at once.
    """

    name = "kueue-controller-manager"
    requeue_backoff = 10.0  # simulated seconds between an evicted workload's release and its requeue
    retry_seconds = 5.0

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.jobsets = self.kind(JOBSET_GROUP, "v1alpha2", "jobsets")
        self.jobs = self.kind("batch", "v1", "jobs")
        self.workloads = self.kind(KUEUE_GROUP, "v1beta2", "workloads")
        self.local_queues = self.kind(KUEUE_GROUP, "v1beta2", "localqueues")
        self.cluster_queues = self.kind(KUEUE_GROUP, "v1beta2", "clusterqueues")
        self.flavors = self.kind(KUEUE_GROUP, "v1beta2", "resourceflavors")
        self.workload_priority_classes = self.kind(KUEUE_GROUP, "v1beta2", "workloadpriorityclasses")
        self.priority_classes = self.kind("scheduling.k8s.io", "v1", "priorityclasses")
        self._arrivals = itertools.count()
        self._arrival: dict[str, int] = {}
        self._requeue_delay: dict[str, float] = {}
        self._requeue_at: dict[str, float] = {}
        self._reported: dict[str, str] = {}
        self._wake_at: float | None = None

    # --- wiring ------------------------------------------------------------------------------

    def watched_kinds(self) -> Iterable[Kind]:
        return (
            self.jobsets,
            self.jobs,
            self.workloads,
            self.local_queues,
            self.cluster_queues,
            self.flavors,
            self.workload_priority_classes,
            self.priority_classes,
        )

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        """One key for everything; also notes the order queued jobs are created in (FIFO order)."""
        if event.kind.plural in ("jobsets", "jobs"):
            if not self._is_queued(event.obj):
                return ()
            if event.type == "ADDED":
                self._arrival.setdefault(event.obj["metadata"]["uid"], next(self._arrivals))
        return (_ALL,)

    @staticmethod
    def _is_queued(job: Mapping[str, Any]) -> bool:
        meta = job["metadata"]
        if not (meta.get("labels") or {}).get(QUEUE_NAME_LABEL):
            return False
        return job["kind"] == "JobSet" or not any(
            r.get("kind") == "JobSet" for r in meta.get("ownerReferences") or ()
        )

    def _job_kind(self, job: Mapping[str, Any]) -> Kind:
        return self.jobsets if job["kind"] == "JobSet" else self.jobs

    # --- scenarios -----------------------------------------------------------------------------

    def workload_name_for(self, namespace: str, name: str, kind: str = "JobSet") -> str | None:
        """The name of the Workload of a queued JobSet (or ``kind="Job"``), or ``None``."""
        store_kind = self.jobsets if kind == "JobSet" else self.jobs
        job = self.store.find(store_kind, namespace, name)
        if job is None:
            return None
        for workload in self.store.list(self.workloads, namespace):
            if (workload["metadata"].get("labels") or {}).get(JOB_UID_LABEL) == job["metadata"]["uid"]:
                return workload["metadata"]["name"]
        return None

    def evict(
        self,
        namespace: str,
        workload_name: str,
        reason: str = "Preempted",
        message: str | None = None,
        *,
        requeue_after: float | None = None,
    ) -> str:
        """Evict an admitted Workload, as Kueue's preemption (or another eviction cause) does.

        The Workload gets ``Evicted=True`` (and ``Preempted=True`` for ``Preempted``); its job
        is suspended, its pods stop, its quota is released, and — unless the reason is
        ``Deactivated`` — it is requeued (``Requeued=True``) and admitted again once
        ``requeue_after`` simulated seconds (default :attr:`requeue_backoff`) have passed and
        quota allows, counted from the moment its pods are gone. Returns the Workload name.
        """
        if reason not in EVICTION_REASONS:
            raise ValueError(
                f"reason={reason!r}: not an eviction reason the local Kueue models; valid: {', '.join(EVICTION_REASONS)}"
            )
        workload = self.store.find(self.workloads, namespace, workload_name)
        if workload is None:
            names = [w["metadata"]["name"] for w in self.store.list(self.workloads, namespace)]
            raise ValueError(
                f"workload {namespace}/{workload_name}: no such Workload; in {namespace}: {', '.join(names) or '(none)'}"
            )
        if not has_reservation(workload) or is_finished(workload):
            raise ValueError(
                f"workload {namespace}/{workload_name} holds no quota (not admitted, or finished): there is nothing to evict"
            )
        cluster_queue = workload["status"]["admission"]["clusterQueue"]
        if message is None:
            message = {
                "Preempted": (
                    "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to prioritization in the "
                    f"ClusterQueue; preemptor path: /{cluster_queue}; preemptee path: /{cluster_queue}"
                ),
                "NodeFailures": "Workload was evicted due to node failures",
                "PodsReadyTimeout": "Exceeded the PodsReady timeout",
                "Deactivated": "The workload is deactivated",
            }[reason]
        if reason == "Deactivated":
            deactivated = copy_of(workload)
            deactivated["spec"]["active"] = False
            deactivated["metadata"].pop("resourceVersion", None)
            workload = self.store.replace(self.workloads, deactivated)
        now = self.clock.timestamp()
        stored = self.set_status(
            self.workloads, workload, evicted_status(workload.get("status") or {}, reason, message, now)
        )
        self.event(stored, f"EvictedDueTo{reason}", message)
        if reason == "Preempted":
            self.event(stored, "Preempted", message)
        self._requeue_delay[stored["metadata"]["uid"]] = (
            self.requeue_backoff if requeue_after is None else requeue_after
        )
        self.enqueue(_ALL)
        return workload_name

    def set_quota(self, cluster_queue: str, flavor: str, chips: int) -> None:
        """Set a ClusterQueue's ``google.com/tpu`` nominal quota for one flavor (shrink it to fill the queue).

        Admitted workloads keep running when quota shrinks below their usage, as in Kueue;
        waiting workloads are admitted at once when it grows.
        """
        if chips < 0:
            raise ValueError(f"chips={chips!r}: must be >= 0")
        current = self.store.find(self.cluster_queues, None, cluster_queue)
        if current is None:
            names = [q["metadata"]["name"] for q in self.store.list(self.cluster_queues)]
            raise ValueError(
                f"cluster_queue={cluster_queue!r}: no such ClusterQueue; valid: {', '.join(names) or '(none)'}"
            )
        updated = copy_of(current)
        known: list[str] = []
        changed = False
        for group in updated["spec"].get("resourceGroups") or ():
            for item in group.get("flavors") or ():
                known.append(item["name"])
                if item["name"] != flavor:
                    continue
                resources = item.setdefault("resources", [])
                for resource in resources:
                    if resource.get("name") == TPU:
                        resource["nominalQuota"] = chips
                        changed = True
                if not changed and TPU in (group.get("coveredResources") or ()):
                    resources.append({"name": TPU, "nominalQuota": chips})
                    changed = True
        if not changed:
            raise ValueError(
                f"flavor={flavor!r}: ClusterQueue {cluster_queue} has no {TPU} quota for it; flavors: {', '.join(known) or '(none)'}"
            )
        updated["metadata"].pop("resourceVersion", None)
        self.store.replace(self.cluster_queues, updated)

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> None:
        self._release_deleted_workloads()
        workloads = self._sync_jobs()
        self._schedule(workloads)
        self._write_queue_statuses()

    def _release_deleted_workloads(self) -> None:
        """A Workload being deleted (its job is gone) drops Kueue's finalizer and so its quota."""
        for workload in self.store.list(self.workloads):
            meta = workload["metadata"]
            if meta.get("deletionTimestamp") and RESOURCE_IN_USE_FINALIZER in (meta.get("finalizers") or ()):
                self._drop_finalizer(workload)

    def _drop_finalizer(self, workload: dict[str, Any]) -> dict[str, Any]:
        updated = copy_of(workload)
        updated["metadata"]["finalizers"] = [
            f for f in updated["metadata"].get("finalizers") or () if f != RESOURCE_IN_USE_FINALIZER
        ]
        updated["metadata"].pop("resourceVersion", None)
        return self.store.replace(self.workloads, updated)

    def _sync_jobs(self) -> list[dict[str, Any]]:
        """Create missing Workloads and keep each job and its Workload in step; returns live Workloads."""
        by_owner: dict[str, dict[str, Any]] = {}
        for workload in self.store.list(self.workloads):
            uid = (workload["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
            if uid and not workload["metadata"].get("deletionTimestamp"):
                by_owner[uid] = workload
        jobs = [j for kind in (self.jobsets, self.jobs) for j in self.store.list(kind) if self._is_queued(j)]
        jobs.sort(
            key=lambda j: (
                self._arrival.get(j["metadata"]["uid"], 1 << 62),
                j["metadata"].get("creationTimestamp", ""),
                j["metadata"]["name"],
            )
        )
        for job in jobs:
            meta = job["metadata"]
            self._arrival.setdefault(meta["uid"], next(self._arrivals))
            if meta.get("deletionTimestamp"):
                if meta["uid"] in by_owner:
                    by_owner[meta["uid"]] = self._finish_orphaned(by_owner[meta["uid"]])
                continue
            workload = by_owner.get(meta["uid"])
            if workload is None:
                created = self._create_workload(job)
                if created is not None:
                    by_owner[meta["uid"]] = created
                continue
            by_owner[meta["uid"]] = self._sync_job(job, workload)
        live = [w for w in self.store.list(self.workloads) if not w["metadata"].get("deletionTimestamp")]
        self._forget({j["metadata"]["uid"] for j in jobs} | {w["metadata"]["uid"] for w in live})
        return live

    def _forget(self, known: set[str]) -> None:
        """Drop what was remembered about jobs and Workloads that are gone."""
        for memory in (self._arrival, self._requeue_delay, self._requeue_at, self._reported):
            for uid in [u for u in memory if u not in known]:
                del memory[uid]

    def _create_workload(self, job: dict[str, Any]) -> dict[str, Any] | None:
        if job_finished(job) is not None:
            return None
        meta = job["metadata"]
        try:
            priority = resolve_priority(
                job,
                {c["metadata"]["name"]: c for c in self.store.list(self.workload_priority_classes)},
                {c["metadata"]["name"]: c for c in self.store.list(self.priority_classes)},
            )
        except LookupError as error:
            self._report(
                meta["uid"], job, "WorkloadPriorityClassNotFound", f"cannot create a Workload: {error}"
            )
            self._wake_in(self.retry_seconds)
            return None
        created = self.store.create(self.workloads, new_workload(job, priority))
        self.event(
            job, "CreatedWorkload", f"Created Workload: {meta['namespace']}/{created['metadata']['name']}"
        )
        if not job["spec"].get("suspend"):
            self._stop(job, created, "Not admitted by cluster queue")
        return created

    def _finish_orphaned(self, workload: dict[str, Any]) -> dict[str, Any]:
        """A job being deleted finishes its Workload at once (reason ``OwnerNotFound``), which gives
        its quota back before the garbage collector reaches the Workload: Kueue's job reconciler
        finalizes a job with a deletionTimestamp (pkg/controller/jobframework/reconciler.go,
        ``finalizeWorkloads`` → pkg/workload/workload.go ``FinalizeOrphanedWorkload``; feature gate
        ``FinishOrphanedWorkloads``, beta and on by default since v0.18)."""
        if is_finished(workload):
            return workload
        done = self.set_status(
            self.workloads, workload, finished_status(workload.get("status") or {}, False, OWNER_NOT_FOUND_MESSAGE, self.clock.timestamp(), OWNER_NOT_FOUND)
        )
        return self._drop_finalizer(done)

    def _sync_job(self, job: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
        now = self.clock.timestamp()
        if is_finished(workload):
            return workload
        finished = job_finished(job)
        if finished is not None:
            succeeded, message = finished
            done = self.set_status(
                self.workloads,
                workload,
                finished_status(workload.get("status") or {}, succeeded, message, now),
            )
            done = self._drop_finalizer(done)
            self.event(
                job,
                "FinishedWorkload",
                f"Workload '{job['metadata']['namespace']}/{workload['metadata']['name']}' is declared finished",
            )
            return done
        if is_true(workload, "Evicted") and has_reservation(workload):
            if not job["spec"].get("suspend"):
                self._stop(job, workload, (condition(workload, "Evicted") or {}).get("message", "evicted"))
                return workload
            if job_active(job):
                return workload
            released = self.set_status(
                self.workloads, workload, requeued_status(workload.get("status") or {}, now)
            )
            uid = released["metadata"]["uid"]
            self._reported.pop(uid, None)
            delay = self._requeue_delay.pop(uid, self.requeue_backoff)
            self._requeue_at[uid] = self.clock.now() + delay
            self._wake_in(delay)
            return released
        if is_true(workload, "Admitted") and has_reservation(workload):
            left = exec_time_left(workload, now)
            if left is not None and left <= 0:
                return self._deactivate_for_max_exec_time(workload)
            if left is not None:
                self._wake_in(left)
            if job["spec"].get("suspend"):
                self._start(job, workload)
        elif not job["spec"].get("suspend"):
            self._stop(job, workload, "Not admitted by cluster queue")
        return workload

    def _deactivate_for_max_exec_time(self, workload: dict[str, Any]) -> dict[str, Any]:
        """Kueue's three steps for a Workload past its limit: mark it, deactivate it, evict it."""
        now = self.clock.timestamp()
        marked = self.set_status(self.workloads, workload, deactivation_target_status(workload["status"], now))
        limit = workload["spec"]["maximumExecutionTimeSeconds"]
        self.event(marked, MAX_EXEC_TIME_EXCEEDED, f"The maximum execution time ({limit}s) exceeded", type_="Warning")
        deactivated = copy_of(marked)
        deactivated["spec"]["active"] = False
        deactivated["metadata"].pop("resourceVersion", None)
        deactivated = self.store.replace(self.workloads, deactivated)
        evicted = self.set_status(self.workloads, deactivated, deactivated_status(deactivated["status"], now))
        reason = (condition(evicted, "Evicted") or {}).get("reason", "Deactivated")
        self.event(evicted, f"EvictedDueTo{reason}", (condition(evicted, "Evicted") or {}).get("message", ""))
        self.enqueue(_ALL)
        return evicted

    def _wake_in(self, simulated_seconds: float) -> None:
        """Reconcile again in ``simulated_seconds`` unless an earlier wake-up is already due.

        One delayed key serves every timer (requeue backoffs, retries, execution limits), so the
        soonest one must win.
        """
        now, at = self.clock.now(), self.clock.now() + max(0.0, simulated_seconds)
        if self._wake_at is None or self._wake_at <= now or at < self._wake_at:
            self._wake_at = at
            self.enqueue_after(_ALL, simulated_seconds)

    def _schedule(self, workloads: list[dict[str, Any]]) -> None:
        """One scheduling cycle: every waiting workload of every ClusterQueue, in queue order."""
        now_ts, now = self.clock.timestamp(), self.clock.now()
        local_queues = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): q for q in self.store.list(self.local_queues)
        }
        cluster_queues = {q["metadata"]["name"]: q for q in self.store.list(self.cluster_queues)}
        flavors = {f["metadata"]["name"]: f for f in self.store.list(self.flavors)}
        live = [w for w in workloads if not is_finished(w)]
        used: dict[str, dict[str, int]] = {}
        for workload in live:
            if has_reservation(workload):
                cq_usage = used.setdefault(workload["status"]["admission"]["clusterQueue"], {})
                for flavor, chips in reserved_chips(workload).items():
                    cq_usage[flavor] = cq_usage.get(flavor, 0) + chips
        waiting: dict[str, list[dict[str, Any]]] = {}
        for workload in live:
            meta = workload["metadata"]
            if has_reservation(workload) or workload["spec"].get("active") is False:
                continue
            if self._requeue_at.get(meta["uid"], 0.0) > now:
                continue
            queue_name = workload["spec"].get("queueName", "")
            local_queue = local_queues.get((meta["namespace"], queue_name))
            if local_queue is None:
                self._mark_pending(workload, "Inadmissible", f"LocalQueue {queue_name} doesn't exist", now_ts)
                continue
            cq_name = (local_queue.get("spec") or {}).get("clusterQueue", "")
            cluster_queue = cluster_queues.get(cq_name)
            if cluster_queue is None:
                self._mark_pending(workload, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist", now_ts)
                continue
            if queue_view(cluster_queue, flavors)[1]:
                self._mark_pending(workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive", now_ts)
                continue
            waiting.setdefault(cq_name, []).append(workload)
        for cq_name, queued in sorted(waiting.items()):
            view, _ = queue_view(cluster_queues[cq_name], flavors)
            ordered = sorted(
                queued,
                key=lambda w: queue_order(
                    w, self._arrival.get((w["metadata"].get("labels") or {}).get(JOB_UID_LABEL, ""))
                ),
            )
            by_key = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in ordered}
            flavor_labels = {f.name: dict(f.node_labels) for f in view.flavors}
            for decision in admit([queued_workload(w) for w in ordered], view, used.get(cq_name, {})):
                workload = by_key[(decision.workload.namespace, decision.workload.name)]
                if decision.assignments is not None:
                    self._admit(workload, cq_name, decision.assignments, flavor_labels, now_ts)
                elif decision.message is not None:
                    self._mark_pending(workload, "Pending", decision.message, now_ts)

    def pending_workloads(self, namespace: str | None, queue: str, *, limit: int = 1000, offset: int = 0) -> dict[str, Any]:
        """Kueue's visibility API (``visibility.kueue.x-k8s.io/v1beta2``): the pending workloads of a
        ClusterQueue (``namespace`` None) or of one LocalQueue, in the order the ClusterQueue will
        try them, as ``pkg/visibility/storage/pending_workloads_{cq,lq}.go`` answer: a
        ``PendingWorkloadsSummary`` whose items carry ``positionInClusterQueue`` (among all of the
        ClusterQueue's) and ``positionInLocalQueue`` (0-based; ``limit`` and ``offset`` as upstream)."""
        local_queues = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in self.store.list(self.local_queues)}
        if namespace is None:
            cq_name = queue
            if self.store.find(self.cluster_queues, None, queue) is None:
                raise ApiError(404, "NotFound", f'clusterqueue.visibility.kueue.x-k8s.io "{queue}" not found')
        else:
            local = local_queues.get((namespace, queue))
            if local is None:
                raise ApiError(404, "NotFound", f'localqueue.visibility.kueue.x-k8s.io "{queue}" not found')
            cq_name = (local.get("spec") or {}).get("clusterQueue", "")
        in_cq = [
            w for w in self.store.list(self.workloads)
            if not is_finished(w) and not has_reservation(w) and w["spec"].get("active") is not False
            and not w["metadata"].get("deletionTimestamp")
            and ((local_queues.get((w["metadata"]["namespace"], w["spec"].get("queueName", ""))) or {}).get("spec") or {}).get("clusterQueue") == cq_name
        ]
        ordered = sorted(in_cq, key=lambda w: queue_order(w, self._arrival.get((w["metadata"].get("labels") or {}).get(JOB_UID_LABEL, ""))))
        items: list[dict[str, Any]] = []
        skipped = 0
        for position, workload in enumerate(ordered):
            meta = workload["metadata"]
            if len(items) >= max(0, limit):
                break
            if namespace is not None and (meta["namespace"], workload["spec"].get("queueName")) != (namespace, queue):
                continue
            if skipped < offset:
                skipped += 1
                continue
            items.append({
                "metadata": {
                    "name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": meta.get("creationTimestamp"),
                    "ownerReferences": [{k: r[k] for k in ("apiVersion", "kind", "name", "uid") if k in r} for r in meta.get("ownerReferences") or ()],
                },
                "priority": int(workload["spec"].get("priority") or 0),
                "localQueueName": workload["spec"].get("queueName", ""),
                "positionInClusterQueue": position,
                "positionInLocalQueue": len(items) + offset,
            })
        return {"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {"creationTimestamp": None}, "items": items}

    def _mark_pending(self, workload: dict[str, Any], reason: str, message: str, now: str) -> None:
        stored = self.set_status(
            self.workloads, workload, pending_status(workload.get("status") or {}, reason, message, now)
        )
        uid = workload["metadata"]["uid"]
        if self._reported.get(uid) != f"{reason}:{message}":
            self._reported[uid] = f"{reason}:{message}"
            self.event(stored, reason, message, type_="Warning")

    def _admit(
        self,
        workload: dict[str, Any],
        cluster_queue: str,
        assignments: Sequence[PodSetAssignment],
        flavor_labels: Mapping[str, Mapping[str, str]],
        now: str,
    ) -> None:
        queued_since = (condition(workload, "Requeued") or {}).get("lastTransitionTime") or workload[
            "metadata"
        ].get("creationTimestamp", now)
        stored = self.set_status(
            self.workloads,
            workload,
            admitted_status(workload.get("status") or {}, cluster_queue, assignments, now),
        )
        self._reported.pop(workload["metadata"]["uid"], None)
        self._requeue_at.pop(workload["metadata"]["uid"], None)
        waited = _seconds_between(queued_since, now)
        self.event(
            stored,
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cluster_queue}, wait time since queued was {waited:.0f}s",
        )
        self.event(
            stored,
            "Admitted",
            f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was 0s",
        )
        owner = self._owner(stored)
        if owner is not None and owner["spec"].get("suspend"):
            self._start(owner, stored, flavor_labels)

    def _owner(self, workload: Mapping[str, Any]) -> dict[str, Any] | None:
        for ref in workload["metadata"].get("ownerReferences") or ():
            kind = (
                self.jobsets
                if ref.get("kind") == "JobSet"
                else self.jobs
                if ref.get("kind") == "Job"
                else None
            )
            if kind is None:
                continue
            found = self.store.find(kind, workload["metadata"]["namespace"], ref["name"])
            if found is not None and found["metadata"]["uid"] == ref.get("uid"):
                return found
        return None

    def _start(
        self,
        job: dict[str, Any],
        workload: dict[str, Any],
        flavor_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        admission = workload["status"]["admission"]
        if flavor_labels is None:
            flavor_labels = {
                f["metadata"]["name"]: dict((f.get("spec") or {}).get("nodeLabels") or {})
                for f in self.store.list(self.flavors)
            }
        assignments = [
            PodSetAssignment(
                a["name"],
                int(a.get("count", 0)),
                (a.get("flavors") or {}).get(TPU),
                quantity((a.get("resourceUsage") or {}).get(TPU, 0)),
            )
            for a in admission.get("podSetAssignments") or ()
        ]
        updated = started_job(job, assignments, flavor_labels)
        updated["metadata"].pop("resourceVersion", None)
        self.store.replace(self._job_kind(job), updated)
        self.event(job, "Started", f"Admitted by clusterQueue {admission['clusterQueue']}")

    def _stop(self, job: dict[str, Any], workload: dict[str, Any], message: str) -> None:
        updated = stopped_job(job, workload)
        updated["metadata"].pop("resourceVersion", None)
        self.store.replace(self._job_kind(job), updated)
        self.event(job, "Stopped", message)

    def _report(self, uid: str, involved: dict[str, Any], reason: str, message: str) -> None:
        if self._reported.get(uid) != f"{reason}:{message}":
            self._reported[uid] = f"{reason}:{message}"
            self.event(involved, reason, message, type_="Warning")

    def _write_queue_statuses(self) -> None:
        now = self.clock.timestamp()
        flavors = {f["metadata"]["name"]: f for f in self.store.list(self.flavors)}
        cluster_queues = {q["metadata"]["name"]: q for q in self.store.list(self.cluster_queues)}
        local_queues = self.store.list(self.local_queues)
        workloads = [w for w in self.store.list(self.workloads) if not w["metadata"].get("deletionTimestamp")]
        queue_of = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): (q.get("spec") or {}).get("clusterQueue", "")
            for q in local_queues
        }
        by_cq: dict[str, list[dict[str, Any]]] = {}
        by_lq: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for workload in workloads:
            lq_key = (workload["metadata"]["namespace"], workload["spec"].get("queueName", ""))
            by_lq.setdefault(lq_key, []).append(workload)
            cq_name = ((workload.get("status") or {}).get("admission") or {}).get(
                "clusterQueue"
            ) or queue_of.get(lq_key)
            if cq_name:
                by_cq.setdefault(cq_name, []).append(workload)
        views = {name: queue_view(cq, flavors) for name, cq in cluster_queues.items()}
        for name, cq in cluster_queues.items():
            view, missing = views[name]
            names = list(dict.fromkeys(f.name for f in view.flavors))
            status = queue_statuses(
                cq, names, missing, by_cq.get(name, []), cq.get("status") or {}, now, local=False
            )
            self.set_status(self.cluster_queues, cq, status)
        for lq in local_queues:
            key = (lq["metadata"]["namespace"], lq["metadata"]["name"])
            cq = cluster_queues.get(queue_of[key])
            view, missing = views.get(queue_of[key], (QueueView("", ()), []))
            names = list(dict.fromkeys(f.name for f in view.flavors))
            status = queue_statuses(
                cq, names, missing, by_lq.get(key, []), lq.get("status") or {}, now, local=True
            )
            self.set_status(self.local_queues, lq, status)
