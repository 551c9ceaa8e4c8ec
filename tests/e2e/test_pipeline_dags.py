"""The conversion and nightly-benchmark example DAGs, and the demo, under real Airflow on the local cluster."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pathways_airflow_testing.lineage_events import completed_tasks, read_events
from tests.support.airflow_cli import AirflowEnv, DagRun
from tests.support.gcs import gcs_bucket

REPO = Path(__file__).resolve().parents[2]
BUCKET = "pathways-demo"


def dags_test(airflow_env: AirflowEnv, dag_id: str, conf: dict, timeout: float = 300) -> DagRun:
    """``airflow dags test`` on the repository's own dags/ folder."""
    return airflow_env.with_dags(REPO / "dags").dags_test(dag_id, conf, timeout=timeout)


@pytest.fixture
def bucket(pathways_cluster):
    with gcs_bucket(pathways_cluster, BUCKET) as bucket:
        yield bucket


def save_step(bucket, prefix: str, step: int, *, commit: bool = True) -> None:
    """A training step as Orbax writes it on GCS: metadata and arrays first, the commit marker last."""
    bucket.blob(f"{prefix}/{step}/_CHECKPOINT_METADATA").upload_from_string(b"{}")
    bucket.blob(f"{prefix}/{step}/items/_METADATA").upload_from_string(json.dumps({"step": step}).encode())
    bucket.blob(f"{prefix}/{step}/items/params.bin").upload_from_string(b"\0" * 64)
    if commit:
        bucket.blob(f"{prefix}/{step}/commit_success.txt").upload_from_string(b"")


def test_conversion_dag_converts_the_newest_committed_step_and_reuses_it_next_time(airflow_env, bucket):
    base = f"e2e-conversion-{uuid.uuid4().hex[:6]}"
    save_step(bucket, f"{base}/run/checkpoints", 10)
    save_step(bucket, f"{base}/run/checkpoints", 20, commit=False)  # cut off by maintenance: never read
    conf = {"checkpoint_dir": f"gs://{BUCKET}/{base}/run/checkpoints", "output_dir": f"gs://{BUCKET}/{base}/serving"}

    first = dags_test(airflow_env, "pathways_checkpoint_conversion", conf)
    assert first.states == {
        "choose_source": "success", "committed_checkpoint": "success", "convert": "success",
    }, first.output[-4000:]
    assert f"converted step 10 (gs://{BUCKET}/{base}/run/checkpoints/10)" in first.output
    served = f"{base}/serving/llama2-7b-step-10/checkpoints/0"
    assert bucket.blob(f"{served}/commit_success.txt").exists()
    assert "checkpoints/20" not in first.output.split("[DAG TEST] starting task_id=convert")[1]

    second = dags_test(airflow_env, "pathways_checkpoint_conversion", conf)
    assert second.states["convert"] == "success", second.output[-4000:]
    assert f"reusing the serving checkpoint gs://{BUCKET}/{served}" in second.output
    assert "created Job" not in second.output


def test_the_asset_watcher_variant_converts_a_checkpoint_written_outside_airflow(airflow_env, bucket):
    base = f"e2e-external-{uuid.uuid4().hex[:6]}"
    save_step(bucket, f"{base}/checkpoints", 300)
    conf = {"checkpoint_dir": f"gs://{BUCKET}/{base}/checkpoints", "output_dir": f"gs://{BUCKET}/{base}/serving"}
    run = dags_test(airflow_env, "pathways_checkpoint_conversion_on_commit", conf)
    assert run.states.get("convert") == "success", run.output[-4000:]
    assert bucket.blob(f"{base}/serving/llama2-7b-step-300/checkpoints/0/commit_success.txt").exists()


