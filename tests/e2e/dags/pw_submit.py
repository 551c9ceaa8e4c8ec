"""Test DAGs: one PathwaysJobOperator, its program and mode set by the run's conf."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from pathways_airflow.operators import PathwaysJobOperator

COMMAND = [
    "python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
    "base_output_directory=gs://pathways-demo/e2e", "run_name={{ run_id | replace(':', '-') | replace('+', '-') }}",
    "steps={{ params.steps }}", "checkpoint_period=10",
]

for deferrable in (True, False):
    with DAG(
        f"pw_submit_{'deferred' if deferrable else 'sync'}",
        schedule=None,
        start_date=dt.datetime(2026, 1, 1),
        catchup=False,
        params={
            "steps": Param(20, type="integer"),
            "fail_at_step": Param("", type="string"),
            "exit_code": Param("1", type="string"),
            "backend": Param("pathwaysjob", enum=["pathwaysjob", "jobset"]),
            "step_seconds": Param("1", type="string"),
            "max_disruptions": Param(3, type="integer"),
        },
    ):
        PathwaysJobOperator(
            task_id="train",
            tpu="v5e",
            topology="2x4",
            num_slices=2,
            pathways_dir="gs://pathways-demo/tmp",
            image="maxtext:latest",
            command=COMMAND,
            env={
                "PATHWAYS_TESTING_STEP_SECONDS": "{{ params.step_seconds }}",
                "PATHWAYS_TESTING_FAIL_AT_STEP": "{{ params.fail_at_step }}",
                "PATHWAYS_TESTING_EXIT_CODE": "{{ params.exit_code }}",
            },
            backend="{{ params.backend }}",
            checkpoint_dir="gs://pathways-demo/e2e/{{ run_id | replace(':', '-') | replace('+', '-') }}/checkpoints",
            deferrable=deferrable,
            max_disruptions=3,
            retries=0,
        )
