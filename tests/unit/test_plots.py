"""The history plot (pathways_airflow.plots): what each panel shows, and that it renders to a real PNG.

What the figure shows is asserted on :func:`plot_panels` (baselines and bands, date labels,
engines, regressed and current runs); the PNG tests only check that it is drawn, regressions in
red, and the same bytes every time.
"""

from __future__ import annotations

import io
import math
import subprocess
import sys

import pytest

from pathways_airflow.benchmark_history import (
    DEFAULT_WATCHED_METRICS,
    LOWER,
    Comparison,
    History,
    Run,
    compare,
    run_record,
    with_run,
)
from pathways_airflow.plots import MAX_DATE_TICKS, date_labels, history_plot_png, plot_panels, tick_positions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METRICS = {
    "request_throughput": 12.0,
    "output_throughput": 1450.0,
    "median_ttft_ms": 110.0,
    "p99_ttft_ms": 300.0,
    "median_tpot_ms": 21.0,
}


def recorded(
    history: History, metrics: dict, *, when: str, run_id: str | None = None, engine: str = "jetstream", **options
) -> tuple[History, Comparison]:
    """``history`` with one more run, recorded as the operator records it: compared, flagged, appended."""
    run_id = run_id or f"scheduled__{when}"
    comparison = compare(metrics, history, run_id=run_id, engine=engine, **options)
    run = run_record(comparison, metrics, run_id=run_id, recorded_at=when, engine=engine)
    return with_run(history, run), comparison


def nightly(
    count: int, *, engine: str = "jetstream", start: History | None = None, day: int = 1, **changes: dict
) -> tuple[History, Comparison]:
    """``count`` nights in June 2025 from ``day``; ``changes[n]`` overrides metrics on night ``n``."""
    history = start or History()
    comparison = compare(METRICS, history, run_id="nothing yet", engine=engine)
    for n in range(day, day + count):
        metrics = {**METRICS, "p99_ttft_ms": 300.0 + n % 3, **changes.get(f"night{n}", {})}
        history, comparison = recorded(history, metrics, when=f"2025-06-{n:02d}T00:00:00+00:00", engine=engine)
    return history, comparison


def needs_matplotlib() -> None:
    """Skip the calling test without the ``plots`` extra: drawing the PNG is matplotlib's."""
    pytest.importorskip("matplotlib", reason="the PNG is drawn by matplotlib, the optional plots extra")


def decode(png: bytes):
    """The PNG's pixels (a numpy array of RGBA floats), as matplotlib reads them back."""
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")


def red_pixels(image) -> int:
    red, green, blue = image[..., 0], image[..., 1], image[..., 2]
    return int(((red > 0.75) & (green < 0.3) & (blue < 0.3)).sum())


def panel(plot, metric):
    return next(p for p in plot.panels if p.metric == metric)


# --- what the figure shows -----------------------------------------------------------------------


def test_the_band_runs_from_the_baseline_to_the_threshold_on_the_worse_side():
    history, _ = nightly(5)
    tonight = {**METRICS, "p99_ttft_ms": 420.0, "request_throughput": 11.5}
    history, comparison = recorded(history, tonight, when="2025-06-06T00:00:00+00:00", thresholds={"p99_ttft_ms": 25})

    plot = plot_panels(history, comparison, title="Nightly llama2-7b")

    latency = panel(plot, "p99_ttft_ms").band  # lower is better: the band lies above the baseline
    assert latency.baseline == comparison.row("p99_ttft_ms").baseline == 301.0
    assert latency.limit == pytest.approx(301.0 * 1.25) and latency.threshold_pct == 25
    assert (latency.low, latency.high) == (301.0, pytest.approx(376.25))
    throughput = panel(plot, "request_throughput").band  # higher is better: the band lies below it
    assert throughput.baseline == 12.0 and throughput.limit == pytest.approx(10.8)
    assert (throughput.low, throughput.high) == (pytest.approx(10.8), 12.0)
    assert throughput.baseline_runs == 5
    assert "baseline 301.0 (median of 5), band +25% to 376.2" in panel(plot, "p99_ttft_ms").title
    assert "baseline 12.0 (median of 5), band −10% to 10.8" in panel(plot, "request_throughput").title
    assert [p.metric for p in plot.panels] == [row.metric for row in comparison.rows]


