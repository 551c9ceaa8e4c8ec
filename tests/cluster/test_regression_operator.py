"""BenchmarkRegressionOperator against the local cluster's GCS emulator (fake-gcs-server), in-process.

Every read and write goes through the real ``google-cloud-storage`` client to a real object
store, generation preconditions included, so what the operator claims (the run is recorded,
flagged, not duplicated, not lost to a concurrent writer) is checked against what is actually
in the bucket.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import replace

import pytest
from airflow.sdk import DAG
from airflow.providers.common.compat.sdk import AirflowFailException

from pathways_airflow.benchmark_history import Run, history_from, to_document, with_run
from pathways_airflow.exceptions import BadSpecError, BenchmarkRegressionError, PathwaysError
from pathways_airflow.operators.regression import WRITE_ATTEMPTS, BenchmarkRegressionOperator, StoredHistory
from pathways_airflow.spec import InvalidWorkloadSpec

from tests.support.connections import connect
from tests.support.task_instance import TaskInstance

BUCKET = "pathways-demo"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

STEADY = {
    "request_throughput": 12.0,
    "input_throughput": 3100.0,
    "output_throughput": 1450.0,
    "mean_ttft_ms": 120.0,
    "median_ttft_ms": 110.0,
    "p99_ttft_ms": 300.0,
    "mean_ttst_ms": 40.0,
    "median_ttst_ms": 38.0,
    "p99_ttst_ms": 90.0,
    "mean_tpot_ms": 22.0,
    "median_tpot_ms": 21.0,
    "p99_tpot_ms": 45.0,
    "completed": 200,
    "duration": 16.6,
    "total_input_tokens": 51200,
    "total_output_tokens": 24000,
    "result_uri": "gs://pathways-demo/bench/results/run.json",
}
"""What InferenceBenchmarkOperator returns (spec.benchmark.benchmark_metrics plus result_uri)."""


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture
def client(pathways_cluster):
    """A second, independent client: the test's own view of the bucket (and a concurrent writer)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": pathways_cluster.gcs_endpoint})
    yield client
    client.close()


@pytest.fixture
def bucket(client):
    return client.bucket(BUCKET)


@pytest.fixture
def base() -> str:
    """A fresh prefix per test: the emulator lives for the whole session."""
    return f"benchmarks/{uuid.uuid4().hex[:8]}"


def metrics(**changes) -> dict:
    return {**STEADY, **changes}


def checker(base: str, task_id: str = "check_regression", cls=BenchmarkRegressionOperator, **params):
    return cls(task_id=task_id, **{"history_uri": f"gs://{BUCKET}/{base}/history.json", **params})


def run(task: BenchmarkRegressionOperator, night: int, *, run_id: str | None = None, ti: TaskInstance | None = None):
    """Execute as the scheduled run of the given night of June 2025."""
    logical_date = dt.datetime(2025, 6, night, tzinfo=dt.timezone.utc)
    run_id = run_id or f"scheduled__{logical_date.isoformat()}"
    ti = ti or TaskInstance("nightly_benchmark", task.task_id, run_id)
    return task.execute({"ti": ti, "run_id": run_id, "logical_date": logical_date})


def stored_history(bucket, base: str):
    blob = bucket.get_blob(f"{base}/history.json")
    return None if blob is None else history_from(json.loads(blob.download_as_bytes()))


def names_under(client, prefix: str) -> set[str]:
    return {b.name.removeprefix(prefix + "/") for b in client.list_blobs(BUCKET, prefix=prefix + "/")}


