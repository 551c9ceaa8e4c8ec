"""The training DAG the deployment test runs: one deferrable PathwaysJobOperator, retried once.

``steps`` × ``step_seconds`` (simulated seconds; the local cluster runs 60 to a real second by
default) sets how long the workload trains, so that each crash scenario fits in tens of seconds.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from pathways_airflow.operators import PathwaysJobOperator

RUN = "{{ run_id | replace(':', '-') | replace('+', '-') }}"

with DAG(
    "pw_deployment",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    params={"steps": Param(60, type="integer"), "step_seconds": Param("20", type="string")},
):
    PathwaysJobOperator(
        task_id="train",
        tpu="v5e",
        topology="2x4",
        num_slices=2,
        pathways_dir="gs://pathways-demo/tmp",
        image="maxtext:latest",
        command=[
            "python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
            "base_output_directory=gs://pathways-demo/deployment", f"run_name={RUN}",
            "steps={{ params.steps }}", "checkpoint_period=10",
        ],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "{{ params.step_seconds }}"},
        checkpoint_dir=f"gs://pathways-demo/deployment/{RUN}/checkpoints",
        deferrable=True,
        retries=1,
        retry_delay=dt.timedelta(seconds=2),
    )