def test_the_band_is_the_comparisons_own_so_the_picture_agrees_with_the_verdict():
    history, _ = nightly(7)
    history, comparison = recorded(history, {**METRICS, "median_tpot_ms": 23.2}, when="2025-06-08T00:00:00+00:00", threshold_pct=10)

    plot = plot_panels(history, comparison, title="t")

    for row in comparison.rows:
        band = panel(plot, row.metric).band
        assert band.baseline == row.baseline and band.threshold_pct == row.threshold_pct
        past = row.current > band.high if row.better == LOWER else row.current < band.low
        assert past == row.regressed
    assert comparison.regressions == ("median_tpot_ms",)


def test_a_metric_without_a_baseline_has_no_band_and_says_so():
    history, comparison = recorded(History(), METRICS, when="2025-06-01T00:00:00+00:00")

    plot = plot_panels(history, comparison, title="t")

    assert all(p.band is None for p in plot.panels)
    assert "no baseline yet (0 of 1 runs needed): no band" in panel(plot, "p99_ttft_ms").title
    assert panel(plot, "p99_ttft_ms").current.value == 300.0


def test_runs_on_one_day_get_labels_that_tell_them_apart():
    history, _ = nightly(3)
    history, comparison = recorded(history, METRICS, when="2025-06-03T14:30:00+00:00", run_id="manual__rerun")

    plot = plot_panels(history, comparison, title="t")

    assert plot.labels == ("06-01 00:00", "06-02 00:00", "06-03 00:00", "06-03 14:30")
    assert plot.ticks == (0, 1, 2, 3)


def test_nightly_runs_read_as_dates_only():
    history, comparison = nightly(4)
    assert plot_panels(history, comparison, title="t").labels == ("06-01", "06-02", "06-03", "06-04")


def test_labels_grow_only_as_far_as_needed_to_differ():
    assert date_labels(["2025-06-01T10:00:00+00:00", "2025-06-01T10:00:30Z"]) == ("2025-06-01 10:00:00", "2025-06-01 10:00:30")
    assert date_labels(["2024-06-01T00:00:00+00:00", "2025-06-01T00:00:00+00:00"]) == ("2024-06-01 00:00", "2025-06-01 00:00")
    # In UTC, whatever offset a hand-edited entry was written with.
    assert date_labels(["2025-06-01T23:30:00-02:00", "2025-06-02T12:00:00+00:00"]) == ("06-02 01:30", "06-02 12:00")
    assert date_labels(["not a date", "2025-06-02T00:00:00+00:00"]) == ("not a date", "06-02")
    assert date_labels([]) == ()


@pytest.mark.parametrize("count", [0, 1, 2, 6, 7, 12, 40, 365])
def test_the_ticks_are_few_and_include_the_first_and_newest_run(count):
    ticks = tick_positions(count)
    assert len(ticks) <= MAX_DATE_TICKS and list(ticks) == sorted(set(ticks))
    if count:
        assert ticks[0] == 0 and ticks[-1] == count - 1 and all(0 <= t < count for t in ticks)


def test_runs_of_other_engines_are_set_apart_and_the_engine_is_named():
    history, _ = nightly(3, engine="jetstream")
    history, _ = nightly(2, engine="vllm", start=history, day=4)
    history, comparison = recorded(history, METRICS, when="2025-06-06T00:00:00+00:00", engine="vllm")

    plot = plot_panels(history, comparison, title="Nightly llama2-7b")

    assert plot.engine == "vllm" and plot.title == "Nightly llama2-7b · engine: vllm"
    assert plot.other_engines == ("jetstream",)
    assert "jetstream" in plot.other_engine_label and "not compared" in plot.other_engine_label
    latency = panel(plot, "p99_ttft_ms")
    assert [p.position for p in latency.other_engines] == [0, 1, 2]
    assert {p.engine for p in latency.other_engines} == {"jetstream"}
    assert [p.position for p in latency.line] == [3, 4, 5] and {p.engine for p in latency.line} == {"vllm"}
    assert latency.band.baseline_runs == 2  # the vLLM nights only, as the comparison counted them


def test_regressed_runs_are_marked_in_the_metric_that_regressed_only():
    history, comparison = nightly(6, night4={"p99_ttft_ms": 900.0})

    plot = plot_panels(history, comparison, title="t")

    assert [(p.position, p.value) for p in panel(plot, "p99_ttft_ms").regressed] == [(3, 900.0)]
    assert panel(plot, "median_ttft_ms").regressed == ()
    assert history.runs[3].regressions == ("p99_ttft_ms",)


