"""The benchmark history and the regression rule (pathways_airflow.benchmark_history), on real-shaped metrics.

The operator that reads and writes the history in GCS is tested in
tests/cluster/test_regression_operator.py.
"""

from __future__ import annotations

import json

import pytest

from pathways_airflow.benchmark_history import (
    DEFAULT_WATCHED_METRICS,
    History,
    Run,
    baseline_values,
    better_direction,
    compare,
    history_from,
    markdown_table,
    numeric_metrics,
    report_markdown,
    run_record,
    summary_line,
    to_document,
    verdict,
    with_run,
)
from pathways_airflow.spec.jetstream import METRIC_KEYS

# What InferenceBenchmarkOperator returns for a llama2-7b run on a v5e-8 (rounded).
TONIGHT = {
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
    "result_uri": "gs://bench/results/run.json",
}


def night(n: int, regressions: tuple[str, ...] = (), **changes) -> Run:
    return Run(
        run_id=f"scheduled__2025-06-{n:02d}T00:00:00+00:00",
        recorded_at=f"2025-06-{n:02d}T00:00:00+00:00",
        metrics=numeric_metrics({**TONIGHT, **changes}),
        regressions=regressions,
    )


def history_of(*runs: Run) -> History:
    history = History()
    for run in runs:
        history = with_run(history, run)
    return history


# --- directions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "better"),
    [("p99_ttft_ms", "lower"), ("median_tpot_ms", "lower"), ("request_throughput", "higher"), ("output_throughput", "higher")],
)
def test_latencies_are_better_lower_and_throughputs_higher(metric, better):
    assert better_direction(metric) == better


@pytest.mark.parametrize("metric", ["completed", "duration", "total_output_tokens", "ttft"])
def test_a_metric_without_a_better_side_cannot_be_watched(metric):
    with pytest.raises(ValueError, match=f"metric '{metric}' cannot be watched"):
        better_direction(metric)
    with pytest.raises(ValueError, match=f"metric '{metric}' cannot be watched"):
        compare(TONIGHT, History(), watched=[metric])


def test_every_latency_and_throughput_the_benchmark_reports_has_a_direction():
    watchable = [k for k in METRIC_KEYS if k.endswith(("_ms", "_throughput"))]
    assert len(watchable) == 12
    assert set(DEFAULT_WATCHED_METRICS) <= set(watchable)
    assert {better_direction(k) for k in watchable} == {"lower", "higher"}


# --- the baseline --------------------------------------------------------------------------------


def test_the_baseline_is_the_median_of_the_newest_window_runs():
    history = history_of(*(night(n, median_ttft_ms=v) for n, v in enumerate([500, 100, 104, 90, 120, 110], 1)))

    comparison = compare({**TONIGHT, "median_ttft_ms": 112.0}, history, window=5, run_id="now")

    row = comparison.row("median_ttft_ms")
    # The oldest (500) is outside the window; median of 100, 104, 90, 120, 110.
    assert (row.baseline, row.baseline_runs) == (104.0, 5)
    assert row.change_pct == pytest.approx((112 - 104) / 104 * 100)
    assert baseline_values(history, "median_ttft_ms", window=5) == [100, 104, 90, 120, 110]


def test_an_even_window_takes_the_mean_of_the_middle_two():
    history = history_of(night(1, p99_ttft_ms=200.0), night(2, p99_ttft_ms=300.0))
    assert compare(TONIGHT, history).row("p99_ttft_ms").baseline == 250.0


def test_regressed_runs_are_left_out_of_the_baseline():
    history = history_of(
        night(1, median_ttft_ms=100.0),
        night(2, median_ttft_ms=102.0),
        night(3, ("median_ttft_ms",), median_ttft_ms=300.0),
        night(4, ("p99_ttft_ms",), median_ttft_ms=310.0, p99_ttft_ms=900.0),
    )

    comparison = compare({**TONIGHT, "median_ttft_ms": 305.0}, history, window=7)

    row = comparison.row("median_ttft_ms")
    # Were the flagged nights part of it, the baseline would be 201 and 305 would be +52 %, not +201 %.
    assert (row.baseline, row.baseline_runs) == (101.0, 2)
    assert row.regressed and comparison.regressions == ("median_ttft_ms",)


