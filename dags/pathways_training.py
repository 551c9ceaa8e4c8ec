"""Weekly training on TPU slices: wait for healthy slices, train (riding out maintenance), publish.

Scheduled weekly with no catch-up. The defaults run on the local cluster
(``pathways-airflow local-cluster`` / ``scripts/demo``); on GKE, set the Params (image, command,
``checkpoint_bucket``, TPU shape) and the ``kubernetes_default`` or GKE connection.

The final committed checkpoint is published as an event on the ``pathways-training-checkpoints``
asset, with its step and URI in the event's extra: ``pathways_checkpoint_conversion`` runs on it.
"""

from __future__ import annotations

import datetime as dt

# Each gs:// Asset makes Airflow import the google provider's handler for the scheme (the GCS hook,
# gcloud-aio-storage). Imported at the top level, the dag-processor imports it once in its own process
# before forking the parses ([dag_processor] parsing_pre_import_modules) instead of each parse
# importing it again: 0.2 s a parse on Airflow 3.3 (benchmarks/README.md, "Import cost").
import airflow.providers.google.assets.gcs  # noqa: F401
from airflow.sdk import DAG, Asset, Param, task

from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.retry import RETRY_POLICY_KWARGS
from pathways_airflow.sensors import TpuSliceReadinessSensor

TRAINING_CHECKPOINTS = Asset("pathways-training-checkpoints", uri="gs://pathways-demo/runs/llama-demo/checkpoints")
RUN_DIR = "gs://{{ params.checkpoint_bucket }}/runs/{{ params.run_name }}"

with DAG(
    "pathways_training",
    schedule="@weekly",
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "tpu", "training"],
    params={
        "tpu": Param("v5e", enum=["v4", "v5e", "v5p", "v6e", "tpu7x"]),
        "topology": Param("2x4", type="string"),
        "num_slices": Param(2, type="integer", minimum=1),
        "steps": Param(100, type="integer", minimum=1),
        "checkpoint_period": Param(10, type="integer", minimum=1),
        "run_name": Param("llama-demo", type="string"),
        "checkpoint_bucket": Param("pathways-demo", type="string"),
        "image": Param("us-docker.pkg.dev/my-project/maxtext/maxtext:latest", type="string"),
        "max_disruptions": Param(3, type="integer", minimum=0),
        "step_seconds": Param("1", type="string", description="local cluster only: simulated seconds per step"),
    },
) as dag:
    slices_ready = TpuSliceReadinessSensor(
        task_id="slices_ready",
        tpu="{{ params.tpu }}",
        topology="{{ params.topology }}",
        num_slices="{{ params.num_slices }}",
        poke_interval=30,
        timeout=6 * 3600,
        mode="reschedule",
    )

    train = PathwaysJobOperator(
        task_id="train",
        tpu="{{ params.tpu }}",
        topology="{{ params.topology }}",
        num_slices="{{ params.num_slices }}",
        pathways_dir="gs://{{ params.checkpoint_bucket }}/pathways",
        image="{{ params.image }}",
        command=[
            "python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
            "base_output_directory=gs://{{ params.checkpoint_bucket }}/runs",
            "run_name={{ params.run_name }}",
            "steps={{ params.steps }}",
            "checkpoint_period={{ params.checkpoint_period }}",
        ],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "{{ params.step_seconds }}"},
        checkpoint_dir=f"{RUN_DIR}/checkpoints",
        max_disruptions="{{ params.max_disruptions }}",
        retries=2,
        **RETRY_POLICY_KWARGS,  # the ready-made retry policy on Airflow 3.3+
        retry_delay=dt.timedelta(minutes=5),
    )

    @task(outlets=[TRAINING_CHECKPOINTS])
    def publish_checkpoint(result: dict, *, outlet_events=None) -> dict:
        """Announce the final committed checkpoint to the DAGs scheduled on it."""
        checkpoint = result.get("checkpoint")
        if not checkpoint:
            raise ValueError(f"{result['name']} finished without a committed checkpoint under its checkpoint_dir")
        outlet_events[TRAINING_CHECKPOINTS].extra = {**checkpoint, "workload": result["name"], "disruptions": result["disruption_summary"]}
        return checkpoint

    slices_ready >> train
    publish_checkpoint(train.output)
