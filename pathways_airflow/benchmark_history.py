"""The history of nightly inference benchmarks, and whether tonight's run regressed. Pure: no I/O.

A platform team benchmarks the newest serving checkpoint every night and wants to hear about it
when a metric it watches gets worse. One number compared with last night's is noise: a
benchmark's latency percentiles move by several percent from run to run. So each watched metric
is compared with a *baseline*: the median of the newest ``window`` earlier runs. Two rules keep
that baseline honest:

* A run flagged as regressed never counts towards a later baseline, so a regression that nobody
  fixed does not quietly become the new normal and let the next run pass.
* A run never counts towards its own baseline: a task retry records the same ``run_id`` again,
  and comparing a run with itself would always pass.

The history is a small versioned JSON document (:func:`history_from`, :func:`to_document`)
kept wherever the team looks, one entry per run::

    {"version": 1,
     "runs": [{"run_id": "scheduled__2025-06-01T00:00:00+00:00",
               "recorded_at": "2025-06-01T00:00:00+00:00",
               "metrics": {"request_throughput": 12.5, "p99_ttft_ms": 210.0, ...},
               "checkpoint": "gs://bucket/serving/checkpoints/0",
               "labels": {"model": "llama2-70b"},
               "engine": "jetstream",
               "regressions": []}]}

A run is only ever compared with runs of the same serving engine (``engine``): the same
checkpoint served by another engine is another baseline, and a switch of engine must not read as
a regression or hide one. Runs recorded without an engine were JetStream's, the only one then.

Which way is better follows the metric's name, as both engines' benchmarks name them:
``*_ms`` (latencies) are better lower, ``*_throughput`` better higher. Anything else has no
direction and cannot be watched.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HISTORY_VERSION = 1
HIGHER = "higher"
LOWER = "lower"

UNNAMED_RUN_ENGINE = "jetstream"
"""The engine of a run whose record or metrics name none."""

DEFAULT_WATCHED_METRICS: tuple[str, ...] = (
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
)
"""What a serving team looks at first: throughput, time to first token, time per output token."""
DEFAULT_THRESHOLD_PCT = 10.0
DEFAULT_WINDOW = 7
DEFAULT_MIN_RUNS = 1
DEFAULT_KEEP = 365
"""A year of nightly runs: enough for a trend, small enough (a few hundred kB) to rewrite each night."""

NO_BASELINE = "no baseline yet"
REGRESSED = "REGRESSED"
IMPROVED = "improved"
OK = "ok"


# --- which way is better -------------------------------------------------------------------------


def better_direction(metric: str) -> str:
    """``"lower"`` for latencies (``*_ms``), ``"higher"`` for throughputs (``*_throughput``).

    Anything else (``completed``, ``duration``, token totals) has no better side, so a change in
    it is not a regression; watching it is refused rather than guessed.
    """
    if metric.endswith("_ms"):
        return LOWER
    if metric.endswith("_throughput"):
        return HIGHER
    raise ValueError(
        f"metric {metric!r} cannot be watched: only latencies ending in _ms (lower is better) and "
        f"throughputs ending in _throughput (higher is better) have a better side; "
        f"for example {', '.join(DEFAULT_WATCHED_METRICS)}"
    )


# --- the history ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One recorded benchmark run.

    ``regressions`` names the watched metrics that regressed when the run was recorded; a run
    with any is left out of later baselines.
    """

    run_id: str
    recorded_at: str
    metrics: Mapping[str, float]
    checkpoint: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    regressions: tuple[str, ...] = ()
    engine: str = UNNAMED_RUN_ENGINE

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "recorded_at": self.recorded_at,
            "metrics": dict(self.metrics),
            "checkpoint": self.checkpoint,
            "labels": dict(self.labels),
            "engine": self.engine,
            "regressions": list(self.regressions),
        }