def test_the_window_counts_only_eligible_runs():
    runs = [night(1, median_ttft_ms=100.0), night(2, median_ttft_ms=100.0)]
    runs += [night(n, ("median_ttft_ms",), median_ttft_ms=400.0) for n in range(3, 10)]
    assert compare(TONIGHT, history_of(*runs), window=3).row("median_ttft_ms").baseline_runs == 2


def test_runs_without_the_metric_do_not_count():
    old = Run("old", "2025-05-01T00:00:00+00:00", {"request_throughput": 11.0})
    history = history_of(old, night(1))
    comparison = compare(TONIGHT, history)
    assert comparison.row("request_throughput").baseline_runs == 2
    assert comparison.row("p99_ttft_ms").baseline_runs == 1


def test_a_retry_is_not_part_of_its_own_baseline():
    first_try = night(2, median_ttft_ms=400.0)
    history = history_of(night(1, median_ttft_ms=100.0), first_try)

    comparison = compare({**TONIGHT, "median_ttft_ms": 400.0}, history, run_id=first_try.run_id)

    row = comparison.row("median_ttft_ms")
    assert (row.baseline, row.baseline_runs, row.regressed) == (100.0, 1, True)


# --- the regression rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "value", "regressed", "status"),
    [
        ("p99_ttft_ms", 330.0, False, "ok"),  # +10.0 %: at the threshold is not beyond it
        ("p99_ttft_ms", 331.0, True, "REGRESSED"),
        ("p99_ttft_ms", 100.0, False, "improved"),
        ("request_throughput", 10.8, False, "ok"),  # -10 %
        ("request_throughput", 10.7, True, "REGRESSED"),
        ("request_throughput", 30.0, False, "improved"),
    ],
)
def test_a_metric_regresses_only_when_worse_by_more_than_the_threshold(metric, value, regressed, status):
    row = compare({**TONIGHT, metric: value}, history_of(night(1))).row(metric)
    assert (row.regressed, row.status) == (regressed, status)


def test_improvements_never_regress_however_large():
    faster = {**TONIGHT, "median_ttft_ms": 1.0, "p99_ttft_ms": 2.0, "median_tpot_ms": 0.5}
    faster.update(request_throughput=1e6, output_throughput=1e9)
    comparison = compare(faster, history_of(night(1), night(2)), threshold_pct=0)
    assert not comparison.regressed
    assert {row.status for row in comparison.rows} == {"improved"}
    assert comparison.row("request_throughput").change_pct > 0 and comparison.row("median_ttft_ms").change_pct < 0


def test_a_per_metric_threshold_overrides_the_default():
    tonight = {**TONIGHT, "p99_ttft_ms": 360.0, "median_ttft_ms": 126.5}  # +20 %, +15 %
    comparison = compare(tonight, history_of(night(1)), threshold_pct=10, thresholds={"p99_ttft_ms": 25})
    assert comparison.row("p99_ttft_ms").threshold_pct == 25 and not comparison.row("p99_ttft_ms").regressed
    assert comparison.row("median_ttft_ms").threshold_pct == 10 and comparison.row("median_ttft_ms").regressed
    assert comparison.regressions == ("median_ttft_ms",)


def test_a_threshold_for_a_metric_not_watched_is_refused():
    with pytest.raises(ValueError, match=r"thresholds\['p99_ttft'\]: not a watched metric"):
        compare(TONIGHT, History(), thresholds={"p99_ttft": 20})


def test_the_first_runs_have_no_baseline_yet_and_cannot_regress():
    awful = {**TONIGHT, "p99_ttft_ms": 1e6, "request_throughput": 0.001}
    first = compare(awful, History())
    assert not first.regressed and {row.status for row in first.rows} == {"no baseline yet"}
    assert all(row.baseline is None and row.change_pct is None for row in first.rows)

    second = compare(awful, history_of(night(1), night(2)), min_runs=3)
    assert not second.regressed and second.row("p99_ttft_ms").baseline_runs == 2

    third = compare(awful, history_of(night(1), night(2), night(3)), min_runs=3)
    assert third.regressions == ("request_throughput", "p99_ttft_ms")


