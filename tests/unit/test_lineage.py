"""What each task reports to OpenLineage: datasets that join into one graph, and its run facets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pathways_airflow.run.lineage import (
    DISRUPTIONS_FACET,
    GOODPUT_FACET,
    TPU_FACET,
    WORKLOAD_FACET,
    benchmark_lineage,
    conversion_lineage,
    dataset_name,
    regression_lineage,
    serving_checkpoint_uri,
    training_lineage,
)

pytestmark = [pytest.mark.unit]

# Results as the operators return them (XCom), for one chained DAG run.
TRAINING = {
    "name": "train-a1b2c3-1",
    "namespace": "ml",
    "uid": "0d6a1c1e-8d1f-4c53-9a1e-1b2c3d4e5f60",
    "backend": "pathwaysjob",
    "tpu": {"machine_type": "ct5lp-hightpu-4t", "topology": "4x4", "slices": 2, "chips": 32},
    "state": "SUCCEEDED",
    "restarts": 0,
    "disruptions": [
        {"time": 1078.0, "kind": "MAINTENANCE", "evidence": ["node n: maintenance"], "workload": "train-a1b2c3-0",
         "reached_step": 120, "resumed_from_step": 100, "steps_recomputed": 20, "seconds_lost": 63.0},
    ],
    "disruption_summary": "1 disruption (1 maintenance): 20 steps recomputed, 1 min lost",
    "goodput": {"chips": 32, "held_seconds": 188.0, "goodput": 0.7983},
    "checkpoint": {"step": 200, "uri": "gs://ml-bucket/runs/llama/checkpoints/200"},
}
CONVERSION = {
    "step": 0,
    "uri": "gs://ml-bucket/runs/llama/serving/0",
    "items_uri": "gs://ml-bucket/runs/llama/serving/0/items",
    "source": {"step": 200, "uri": "gs://ml-bucket/runs/llama/checkpoints/200"},
    "job": "ml/convert-d4e5f6",
}
BENCHMARK = {"engine": "vllm", "request_throughput": 46.8, "median_ttft_ms": 105.7, "failed": 0,
             "result_uri": "gs://ml-bucket/bench/2026-11-26/result.json"}
REGRESSION = {"regressed": False, "regressions": [], "history_uri": "gs://ml-bucket/bench/history.json",
              "report_uri": "gs://ml-bucket/bench/reports/r1/report.md", "plot_uri": None}


def test_the_chain_forms_one_graph_from_the_training_checkpoint_to_the_benchmark_result():
    training = training_lineage(TRAINING, checkpoint_dir="gs://ml-bucket/runs/llama/checkpoints", cluster="p/us-east5/tpu")
    conversion = conversion_lineage(CONVERSION, cluster="p/us-east5/tpu")
    benchmark = benchmark_lineage(BENCHMARK, checkpoint=CONVERSION["items_uri"], hf_model="meta-llama/Llama-2-7b-hf", cluster="c")
    regression = regression_lineage(REGRESSION, results_uri=BENCHMARK["result_uri"])
    assert training.outputs == conversion.inputs == ("gs://ml-bucket/runs/llama/checkpoints/200",)
    assert conversion.outputs == benchmark.inputs == ("gs://ml-bucket/runs/llama/serving/0",)
    assert benchmark.outputs[0] == regression.inputs[0] == "gs://ml-bucket/bench/2026-11-26/result.json"
    assert "gs://ml-bucket/bench/history.json" in regression.outputs and None not in regression.outputs


def test_training_reports_the_step_it_resumed_from_and_its_run_facets():
    lineage = training_lineage(TRAINING, checkpoint_dir="gs://ml-bucket/runs/llama/checkpoints", cluster="p/us-east5/tpu")
    assert lineage.inputs == ("gs://ml-bucket/runs/llama/checkpoints/100",)
    assert lineage.run_facets[WORKLOAD_FACET] == {
        "cluster": "p/us-east5/tpu", "namespace": "ml", "name": "train-a1b2c3-1",
        "uid": "0d6a1c1e-8d1f-4c53-9a1e-1b2c3d4e5f60", "backend": "pathwaysjob",
    }
    assert lineage.run_facets[TPU_FACET]["chips"] == 32
    assert lineage.run_facets[DISRUPTIONS_FACET]["kinds"] == ["MAINTENANCE"]
    assert lineage.run_facets[GOODPUT_FACET]["goodput"] == 0.7983


def test_a_training_task_without_a_committed_checkpoint_reports_no_output():
    lineage = training_lineage({**TRAINING, "checkpoint": None, "disruptions": []}, checkpoint_dir="gs://b/c", cluster="x")
    assert (lineage.inputs, lineage.outputs) == ((), ())
    no_dir = training_lineage({k: v for k, v in TRAINING.items() if k != "checkpoint"}, checkpoint_dir=None, cluster="x")
    assert (no_dir.inputs, no_dir.outputs) == ((), ())


def test_the_step_the_task_ended_with_is_only_its_output_even_when_a_resubmission_resumed_from_it():
    resumed_own = {**TRAINING, "disruptions": [{**TRAINING["disruptions"][0], "resumed_from_step": 200}]}
    lineage = training_lineage(resumed_own, checkpoint_dir="gs://ml-bucket/runs/llama/checkpoints", cluster="x")
    assert lineage.inputs == () and lineage.outputs == ("gs://ml-bucket/runs/llama/checkpoints/200",)


@pytest.mark.parametrize(
    ("checkpoint", "uri"),
    [
        ({"uri": "gs://b/serving/0", "items_uri": "gs://b/serving/0/items"}, "gs://b/serving/0"),
        ({"items_uri": "gs://b/serving/0/items"}, "gs://b/serving/0"),
        ("gs://b/serving/0/items/", "gs://b/serving/0"),
        (None, None),
        ("", None),
    ],
)
def test_a_server_reads_the_step_directory_of_its_checkpoint(checkpoint, uri):
    assert serving_checkpoint_uri(checkpoint) == uri


def test_a_benchmark_of_a_hugging_face_model_has_no_checkpoint_input():
    lineage = benchmark_lineage(BENCHMARK, checkpoint=None, hf_model="meta-llama/Llama-2-7b-hf", cluster="c")
    assert lineage.inputs == () and lineage.run_facets["pathways_benchmark"]["median_ttft_ms"] == 105.7


@pytest.mark.parametrize(
    ("uri", "namespace", "name"),
    [("gs://bucket/a/b/200", "gs://bucket", "a/b/200"), ("gs://bucket/a/", "gs://bucket", "a"), ("/data/out", "file", "/data/out")],
)
def test_datasets_follow_openlineage_naming(uri, namespace, name):
    assert dataset_name(uri) == (namespace, name)


def test_the_openlineage_objects_carry_the_datasets_and_facets():
    pytest.importorskip("airflow.providers.openlineage", reason="the OpenLineage provider is an optional extra")
    from openlineage.client.serde import Serde

    from pathways_airflow.lineage import operator_lineage

    lineage = operator_lineage(training_lineage(TRAINING, checkpoint_dir="gs://ml-bucket/runs/llama/checkpoints", cluster="c"))
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("gs://ml-bucket", "runs/llama/checkpoints/200")]
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("gs://ml-bucket", "runs/llama/checkpoints/100")]
    facet = json.loads(Serde.to_json(lineage.run_facets[WORKLOAD_FACET]))
    assert facet["uid"] == TRAINING["uid"] and facet["_schemaURL"].endswith("#/$defs/RunFacet")


def test_without_a_result_an_operator_reports_nothing():
    from pathways_airflow.operators import PathwaysJobOperator

    operator = PathwaysJobOperator(
        task_id="train", topology="2x2", tpu="v5e", pathways_dir="gs://ml-bucket/tmp", checkpoint_dir="gs://ml-bucket/runs/llama/checkpoints"
    )
    assert operator.lineage() is None and operator.get_openlineage_facets_on_complete(None) is None
    assert operator.reported(TRAINING) is TRAINING
    lineage = operator.lineage()
    assert lineage.outputs == ("gs://ml-bucket/runs/llama/checkpoints/200",)
    assert lineage.inputs == ("gs://ml-bucket/runs/llama/checkpoints/100",)
    assert lineage.run_facets[WORKLOAD_FACET]["cluster"] == "kubernetes_conn_id=kubernetes_default"


def test_importing_the_operators_loads_nothing_of_openlineage():
    code = "import sys, pathways_airflow.operators, pathways_airflow.sensors; print(sorted(m for m in sys.modules if 'openlineage' in m))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_a_regression_gate_that_failed_still_reports_the_history_it_wrote():
    pytest.importorskip("airflow.providers.openlineage", reason="the OpenLineage provider is an optional extra")
    from pathways_airflow.operators import BenchmarkRegressionOperator

    operator = BenchmarkRegressionOperator(
        task_id="gate", metrics=BENCHMARK, watched_metrics=["median_ttft_ms", "request_throughput"], history_uri=REGRESSION["history_uri"]
    )
    assert operator.get_openlineage_facets_on_failure(None) is None, "nothing written, nothing reported"
    operator.reported({**REGRESSION, "regressed": True, "regressions": ["median_ttft_ms"]})
    lineage = operator.get_openlineage_facets_on_failure(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("gs://ml-bucket", "bench/2026-11-26/result.json"), ("gs://ml-bucket", "bench/history.json")]
    assert ("gs://ml-bucket", "bench/history.json") in [(d.namespace, d.name) for d in lineage.outputs]
    assert lineage.run_facets["pathways_regression"].regressions == ["median_ttft_ms"]