@dataclass(frozen=True)
class History:
    """Recorded runs, oldest first, in the order they were recorded; run ids are unique."""

    runs: tuple[Run, ...] = ()

    def __len__(self) -> int:
        return len(self.runs)

    def find(self, run_id: str) -> Run | None:
        return next((run for run in self.runs if run.run_id == run_id), None)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _run_from(index: int, entry: Any) -> Run:
    """One ``runs[index]`` entry, or a ``ValueError`` naming the entry and its bad field."""
    where = f"runs[{index}]"
    if not isinstance(entry, Mapping):
        raise ValueError(f"history {where}: expected an object, got {type(entry).__name__}")
    run_id = entry.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"history {where}.run_id={run_id!r}: must be a non-empty string")
    where = f"{where} (run_id {run_id!r})"
    recorded_at = entry.get("recorded_at")
    if not isinstance(recorded_at, str) or not _is_iso_datetime(recorded_at):
        raise ValueError(f"history {where}.recorded_at={recorded_at!r}: must be an ISO-8601 date and time")
    metrics = entry.get("metrics")
    if not isinstance(metrics, Mapping):
        raise ValueError(f"history {where}.metrics={metrics!r}: must be an object of metric name to number")
    for name, value in metrics.items():
        if not isinstance(name, str) or not _is_number(value):
            raise ValueError(f"history {where}.metrics.{name}={value!r}: must be a finite number")
    checkpoint = entry.get("checkpoint")
    if checkpoint is not None and not isinstance(checkpoint, str):
        raise ValueError(f"history {where}.checkpoint={checkpoint!r}: must be a string or null")
    labels = entry.get("labels", {})
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ValueError(f"history {where}.labels={labels!r}: must be an object of string to string")
    regressions = entry.get("regressions", [])
    if not isinstance(regressions, list) or not all(isinstance(m, str) for m in regressions):
        raise ValueError(f"history {where}.regressions={regressions!r}: must be a list of metric names")
    engine = entry.get("engine", UNNAMED_RUN_ENGINE)
    if not isinstance(engine, str) or not engine:
        raise ValueError(f"history {where}.engine={engine!r}: must be the serving engine's name")
    return Run(
        run_id=run_id,
        recorded_at=recorded_at,
        metrics=dict(metrics),
        checkpoint=checkpoint,
        labels=dict(labels),
        regressions=tuple(regressions),
        engine=engine,
    )


def _is_iso_datetime(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def history_from(document: Any) -> History:
    """The :class:`History` in a stored document; ``None`` (no document yet) is an empty history.

    Raises a ``ValueError`` naming the field (and run) that is wrong: the document is edited by
    hand now and then, and a silent repair could drop the runs the baseline depends on.
    """
    if document is None:
        return History()
    if not isinstance(document, Mapping):
        raise ValueError(f"history: expected a JSON object with 'version' and 'runs', got {type(document).__name__}")
    version = document.get("version")
    if version != HISTORY_VERSION:
        raise ValueError(f"history version={version!r}: this pathways-airflow reads version {HISTORY_VERSION}")
    entries = document.get("runs")
    if not isinstance(entries, list):
        raise ValueError(f"history runs={entries!r}: must be a list of runs")
    runs = tuple(_run_from(index, entry) for index, entry in enumerate(entries))
    seen: dict[str, int] = {}
    for index, run in enumerate(runs):
        if run.run_id in seen:
            raise ValueError(
                f"history runs[{index}].run_id={run.run_id!r}: already recorded at runs[{seen[run.run_id]}]; "
                "each run may appear once"
            )
        seen[run.run_id] = index
    return History(runs)


def to_document(history: History) -> dict[str, Any]:
    """The JSON document :func:`history_from` reads back."""
    return {"version": HISTORY_VERSION, "runs": [run.to_dict() for run in history.runs]}


def with_run(history: History, run: Run, keep: int = DEFAULT_KEEP) -> History:
    """``history`` with ``run`` recorded, keeping the newest ``keep`` runs.

    A run already recorded under the same ``run_id`` (an earlier try of the same task) is
    replaced where it stands, so a retry never counts a night twice.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep={keep!r}: must be an integer ≥ 1")
    if history.find(run.run_id) is not None:
        runs = tuple(run if r.run_id == run.run_id else r for r in history.runs)
    else:
        runs = (*history.runs, run)
    return History(runs[-keep:])


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a benchmark's result (what a run records); ``result_uri`` and the like are dropped."""
    return {name: value for name, value in metrics.items() if isinstance(name, str) and _is_number(value)}


# --- the comparison ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One watched metric of this run against its baseline."""

    metric: str
    current: float
    baseline: float | None
    baseline_runs: int
    change_pct: float | None
    """Signed change relative to the baseline: ``+31.2`` is 31.2 % above it, whichever way is better."""
    threshold_pct: float
    better: str
    regressed: bool
    status: str

    @property
    def worse_pct(self) -> float | None:
        """How much worse than the baseline, in percent (negative: better)."""
        if self.change_pct is None:
            return None
        return self.change_pct if self.better == LOWER else -self.change_pct

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "current": self.current,
            "baseline": self.baseline,
            "baseline_runs": self.baseline_runs,
            "change_pct": self.change_pct,
            "threshold_pct": self.threshold_pct,
            "better": self.better,
            "regressed": self.regressed,
            "status": self.status,
        }


