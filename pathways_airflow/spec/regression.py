"""What a benchmark regression check is: its parameters, checked and resolved, and the words of its verdict. Pure.

``BenchmarkRegressionOperator`` turns its (rendered) parameters into a :class:`RegressionCheck`
here, before any GCS call; the history and the comparison themselves are
:mod:`pathways_airflow.benchmark_history`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pathways_airflow.benchmark_history import (
    UNNAMED_RUN_ENGINE,
    DEFAULT_KEEP,
    DEFAULT_MIN_RUNS,
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_WATCHED_METRICS,
    DEFAULT_WINDOW,
    Comparison,
    History,
    better_direction,
    compare,
    format_value,
)
from pathways_airflow.checkpoints import is_gcs, join, split_gcs_uri
from pathways_airflow.spec.arguments import storage_dir_problem
from pathways_airflow.spec.errors import SpecProblem, raise_if_any
from pathways_airflow.spec.workload import checked_flag, rendered_literal

REPORT_FILE = "report.md"
PLOT_FILE = "history.png"
REPORTS_DIR = "reports"

_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


# --- pure: parameters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegressionCheck:
    """Every parameter of one check, validated (:func:`resolve_check`)."""

    metrics: Mapping[str, Any]
    history_uri: str
    report_dir: str | None
    watched: tuple[str, ...] = DEFAULT_WATCHED_METRICS
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    thresholds: Mapping[str, float] = field(default_factory=dict)
    window: int = DEFAULT_WINDOW
    min_runs: int = DEFAULT_MIN_RUNS
    keep: int = DEFAULT_KEEP
    checkpoint: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    fail_on_regression: bool = True

    @property
    def engine(self) -> str:
        """The serving engine the metrics came from (the benchmark's result names it)."""
        named = self.metrics.get("engine")
        return named if isinstance(named, str) and named else UNNAMED_RUN_ENGINE

    def compare(self, history: History, run_id: str) -> Comparison:
        return compare(
            self.metrics,
            history,
            watched=self.watched,
            threshold_pct=self.threshold_pct,
            thresholds=self.thresholds,
            window=self.window,
            min_runs=self.min_runs,
            run_id=run_id,
            engine=self.engine,
        )


def _unset(value: Any) -> bool:
    """``None``, ``""`` and ``"None"`` (what a template renders an absent value to)."""
    return value is None or (isinstance(value, str) and value.strip() in ("", "None"))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:  # an int too large for a float: no metric or percentage is that
        return False


def _number(problems: list[SpecProblem], name: str, value: Any) -> float | None:
    """A percentage ≥ 0 from a number or the string a template renders it to."""
    parsed = value
    if isinstance(value, str):
        try:
            parsed = float(value.strip().rstrip("%"))
        except (ValueError, OverflowError):
            parsed = None
    if not _is_finite(parsed) or parsed < 0:
        problems.append(SpecProblem(name, value, "must be a percentage ≥ 0 (10 means 10 %)"))
        return None
    return float(parsed)


def _count(problems: list[SpecProblem], name: str, value: Any) -> int | None:
    parsed = value
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,18}\s*", value):
        parsed = int(value.strip())
    if isinstance(parsed, bool) or not isinstance(parsed, int) or parsed < 1:
        problems.append(SpecProblem(name, value, "must be an integer ≥ 1"))
        return None
    return parsed


def parse_metrics(problems: list[SpecProblem], value: Any) -> Mapping[str, Any] | None:
    """InferenceBenchmarkOperator's metrics: a dict, or the JSON / Python literal a template made of it."""
    data = rendered_literal(value) if isinstance(value, str) else value
    if _unset(data):
        problems.append(SpecProblem("metrics", value, "no metrics given (did the benchmark task return nothing?)"))
        return None
    if not isinstance(data, Mapping):
        reason = "must be the dict InferenceBenchmarkOperator returns ({'request_throughput': ..., ...}) or its JSON"
        problems.append(SpecProblem("metrics", value, reason))
        return None
    return data


def parse_watched(problems: list[SpecProblem], value: Any) -> tuple[str, ...] | None:
    """Metric names: a list, its JSON / literal, or ``"a, b"``; each must have a better side."""
    data = value
    if isinstance(value, str):
        data = rendered_literal(value)
        if isinstance(data, str):
            data = [part.strip() for part in data.split(",") if part.strip()]
    if not isinstance(data, (list, tuple)) or not data or not all(isinstance(n, str) for n in data):
        reason = f"must be a non-empty list of metric names such as {list(DEFAULT_WATCHED_METRICS)}"
        problems.append(SpecProblem("watched_metrics", value, reason))
        return None
    for name in data:
        try:
            better_direction(name)
        except ValueError as error:
            problems.append(SpecProblem("watched_metrics", value, str(error)))
            return None
    return tuple(dict.fromkeys(data))