def test_nightly_benchmark_on_either_engine_passes_steady_runs_and_fails_an_injected_regression(airflow_env, bucket, tmp_path):
    base = f"e2e-nightly-{uuid.uuid4().hex[:6]}"
    serving = f"{base}/serving/checkpoints/0"
    bucket.blob(f"{serving}/items/params.bin").upload_from_string(b"weights")
    bucket.blob(f"{serving}/commit_success.txt").upload_from_string(b"")
    history = f"{base}/benchmarks/history.json"

    def night(name: str, **overrides) -> DagRun:
        conf = {
            "serving_checkpoint": f"gs://{BUCKET}/{serving}",
            "benchmark_dir": f"gs://{BUCKET}/{base}/benchmarks",
            "report_dir": str(tmp_path / name),
            "num_prompts": 8,
            "max_output_length": 8,
            **overrides,
        }
        return dags_test(airflow_env, "pathways_nightly_inference_benchmark", conf)

    first = night("first")
    assert first.states == {"newest_serving_checkpoint": "success", "benchmark": "success", "check_regression": "success"}, first.output[-4000:]
    assert "no baseline yet" in first.output

    other_engine = night("jetstream", engine="jetstream")  # the archived engine, end to end
    assert other_engine.states == first.states, other_engine.output[-4000:]
    assert "no baseline yet" in other_engine.output  # never compared with vLLM's runs

    steady = night("steady")
    assert steady.states["check_regression"] == "success", steady.output[-4000:]
    assert "no regression" in steady.output

    slower = night("slower", local_ttft_ms="2000")  # 4× the time to first token
    assert slower.states["benchmark"] == "success", slower.output[-4000:]
    assert slower.states["check_regression"] == "failed", slower.output[-4000:]
    assert "BenchmarkRegressionError" in slower.output and "median_ttft_ms" in slower.output

    runs = json.loads(bucket.blob(history).download_as_bytes())["runs"]
    assert [bool(r["regressions"]) for r in runs] == [False, False, False, True]
    assert [r["engine"] for r in runs] == ["vllm", "jetstream", "vllm", "vllm"]
    assert "median_ttft_ms" in runs[-1]["regressions"]
    report = (tmp_path / "slower" / "report.md").read_text()
    assert "REGRESS" in report and "| median_ttft_ms" in report
    assert (tmp_path / "slower" / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_runs_the_chained_pipeline_with_a_maintenance_event(tmp_path, crds):
    """The README's main command, shortened: its own cluster, real Airflow, one maintenance event."""
    out = tmp_path / "demo"
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("pathways-airflow")), "demo",
            "--dags", str(REPO / "dags"), "--out", str(out), "--crds", str(crds),
            "--steps", "40", "--maintenance-at", "15", "--nightly-runs", "1",
        ],
        capture_output=True, text=True, timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    summary = output.split("── summary")[1]
    for stage in ("slices_ready", "train", "convert", "benchmark", "check_regression"):
        assert f"  {stage}" in summary and "success" in summary
    assert ">>> host maintenance on TPU node pool" in output
    # Maintenance GKE announced on an idle slice before the training was started and waited out first.
    assert ">>> GKE announces host maintenance on idle TPU node pool tpu-v5e-2x4-2, due inside" in output
    assert re.search(r"maintenance announced before training: tpu-v5e-2x4-2 in [\d.]+ h; started it on 2 idle nodes, waited \d+ s, "
                     r"then submitted \(maintenance_window='start_now'\)", summary), summary
    assert "ended by MAINTENANCE" in output and "(attempt 1), resuming from step" in output
    assert "1 disruption (1 maintenance)" in summary
    assert "final training checkpoint: step 39" in summary
    assert "regression check (nightly run 1): no regression" in summary
    assert "benchmark history: 2 runs" in summary
    assert "left in the cluster: nothing" in summary
    assert (out / "report" / "nightly-1" / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # One report per run: the pipeline's is not overwritten by the nightly run's.
    assert (out / "report" / "pipeline" / "report.md").is_file() and (out / "report" / "nightly-1" / "report.md").is_file()
    assert f"report: {out / 'report' / 'pipeline' / 'report.md'}" in summary
    # The training task's chip time: two v5e 2x4 slices, one maintenance.
    assert re.search(r"training chip time: goodput \d+% of [\d.e-]+ chip-hours \(16 chips held .*lost [\d.]+ s to 1 disruption", summary)
    # One lineage graph from the training checkpoint to the benchmark result and the history.
    lineage = next(line for line in summary.splitlines() if line.startswith("lineage (OpenLineage events): "))
    links = lineage.split(": ", 1)[1].split(" → ")
    assert links[0::2] == ["train", "convert", "benchmark", "check_regression"], lineage
    assert links[1] == "gs://pathways-demo/runs/llama-demo/checkpoints/39" and links[3].startswith("gs://pathways-demo/serving/")
    assert links[5].endswith(".json") and links[7].endswith("history.json")
    train = completed_tasks(read_events(out / "lineage.jsonl"), "pathways_train_convert_infer")["train"]
    facets = train.run_facets
    assert facets["pathways_workload"]["uid"] and facets["pathways_workload"]["namespace"] == "default"
    assert facets["pathways_tpu"]["chips"] == 16 and facets["pathways_disruptions"]["kinds"] == ["MAINTENANCE"]
    assert 0 < facets["pathways_goodput"]["goodput"] < 1