def test_a_zero_baseline_regresses_only_on_the_worse_side():
    history = history_of(Run("r", "2025-06-01T00:00:00+00:00", {**numeric_metrics(TONIGHT), "median_tpot_ms": 0.0}))
    assert compare({**TONIGHT, "median_tpot_ms": 0.0}, history).row("median_tpot_ms").status == "ok"
    row = compare({**TONIGHT, "median_tpot_ms": 1.0}, history).row("median_tpot_ms")
    assert row.regressed and row.change_pct is None


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({k: v for k, v in TONIGHT.items() if k != "p99_ttft_ms"}, "metrics: no p99_ttft_ms (watched)"),
        ({**TONIGHT, "median_tpot_ms": "21"}, "metrics.median_tpot_ms='21': must be a finite number"),
        ({**TONIGHT, "median_tpot_ms": float("nan")}, "metrics.median_tpot_ms=nan"),
    ],
)
def test_a_watched_metric_missing_or_not_a_number_is_an_error(metrics, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        compare(metrics, History())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"threshold_pct": -1}, "threshold_pct=-1"),
        ({"window": 0}, "window=0"),
        ({"min_runs": True}, "min_runs=True"),
        ({"window": 3, "min_runs": 4}, "min_runs=4 is more than window=3"),
        ({"watched": "p99_ttft_ms"}, "watched='p99_ttft_ms': must be a list"),
        ({"watched": []}, "name at least one metric"),
    ],
)
def test_bad_settings_are_refused(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        compare(TONIGHT, History(), **params)


# --- recording runs ------------------------------------------------------------------------------


def test_with_run_replaces_a_retry_in_place_and_appends_a_new_run():
    history = history_of(night(1), night(2))
    retried = night(1, median_ttft_ms=999.0)

    again = with_run(history, retried)

    assert [r.run_id for r in again.runs] == [night(1).run_id, night(2).run_id]
    assert again.runs[0].metrics["median_ttft_ms"] == 999.0
    assert with_run(again, retried) == again
    assert [r.run_id for r in with_run(again, night(3)).runs][-1] == night(3).run_id


def test_with_run_keeps_the_newest():
    history = history_of(*(night(n) for n in range(1, 6)))
    kept = with_run(history, night(6), keep=3)
    assert [r.recorded_at[:10] for r in kept.runs] == ["2025-06-04", "2025-06-05", "2025-06-06"]
    with pytest.raises(ValueError, match="keep=0"):
        with_run(history, night(6), keep=0)


def test_a_recorded_run_keeps_the_numbers_and_its_regressions():
    comparison = compare({**TONIGHT, "p99_ttft_ms": 600.0}, history_of(night(1)), run_id="tonight")

    run = run_record(
        comparison, {**TONIGHT, "p99_ttft_ms": 600.0}, run_id="tonight", recorded_at="2025-06-02T00:00:00+00:00",
        checkpoint="gs://serving/checkpoints/0", labels={"model": "llama2-7b"},
    )

    assert run.regressions == ("p99_ttft_ms",) and run.regressed
    assert "result_uri" not in run.metrics and run.metrics["completed"] == 200
    assert run.checkpoint == "gs://serving/checkpoints/0" and run.labels == {"model": "llama2-7b"}


def test_the_document_round_trips_through_json():
    history = history_of(night(1), night(2, ("p99_ttft_ms",)))
    document = json.loads(json.dumps(to_document(history)))
    assert document["version"] == 1 and document["runs"][1]["regressions"] == ["p99_ttft_ms"]
    assert set(document["runs"][0]) == {"run_id", "recorded_at", "metrics", "checkpoint", "labels", "engine", "regressions"}
    assert history_from(document) == history


def test_a_run_is_compared_only_with_runs_of_its_own_engine():
    """Runs recorded before engines were recorded were JetStream's; a vLLM night starts its own
    baseline, and a JetStream night after it still compares with JetStream's."""
    old = to_document(history_of(night(1), night(2)))
    for run in old["runs"]:
        del run["engine"]
    history = history_from(old)
    assert {run.engine for run in history.runs} == {"jetstream"}
    slower = {**TONIGHT, "p99_ttft_ms": TONIGHT["p99_ttft_ms"] * 3}
    first_vllm = compare(slower, history, run_id="vllm-1", engine="vllm")
    assert not first_vllm.regressed and {row.status for row in first_vllm.rows} == {"no baseline yet"}
    history = with_run(history, run_record(first_vllm, slower, run_id="vllm-1", recorded_at="2025-06-03T00:00:00+00:00", engine="vllm"), keep=10)
    assert history_from(json.loads(json.dumps(to_document(history)))).find("vllm-1").engine == "vllm"
    assert compare(slower, history, run_id="jetstream-3").regressions == ("p99_ttft_ms",), "JetStream's baseline is still JetStream's"
    assert not compare(slower, history, run_id="vllm-2", engine="vllm").regressed, "vLLM's is the vLLM night's"
    with pytest.raises(ValueError, match="engine=''"):
        history_from({"version": 1, "runs": [{**old["runs"][0], "engine": ""}]})


def test_no_document_is_an_empty_history_and_optional_fields_may_be_left_out():
    assert history_from(None) == History() and len(history_from({"version": 1, "runs": []})) == 0
    minimal = {"version": 1, "runs": [{"run_id": "a", "recorded_at": "2025-06-01T00:00:00Z", "metrics": {"p99_ttft_ms": 1}}]}
    [run] = history_from(minimal).runs
    assert (run.checkpoint, dict(run.labels), run.regressions) == (None, {}, ())


def _document(**run_fields) -> dict:
    run = {"run_id": "r1", "recorded_at": "2025-06-01T00:00:00+00:00", "metrics": {"p99_ttft_ms": 1.0}, **run_fields}
    return {"version": 1, "runs": [{**night(0 + 1).to_dict(), "run_id": "r0"}, run]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "expected a JSON object with 'version' and 'runs', got list"),
        ({"version": 2, "runs": []}, "history version=2: this pathways-airflow reads version 1"),
        ({"runs": []}, "history version=None"),
        ({"version": 1, "runs": {}}, "history runs={}: must be a list"),
        ({"version": 1, "runs": ["x"]}, "history runs[0]: expected an object, got str"),
        (_document(run_id=""), "history runs[1].run_id='': must be a non-empty string"),
        (_document(recorded_at="last night"), "history runs[1] (run_id 'r1').recorded_at='last night'"),
        (_document(metrics=[1]), "runs[1] (run_id 'r1').metrics=[1]: must be an object"),
        (_document(metrics={"p99_ttft_ms": "fast"}), "runs[1] (run_id 'r1').metrics.p99_ttft_ms='fast': must be a finite number"),
        (_document(metrics={"p99_ttft_ms": True}), "metrics.p99_ttft_ms=True"),
        (_document(checkpoint=5), "runs[1] (run_id 'r1').checkpoint=5"),
        (_document(labels={"model": 7}), "runs[1] (run_id 'r1').labels="),
        (_document(regressions="p99_ttft_ms"), "runs[1] (run_id 'r1').regressions='p99_ttft_ms'"),
        (_document(run_id="r0"), "history runs[1].run_id='r0': already recorded at runs[0]"),
    ],
)
def test_a_bad_document_is_refused_naming_the_run_and_field(document, message):
    with pytest.raises(ValueError) as refused:
        history_from(document)
    assert message in str(refused.value)


