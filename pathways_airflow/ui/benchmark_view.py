"""What the Pathways view draws for the nightly benchmark's history. Pure: no I/O.

A panel per watched metric with every run of one serving engine, the baseline and threshold band
the newest run was judged against, and the runs the gate flagged. Each point also carries the
baseline it had on its own night, from :func:`~pathways_airflow.benchmark_history.compare` over
the runs recorded before it: the rule the gate applies, never a copy of it. Runs of another
engine were never compared with these and are left to that engine's view.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow.benchmark_history import (
    DEFAULT_MIN_RUNS,
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_WATCHED_METRICS,
    DEFAULT_WINDOW,
    LOWER,
    UNNAMED_RUN_ENGINE,
    Comparison,
    History,
    Row,
    Run,
    better_direction,
    compare,
    format_value,
    regression_limit,
    verdict,
)
from pathways_airflow.plots import date_labels, tick_positions

MAX_TICKS = 8


@dataclass(frozen=True)
class MetricPoint:
    """One run's value of one metric, at the run's place along x, with the baseline it had then."""

    position: int
    run_id: str
    value: float
    regressed: bool
    current: bool
    baseline_then: float | None
    status_then: str


@dataclass(frozen=True)
class MetricPanel:
    metric: str
    better: str
    title: str
    threshold_pct: float
    baseline: float | None
    limit: float | None
    """The band runs from ``baseline`` to ``limit``, the worse side; past ``limit`` is a regression."""
    band_note: str
    points: tuple[MetricPoint, ...]
    y_min: float
    y_max: float
    current_status: str | None


@dataclass(frozen=True)
class RunInfo:
    position: int
    run_id: str
    label: str
    when: str
    regressions: tuple[str, ...]
    checkpoint: str | None


@dataclass(frozen=True)
class BenchmarkView:
    has_history: bool
    message: str
    engine: str = UNNAMED_RUN_ENGINE
    engines: tuple[Mapping[str, Any], ...] = ()
    runs: tuple[RunInfo, ...] = ()
    ticks: tuple[int, ...] = ()
    panels: tuple[MetricPanel, ...] = ()
    verdict: str | None = None
    current_run_id: str | None = None
    current_label: str = "newest run"
    """What the ringed run is: the newest of the history, or this DAG's gated run with newer runs after it."""
    window: int = DEFAULT_WINDOW
    history_uri: str | None = None
    report_uri: str | None = None
    regressed_runs: int = 0


def rows_of(result: Any) -> tuple[Row, ...]:
    """The comparison rows a ``BenchmarkRegressionOperator`` result carries (malformed ones left out)."""
    if not isinstance(result, Mapping):
        return ()
    rows = []
    for item in result.get("rows") or ():
        try:
            rows.append(Row(**{f.name: item[f.name] for f in dataclasses.fields(Row)}))
        except (KeyError, TypeError):
            continue
    return tuple(rows)


def _baseline_then(history: History, index: int, metric: str, value: float, threshold: float, window: int, min_runs: int) -> Row:
    """The row the gate computed for run ``index`` of ``history``: against the runs recorded before it."""
    run = history.runs[index]
    earlier = History(history.runs[:index])
    return compare(
        {metric: value}, earlier, watched=[metric], threshold_pct=threshold, window=window,
        min_runs=min(min_runs, window), run_id=run.run_id, engine=run.engine,
    ).rows[0]