def parse_thresholds(problems: list[SpecProblem], value: Any, watched: Sequence[str] | None) -> dict[str, float]:
    """Per-metric thresholds in percent; a key that is not watched is most likely a typo."""
    if _unset(value):
        return {}
    data = rendered_literal(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        problems.append(SpecProblem("thresholds", value, "must be a mapping such as {'p99_ttft_ms': 20}"))
        return {}
    parsed: dict[str, float] = {}
    for name, threshold in data.items():
        if watched is not None and name not in watched:
            reason = f"{name!r} is not a watched metric (a typo?)"
            problems.append(SpecProblem("thresholds", value, reason, tuple(watched)))
            continue
        number = _number(problems, f"thresholds[{name!r}]", threshold)
        if number is not None:
            parsed[name] = number
    return parsed


def parse_checkpoint(problems: list[SpecProblem], value: Any) -> str | None:
    """What checkpoint the run served: a URI, or CheckpointConversionOperator's ``{"uri", ...}``."""
    data = rendered_literal(value) if isinstance(value, str) and value.strip().startswith("{") else value
    if _unset(data):
        return None
    if isinstance(data, Mapping):
        data = data.get("uri") or data.get("items_uri")
    if not isinstance(data, str) or not data.strip():
        reason = "must be a checkpoint URI or CheckpointConversionOperator's result ({'uri': ...})"
        problems.append(SpecProblem("checkpoint", value, reason))
        return None
    return data.strip()


def parse_labels(problems: list[SpecProblem], value: Any) -> dict[str, str]:
    """Free-form ``{name: value}`` recorded with the run (model, image tag, …); scalars become strings."""
    if _unset(value):
        return {}
    data = rendered_literal(value) if isinstance(value, str) else value
    ok = isinstance(data, Mapping) and all(
        isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in data.items()
    )
    if not ok:
        problems.append(SpecProblem("labels", value, "must be a mapping of strings, such as {'model': 'llama2-70b'}"))
        return {}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def _gcs_object_problem(name: str, value: Any, what: str) -> SpecProblem | None:
    if not isinstance(value, str) or not is_gcs(value) or any(c.isspace() or c in "*?[" for c in value):
        return SpecProblem(name, value, f"must be gs://BUCKET/PATH {what}")
    try:
        bucket, path = split_gcs_uri(value)
    except ValueError:
        return SpecProblem(name, value, f"must be gs://BUCKET/PATH {what}")
    if not path.strip("/") or value.endswith("/"):
        return SpecProblem(name, value, f"must be gs://BUCKET/PATH {what}; it names no object")
    return None


def _report_dir_problem(value: Any) -> SpecProblem | None:
    if value is None:
        return None
    return storage_dir_problem("report_dir", value, reason="must be a gs://BUCKET/PATH prefix or an absolute local directory")


def resolve_check(
    *,
    metrics: Any,
    history_uri: Any,
    report_dir: Any = None,
    watched_metrics: Any = DEFAULT_WATCHED_METRICS,
    threshold_pct: Any = DEFAULT_THRESHOLD_PCT,
    thresholds: Any = None,
    window: Any = DEFAULT_WINDOW,
    min_runs: Any = DEFAULT_MIN_RUNS,
    keep: Any = DEFAULT_KEEP,
    checkpoint: Any = None,
    labels: Any = None,
    fail_on_regression: Any = True,
) -> RegressionCheck:
    """Check every parameter and return the :class:`RegressionCheck`.

    Raises one ``InvalidWorkloadSpec`` (a ``ValueError``) listing every problem, each naming its field.
    """
    problems: list[SpecProblem] = []
    parsed_metrics = parse_metrics(problems, metrics)
    problem = _gcs_object_problem("history_uri", history_uri, "of the history JSON object")
    if problem:
        problems.append(problem)
    report = None if _unset(report_dir) else report_dir
    problem = _report_dir_problem(report)
    if problem:
        problems.append(problem)
    watched = parse_watched(problems, watched_metrics)
    threshold = _number(problems, "threshold_pct", threshold_pct)
    per_metric = parse_thresholds(problems, thresholds, watched)
    window_n = _count(problems, "window", window)
    min_n = _count(problems, "min_runs", min_runs)
    keep_n = _count(problems, "keep", keep)
    if window_n is not None and min_n is not None and min_n > window_n:
        problems.append(SpecProblem("min_runs", min_runs, f"is more than window={window_n}: no baseline could ever form"))
    if keep_n is not None and window_n is not None and keep_n < window_n:
        problems.append(SpecProblem("keep", keep, f"is less than window={window_n}: the baseline needs that many runs kept"))
    recorded_checkpoint = parse_checkpoint(problems, checkpoint)
    run_labels = parse_labels(problems, labels)
    fail = checked_flag(problems, "fail_on_regression", fail_on_regression)
    if parsed_metrics is not None and watched is not None:
        missing = [name for name in watched if name not in parsed_metrics]
        if missing:
            have = ", ".join(sorted(map(str, parsed_metrics))) or "nothing"
            reason = f"has no {', '.join(missing)} (watched); it has {have}"
            problems.append(SpecProblem("metrics", _short(metrics), reason))
        bad = [name for name in watched if name in parsed_metrics and not _is_finite(parsed_metrics[name])]
        if bad:
            reason = f"{bad[0]}={parsed_metrics[bad[0]]!r} is not a number"
            problems.append(SpecProblem("metrics", _short(metrics), reason))
    raise_if_any(problems)
    assert parsed_metrics is not None and watched is not None and threshold is not None
    assert window_n is not None and min_n is not None and keep_n is not None and fail is not None
    return RegressionCheck(
        metrics=dict(parsed_metrics),
        history_uri=history_uri,
        report_dir=(report.rstrip("/") or "/") if report else None,
        watched=watched,
        threshold_pct=threshold,
        thresholds=per_metric,
        window=window_n,
        min_runs=min_n,
        keep=keep_n,
        checkpoint=recorded_checkpoint,
        labels=run_labels,
        fail_on_regression=fail,
    )


def _short(value: Any, limit: int = 200) -> Any:
    text = repr(value)
    return value if len(text) <= limit else text[:limit] + "…"


def run_id_path_segment(run_id: str) -> str:
    """A run id as one path segment: ``scheduled__2025-06-01T00:00:00+00:00`` → ``scheduled__2025-06-01T00_00_00_00_00``."""
    return _UNSAFE_PATH_CHARS.sub("_", run_id).strip("._") or "run"


def default_report_dir(history_uri: str, run_id: str) -> str:
    """``<the history's directory>/reports/<run id>``: next to the history, one directory per run."""
    directory = history_uri.rsplit("/", 1)[0]
    return join(directory, REPORTS_DIR, run_id_path_segment(run_id))


def recorded_at(context: Mapping[str, Any]) -> str:
    """When the run counts as having happened, in UTC: the DAG run's logical date, else now.

    The logical date keeps a retry (or a backfill) on the night it was for.
    """
    when = context.get("logical_date")
    if when is None:
        return dt.datetime.now(dt.timezone.utc).isoformat()
    if getattr(when, "tzinfo", None) is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromtimestamp(when.timestamp(), dt.timezone.utc).isoformat()


def regression_message(comparison: Comparison, *, history_uri: str, report_uri: str) -> str:
    """What the failed task says: each regressed metric with its numbers, and where to look."""
    lines = [f"benchmark regression in run {comparison.run_id}:"]
    for row in comparison.rows:
        if not row.regressed:
            continue
        change = f"{row.change_pct:+.1f}%" if row.change_pct is not None else "from a baseline of 0"
        baseline = format_value(row.baseline) if row.baseline is not None else "–"
        lines.append(
            f"  - {row.metric}: {format_value(row.current)} vs baseline {baseline} "
            f"(median of {row.baseline_runs} runs), {change}, threshold {row.threshold_pct:g}% "
            f"({row.better} is better)"
        )
    lines.append(
        f"The run is recorded in {history_uri}, flagged as regressed, so later baselines leave it out. "
        f"Report: {report_uri}"
    )
    return "\n".join(lines)



TEMPLATED_STAND_INS: dict[str, Any] = {
    "metrics": {},
    "history_uri": "gs://bucket/history.json",
    "report_dir": None,
    "watched_metrics": DEFAULT_WATCHED_METRICS,
    "threshold_pct": DEFAULT_THRESHOLD_PCT,
    "thresholds": None,
    "window": DEFAULT_WINDOW,
    "min_runs": DEFAULT_MIN_RUNS,
    "keep": DEFAULT_KEEP,
    "checkpoint": None,
    "labels": None,
    "fail_on_regression": True,
}
"""Stand-ins for templated parameters when checking the literal ones at DAG parse time."""