# --- what people read ----------------------------------------------------------------------------


def test_the_report_has_the_verdict_the_table_the_history_length_and_the_plot():
    history = history_of(night(1, p99_ttft_ms=290.0), night(2, p99_ttft_ms=300.0), night(3, p99_ttft_ms=310.0))
    tonight = {**TONIGHT, "p99_ttft_ms": 393.6}
    comparison = compare(tonight, history, run_id="scheduled__2025-06-04T00:00:00+00:00")
    recorded = with_run(history, run_record(comparison, tonight, run_id=comparison.run_id, recorded_at="2025-06-04T00:00:00+00:00", checkpoint="gs://s/0"))

    report = report_markdown(comparison, recorded, title="Nightly llama2-7b", plot_file="history.png")

    lines = report.splitlines()
    assert lines[0] == "# Nightly llama2-7b"
    assert "**REGRESSION in p99_ttft_ms (+31.2% vs baseline, threshold 10%)**" in lines
    assert (
        "Run `scheduled__2025-06-04T00:00:00+00:00`, recorded at 2025-06-04T00:00:00+00:00; served by jetstream "
        "(compared with its runs only); checkpoint `gs://s/0`."
    ) in lines
    assert "| metric | this run | baseline (median of 3) | change | threshold | status |" in lines
    assert "| p99_ttft_ms (↓ better) | 393.6 | 300.0 | +31.2% | 10% | **REGRESSED** |" in lines
    assert "| request_throughput (↑ better) | 12.0 | 12.0 | +0.0% | 10% | ok |" in lines
    assert "| output_throughput (↑ better) | 1,450 | 1,450 | +0.0% | 10% | ok |" in lines
    assert sum(1 for line in lines if line.startswith("| ") and "better)" in line) == len(DEFAULT_WATCHED_METRICS)
    assert any(line.startswith("The history holds 4 runs (1 flagged as regressed") for line in lines)
    assert "![history of the watched metrics](history.png)" in lines