def test_the_first_run_starts_the_history_and_a_steady_second_run_passes(client, bucket, base):
    pytest.importorskip("matplotlib", reason="the plot is drawn by matplotlib, the optional plots extra")
    # After templating without render_template_as_native_obj the XCom dict arrives as its repr.
    first = run(checker(base, metrics=repr(STEADY), checkpoint={"uri": "gs://pathways-demo/serving/checkpoints/0", "items_uri": "x"}, labels={"model": "llama2-7b"}), 1)

    assert first["regressed"] is False and first["regressions"] == []
    assert {row["status"] for row in first["rows"]} == {"no baseline yet"}
    assert first["runs_in_history"] == 1
    history = stored_history(bucket, base)
    [recorded] = history.runs
    assert recorded.run_id == "scheduled__2025-06-01T00:00:00+00:00"
    assert recorded.recorded_at == "2025-06-01T00:00:00+00:00"
    assert recorded.checkpoint == "gs://pathways-demo/serving/checkpoints/0"
    assert recorded.labels == {"model": "llama2-7b"}
    assert recorded.regressions == ()
    assert "result_uri" not in recorded.metrics and recorded.metrics["p99_ttft_ms"] == 300.0

    # A JSON string works too; small noise stays within the 10 % threshold.
    second = run(checker(base, metrics=json.dumps(metrics(median_ttft_ms=115.0, request_throughput=11.5))), 2)

    assert second["regressed"] is False
    rows = {row["metric"]: row for row in second["rows"]}
    assert rows["median_ttft_ms"]["baseline"] == 110.0 and rows["median_ttft_ms"]["baseline_runs"] == 1
    assert rows["median_ttft_ms"]["change_pct"] == pytest.approx(100 * 5 / 110)
    assert rows["request_throughput"]["status"] == "ok"
    assert second["runs_in_history"] == 2 and len(stored_history(bucket, base)) == 2
    report_dir = f"{base}/reports/scheduled__2025-06-02T00_00_00_00_00"
    assert second["report_uri"] == f"gs://{BUCKET}/{report_dir}/report.md"
    assert second["plot_uri"] == f"gs://{BUCKET}/{report_dir}/history.png"
    assert names_under(client, report_dir) == {"report.md", "history.png"}
    report = bucket.blob(f"{report_dir}/report.md").download_as_text()
    assert "**no regression**" in report and "| median_ttft_ms (↓ better) | 115.0 | 110.0 | +4.5% | 10% | ok |" in report
    assert "The history holds 2 runs" in report and "![history of the watched metrics](history.png)" in report
    assert bucket.blob(f"{report_dir}/history.png").download_as_bytes().startswith(PNG_MAGIC)


def test_a_regression_fails_the_task_is_recorded_flagged_and_left_out_of_the_next_baseline(bucket, base):
    for night, ttft in ((1, 105.0), (2, 115.0), (3, 110.0)):
        run(checker(base, metrics=metrics(median_ttft_ms=ttft)), night)
    ti = TaskInstance("nightly_benchmark", "check_regression", "scheduled__2025-06-04T00:00:00+00:00")

    with pytest.raises(BenchmarkRegressionError) as failed:
        run(checker(base, metrics=metrics(median_ttft_ms=330.0)), 4, ti=ti)

    error = failed.value
    assert isinstance(error, AirflowFailException), "a regression is deterministic: Airflow must not retry it"
    assert error.regressions == ("median_ttft_ms",)
    message = str(error)
    assert "median_ttft_ms: 330.0 vs baseline 110.0 (median of 3 runs), +200.0%, threshold 10%" in message
    assert error.report_uri in message and "reports/scheduled__2025-06-04T00_00_00_00_00/report.md" in message
    assert ti.xcoms["return_value"]["regressed"] is True and ti.xcoms["return_value"]["regressions"] == ["median_ttft_ms"]
    history = stored_history(bucket, base)
    assert [r.regressions for r in history.runs] == [(), (), (), ("median_ttft_ms",)]
    assert history.runs[-1].metrics["median_ttft_ms"] == 330.0
    report = bucket.blob(f"{base}/reports/scheduled__2025-06-04T00_00_00_00_00/report.md").download_as_text()
    assert "**REGRESSION in median_ttft_ms (+200.0% vs baseline, threshold 10%)**" in report
    assert "| **REGRESSED** |" in report

    after = run(checker(base, metrics=metrics(median_ttft_ms=118.0)), 5)

    assert after["regressed"] is False
    row = next(r for r in after["rows"] if r["metric"] == "median_ttft_ms")
    # Median of 105, 115, 110: the 330 of night 4 is not part of the baseline.
    assert (row["baseline"], row["baseline_runs"], row["status"]) == (110.0, 3, "ok")
    assert [r.regressions for r in stored_history(bucket, base).runs][-1] == ()