def test_the_current_run_is_the_compared_one_and_a_missing_value_is_a_gap():
    history, _ = nightly(2)
    history = with_run(history, Run("partial", "2025-06-03T00:00:00+00:00", {"request_throughput": 12.0}))
    history, comparison = recorded(history, METRICS, when="2025-06-04T00:00:00+00:00", watched=["p99_ttft_ms", "request_throughput"])
    later = with_run(history, Run("later", "2025-06-05T00:00:00+00:00", METRICS))

    plot = plot_panels(later, comparison, title="t")

    latency = panel(plot, "p99_ttft_ms")
    assert latency.current.run_id == comparison.run_id and latency.current.position == 3
    assert math.isnan(latency.line[2].value) and latency.line[2].run_id == "partial"
    assert panel(plot, "request_throughput").line[2].value == 12.0


def test_no_metrics_is_an_error():
    history, comparison = nightly(2)
    with pytest.raises(ValueError, match="no metrics"):
        plot_panels(history, Comparison(comparison.run_id, (), comparison.window, comparison.min_runs), title="t")


# --- the PNG -------------------------------------------------------------------------------------


def test_the_plot_is_a_png_with_a_panel_per_metric_and_the_same_bytes_every_time():
    needs_matplotlib()
    history, comparison = nightly(10, night5={"p99_ttft_ms": 900.0})
    one_history, one = recorded(nightly(9)[0], METRICS, when="2025-06-10T00:00:00+00:00", watched=["p99_ttft_ms"])

    png = history_plot_png(history, comparison, title="Nightly llama2-7b")

    assert png.startswith(PNG_MAGIC)
    assert png == history_plot_png(history, comparison, title="Nightly llama2-7b")
    assert b"Software" not in png and b"matplotlib" not in png
    image, single = decode(png), decode(history_plot_png(one_history, one, title="one"))
    # Five panels in two columns: three rows of panels, two columns.
    assert image.shape[0] > 2 * single.shape[0] and image.shape[1] == 2 * single.shape[1]


def test_regressed_runs_are_red_and_steady_ones_are_not():
    needs_matplotlib()
    steady = decode(history_plot_png(*nightly(8), title="t"))
    flagged = decode(history_plot_png(*nightly(8, night5={"p99_ttft_ms": 900.0}), title="t"))

    assert red_pixels(steady) == 0
    assert red_pixels(flagged) > 20


@pytest.mark.parametrize("count", [0, 1, 40])
def test_empty_single_and_long_histories_render(count):
    needs_matplotlib()
    history, comparison = nightly(count) if count else (History(), compare(METRICS, History(), run_id="first"))
    assert decode(history_plot_png(history, comparison, title="t")).size > 0


def test_mixed_engines_and_missing_baselines_render():
    needs_matplotlib()
    history, _ = nightly(4, engine="jetstream")
    history, comparison = recorded(history, METRICS, when="2025-06-04T09:15:00+00:00", engine="vllm")
    assert history_plot_png(history, comparison, title="t").startswith(PNG_MAGIC)


def test_the_operator_writes_the_plot_of_its_comparison(tmp_path):
    needs_matplotlib()
    from pathways_airflow.operators.regression import BenchmarkRegressionOperator

    history, _ = nightly(4)
    tonight = {**METRICS, "engine": "jetstream"}
    operator = BenchmarkRegressionOperator(task_id="regression", metrics=tonight, history_uri="gs://bucket/history.json")
    check = operator.check()
    history, comparison = recorded(history, tonight, when="2025-06-05T00:00:00+00:00", watched=check.watched)
    report, plot = tmp_path / "report.md", tmp_path / "history.png"

    written = operator._write_report(None, comparison, history, "Nightly", str(report), str(plot))

    assert written == str(plot)
    assert plot.read_bytes() == history_plot_png(history, comparison, title="Nightly")
    assert "![history of the watched metrics](history.png)" in report.read_text()


def test_importing_the_operators_and_computing_the_panels_does_not_import_matplotlib():
    code = (
        "import sys, pathways_airflow.operators, pathways_airflow.operators.regression, pathways_airflow.plots as p\n"
        "from pathways_airflow.benchmark_history import History, compare\n"
        f"metrics = {METRICS!r}\n"
        "p.plot_panels(History(), compare(metrics, History(), run_id='r'), title='t')\n"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_the_default_watched_metrics_each_get_a_panel():
    history, comparison = nightly(3)
    assert [p.metric for p in plot_panels(history, comparison, title="t").panels] == list(DEFAULT_WATCHED_METRICS)
