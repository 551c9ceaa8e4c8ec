"""``PathwaysJanitorOperator``: delete the TPU workloads whose Airflow task instance is finished or gone.

A backstop for what nothing on the cluster stops: a workload whose task was killed where no
``on_kill`` could run (a triggerer killed with SIGKILL on Airflow 3.1/3.2), marked failed while
the Kubernetes API was down, or whose DAG run was deleted. The rule is
:mod:`pathways_airflow.state.janitor`; the task asks Airflow through the Task SDK (the Execution
API its supervisor already talks to), so it needs no credentials of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS, ClusterConnectionMixin
from pathways_airflow.spec.arguments import janitor_arguments
from pathways_airflow.state.janitor import GRACE_PERIOD, report_line, summary, sweep_summary

if TYPE_CHECKING:
    from airflow.sdk import Context


class PathwaysJanitorOperator(ClusterConnectionMixin, BaseOperator):
    """Find the PathwaysJobs and JobSets labelled as ours whose task instance Airflow reports
    finished or gone, and (unless ``dry_run``) delete them and wait for their pods to go.

    Never deleted: a workload without our managed-by label and task key, one younger than
    ``grace_period_seconds``, one whose task instance is live or will be retried.

    :param namespace: where to look; ``None`` or ``"*"``: every namespace (needs a ClusterRole).
    :param grace_period_seconds: never delete a workload younger than this (default 10 minutes).
    :param dry_run: only log what would be deleted (the default).
    :param wait_seconds: how long to wait for the deleted workloads' pods to terminate.
    :return: ``{"orphans": [...], "deleted": [...], "chips_freed": n, "kept": n}`` (names as
        ``Kind/namespace/name``; ``deleted`` is empty in a dry run).
    """

    template_fields: Sequence[str] = ("namespace", "grace_period_seconds", "dry_run", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        namespace: str | None = "default",
        grace_period_seconds: float | str = GRACE_PERIOD.total_seconds(),
        dry_run: bool | str = True,
        wait_seconds: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.grace_period_seconds = grace_period_seconds
        self.dry_run = dry_run
        self.wait_seconds = wait_seconds

    def execute(self, context: Context) -> dict[str, Any]:
        from pathways_airflow.hooks.airflow_states import states_through_the_task_sdk
        from pathways_airflow.hooks.janitor import sweep

        namespace, grace, dry_run = janitor_arguments(self.namespace, self.grace_period_seconds, self.dry_run)
        result = sweep(
            self.hook,
            namespace,
            states_through_the_task_sdk,
            grace_period=dt.timedelta(seconds=grace),
            delete=not dry_run,
            wait_seconds=self.wait_seconds,
        )
        for verdict in result.verdicts:
            self.log.info("%s", report_line(verdict, acting=not dry_run))
        self.log.info("%s", sweep_summary(result.verdicts, result.deleted, result.left, acting=not dry_run))
        return summary(result.verdicts, result.deleted)
