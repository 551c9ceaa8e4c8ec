"""What ``PathwaysJobOperator`` returns (its XCom): the workload, its disruptions, timeline and goodput. Pure.

One shape, read by the DAG's next task, the lineage facets and the Pathways view in the UI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pathways_airflow.state.disruption import summarize
from pathways_airflow.state.goodput import goodput_of
from pathways_airflow.state.model import WorkloadState
from pathways_airflow.state.records import Submission
from pathways_airflow.state.timeline import timeline_of

NO_CHECKPOINT_DIR = object()
"""``checkpoint=`` of a task without a ``checkpoint_dir``: the result has no ``checkpoint`` key."""


def workload_result(
    record: Submission,
    state: WorkloadState,
    *,
    checkpoint: Mapping[str, Any] | None | object = NO_CHECKPOINT_DIR,
    chips: int,
    now: float,
) -> dict[str, Any]:
    """The task's result once its workload has succeeded.

    ``checkpoint``: the newest committed checkpoint (``{"step", "uri"}``), ``None`` if the
    directory holds none. ``chips``: what each of the task's workloads held.
    """
    disruptions = [d.to_dict() for d in record.disruptions]
    goodput = goodput_of(record.runs, record.disruptions, chips, now=now)
    result: dict[str, Any] = {
        "name": record.name,
        "namespace": record.namespace,
        "backend": record.backend,
        "state": state.phase.value,
        "restarts": state.restarts,
        "wall_time_seconds": round(now - record.started, 1),
        "disruptions": disruptions,
        "disruption_summary": summarize(disruptions),
        "timeline": timeline_of(record.runs, record.disruptions),
        "goodput": goodput.to_dict(),
        "goodput_summary": goodput.summary(),
    }
    if checkpoint is not NO_CHECKPOINT_DIR:
        result["checkpoint"] = None if checkpoint is None else dict(checkpoint)  # type: ignore[call-overload]
    return result


__all__ = ["NO_CHECKPOINT_DIR", "workload_result"]