def _panel(metric: str, history: History, positions: Sequence[tuple[int, Run]], current_id: str | None,
           gate_row: Row | None, threshold: float, window: int, min_runs: int) -> MetricPanel:
    better = better_direction(metric)
    points = []
    for position, (index, run) in enumerate(positions):
        value = run.metrics.get(metric)
        if value is None:
            continue
        then = _baseline_then(history, index, metric, float(value), threshold, window, min_runs)
        points.append(MetricPoint(position, run.run_id, float(value), metric in run.regressions,
                                  run.run_id == current_id, then.baseline, then.status))
    current = next((p for p in points if p.current), None)
    baseline = gate_row.baseline if gate_row is not None else (current.baseline_then if current else None)
    limit = None if baseline is None else regression_limit(baseline, threshold, better)
    values = [p.value for p in points] + [v for v in (baseline, limit) if v is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.08 or abs(high) * 0.1 or 1.0
    sign = "+" if better == LOWER else "−"
    band_note = (
        f"baseline {format_value(baseline)}, band {sign}{threshold:g}% to {format_value(limit)}"
        if baseline is not None and limit is not None
        else f"no baseline yet (needs {min_runs} earlier run{'s' if min_runs != 1 else ''} of this engine): no band"
    )
    return MetricPanel(
        metric=metric,
        better=better,
        title=f"{metric} ({better} is better)",
        threshold_pct=threshold,
        baseline=baseline,
        limit=limit,
        band_note=band_note,
        points=tuple(points),
        y_min=low - pad,
        y_max=high + pad,
        current_status=gate_row.status if gate_row is not None else (current.status_then if current else None),
    )


def benchmark_view(
    history: History,
    latest: Mapping[str, Any] | None = None,
    *,
    latest_run_id: str | None = None,
    engine: str | None = None,
    window: int = DEFAULT_WINDOW,
    min_runs: int = DEFAULT_MIN_RUNS,
) -> BenchmarkView:
    """Every watched metric's history for one engine, judged as the gate judged it.

    ``latest`` is the newest ``BenchmarkRegressionOperator`` result (its ``rows`` name the
    watched metrics, their thresholds and the verdict); ``latest_run_id`` its DAG run. The
    engine shown is ``engine`` when the history has runs of it, else the latest run's.
    """
    gate_rows = rows_of(latest)
    uri = latest.get("history_uri") if isinstance(latest, Mapping) else None
    report = latest.get("report_uri") if isinstance(latest, Mapping) else None
    if not history.runs:
        return BenchmarkView(has_history=False, message="The benchmark history holds no runs yet.", history_uri=uri)
    current = (history.find(latest_run_id) if latest_run_id else None) or history.runs[-1]
    counts: dict[str, int] = {}
    for run in history.runs:
        counts[run.engine] = counts.get(run.engine, 0) + 1
    shown = engine if engine in counts else current.engine
    positions = [(i, run) for i, run in enumerate(history.runs) if run.engine == shown]
    current_id = current.run_id if current.engine == shown else positions[-1][1].run_id
    judged_here = current.engine == shown and current.run_id == current_id and bool(gate_rows)
    by_metric = {row.metric: row for row in gate_rows}
    present = {m for _, run in positions for m in run.metrics}
    watched = [row.metric for row in gate_rows] or [m for m in DEFAULT_WATCHED_METRICS if m in present]
    panels = tuple(
        _panel(
            metric, history, positions, current_id, by_metric.get(metric) if judged_here else None,
            by_metric[metric].threshold_pct if metric in by_metric else DEFAULT_THRESHOLD_PCT, window, min_runs,
        )
        for metric in watched
    )
    labels = date_labels([run.recorded_at for _, run in positions])
    runs = tuple(
        RunInfo(p, run.run_id, labels[p], run.recorded_at, run.regressions, run.checkpoint)
        for p, (_, run) in enumerate(positions)
    )
    said = verdict(Comparison(current_id, gate_rows, window, min_runs)) if judged_here else None
    newer = len(positions) - 1 - next(p for p, (_, run) in enumerate(positions) if run.run_id == current_id)
    return BenchmarkView(
        has_history=True,
        message=f"{len(positions)} run{'s' if len(positions) != 1 else ''} of {shown}",
        engine=shown,
        engines=tuple({"engine": name, "runs": n} for name, n in counts.items()),
        runs=runs,
        ticks=tick_positions(len(runs), MAX_TICKS),
        panels=panels,
        verdict=said,
        current_run_id=current_id,
        current_label="newest run" if not newer else f"this DAG's gated run ({newer} newer in the history)",
        window=window,
        history_uri=uri,
        report_uri=report,
        regressed_runs=sum(1 for _, run in positions if run.regressed),
    )



__all__ = ["BenchmarkView", "MetricPanel", "MetricPoint", "RunInfo", "benchmark_view", "rows_of"]
