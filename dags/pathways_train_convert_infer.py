"""Train → convert checkpoint → inference benchmark, chained in one DAG.

The three stages of ``pathways_training``, ``pathways_checkpoint_conversion`` and
``pathways_nightly_inference_benchmark`` in one run, each handing the next what it produced:

1. ``slices_ready`` waits until the training slices are healthy and not under maintenance;
2. ``train`` runs MaxText on Pathways, riding out maintenance (it resubmits and resumes from the
   newest committed checkpoint) and returns the final committed checkpoint;
3. ``convert`` turns that step into a parameter-only serving checkpoint (reused if it was
   already converted) and publishes it on the ``pathways-serving-checkpoints`` asset, where the
   nightly benchmark finds it;
4. ``benchmark`` serves it on Pathways with the ``engine`` Param's engine (vLLM by default, or
   JetStream), runs the engine's benchmark client and returns the
   metrics, deleting the server on every path;
5. ``check_regression`` adds the metrics to the history in GCS, writes the report and plot, and
   fails on a regression beyond the threshold.

``scripts/demo`` runs it on the local cluster with one TPU maintenance event in the middle of
training. The defaults run there; on GKE, set the Params and the connections.
"""

from __future__ import annotations

import datetime as dt

# Each gs:// Asset makes Airflow import the google provider's handler for the scheme (the GCS hook,
# gcloud-aio-storage). Imported at the top level, the dag-processor imports it once in its own process
# before forking the parses ([dag_processor] parsing_pre_import_modules) instead of each parse
# importing it again: 0.2 s a parse on Airflow 3.3 (benchmarks/README.md, "Import cost").
import airflow.providers.google.assets.gcs  # noqa: F401
from airflow.sdk import DAG, Asset, Param

from pathways_airflow.operators import (
    BenchmarkRegressionOperator,
    CheckpointConversionOperator,
    InferenceBenchmarkOperator,
    PathwaysJobOperator,
)
from pathways_airflow.retry import RETRY_POLICY_KWARGS
from pathways_airflow.sensors import TpuSliceReadinessSensor

SERVING_CHECKPOINTS = Asset("pathways-serving-checkpoints", uri="gs://pathways-demo/serving")