def test_fail_on_regression_false_records_and_reports_without_failing(bucket, base):
    run(checker(base, metrics=STEADY), 1)

    result = run(checker(base, metrics=metrics(output_throughput=700.0), fail_on_regression="False"), 2)

    assert result["regressed"] is True and result["regressions"] == ["output_throughput"]
    assert stored_history(bucket, base).runs[-1].regressions == ("output_throughput",)


def test_a_retry_with_the_same_run_id_replaces_its_entry_and_keeps_its_baseline(bucket, base):
    run(checker(base, metrics=STEADY), 1)
    run(checker(base, metrics=metrics(p99_ttft_ms=310.0)), 2)

    retry = run(checker(base, metrics=metrics(p99_ttft_ms=320.0)), 2)

    history = stored_history(bucket, base)
    assert [r.run_id for r in history.runs] == ["scheduled__2025-06-01T00:00:00+00:00", "scheduled__2025-06-02T00:00:00+00:00"]
    assert history.runs[-1].metrics["p99_ttft_ms"] == 320.0
    row = next(r for r in retry["rows"] if r["metric"] == "p99_ttft_ms")
    assert (row["baseline"], row["baseline_runs"]) == (300.0, 1), "a retry is compared with the runs before it, not with itself"
    assert retry["runs_in_history"] == 2

    # A regressed run retried with the same numbers fails again, and is still recorded once.
    for _ in range(2):
        with pytest.raises(BenchmarkRegressionError):
            run(checker(base, metrics=metrics(median_tpot_ms=40.0)), 3)
    history = stored_history(bucket, base)
    assert len(history) == 3 and history.runs[-1].regressions == ("median_tpot_ms",)


def test_reports_go_to_a_local_directory(tmp_path, bucket, base):
    pytest.importorskip("matplotlib", reason="the plot is drawn by matplotlib, the optional plots extra")
    run(checker(base, metrics=STEADY), 1)
    report_dir = tmp_path / "reports" / "night-2"

    result = run(checker(base, metrics=metrics(request_throughput=12.4), report_dir=str(report_dir)), 2)

    import matplotlib.image

    assert result["report_uri"] == str(report_dir / "report.md") and result["plot_uri"] == str(report_dir / "history.png")
    assert sorted(p.name for p in report_dir.iterdir()) == ["history.png", "report.md"]
    report = (report_dir / "report.md").read_text()
    assert "| metric | this run | baseline (median of 1) | change | threshold | status |" in report
    assert "| request_throughput (↑ better) | 12.4 | 12.0 | +3.3% | 10% | ok |" in report
    image = matplotlib.image.imread(str(report_dir / "history.png"))
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_reports_go_to_a_gcs_prefix_of_choice(client, bucket, base):
    pytest.importorskip("matplotlib", reason="the plot is drawn by matplotlib, the optional plots extra")
    report_prefix = f"{base}/elsewhere/night-1"

    result = run(checker(base, metrics=STEADY, report_dir=f"gs://{BUCKET}/{report_prefix}/"), 1)

    assert result["report_uri"] == f"gs://{BUCKET}/{report_prefix}/report.md"
    assert names_under(client, report_prefix) == {"report.md", "history.png"}
    plot = bucket.get_blob(f"{report_prefix}/history.png")
    assert plot.content_type == "image/png" and plot.download_as_bytes().startswith(PNG_MAGIC)
    assert not names_under(client, f"{base}/reports")


