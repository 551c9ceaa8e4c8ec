"""``BenchmarkRegressionOperator``: record tonight's benchmark, compare it with recent runs, fail on a regression.

It follows ``InferenceBenchmarkOperator`` in a nightly DAG. It keeps the run history as one JSON
object in GCS (:mod:`pathways_airflow.benchmark_history` describes it and the comparison), and
writes a report next to it (``report.md``: verdict and table; ``history.png``: the plot).

Three things it guarantees:

* **Nothing is lost to a concurrent run.** The history is read with its generation and written
  back only if that generation is still current (``if_generation_match``; 0 when it does not
  exist yet). When another run wrote in between, read, compare and write start over.
* **A retry is not a second run.** The entry is keyed by the DAG run's ``run_id``: a retry
  replaces it and is compared with the same earlier runs as the first try.
* **A regression is recorded before the task fails,** flagged so that later baselines leave it
  out, and the failure (:class:`~pathways_airflow.exceptions.BenchmarkRegressionError`) is not
  retried by Airflow: the same numbers would fail again.

Every parameter is checked before any GCS call, at DAG parse time for literal values and after
templating for the rest, and the buckets are checked to exist before anything is written.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.spec.arguments import looks_templated
from pathways_airflow.benchmark_history import (
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
    history_from,
    markdown_table,
    report_markdown,
    run_record,
    summary_line,
    to_document,
    with_run,
)
from pathways_airflow.checkpoints import is_gcs, join, split_gcs_uri
from pathways_airflow.exceptions import BadSpecError, BenchmarkRegressionError, PathwaysError
from pathways_airflow.spec.errors import SpecProblem, raise_if_any
from pathways_airflow.spec.workload import checked_flag, rendered_literal

if TYPE_CHECKING:
    from airflow.sdk import Context

REPORT_FILE = "report.md"
PLOT_FILE = "history.png"
REPORTS_DIR = "reports"
WRITE_ATTEMPTS = 5
"""Read-compare-write rounds before giving up on a history other runs keep changing."""

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
    reason = "must be a gs://BUCKET/PATH prefix or an absolute local directory"
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n*?["):
        return SpecProblem("report_dir", value, reason)
    if is_gcs(value):
        try:
            split_gcs_uri(value)
        except ValueError:
            return SpecProblem("report_dir", value, reason)
        return None
    if not os.path.isabs(value):
        return SpecProblem("report_dir", value, reason)
    return None


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


# --- I/O -----------------------------------------------------------------------------------------


class _HistoryChanged(Exception):
    """Another writer changed the history between our read and our write."""


@dataclass(frozen=True)
class StoredHistory:
    """The history as read, and the generation to write it back over (0: it does not exist yet)."""

    history: History
    generation: int


class BenchmarkRegressionOperator(BaseOperator):
    """Record an inference benchmark run in a GCS history, compare it with recent runs, and fail on a regression.

    :param metrics: the metrics ``InferenceBenchmarkOperator`` returns (pass its ``.output``); a
        dict, or the JSON / Python-literal string a template renders it to.
    :param history_uri: ``gs://BUCKET/PATH/history.json``: the history object (created on the first run).
    :param report_dir: where ``report.md`` and ``history.png`` go: a ``gs://`` prefix or an absolute
        local directory (default ``<history's directory>/reports/<run_id>``).
    :param watched_metrics: metrics that can regress; latencies (``*_ms``, lower is better) and
        throughputs (``*_throughput``, higher is better). Default: request and output throughput,
        median and p99 time to first token, median time per output token.
    :param threshold_pct: how much worse than the baseline, in percent, is a regression (default 10).
    :param thresholds: per-metric overrides, such as ``{"p99_ttft_ms": 25}`` (p99s are noisier).
    :param window: the baseline is the median over the newest ``window`` earlier runs not flagged as regressed.
    :param min_runs: fewer such runs than this: "no baseline yet", and the metric cannot regress.
    :param keep: runs kept in the history (the newest).
    :param checkpoint: the serving checkpoint benchmarked, recorded with the run: a URI or
        ``CheckpointConversionOperator``'s result.
    :param labels: ``{name: value}`` recorded with the run (model, image tag, …).
    :param gcp_conn_id: the Google connection for GCS.
    :param fail_on_regression: fail the task on a regression (default True); otherwise only report it.

    Returns ``{"regressed", "regressions", "rows", "history_uri", "report_uri", "plot_uri",
    "runs_in_history"}``; on a regression it is also pushed as the XCom before the task fails,
    for a downstream notification with ``trigger_rule="all_done"``.
    """

    template_fields: Sequence[str] = (
        "metrics",
        "history_uri",
        "report_dir",
        "watched_metrics",
        "threshold_pct",
        "thresholds",
        "window",
        "min_runs",
        "keep",
        "checkpoint",
        "labels",
        "fail_on_regression",
    )
    template_fields_renderers = {
        "metrics": "json",
        "watched_metrics": "py",
        "thresholds": "json",
        "checkpoint": "py",
        "labels": "json",
    }
    ui_color = "#ffe0b2"

    def __init__(
        self,
        *,
        metrics: Mapping[str, Any] | str,
        history_uri: str,
        report_dir: str | None = None,
        watched_metrics: Sequence[str] | str = DEFAULT_WATCHED_METRICS,
        threshold_pct: float | str = DEFAULT_THRESHOLD_PCT,
        thresholds: Mapping[str, float] | str | None = None,
        window: int | str = DEFAULT_WINDOW,
        min_runs: int | str = DEFAULT_MIN_RUNS,
        keep: int | str = DEFAULT_KEEP,
        checkpoint: str | Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        fail_on_regression: bool | str = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.metrics = metrics
        self.history_uri = history_uri
        self.report_dir = report_dir
        self.watched_metrics = watched_metrics
        self.threshold_pct = threshold_pct
        self.thresholds = thresholds
        self.window = window
        self.min_runs = min_runs
        self.keep = keep
        self.checkpoint = checkpoint
        self.labels = labels
        self.gcp_conn_id = gcp_conn_id
        self.fail_on_regression = fail_on_regression
        self.validate(only_known=True)

    # --- pure questions -------------------------------------------------------------------------

    def _arguments(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.template_fields}

    def validate(self, *, only_known: bool = False) -> None:
        """Raise ``InvalidWorkloadSpec`` for any bad parameter; with ``only_known``, templated ones wait."""

        arguments = self._arguments()
        if only_known:
            templated = {name for name, value in arguments.items() if looks_templated(value)}
            for name in templated:
                arguments[name] = _DEFAULTS[name]
            if templated & {"metrics", "watched_metrics"}:
                # Whether the metrics hold every watched one is known only once both are rendered.
                watched = parse_watched([], arguments["watched_metrics"]) or ()
                arguments["metrics"] = {name: 1.0 for name in watched}
        resolve_check(**arguments)

    def check(self) -> RegressionCheck:
        """The parameters as rendered, validated."""
        return resolve_check(**self._arguments())

    # --- running --------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        check = self.check()
        run_id = context.get("run_id") or context["ti"].run_id
        when = recorded_at(context)
        report_dir = check.report_dir or default_report_dir(check.history_uri, run_id)
        report_uri, plot_uri = join(report_dir, REPORT_FILE), join(report_dir, PLOT_FILE)
        written_plot: str | None = None
        client = self._storage()
        try:
            self._require_buckets(client, check.history_uri, report_dir)
            comparison, history = self._record(client, check, run_id, when)
            title = f"Inference benchmark: {context['ti'].dag_id} / {self.task_id}"
            written_plot = self._write_report(client, comparison, history, check, title, report_uri, plot_uri)
        finally:
            client.close()

        self.log.info("%s", summary_line(comparison))
        self.log.info("benchmark history %s (%d runs):\n%s", check.history_uri, len(history), markdown_table(comparison))
        self.log.info("report: %s (plot: %s)", report_uri, written_plot or "none")
        result = {
            "regressed": comparison.regressed,
            "regressions": list(comparison.regressions),
            "rows": [row.to_dict() for row in comparison.rows],
            "history_uri": check.history_uri,
            "report_uri": report_uri,
            "plot_uri": written_plot,
            "runs_in_history": len(history),
        }
        if comparison.regressed and check.fail_on_regression:
            context["ti"].xcom_push(key="return_value", value=result)
            raise BenchmarkRegressionError(
                regression_message(comparison, history_uri=check.history_uri, report_uri=report_uri),
                regressions=comparison.regressions,
                report_uri=report_uri,
                result=result,
            )
        return result

    def _storage(self) -> Any:
        from pathways_airflow.hooks.storage import storage_client

        return storage_client(self.gcp_conn_id)

    def _require_buckets(self, client: Any, history_uri: str, report_dir: str) -> None:
        """Fail before writing anything when a bucket is missing: no run of this task could create it.

        A credential that may write objects but not read bucket metadata (403) is given the benefit
        of the doubt; the write itself will say what is wrong.
        """
        from google.api_core.exceptions import Forbidden

        uris = [history_uri] + ([report_dir] if is_gcs(report_dir) else [])
        for bucket in dict.fromkeys(split_gcs_uri(uri)[0] for uri in uris):
            try:
                exists = client.bucket(bucket).exists()
            except Forbidden:
                continue
            if not exists:
                field_name = "history_uri" if split_gcs_uri(history_uri)[0] == bucket else "report_dir"
                raise BadSpecError(
                    f"{field_name}: bucket gs://{bucket} does not exist (or this connection, {self.gcp_conn_id!r}, "
                    "cannot see it); create it or fix the URI. Nothing was written."
                )

    def _record(self, client: Any, check: RegressionCheck, run_id: str, when: str) -> tuple[Comparison, History]:
        """Read, compare and write the history, again from the top whenever another writer got there first."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

        retrying = Retrying(
            retry=retry_if_exception_type(_HistoryChanged),
            stop=stop_after_attempt(WRITE_ATTEMPTS),
            wait=wait_random_exponential(multiplier=0.2, max=3.0),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    stored = self._read_history(client, check.history_uri)
                    comparison = check.compare(stored.history, run_id)
                    record = run_record(
                        comparison,
                        check.metrics,
                        run_id=run_id,
                        recorded_at=when,
                        checkpoint=check.checkpoint,
                        labels=check.labels,
                    )
                    updated = with_run(stored.history, record, keep=check.keep)
                    self._write_history(client, check.history_uri, updated, stored.generation)
                    return comparison, updated
        except _HistoryChanged:
            raise PathwaysError(
                f"{check.history_uri} changed under this task {WRITE_ATTEMPTS} times in a row (other runs writing "
                "it); this run was not recorded. A retry of the task will try again."
            ) from None
        raise AssertionError("unreachable")

    def _read_history(self, client: Any, uri: str) -> StoredHistory:
        """The history and its generation, both of the same version of the object."""
        from google.api_core.exceptions import NotFound, PreconditionFailed

        bucket, name = split_gcs_uri(uri)
        blob = client.bucket(bucket).get_blob(name)
        if blob is None:
            return StoredHistory(History(), 0)
        try:
            data = blob.download_as_bytes(if_generation_match=blob.generation)
        except (PreconditionFailed, NotFound):
            raise _HistoryChanged() from None
        try:
            history = history_from(json.loads(data))
        except ValueError as error:
            raise BadSpecError(
                f"{uri} (generation {blob.generation}) is not a benchmark history this operator can read: {error}. "
                "Fix the object (or move it away to start a new history); nothing was written."
            ) from None
        return StoredHistory(history, int(blob.generation))

    def _write_history(self, client: Any, uri: str, history: History, generation: int) -> None:
        from google.api_core.exceptions import PreconditionFailed

        bucket, name = split_gcs_uri(uri)
        text = json.dumps(to_document(history), indent=1, sort_keys=True)
        try:
            client.bucket(bucket).blob(name).upload_from_string(
                text, content_type="application/json", if_generation_match=generation
            )
        except PreconditionFailed:
            self.log.info("%s changed since it was read (another run wrote it); reading it again", uri)
            raise _HistoryChanged() from None

    def _write_report(
        self,
        client: Any,
        comparison: Comparison,
        history: History,
        check: RegressionCheck,
        title: str,
        report_uri: str,
        plot_uri: str,
    ) -> str | None:
        """Write the report and, where matplotlib is installed, the plot; the plot's URI or ``None``."""
        from pathways_airflow.plots import INSTALL_HINT, history_plot_png, plots_available

        with_plot = plots_available()
        markdown = report_markdown(comparison, history, title=title, plot_file=PLOT_FILE if with_plot else None)
        _write(client, report_uri, markdown.encode(), "text/markdown; charset=utf-8")
        if not with_plot:
            self.log.warning("%s not written: matplotlib is not installed (%s adds it)", PLOT_FILE, INSTALL_HINT)
            return None
        png = history_plot_png(history, check.watched, title=title, current_run_id=comparison.run_id)
        _write(client, plot_uri, png, "image/png")
        return plot_uri


_DEFAULTS: dict[str, Any] = {
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


def _write(client: Any, uri: str, data: bytes, content_type: str) -> None:
    """Write a report file to GCS or to a local directory (atomically: a reader never sees half a PNG)."""
    if is_gcs(uri):
        bucket, name = split_gcs_uri(uri)
        client.bucket(bucket).blob(name).upload_from_string(data, content_type=content_type)
        return
    directory = os.path.dirname(uri)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, uri)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


__all__ = [
    "BenchmarkRegressionOperator",
    "RegressionCheck",
    "default_report_dir",
    "recorded_at",
    "regression_message",
    "resolve_check",
]