@dataclass(frozen=True)
class Comparison:
    """Every watched metric of one run against the recent baseline."""

    run_id: str | None
    rows: tuple[Row, ...]
    window: int
    min_runs: int

    @property
    def regressions(self) -> tuple[str, ...]:
        return tuple(row.metric for row in self.rows if row.regressed)

    @property
    def regressed(self) -> bool:
        return any(row.regressed for row in self.rows)

    def row(self, metric: str) -> Row:
        for row in self.rows:
            if row.metric == metric:
                return row
        raise KeyError(metric)


def _checked_watched(watched: Any) -> tuple[str, ...]:
    if isinstance(watched, (str, bytes)) or not isinstance(watched, Iterable):
        raise ValueError(f"watched={watched!r}: must be a list of metric names such as {list(DEFAULT_WATCHED_METRICS)}")
    names = tuple(dict.fromkeys(watched))
    if not names:
        raise ValueError("watched=[]: name at least one metric to watch")
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"watched: {name!r} is not a metric name")
        better_direction(name)
    return names


def _checked_threshold(name: str, value: Any) -> float:
    if not _is_number(value) or value < 0:
        raise ValueError(f"{name}={value!r}: must be a percentage ≥ 0 (10 means 10 %)")
    return float(value)


def _checked_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r}: must be an integer ≥ 1")
    return value


def _change_pct(current: float, baseline: float) -> float | None:
    if baseline == 0:
        return 0.0 if current == 0 else None
    return (current - baseline) / abs(baseline) * 100.0


def baseline_values(
    history: History, metric: str, *, window: int, exclude_run_id: str | None = None, engine: str = UNNAMED_RUN_ENGINE
) -> list[float]:
    """The values the baseline of ``metric`` is the median of: newest ``window`` eligible runs, oldest first.

    Eligible: recorded before (not under ``exclude_run_id``), served by the same ``engine``, not
    flagged as regressed, and holding the metric.
    """
    eligible = [
        run.metrics[metric]
        for run in history.runs
        if run.run_id != exclude_run_id and run.engine == engine and not run.regressed and metric in run.metrics
    ]
    return eligible[-window:] if window else []


def regression_limit(baseline: float, threshold_pct: float, better: str) -> float:
    """The value past which a metric regresses: its baseline moved ``threshold_pct`` towards worse,
    relative to the baseline's size (as :func:`compare` measures a change)."""
    step = abs(baseline) * threshold_pct / 100.0
    return baseline + step if better == LOWER else baseline - step


def _row(metric: str, current: float, values: Sequence[float], threshold: float, min_runs: int) -> Row:
    better = better_direction(metric)
    if len(values) < min_runs or not values:
        return Row(metric, current, None, len(values), None, threshold, better, False, NO_BASELINE)
    baseline = float(statistics.median(values))
    change = _change_pct(current, baseline)
    if change is None:
        # A zero baseline: any move is infinitely many percent; only its side matters.
        worse = current > baseline if better == LOWER else current < baseline
        regressed = worse
        status = REGRESSED if worse else IMPROVED
        return Row(metric, current, baseline, len(values), None, threshold, better, regressed, status)
    worse_pct = change if better == LOWER else -change
    regressed = worse_pct > threshold
    status = REGRESSED if regressed else IMPROVED if -worse_pct > threshold else OK
    return Row(metric, current, baseline, len(values), change, threshold, better, regressed, status)


