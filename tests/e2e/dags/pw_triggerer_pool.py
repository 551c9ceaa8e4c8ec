"""The fleet the triggerer-pool test spreads over two triggerers: ``waits`` deferrable PathwaysJobs.

One mapped ``PathwaysJobOperator``: each map index is a one-slice v5e 2x2 workload whose program
is ``exit N`` held open until a ``gs://`` object exists (the local cluster's gated ``exit``
stand-in), so the test decides when the fleet ends. The run's ``kinds`` give each index its
program: ``bug`` exits 3 once ``<gate>/bugs`` exists; any other kind exits 0 once ``<gate>/all``
does (the test itself disrupts the slices of the ``disrupted`` ones while the triggerers hold
the waits).
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param, task

from pathways_airflow.operators import PathwaysJobOperator

BUG_EXIT_CODE = 3

with DAG(
    "pw_triggerer_pool",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_tasks=100_000,
    render_template_as_native_obj=True,
    params={"kinds": Param(["success"], type="array", minItems=1), "gate": Param("gs://pathways-demo/pool/gate", type="string")},
):

    @task
    def plan(kinds: list[str], gate: str) -> list[dict[str, str]]:
        return [
            {
                "PATHWAYS_TESTING_EXIT_CODE": str(BUG_EXIT_CODE if kind == "bug" else 0),
                "PATHWAYS_TESTING_EXIT_WHEN": f"{gate}/{'bugs' if kind == 'bug' else 'all'}",
            }
            for kind in kinds
        ]

    PathwaysJobOperator.partial(
        task_id="wait",
        tpu="v5e",
        topology="2x2",
        num_slices=1,
        pathways_dir="gs://pathways-demo/tmp",
        image="python:3.12",
        command=["bash", "-c", "exit $PATHWAYS_TESTING_EXIT_CODE"],
        deferrable=True,
        retries=1,
        retry_delay=dt.timedelta(seconds=2),
    ).expand(env=plan("{{ params.kinds }}", "{{ params.gate }}"))