class RacingOperator(BenchmarkRegressionOperator):
    """Another night's task records its run right after this task read the history (before it writes)."""

    def __init__(self, *, rival_client, rival_run: Run, races: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.rival_client, self.rival_run, self.races, self.reads = rival_client, rival_run, races, 0

    def _read_history(self, client, uri) -> StoredHistory:
        stored = super()._read_history(client, uri)
        self.reads += 1
        if self.reads <= self.races:
            blob = self.rival_client.bucket(BUCKET).blob(uri.removeprefix(f"gs://{BUCKET}/"))
            current = history_from(json.loads(blob.download_as_bytes())) if blob.exists() else history_from(None)
            rival = replace(self.rival_run, run_id=f"{self.rival_run.run_id}-{self.reads}")
            blob.upload_from_string(json.dumps(to_document(with_run(current, rival))))
        return stored


@pytest.mark.parametrize("existing", [True, False], ids=["history-exists", "first-write"])
def test_a_concurrent_writer_never_loses_an_entry(client, bucket, base, existing):
    if existing:
        run(checker(base, metrics=STEADY), 1)
    rival = Run("manual__rival", "2025-06-02T06:00:00+00:00", {"median_ttft_ms": 111.0}, labels={"who": "rival"})
    task = checker(base, cls=RacingOperator, metrics=STEADY, rival_client=client, rival_run=rival)

    result = run(task, 3)

    assert task.reads == 2, "the write must have been refused once and the history read again"
    history = stored_history(bucket, base)
    expected = (["scheduled__2025-06-01T00:00:00+00:00"] if existing else []) + ["manual__rival-1", "scheduled__2025-06-03T00:00:00+00:00"]
    assert [r.run_id for r in history.runs] == expected
    assert result["runs_in_history"] == len(expected)
    # The rival's run was part of what this run was compared with.
    row = next(r for r in result["rows"] if r["metric"] == "median_ttft_ms")
    assert row["baseline_runs"] == len(expected) - 1


def test_a_history_that_keeps_changing_gives_up_without_recording(client, bucket, base):
    rival = Run("manual__rival", "2025-06-02T06:00:00+00:00", {"median_ttft_ms": 111.0})
    task = checker(base, cls=RacingOperator, metrics=STEADY, rival_client=client, rival_run=rival, races=WRITE_ATTEMPTS)

    with pytest.raises(PathwaysError, match=f"changed under this task {WRITE_ATTEMPTS} times in a row") as gave_up:
        run(task, 3)

    assert not isinstance(gave_up.value, AirflowFailException), "another try later may well succeed"
    assert [r.run_id for r in stored_history(bucket, base).runs] == [f"manual__rival-{n}" for n in range(1, WRITE_ATTEMPTS + 1)]


def test_templated_parameters_are_read_after_rendering(bucket, base):
    with DAG("nightly_benchmark", schedule=None):
        task = checker(
            base,
            metrics="{{ params.metrics }}",
            threshold_pct="{{ params.threshold }}",
            watched_metrics="{{ ['p99_ttft_ms', 'request_throughput'] }}",
            labels={"model": "{{ params.get('model', 'llama2-7b') }}"},
        )
    task.render_template_fields({"params": {"metrics": STEADY, "threshold": "15"}})
    assert isinstance(task.metrics, str), "without native rendering the dict arrives as its repr"

    result = run(task, 1)

    assert [row["metric"] for row in result["rows"]] == ["p99_ttft_ms", "request_throughput"]
    assert {row["threshold_pct"] for row in result["rows"]} == {15.0}
    assert stored_history(bucket, base).runs[0].labels == {"model": "llama2-7b"}


def test_keep_trims_the_oldest_runs(bucket, base):
    for night in range(1, 5):
        run(checker(base, metrics=STEADY, keep=2, window=2), night)

    history = stored_history(bucket, base)
    assert [r.recorded_at[:10] for r in history.runs] == ["2025-06-03", "2025-06-04"]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("threshold_pct", "ten", "threshold_pct='ten': must be a percentage"),
        ("watched_metrics", '["p99_ttft_ms", "completed"]', "metric 'completed' cannot be watched"),
        ("metrics", "None", "no metrics given"),
        ("metrics", json.dumps({"request_throughput": 1.0}), "has no output_throughput, median_ttft_ms, p99_ttft_ms, median_tpot_ms (watched)"),
        ("thresholds", "{'p99_ttft': 20}", "'p99_ttft' is not a watched metric"),
        ("window", "0", "window='0': must be an integer ≥ 1"),
        ("history_uri", "gs://pathways-demo/benchmarks/", "it names no object"),
        ("report_dir", "relative/reports", "absolute local directory"),
    ],
)
def test_bad_rendered_parameters_fail_before_any_gcs_call(bucket, base, field, value, words):
    task = checker(base, metrics="{{ ti.xcom_pull('benchmark') }}", threshold_pct="{{ var.value.threshold }}")
    # What templating would leave behind.
    task.metrics, task.threshold_pct = STEADY, "10"
    setattr(task, field, value)

    with pytest.raises(InvalidWorkloadSpec) as refused:
        run(task, 1)

    assert field in refused.value.fields and words in str(refused.value)
    assert stored_history(bucket, base) is None