with DAG(
    "pathways_train_convert_infer",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "tpu", "training", "conversion", "inference"],
    params={
        "bucket": Param("pathways-demo", type="string", description="GCS bucket for checkpoints, results and history"),
        "run_name": Param("llama-demo", type="string"),
        "model_name": Param("llama2-7b", type="string"),
        "engine": Param("vllm", enum=["vllm", "jetstream"], description="serving engine for the benchmark: vLLM on TPU, or the archived JetStream"),
        "hf_model": Param("meta-llama/Llama-2-7b-hf", type="string", description="vLLM: the Hugging Face model id (architecture and tokenizer)"),
        "vllm_image": Param("us-docker.pkg.dev/my-project/maxtext/maxtext-vllm:latest", type="string", description="vLLM: an image with vLLM on TPU and MaxText's vLLM adapter (maxtext[tpu-post-train])"),
        "image": Param("us-docker.pkg.dev/my-project/maxtext/maxtext:latest", type="string"),
        "tpu": Param("v5e", enum=["v4", "v5e", "v5p", "v6e", "tpu7x"]),
        "topology": Param("2x4", type="string"),
        "num_slices": Param(2, type="integer", minimum=1),
        "steps": Param(100, type="integer", minimum=1),
        "checkpoint_period": Param(10, type="integer", minimum=1),
        "max_disruptions": Param(3, type="integer", minimum=0),
        "expected_hours": Param(12, type="number", exclusiveMinimum=0, description="how long training runs: maintenance announced inside it is handled first"),
        "maintenance_window": Param("wait", enum=["wait", "start_now", "ignore"], description="maintenance announced inside the training: wait for it, start it now on idle slices, or go ahead"),
        "serving_tpu": Param("v5e", enum=["v4", "v5e", "v5p", "v6e", "tpu7x"]),
        "serving_topology": Param("2x4", type="string"),
        "num_prompts": Param(20, type="integer", minimum=1),
        "max_output_length": Param(16, type="integer", minimum=1),
        "threshold_pct": Param(20.0, type="number", minimum=0),
        "report_dir": Param("", type="string", description="where report.md and history.png go; empty: next to the history in GCS"),
        "local_step_seconds": Param("1", type="string", description="local cluster only: simulated seconds per training step"),
        "local_ttft_ms": Param("500", type="string", description="local cluster only: the stand-in server's time to first token"),
        "local_tpot_ms": Param("20", type="string", description="local cluster only: the stand-in server's time per output token"),
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
        pathways_dir="gs://{{ params.bucket }}/pathways",
        image="{{ params.image }}",
        command=[
            "python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
            "base_output_directory=gs://{{ params.bucket }}/runs",
            "run_name={{ params.run_name }}",
            "model_name={{ params.model_name }}",
            "steps={{ params.steps }}",
            "checkpoint_period={{ params.checkpoint_period }}",
        ],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "{{ params.local_step_seconds }}"},
        checkpoint_dir="gs://{{ params.bucket }}/runs/{{ params.run_name }}/checkpoints",
        max_disruptions="{{ params.max_disruptions }}",
        expected_duration="{{ params.expected_hours * 3600 }}",
        maintenance_window="{{ params.maintenance_window }}",
        retries=2,
        **RETRY_POLICY_KWARGS,  # the ready-made retry policy on Airflow 3.3+
        retry_delay=dt.timedelta(minutes=5),
    )

    convert = CheckpointConversionOperator(
        task_id="convert",
        checkpoint="{{ ti.xcom_pull(task_ids='train')['checkpoint'] }}",
        output_dir="gs://{{ params.bucket }}/serving",
        run_name="{{ params.run_name }}-step-{{ ti.xcom_pull(task_ids='train')['checkpoint']['step'] }}",
        image="{{ params.image }}",
        extra_arguments=["model_name={{ params.model_name }}"],
        outlets=[SERVING_CHECKPOINTS],
        retries=2,
        retry_delay=dt.timedelta(minutes=2),
    )

    benchmark = InferenceBenchmarkOperator(
        task_id="benchmark",
        engine="{{ params.engine }}",
        hf_model="{{ params.hf_model if params.engine == 'vllm' else None }}",
        image="{{ params.vllm_image if params.engine == 'vllm' else None }}",
        checkpoint=convert.output,
        model_name="{{ params.model_name }}",
        tpu="{{ params.serving_tpu }}",
        topology="{{ params.serving_topology }}",
        pathways_dir="gs://{{ params.bucket }}/pathways",
        env={
            "PATHWAYS_TESTING_WARMUP_SECONDS": "30",
            "PATHWAYS_TESTING_TTFT_MS": "{{ params.local_ttft_ms }}",
            "PATHWAYS_TESTING_TPOT_MS": "{{ params.local_tpot_ms }}",
        },
        num_prompts="{{ params.num_prompts }}",
        request_rate="inf",
        max_output_length="{{ params.max_output_length }}",
        results_uri="gs://{{ params.bucket }}/benchmarks/{{ params.model_name }}/results/",
        execution_timeout=dt.timedelta(hours=3),
    )

    check_regression = BenchmarkRegressionOperator(
        task_id="check_regression",
        metrics=benchmark.output,
        history_uri="gs://{{ params.bucket }}/benchmarks/{{ params.model_name }}/history.json",
        report_dir="{{ params.report_dir }}",
        checkpoint="{{ ti.xcom_pull(task_ids='convert')['uri'] }}",
        threshold_pct="{{ params.threshold_pct }}",
        labels={"model": "{{ params.model_name }}", "training_run": "{{ params.run_name }}"},
    )

    slices_ready >> train >> convert