def compare(
    metrics: Mapping[str, Any],
    history: History,
    *,
    watched: Sequence[str] = DEFAULT_WATCHED_METRICS,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    thresholds: Mapping[str, float] | None = None,
    window: int = DEFAULT_WINDOW,
    min_runs: int = DEFAULT_MIN_RUNS,
    run_id: str | None = None,
    engine: str = UNNAMED_RUN_ENGINE,
) -> Comparison:
    """Compare this run's ``metrics`` with the baseline each watched metric has in ``history``.

    A metric regresses when it is worse than its baseline (the median over the newest ``window``
    earlier, unflagged runs that have it) by more than its threshold: ``thresholds[metric]`` if
    given, else ``threshold_pct``. Only runs of the same serving ``engine`` count. With fewer than
    ``min_runs`` such runs it has "no baseline yet" and cannot regress: the first nights (and the
    first nights after a change of engine) establish the history. ``run_id`` (this run's) is
    left out of its own baseline, so a retry compares against the same runs as the first try.

    Raises ``ValueError`` for a watched metric missing from ``metrics`` (or not a number), a
    metric without a better side, and bad thresholds or counts.
    """
    names = _checked_watched(watched)
    default_threshold = _checked_threshold("threshold_pct", threshold_pct)
    overrides = dict(thresholds or {})
    for name, value in overrides.items():
        if name not in names:
            raise ValueError(
                f"thresholds[{name!r}]: not a watched metric (a typo?); watched: {', '.join(names)}"
            )
        _checked_threshold(f"thresholds[{name!r}]", value)
    window = _checked_count("window", window)
    min_runs = _checked_count("min_runs", min_runs)
    if min_runs > window:
        raise ValueError(f"min_runs={min_runs} is more than window={window}: no metric could ever have a baseline")
    missing = [name for name in names if name not in metrics]
    if missing:
        raise ValueError(
            f"metrics: no {', '.join(missing)} (watched); the run has {', '.join(sorted(map(str, metrics))) or 'nothing'}"
        )
    for name in names:
        if not _is_number(metrics[name]):
            raise ValueError(f"metrics.{name}={metrics[name]!r}: must be a finite number")
    rows = tuple(
        _row(
            name,
            float(metrics[name]),
            baseline_values(history, name, window=window, exclude_run_id=run_id, engine=engine),
            float(overrides.get(name, default_threshold)),
            min_runs,
        )
        for name in names
    )
    return Comparison(run_id=run_id, rows=rows, window=window, min_runs=min_runs)


def run_record(
    comparison: Comparison,
    metrics: Mapping[str, Any],
    *,
    run_id: str,
    recorded_at: str,
    checkpoint: str | None = None,
    labels: Mapping[str, str] | None = None,
    engine: str = UNNAMED_RUN_ENGINE,
) -> Run:
    """The entry this run adds to the history, flagged with the metrics that regressed."""
    return Run(
        run_id=run_id,
        recorded_at=recorded_at,
        metrics=numeric_metrics(metrics),
        checkpoint=checkpoint,
        labels=dict(labels or {}),
        regressions=comparison.regressions,
        engine=engine,
    )


# --- what people read ----------------------------------------------------------------------------


