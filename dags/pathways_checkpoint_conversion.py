"""Turn each committed training checkpoint into a serving checkpoint (for vLLM's MaxText plugin or JetStream).

Two ways to start it:

* ``pathways_checkpoint_conversion`` runs on every event of the ``pathways-training-checkpoints``
  asset, which ``pathways_training`` publishes with the final committed step in its extra. Run
  by hand (or ``airflow dags test``), it converts the newest committed step under the
  ``checkpoint_dir`` Param.
* ``pathways_checkpoint_conversion_on_commit`` is for checkpoints written outside Airflow: an
  ``AssetWatcher`` in the triggerer fires once per newly committed step under a checkpoint
  directory (``CheckpointCommittedTrigger``; a partial step never fires it), and the run converts it.

Either way the step is checked committed before anything runs, a serving checkpoint already
converted from the same step is reused, and the result is published as an event on the
``pathways-serving-checkpoints`` asset: ``pathways_nightly_inference_benchmark`` benchmarks the
newest one.
"""

from __future__ import annotations

import datetime as dt

# Each gs:// Asset makes Airflow import the google provider's handler for the scheme (the GCS hook,
# gcloud-aio-storage). Imported at the top level, the dag-processor imports it once in its own process
# before forking the parses ([dag_processor] parsing_pre_import_modules) instead of each parse
# importing it again: 0.2 s a parse on Airflow 3.3 (benchmarks/README.md, "Import cost").
import airflow.providers.google.assets.gcs  # noqa: F401
from airflow.sdk import DAG, Asset, AssetWatcher, Param, task

from pathways_airflow.checkpoints import checkpoint_dir_of, checkpoint_named_by
from pathways_airflow.operators import CheckpointConversionOperator
from pathways_airflow.sensors import CheckpointSensor
from pathways_airflow.triggers.checkpoint_event import CheckpointCommittedTrigger

TRAINING_CHECKPOINTS = Asset("pathways-training-checkpoints", uri="gs://pathways-demo/runs/llama-demo/checkpoints")
SERVING_CHECKPOINTS = Asset("pathways-serving-checkpoints", uri="gs://pathways-demo/serving")
EXTERNAL_CHECKPOINT_DIR = "gs://pathways-demo/external/llama-demo/checkpoints"
EXTERNAL_CHECKPOINTS = Asset(
    "pathways-external-training-checkpoints",
    uri=EXTERNAL_CHECKPOINT_DIR,
    watchers=[
        AssetWatcher(
            name="external-checkpoint-committed",
            trigger=CheckpointCommittedTrigger(checkpoint_dir=EXTERNAL_CHECKPOINT_DIR, poll_interval=300),
        )
    ],
)

PARAMS = {
    "checkpoint_dir": Param(
        "gs://pathways-demo/runs/llama-demo/checkpoints",
        type="string",
        description="where to look when no asset event names a step: MaxText's <base>/<run>/checkpoints",
    ),
    "output_dir": Param("gs://pathways-demo/serving", type="string", description="base_output_directory of the serving checkpoint"),
    "model_name": Param("llama2-7b", type="string"),
    "quantization": Param("", enum=["", "int8"]),
    "image": Param("gcr.io/tpu-prod-env-multipod/maxtext_jax_stable:latest", type="string"),
}


@task
def choose_source(asset: Asset, *, params: dict, triggering_asset_events=None) -> dict:
    """The step the newest triggering event names, else the newest committed one under the Param."""
    events = list(triggering_asset_events[asset]) if triggering_asset_events else []
    named = checkpoint_named_by(events[-1].extra) if events else None
    if named is not None:
        return {"checkpoint_dir": checkpoint_dir_of(named), "min_step": named.step, "why": f"asset event for step {named.step}"}
    return {"checkpoint_dir": params["checkpoint_dir"], "min_step": 0, "why": "no asset event: the newest committed step"}


def conversion_stage(asset: Asset) -> None:
    """Choose the step → wait until it is committed → convert it; the serving checkpoint is the outlet event's extra."""
    source = choose_source(asset)
    committed = CheckpointSensor(
        task_id="committed_checkpoint",
        checkpoint_dir="{{ ti.xcom_pull(task_ids='choose_source')['checkpoint_dir'] }}",
        min_step="{{ ti.xcom_pull(task_ids='choose_source')['min_step'] }}",
        poke_interval=60,
        timeout=3600,
        mode="reschedule",
    )
    convert = CheckpointConversionOperator(
        task_id="convert",
        checkpoint=committed.output,
        output_dir="{{ params.output_dir }}",
        run_name="{{ params.model_name }}-step-{{ ti.xcom_pull(task_ids='committed_checkpoint')['step'] }}",
        quantization="{{ params.quantization or None }}",
        image="{{ params.image }}",
        extra_arguments=["model_name={{ params.model_name }}"],
        outlets=[SERVING_CHECKPOINTS],
        retries=2,
        retry_delay=dt.timedelta(minutes=2),
    )
    source >> committed >> convert


with DAG(
    "pathways_checkpoint_conversion",
    schedule=[TRAINING_CHECKPOINTS],
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "checkpoints", "conversion"],
    params=PARAMS,
):
    conversion_stage(TRAINING_CHECKPOINTS)


with DAG(
    "pathways_checkpoint_conversion_on_commit",
    schedule=[EXTERNAL_CHECKPOINTS],
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "checkpoints", "conversion"],
    params={**PARAMS, "checkpoint_dir": Param(EXTERNAL_CHECKPOINT_DIR, type="string")},
):
    conversion_stage(EXTERNAL_CHECKPOINTS)
