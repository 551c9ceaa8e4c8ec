"""The fleet the triggerer-pool test spreads over two triggerers: ``waits`` deferrable PathwaysJobs.

One mapped ``PathwaysJobOperator``: each map index is a one-slice v5e 2x2 workload whose program
is ``exit N`` held open until a ``gs://`` object exists (the local cluster's gated ``exit``
stand-in), so the test decides when the fleet ends. ``plan`` gives each index its kind by the
rule the test shares (``kind_of``): a user's bug (exit 3, released by ``<gate>/bugs``) or a
success (exit 0, released by ``<gate>/all``); the test itself disrupts the slices of the
``disrupted`` share while the triggerers hold the waits.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param, task

from pathways_airflow.operators import PathwaysJobOperator

DAG_ID = "pw_triggerer_pool"
TASK_ID = "wait"
BUG_EXIT_CODE = 3


def kind_of(map_index: int) -> str:
    """``bug``, ``disrupted`` or ``success``: one in ten of each of the first two."""
    return {3: "bug", 7: "disrupted"}.get(map_index % 10, "success")


with DAG(
    DAG_ID,
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_tasks=100_000,
    params={"waits": Param(20, type="integer", minimum=1), "gate": Param("gs://pathways-demo/pool/gate", type="string")},
):

    @task
    def plan(waits: str, gate: str) -> list[dict[str, str]]:
        return [
            {
                "PATHWAYS_TESTING_EXIT_CODE": str(BUG_EXIT_CODE if kind_of(i) == "bug" else 0),
                "PATHWAYS_TESTING_EXIT_WHEN": f"{gate}/{'bugs' if kind_of(i) == 'bug' else 'all'}",
            }
            for i in range(int(waits))
        ]

    PathwaysJobOperator.partial(
        task_id=TASK_ID,
        tpu="v5e",
        topology="2x2",
        num_slices=1,
        pathways_dir="gs://pathways-demo/tmp",
        image="python:3.12",
        command=["bash", "-c", "exit $PATHWAYS_TESTING_EXIT_CODE"],
        deferrable=True,
        retries=1,
        retry_delay=dt.timedelta(seconds=2),
    ).expand(env=plan("{{ params.waits }}", "{{ params.gate }}"))
