"""What ``PathwaysJobOperator`` returns (its XCom): the workload, its disruptions, timeline and goodput. Pure.

One shape, read by the DAG's next task, the lineage facets and the Pathways view in the UI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pathways_airflow.run.messages import summarize
from pathways_airflow.run.goodput import goodput_of
from pathways_airflow.state.model import Observation, WorkloadState
from pathways_airflow.state.workload_parts import execution_attempts_of
from pathways_airflow.run.records import Submission
from pathways_airflow.run.timeline import timeline_of

if TYPE_CHECKING:
    from pathways_airflow.spec.workload import Workload

NO_CHECKPOINT_DIR = object()
"""``checkpoint=`` of a task without a ``checkpoint_dir``: the result has no ``checkpoint`` key."""


def tpu_of(workload: Workload) -> dict[str, Any]:
    """The TPU shape a workload held: machine type, topology, slices, chips."""
    shape = workload.shape
    return {"machine_type": shape.machine_type.name, "topology": shape.topology, "slices": workload.num_slices, "chips": workload.total_chips}


def uid_of(observation: Observation) -> str | None:
    """The workload's uid: its identity beyond its name (a name is reused by a later DAG run)."""
    top = observation.pathwaysjob if observation.backend == "pathwaysjob" else observation.jobset
    return ((top or {}).get("metadata") or {}).get("uid")


def counted_state(state: WorkloadState, observation: Observation) -> WorkloadState:
    """``state`` with the JobSet's count of executions when it was judged without one (a success a
    retry found and reuses carries no look at the JobSet)."""
    if state.execution_attempts is not None:
        return state
    return state.with_execution_attempts(execution_attempts_of(observation.jobset))


def workload_result(
    record: Submission,
    state: WorkloadState,
    *,
    checkpoint: Mapping[str, Any] | None | object = NO_CHECKPOINT_DIR,
    tpu: Mapping[str, Any],
    uid: str | None = None,
    now: float,
) -> dict[str, Any]:
    """The task's result once its workload has succeeded.

    ``checkpoint``: the newest committed checkpoint (``{"step", "uri"}``), ``None`` if the
    directory holds none. ``tpu``: what each of the task's workloads held (:func:`tpu_of`).
    """
    disruptions = [d.to_dict() for d in record.disruptions]
    goodput = goodput_of(record.runs, record.disruptions, int(tpu["chips"]), now=now)
    result: dict[str, Any] = {
        "name": record.name,
        "namespace": record.namespace,
        "uid": uid,
        "backend": record.backend,
        "tpu": dict(tpu),
        "state": state.phase.value,
        "restarts": state.restarts,
        "wall_time_seconds": round(now - record.started, 1),
        "disruptions": disruptions,
        "disruption_summary": summarize(disruptions, goodput.lost),
        "timeline": timeline_of(record.runs, record.disruptions),
        "goodput": goodput.to_dict(),
        "goodput_summary": goodput.summary(),
        "queued": dict(record.runs[-1].queued) if record.runs and record.runs[-1].queued else None,
        "maintenance": dict(record.maintenance) if record.maintenance else None,
    }
    if state.execution_attempts is not None:  # JobSet's KEP-1282 count, where the cluster keeps it
        result["execution_attempts"] = state.execution_attempts
    if checkpoint is not NO_CHECKPOINT_DIR:
        result["checkpoint"] = None if checkpoint is None else dict(checkpoint)  # type: ignore[call-overload]
    return result


__all__ = ["NO_CHECKPOINT_DIR", "tpu_of", "uid_of", "workload_result"]