def test_the_table_says_when_baselines_differ_in_size_or_are_missing():
    old = Run("old", "2025-05-01T00:00:00+00:00", {"request_throughput": 11.0})
    table = markdown_table(compare(TONIGHT, history_of(old, night(1))))
    assert "| baseline (median of N) |" in table.splitlines()[0]
    assert "| request_throughput (↑ better) | 12.0 | 11.5 (of 2) | +4.3% | 10% | ok |" in table
    assert "| p99_ttft_ms (↓ better) | 300.0 | 300.0 (of 1) | +0.0% | 10% | ok |" in table

    table = markdown_table(compare(TONIGHT, history_of(old, night(1)), min_runs=2))
    assert "| baseline (median of 2) |" in table.splitlines()[0]
    assert "| request_throughput (↑ better) | 12.0 | 11.5 | +4.3% | 10% | ok |" in table
    assert "| p99_ttft_ms (↓ better) | 300.0 | – (1 of 2 runs needed) | – | 10% | no baseline yet |" in table


def test_the_verdict_and_summary_line():
    assert verdict(compare(TONIGHT, History())) == "no regression (no baseline yet: this run starts the history)"
    steady = compare(TONIGHT, history_of(night(1)), run_id="r2")
    assert verdict(steady) == "no regression"
    line = summary_line(steady)
    assert line.startswith("run r2: no regression — request_throughput 12.0 (+0.0%);")
    assert "\n" not in line and all(metric in line for metric in DEFAULT_WATCHED_METRICS)
    both = compare({**TONIGHT, "p99_ttft_ms": 600.0, "request_throughput": 6.0}, history_of(night(1)))
    assert verdict(both) == (
        "REGRESSION in request_throughput (-50.0% vs baseline, threshold 10%), "
        "p99_ttft_ms (+100.0% vs baseline, threshold 10%)"
    )


@pytest.mark.parametrize(("metric", "baseline", "limit"), [("median_ttft_ms", 100.0, 110.0), ("request_throughput", 50.0, 45.0)])
def test_the_regression_limit_is_where_compare_starts_to_flag(metric, baseline, limit):
    from pathways_airflow.benchmark_history import Run, better_direction, compare, regression_limit

    assert regression_limit(baseline, 10.0, better_direction(metric)) == pytest.approx(limit)
    earlier = History(tuple(Run(f"r{i}", f"2026-11-2{i}T00:00:00+00:00", {metric: baseline}) for i in range(3)))
    nudge = 0.01 if better_direction(metric) == "lower" else -0.01
    at_limit = compare({metric: limit}, earlier, watched=[metric], threshold_pct=10.0, run_id="now").rows[0]
    past_limit = compare({metric: limit + nudge}, earlier, watched=[metric], threshold_pct=10.0, run_id="now").rows[0]
    assert (at_limit.regressed, past_limit.regressed) == (False, True)
