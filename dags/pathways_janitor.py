"""Hourly: delete the TPU workloads Airflow has lost track of.

A workload labelled as pathways-airflow's whose task instance is finished (success, failed,
skipped...) or no longer exists (its DAG run was deleted) holds TPU slices nobody waits on; this
DAG deletes it and logs the chips freed. Workloads younger than the grace period, workloads of
live or retrying task instances and anything not labelled as ours are never touched.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from pathways_airflow.operators import PathwaysJanitorOperator

with DAG(
    "pathways_janitor",
    schedule="@hourly",
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "tpu", "maintenance"],
    params={
        "namespace": Param("default", type="string", description='"*" for every namespace (needs a ClusterRole)'),
        "grace_period_seconds": Param(600, type="number", minimum=0),
        # The operator defaults to a dry run; this DAG deletes. Trigger it with dry_run=True to see first.
        "dry_run": Param(False, type="boolean"),
    },
):
    PathwaysJanitorOperator(
        task_id="delete_orphaned_workloads",
        namespace="{{ params.namespace }}",
        grace_period_seconds="{{ params.grace_period_seconds }}",
        dry_run="{{ params.dry_run }}",
        execution_timeout=dt.timedelta(minutes=30),
    )
