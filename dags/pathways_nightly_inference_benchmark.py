"""Nightly inference benchmark of the newest serving checkpoint, with a regression gate.

Every night: take the newest serving checkpoint (the last event on the
``pathways-serving-checkpoints`` asset, which ``pathways_checkpoint_conversion`` publishes, or
the ``serving_checkpoint`` Param), serve it on Pathways with the ``engine`` Param's engine (vLLM
through MaxText's model plugin by default, or JetStream), benchmark it, add the
metrics to the history kept in GCS (``<benchmark_dir>/history.json``), and fail the run when a
watched metric is worse than the median of the recent runs of the same engine by more than the
threshold. Each run
writes ``report.md`` (a table against the baseline) and ``history.png`` (the metric history).

The defaults run on the local cluster (``scripts/demo``); on GKE set the Params (TPU shape,
``pathways_dir``, ``benchmark_dir``, dataset) and the connections. The ``local_*`` Params only
shape the local cluster's stand-in server and are ignored by a real server image.
"""

from __future__ import annotations

import datetime as dt

# Each gs:// Asset makes Airflow import the google provider's handler for the scheme (the GCS hook,
# gcloud-aio-storage). Imported at the top level, the dag-processor imports it once in its own process
# before forking the parses ([dag_processor] parsing_pre_import_modules) instead of each parse
# importing it again: 0.2 s a parse on Airflow 3.3 (benchmarks/README.md, "Import cost").
import airflow.providers.google.assets.gcs  # noqa: F401
from airflow.sdk import DAG, Asset, Param, task
from airflow.providers.common.compat.sdk import AirflowSkipException

from pathways_airflow.operators import BenchmarkRegressionOperator, InferenceBenchmarkOperator

SERVING_CHECKPOINTS = Asset("pathways-serving-checkpoints", uri="gs://pathways-demo/serving")

with DAG(
    "pathways_nightly_inference_benchmark",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pathways", "tpu", "inference", "benchmark"],
    params={
        "serving_checkpoint": Param("", type="string", description="gs:// serving checkpoint; empty: the newest asset event"),
        "engine": Param("vllm", enum=["vllm", "jetstream"], description="serving engine: vLLM on TPU, or the archived JetStream"),
        "model_name": Param("llama2-7b", type="string", description="the checkpoint's MaxText model name"),
        "hf_model": Param("meta-llama/Llama-2-7b-hf", type="string", description="vLLM: the Hugging Face model id (architecture and tokenizer)"),
        "vllm_image": Param("us-docker.pkg.dev/my-project/maxtext/maxtext-vllm:latest", type="string", description="vLLM: an image with vLLM on TPU and MaxText's vLLM adapter (maxtext[tpu-post-train])"),
        "tpu": Param("v5e", enum=["v4", "v5e", "v5p", "v6e", "tpu7x"]),
        "topology": Param("2x4", type="string"),
        "pathways_dir": Param("gs://pathways-demo/pathways", type="string"),
        "benchmark_dir": Param("gs://pathways-demo/benchmarks/llama2-7b", type="string", description="history.json, results/ and reports/ live here"),
        "report_dir": Param("", type="string", description="where report.md and history.png go; empty: <benchmark_dir>/reports/<run>"),
        "dataset": Param("", type="string", description="empty: the engine's generated prompts (vLLM random, JetStream test)"),
        "dataset_path": Param("", type="string"),
        "num_prompts": Param(20, type="integer", minimum=1),
        "request_rate": Param("inf", type="string", description="requests per second, or inf"),
        "max_output_length": Param(16, type="integer", minimum=1),
        "threshold_pct": Param(20.0, type="number", minimum=0, description="allowed worsening vs the baseline, in percent"),
        "window": Param(7, type="integer", minimum=1, description="baseline: median of this many earlier runs"),
        "local_ttft_ms": Param("500", type="string", description="local cluster only: the stand-in server's time to first token"),
        "local_tpot_ms": Param("20", type="string", description="local cluster only: the stand-in server's time per output token"),
    },
) as dag:

    @task(inlets=[SERVING_CHECKPOINTS])
    def newest_serving_checkpoint(*, params: dict, inlet_events=None) -> dict:
        """The checkpoint to benchmark: the Param if set, else the newest published serving checkpoint."""
        if params["serving_checkpoint"]:
            return {"uri": params["serving_checkpoint"], "why": "the serving_checkpoint Param"}
        try:
            newest = inlet_events[SERVING_CHECKPOINTS][-1]
        except IndexError:
            raise AirflowSkipException(
                f"no serving checkpoint has been published on the {SERVING_CHECKPOINTS.name!r} asset yet "
                "(run pathways_checkpoint_conversion, or set the serving_checkpoint Param): nothing to benchmark"
            ) from None
        return {**newest.extra, "why": f"the newest {SERVING_CHECKPOINTS.name} event ({newest.timestamp})"}

    checkpoint = newest_serving_checkpoint()

    benchmark = InferenceBenchmarkOperator(
        task_id="benchmark",
        engine="{{ params.engine }}",
        hf_model="{{ params.hf_model if params.engine == 'vllm' else None }}",
        image="{{ params.vllm_image if params.engine == 'vllm' else None }}",
        checkpoint=checkpoint,
        model_name="{{ params.model_name }}",
        tpu="{{ params.tpu }}",
        topology="{{ params.topology }}",
        pathways_dir="{{ params.pathways_dir }}",
        env={
            "PATHWAYS_TESTING_WARMUP_SECONDS": "30",
            "PATHWAYS_TESTING_TTFT_MS": "{{ params.local_ttft_ms }}",
            "PATHWAYS_TESTING_TPOT_MS": "{{ params.local_tpot_ms }}",
        },
        dataset="{{ params.dataset or None }}",
        dataset_path="{{ params.dataset_path or None }}",
        num_prompts="{{ params.num_prompts }}",
        request_rate="{{ params.request_rate }}",
        max_output_length="{{ params.max_output_length }}",
        results_uri="{{ params.benchmark_dir }}/results/",
        execution_timeout=dt.timedelta(hours=3),
    )

    BenchmarkRegressionOperator(
        task_id="check_regression",
        metrics=benchmark.output,
        history_uri="{{ params.benchmark_dir }}/history.json",
        report_dir="{{ params.report_dir }}",
        checkpoint="{{ ti.xcom_pull(task_ids='newest_serving_checkpoint')['uri'] }}",
        threshold_pct="{{ params.threshold_pct }}",
        window="{{ params.window }}",
        labels={"model": "{{ params.model_name }}", "tpu": "{{ params.tpu }}-{{ params.topology }}"},
    )
