"""Which task instance an operator's Kubernetes objects belong to. One rule for every operator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pathways_airflow.spec.names import TaskIdentity
from pathways_airflow.run.rounds import first_try_of

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context

DRY_RUN_RUN_ID = "dry-run"
"""The run id a dry run uses without a context, so a dry run never names a real run."""


def task_identity(operator: BaseOperator, context: Context | None) -> TaskIdentity:
    """The task instance from the context, or placeholders for a dry run without one."""
    if context is None:
        return TaskIdentity(operator.dag_id if operator.has_dag() else "dry-run", operator.task_id, DRY_RUN_RUN_ID)
    ti = context["ti"]
    map_index = getattr(ti, "map_index", None)
    first_try = first_try_of(getattr(ti, "try_number", None), getattr(ti, "max_tries", None), operator.retries)
    return TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else map_index, first_try)