def test_literal_parameters_are_checked_when_the_dag_is_parsed(base):
    with pytest.raises(InvalidWorkloadSpec) as refused:
        checker(base, metrics=STEADY, threshold_pct=-5, min_runs=9, window=7, labels=["x"])
    assert set(refused.value.fields) == {"threshold_pct", "min_runs", "labels"}
    with pytest.raises(InvalidWorkloadSpec, match="history_uri"):
        checker(base, metrics=STEADY, history_uri="/tmp/history.json")
    # Templated values wait for rendering; a metric missing from a templated dict is not guessed at.
    checker(base, metrics="{{ ti.xcom_pull('benchmark') }}", watched_metrics=["p99_tpot_ms"], thresholds={"p99_tpot_ms": 30})


@pytest.mark.parametrize("where", ["history_uri", "report_dir"])
def test_a_missing_bucket_fails_before_anything_is_written(tmp_path, bucket, base, where):
    params = {"history_uri": "gs://no-such-bucket-4711/history.json"} if where == "history_uri" else {"report_dir": "gs://no-such-bucket-4711/reports"}

    with pytest.raises(BadSpecError) as refused:
        run(checker(base, metrics=STEADY, **params), 1)

    assert f"{where}: bucket gs://no-such-bucket-4711 does not exist" in str(refused.value)
    assert stored_history(bucket, base) is None


def test_an_unreadable_history_is_left_alone(bucket, base):
    blob = bucket.blob(f"{base}/history.json")
    blob.upload_from_string(json.dumps({"version": 1, "runs": [{"run_id": "a", "recorded_at": "yesterday", "metrics": {}}]}))
    blob.reload()

    with pytest.raises(BadSpecError) as refused:
        run(checker(base, metrics=STEADY), 1)

    assert "runs[0] (run_id 'a').recorded_at='yesterday'" in str(refused.value)
    assert bucket.get_blob(blob.name).generation == blob.generation


def test_without_matplotlib_the_report_is_written_without_the_plot(tmp_path, bucket, base, monkeypatch, capfd):
    """A production image installed without the ``plots`` extra: the gate still works and says why no PNG."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without matplotlib looks like to import
    run(checker(base, metrics=STEADY), 1)
    report_dir = tmp_path / "reports" / "no-plot"

    result = run(checker(base, metrics=metrics(request_throughput=12.4), report_dir=str(report_dir)), 2)

    assert result["plot_uri"] is None and result["report_uri"] == str(report_dir / "report.md")
    assert sorted(p.name for p in report_dir.iterdir()) == ["report.md"]
    report = (report_dir / "report.md").read_text()
    assert "| request_throughput (↑ better) | 12.4 | 12.0 | +3.3% | 10% | ok |" in report and "history.png" not in report
    assert "pathways-airflow[plots]" in "".join(capfd.readouterr())
