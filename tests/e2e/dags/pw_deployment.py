"""The training DAG the deployment test runs: one deferrable PathwaysJobOperator, retried once.

``steps`` × ``step_seconds`` (simulated seconds; the local cluster runs 60 to a real second by
default) sets how long the workload trains, so that each crash scenario fits in tens of seconds.
``hold_after_submit`` (real seconds) keeps the task process alive that long after the API server
accepted its PathwaysJob and before the task notes or defers anything: the window a worker crash
must be survivable in, held open so that the test's kill lands in it every time.
"""

from __future__ import annotations

import datetime as dt
import time
from functools import cached_property
from typing import Any, Mapping

from airflow.sdk import DAG, Param

from pathways_airflow.hooks.pathways import Adoption, PathwaysHook
from pathways_airflow.operators import PathwaysJobOperator


class HeldAfterSubmitHook(PathwaysHook):
    """A PathwaysHook that sleeps ``hold`` seconds after it created a workload."""

    def __init__(self, target: Any, hold: float):
        super().__init__(target)
        self.hold = hold

    def create_or_adopt(self, manifest: Mapping[str, Any], task_key: str) -> Adoption:
        adoption = super().create_or_adopt(manifest, task_key)
        if adoption.created and self.hold > 0:
            time.sleep(self.hold)
        return adoption


class HeldTrainingOperator(PathwaysJobOperator):
    template_fields = (*PathwaysJobOperator.template_fields, "hold_after_submit")

    def __init__(self, *, hold_after_submit: str = "0", **kwargs: Any):
        super().__init__(**kwargs)
        self.hold_after_submit = hold_after_submit

    @cached_property
    def hook(self) -> PathwaysHook:
        return HeldAfterSubmitHook(self.cluster_target(), float(self.hold_after_submit))

RUN = "{{ run_id | replace(':', '-') | replace('+', '-') }}"

with DAG(
    "pw_deployment",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    params={
        "steps": Param(60, type="integer"),
        "step_seconds": Param("20", type="string"),
        "hold_after_submit": Param("0", type="string"),
    },
):
    HeldTrainingOperator(
        task_id="train",
        hold_after_submit="{{ params.hold_after_submit }}",
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
