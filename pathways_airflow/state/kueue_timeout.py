"""A workload Kueue stopped at its maximum execution time: the task's own timeout, not a disruption. Pure.

Kueue deactivates a Workload once it has been admitted for ``spec.maximumExecutionTimeSeconds``
(copied from the job's ``kueue.x-k8s.io/max-exec-time-seconds`` label, which the operator sets
from ``execution_timeout``). The job is suspended and its pods go, exactly as after a preemption,
but it never comes back: the Workload is inactive. Resubmitting it as a disruption would run the
program past the limit the DAG author set, so the wait must end it as a timeout.

Kueue writes it in two steps (kubernetes-sigs/kueue pkg/controller/core/workload_controller.go,
reconcileMaxExecutionTime, then pkg/workload/evict/evict.go): condition ``DeactivationTarget``
with reason ``MaximumExecutionTimeExceeded``, then ``Evicted`` with reason
``DeactivatedDueToMaximumExecutionTimeExceeded``. Either one decides.
"""

from __future__ import annotations

from typing import Any, Mapping

from pathways_airflow import well_known
from pathways_airflow.state.conditions import true_condition


def max_exec_time_exceeded(kueue_workload: Mapping[str, Any] | None) -> str | None:
    """Why Kueue stopped the workload for good at its time limit, or ``None`` if it did not."""
    target = true_condition(kueue_workload, "DeactivationTarget")
    evicted = true_condition(kueue_workload, "Evicted")
    if target is not None and target.get("reason") == well_known.MAX_EXEC_TIME_EXCEEDED:
        said = target
    elif evicted is not None and evicted.get("reason") == well_known.DEACTIVATED_FOR_MAX_EXEC_TIME:
        said = evicted
    else:
        return None
    limit = ((kueue_workload or {}).get("spec") or {}).get("maximumExecutionTimeSeconds")
    return (
        f"Kueue stopped it after {limit if limit is not None else 'its maximum'}s of admitted time "
        f"({said.get('reason')}: {said.get('message') or 'no message'}); the limit is the label "
        f"{well_known.MAX_EXEC_TIME}, set from the task's execution_timeout (or max_exec_time_seconds): "
        "a timeout, not a disruption, so it is not resubmitted"
    )