def format_value(value: float) -> str:
    """A metric value at a precision a person compares by eye."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _pct(value: float) -> str:
    return f"{value:g}%"


def _change(row: Row) -> str:
    if row.change_pct is not None:
        return f"{row.change_pct:+.1f}%"
    if row.baseline is None:
        return "–"
    return "from 0"


def _regression_phrase(row: Row) -> str:
    return f"{row.metric} ({_change(row)} vs baseline, threshold {_pct(row.threshold_pct)})"


def verdict(comparison: Comparison) -> str:
    """``"no regression"``, or ``"REGRESSION in p99_ttft_ms (+31.2% vs baseline, threshold 10%)"``."""
    regressed = [row for row in comparison.rows if row.regressed]
    if regressed:
        return "REGRESSION in " + ", ".join(_regression_phrase(row) for row in regressed)
    waiting = [row.metric for row in comparison.rows if row.status == NO_BASELINE]
    if waiting and len(waiting) == len(comparison.rows):
        return "no regression (no baseline yet: this run starts the history)"
    if waiting:
        return f"no regression (no baseline yet for {', '.join(waiting)})"
    return "no regression"


def summary_line(comparison: Comparison) -> str:
    """One line for the task log: the verdict, and each watched metric's change."""
    parts = []
    for row in comparison.rows:
        if row.baseline is None:
            parts.append(f"{row.metric} {format_value(row.current)} (no baseline yet)")
        else:
            parts.append(f"{row.metric} {format_value(row.current)} ({_change(row)})")
    run = f"run {comparison.run_id}: " if comparison.run_id else ""
    return f"{run}{verdict(comparison)} — " + "; ".join(parts)


def _baseline_cell(row: Row, uniform: bool, min_runs: int) -> str:
    if row.baseline is None:
        return f"– ({row.baseline_runs} of {min_runs} runs needed)"
    return format_value(row.baseline) if uniform else f"{format_value(row.baseline)} (of {row.baseline_runs})"


def _status_cell(row: Row) -> str:
    return f"**{row.status}**" if row.regressed else row.status


def markdown_table(comparison: Comparison) -> str:
    """metric | this run | baseline (median of N) | change | threshold | status."""
    counts = {row.baseline_runs for row in comparison.rows if row.baseline is not None}
    uniform = len(counts) == 1
    baseline_header = f"baseline (median of {counts.pop()})" if uniform else "baseline (median of N)"
    lines = [
        f"| metric | this run | {baseline_header} | change | threshold | status |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in comparison.rows:
        better = "↓" if row.better == LOWER else "↑"
        lines.append(
            f"| {row.metric} ({better} better) | {format_value(row.current)} | {_baseline_cell(row, uniform, comparison.min_runs)} | "
            f"{_change(row)} | {_pct(row.threshold_pct)} | {_status_cell(row)} |"
        )
    return "\n".join(lines)


def report_markdown(comparison: Comparison, history: History, *, title: str, plot_file: str | None) -> str:
    """The run's report: heading, verdict, table, the history's length and the plot.

    ``history`` is the history with this run recorded, as the plot shows it.
    """
    run = history.find(comparison.run_id) if comparison.run_id else None
    lines = [f"# {title}", "", f"**{verdict(comparison)}**", ""]
    if run is not None:
        about = [f"Run `{run.run_id}`, recorded at {run.recorded_at}", f"served by {run.engine} (compared with its runs only)"]
        if run.checkpoint:
            about.append(f"checkpoint `{run.checkpoint}`")
        if run.labels:
            about.append("labels " + ", ".join(f"`{k}={v}`" for k, v in sorted(run.labels.items())))
        lines += ["; ".join(about) + ".", ""]
    lines += [markdown_table(comparison), ""]
    flagged = sum(1 for r in history.runs if r.regressed)
    lines.append(
        f"The history holds {len(history)} run{'s' if len(history) != 1 else ''} "
        f"({flagged} flagged as regressed, left out of baselines); the baseline is the median of up to "
        f"{comparison.window} earlier unflagged runs."
    )
    if plot_file is not None:
        lines += ["", f"![history of the watched metrics]({plot_file})"]
    lines.append("")
    return "\n".join(lines)


__all__ = [
    "DEFAULT_WATCHED_METRICS",
    "HISTORY_VERSION",
    "Comparison",
    "History",
    "Row",
    "Run",
    "baseline_values",
    "better_direction",
    "compare",
    "history_from",
    "markdown_table",
    "numeric_metrics",
    "report_markdown",
    "run_record",
    "summary_line",
    "to_document",
    "verdict",
    "with_run",
]
