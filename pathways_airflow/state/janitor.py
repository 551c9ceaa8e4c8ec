"""Which of our workloads has Airflow lost track of? The janitor's rule, and the chips it frees.

Nothing on the cluster stops a workload whose Airflow task is gone: a triggerer killed with
SIGKILL on Airflow 3.1/3.2, a task marked failed while the Kubernetes API was down, a DAG run
deleted. The janitor lists the workloads that carry our labels, asks Airflow for the state of the
task instance each one names (its annotations, :meth:`TaskIdentity.annotations`) and deletes those
whose task instance is finished or gone. Everything here errs towards keeping:

* only a workload with our managed-by label and a task key whose annotations hash to that key is
  ever considered (someone else's object, or one whose labels were edited, is never touched);
* a live task instance keeps its workload: running, deferred, queued or scheduled, and also
  ``up_for_retry`` / ``up_for_reschedule`` / ``restarting`` / no state yet, whose next try
  re-attaches to the workload or reads the result it left;
* a workload younger than the grace period is kept whatever Airflow says: a task may be between
  its submit and its first heartbeat or its defer, and a retry between its adopt and its wait;
* a state the janitor does not know, and a task instance it could not ask about, keep it.

The states are Airflow's ``TaskInstanceState`` values (airflow-core ``utils/state.py``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow.spec.names import LABEL_PREFIX, MANAGED_BY_LABEL, MANAGED_BY_VALUE, TASK_KEY_LABEL, TaskIdentity
from pathways_airflow.spec.tpu import MACHINE_TYPES, pod_spec_chips, slice_shape

GRACE_PERIOD = dt.timedelta(minutes=10)
"""How old a workload must be before the janitor may delete it (see the module docstring)."""

LIVE_STATES = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting", None}
)
"""Task instance states whose workload is still wanted; ``None`` is a task instance without a
state yet (created, or cleared and about to be scheduled again)."""
FINISHED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
"""Task instance states no try follows unless a user clears the task (which submits anew)."""

"""The extended resource a TPU worker pod requests (GKE: "Deploy TPU workloads in GKE")."""

TaskAnswer = tuple[bool, "str | None"]
"""``(found, state)`` for one task instance, as :func:`hooks.airflow_states.this_task_state` reads it."""


@dataclass(frozen=True)
class Verdict:
    """What the janitor decided for one workload, and why, in words a human can act on."""

    kind: str
    namespace: str
    name: str
    task_instance: str
    """``dag_id/run_id/task_id[map_index]``, or ``-`` when the workload names none."""
    state: str
    """The task instance's state as Airflow reported it (``none``, ``not found``, ``unknown``)."""
    delete: bool
    reason: str
    chips: int | None

    @property
    def decision(self) -> str:
        return "delete" if self.delete else "keep"


def owned_task(workload: Mapping[str, Any]) -> TaskIdentity | None:
    """The task instance a workload belongs to, when it is provably ours, else ``None``.

    Ours means: our managed-by label, a task key, and annotations naming a task instance whose
    key is that task key (labels hold shortened ids; the annotations hold the full ones).
    """
    meta = workload.get("metadata") or {}
    labels = meta.get("labels") or {}
    notes = meta.get("annotations") or {}
    key = labels.get(TASK_KEY_LABEL)
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE or not key:
        return None
    ids = [notes.get(f"{LABEL_PREFIX}/{field}") for field in ("dag-id", "task-id", "run-id")]
    if not all(isinstance(value, str) and value for value in ids):
        return None
    try:
        map_index = int(notes.get(f"{LABEL_PREFIX}/map-index", -1))
    except (TypeError, ValueError):
        return None
    identity = TaskIdentity(ids[0], ids[1], ids[2], map_index)
    return identity if identity.key == key else None


def owner_workload(workload: Mapping[str, Any]) -> str | None:
    """The PathwaysJob a JobSet belongs to (it inherits that PathwaysJob's labels), if any."""
    for reference in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("kind") == "PathwaysJob":
            return str(reference.get("name"))
    return None


def describe(identity: TaskIdentity) -> str:
    mapped = f"[{identity.map_index}]" if identity.map_index >= 0 else ""
    return f"{identity.dag_id}/{identity.run_id}/{identity.task_id}{mapped}"


def workload_age(workload: Mapping[str, Any], now: dt.datetime) -> dt.timedelta | None:
    stamp = (workload.get("metadata") or {}).get("creationTimestamp")
    try:
        created = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return now - created if created.tzinfo else None


def judge(
    workload: Mapping[str, Any],
    answer: TaskAnswer | None,
    now: dt.datetime,
    grace_period: dt.timedelta = GRACE_PERIOD,
) -> Verdict:
    """Keep or delete one workload, given what Airflow answered for its task instance.

    ``answer`` is ``None`` when Airflow could not be asked (or the workload names no task
    instance); ``(False, None)`` when Airflow says the task instance does not exist.
    """
    meta = workload.get("metadata") or {}
    identity = owned_task(workload)

    def verdict(delete: bool, reason: str, state: str = "-") -> Verdict:
        return Verdict(
            str(workload.get("kind")), str(meta.get("namespace")), str(meta.get("name")),
            describe(identity) if identity else "-", state, delete, reason, workload_chips(workload),
        )

    if identity is None:
        return verdict(False, "not provably ours: no managed-by label and task key matching its annotations")
    owner = owner_workload(workload)
    if owner:
        return verdict(False, f"part of PathwaysJob {owner}: it goes with that PathwaysJob")
    if meta.get("deletionTimestamp"):
        return verdict(False, "already being deleted")
    if answer is None:
        return verdict(False, "Airflow could not be asked about its task instance", "unknown")
    found, state = answer
    shown = (state or "none") if found else "not found"
    age = workload_age(workload, now)
    if age is None or age < grace_period:
        return verdict(False, f"younger than the grace period ({_minutes(grace_period)})", shown)
    if not found:
        return verdict(True, f"task instance {describe(identity)} no longer exists (its DAG run or task was deleted)", shown)
    if state in LIVE_STATES:
        return verdict(False, f"task instance is {shown}", shown)
    if state in FINISHED_STATES:
        return verdict(True, f"task instance {describe(identity)} is {state}", shown)
    return verdict(False, f"task instance is in a state the janitor does not know ({state}): kept", shown)


def _minutes(period: dt.timedelta) -> str:
    seconds = int(period.total_seconds())
    return f"{seconds // 60} min" if seconds % 60 == 0 and seconds else f"{seconds} s"


# --- chips ------------------------------------------------------------------------------------


def workload_chips(workload: Mapping[str, Any]) -> int | None:
    """The TPU chips a workload's pods request in all, or ``None`` when its manifest does not say.

    A PathwaysJob: for each ``workers[]`` entry, slices × VMs per slice × chips per VM (what each
    worker pod requests, from the TPU catalog). A JobSet: for each replicated job, replicas ×
    parallelism × the ``google.com/tpu`` limits of its containers.
    """
    spec = workload.get("spec") or {}
    try:
        if workload.get("kind") == "PathwaysJob":
            return sum(_pathways_workers_chips(worker) for worker in spec.get("workers") or [])
        if workload.get("kind") == "JobSet":
            return sum(_replicated_job_chips(job) for job in spec.get("replicatedJobs") or [])
    except (KeyError, TypeError, ValueError, AttributeError, LookupError):
        return None
    return None


def _pathways_workers_chips(worker: Mapping[str, Any]) -> int:
    # google/pathways-job api/v1/pathwaysjob_types.go: WorkerSpec{Type, Topology, NumSlices}.
    shape = slice_shape(MACHINE_TYPES[worker["type"]], worker["topology"])
    return int(worker.get("numSlices", 1)) * shape.vms * shape.chips_per_vm


def _replicated_job_chips(job: Mapping[str, Any]) -> int:
    # kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go: ReplicatedJob{Replicas, Template}.
    job_spec = job["template"]["spec"]
    pods = int(job.get("replicas", 1)) * int(job_spec.get("parallelism", 1))
    return pods * pod_spec_chips(job_spec["template"]["spec"])


def chips_freed(verdicts: list[Verdict]) -> int:
    """The chips of the workloads deleted (those whose size is unknown count as none)."""
    return sum(v.chips or 0 for v in verdicts if v.delete)


# --- a whole sweep ------------------------------------------------------------------------------


def top_level(workloads: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The workloads to judge: a PathwaysJob's own JobSet inherits its labels, but is the
    PathwaysJob's to delete, so it is left out (judging it too would count its chips twice)."""
    return [w for w in workloads if not owner_workload(w)]


def tasks_to_ask(workloads: list[Mapping[str, Any]]) -> list[TaskIdentity]:
    """The task instances Airflow must be asked about, each once, in a stable order."""
    found = {identity for identity in map(owned_task, top_level(workloads)) if identity is not None}
    return sorted(found, key=lambda i: (i.dag_id, i.run_id, i.task_id, i.map_index))


def judge_all(
    workloads: list[Mapping[str, Any]],
    answers: Mapping[TaskIdentity, TaskAnswer],
    now: dt.datetime,
    grace_period: dt.timedelta = GRACE_PERIOD,
) -> list[Verdict]:
    """A verdict for every top-level workload; a task instance missing from ``answers`` was not asked."""
    verdicts = []
    for workload in top_level(workloads):
        identity = owned_task(workload)
        verdicts.append(judge(workload, answers.get(identity) if identity else None, now, grace_period))
    return verdicts


def report_line(verdict: Verdict, *, acting: bool) -> str:
    """One line per workload: name, kind, namespace, task instance, state, decision, reason, chips."""
    decision = verdict.decision if acting or not verdict.delete else "would delete"
    chips = "?" if verdict.chips is None else str(verdict.chips)
    return (
        f"{verdict.kind} {verdict.namespace}/{verdict.name} task={verdict.task_instance} state={verdict.state} "
        f"decision={decision} chips={chips} reason: {verdict.reason}"
    )


def summary(verdicts: list[Verdict], deleted: list[Verdict]) -> dict[str, Any]:
    """What a sweep found and did, small enough for XCom: ``deleted`` is empty in a dry run."""
    return {
        "orphans": [f"{v.kind}/{v.namespace}/{v.name}" for v in verdicts if v.delete],
        "deleted": [f"{v.kind}/{v.namespace}/{v.name}" for v in deleted],
        "chips_freed": chips_freed(deleted),
        "kept": sum(1 for v in verdicts if not v.delete),
    }


def sweep_summary(verdicts: list[Verdict], deleted: list[Verdict], left: list[str], *, acting: bool) -> str:
    """The sweep's last line: how many orphans, how many chips, and anything still terminating."""
    orphans = [v for v in verdicts if v.delete]
    if not acting:
        return (
            f"dry run: {len(orphans)} of {len(verdicts)} workloads are orphans holding "
            f"{chips_freed(orphans)} TPU chips; nothing deleted"
        )
    line = f"deleted {len(deleted)} of {len(verdicts)} workloads, freeing {chips_freed(deleted)} TPU chips"
    return line + (f"; still terminating: {', '.join(left)}" if left else "")
