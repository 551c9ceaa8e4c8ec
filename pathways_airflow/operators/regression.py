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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.benchmark_history import (
    DEFAULT_KEEP,
    DEFAULT_MIN_RUNS,
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_WATCHED_METRICS,
    DEFAULT_WINDOW,
    Comparison,
    History,
    history_from,
    markdown_table,
    report_markdown,
    run_record,
    summary_line,
    to_document,
    with_run,
)
from pathways_airflow.checkpoints import join, split_gcs_uri
from pathways_airflow.exceptions import BadSpecError, BenchmarkRegressionError, PathwaysError
from pathways_airflow.hooks.storage import (
    ObjectChanged,
    missing_buckets,
    read_with_generation,
    opened_storage,
    write_file,
    write_if_generation,
)
from pathways_airflow.operators.lineage import ReportsLineage, regression_rule
from pathways_airflow.spec.arguments import looks_templated
from pathways_airflow.spec.regression import (
    TEMPLATED_STAND_INS,
    PLOT_FILE,
    REPORT_FILE,
    RegressionCheck,
    default_report_dir,
    parse_watched,
    recorded_at,
    regression_message,
    resolve_check,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

WRITE_ATTEMPTS = 5
"""Read-compare-write rounds before giving up on a history other runs keep changing."""


@dataclass(frozen=True)
class StoredHistory:
    """The history as read, and the generation to write it back over (0: it does not exist yet)."""

    history: History
    generation: int


class BenchmarkRegressionOperator(ReportsLineage, BaseOperator):
    """Record an inference benchmark run in a GCS history, compare it with recent runs, and fail on a regression.

    :param metrics: the metrics ``InferenceBenchmarkOperator`` returns (pass its ``.output``); a
        dict, or the JSON / Python-literal string a template renders it to. Its ``engine`` (the
        serving engine; JetStream when absent) is recorded, and runs are compared only with runs
        of the same engine.
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
    lineage_rule = regression_rule

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
                arguments[name] = TEMPLATED_STAND_INS[name]
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
        with opened_storage(self.gcp_conn_id) as client:
            self._require_buckets(client, check.history_uri, report_dir)
            comparison, history = self._record(client, check, run_id, when)
            title = f"Inference benchmark: {context['ti'].dag_id} / {self.task_id}"
            written_plot = self._write_report(client, comparison, history, title, report_uri, plot_uri)

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
            context["ti"].xcom_push(key="return_value", value=self.reported(result))
            raise BenchmarkRegressionError(
                regression_message(comparison, history_uri=check.history_uri, report_uri=report_uri),
                regressions=comparison.regressions,
                report_uri=report_uri,
                result=result,
            )
        return self.reported(result)

    def _require_buckets(self, client: Any, history_uri: str, report_dir: str) -> None:
        """Fail before writing anything when a bucket is missing: no run of this task could create it."""
        for bucket in missing_buckets(client, [history_uri, report_dir]):
            field_name = "history_uri" if split_gcs_uri(history_uri)[0] == bucket else "report_dir"
            raise BadSpecError(
                f"{field_name}: bucket gs://{bucket} does not exist (or this connection, {self.gcp_conn_id!r}, "
                "cannot see it); create it or fix the URI. Nothing was written."
            )

    def _record(self, client: Any, check: RegressionCheck, run_id: str, when: str) -> tuple[Comparison, History]:
        """Read, compare and write the history, again from the top whenever another writer got there first."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

        retrying = Retrying(
            retry=retry_if_exception_type(ObjectChanged),
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
                        engine=check.engine,
                    )
                    updated = with_run(stored.history, record, keep=check.keep)
                    self._write_history(client, check.history_uri, updated, stored.generation)
                    return comparison, updated
        except ObjectChanged:
            raise PathwaysError(
                f"{check.history_uri} changed under this task {WRITE_ATTEMPTS} times in a row (other runs writing "
                "it); this run was not recorded. A retry of the task will try again."
            ) from None
        raise AssertionError("unreachable")

    def _read_history(self, client: Any, uri: str) -> StoredHistory:
        """The history and its generation, both of the same version of the object."""
        data, generation = read_with_generation(client, uri)
        if data is None:
            return StoredHistory(History(), 0)
        try:
            history = history_from(json.loads(data))
        except ValueError as error:
            raise BadSpecError(
                f"{uri} (generation {generation}) is not a benchmark history this operator can read: {error}. "
                "Fix the object (or move it away to start a new history); nothing was written."
            ) from None
        return StoredHistory(history, generation)

    def _write_history(self, client: Any, uri: str, history: History, generation: int) -> None:
        text = json.dumps(to_document(history), indent=1, sort_keys=True)
        try:
            write_if_generation(client, uri, text, "application/json", generation)
        except ObjectChanged:
            self.log.info("%s changed since it was read (another run wrote it); reading it again", uri)
            raise

    def _write_report(
        self,
        client: Any,
        comparison: Comparison,
        history: History,
        title: str,
        report_uri: str,
        plot_uri: str,
    ) -> str | None:
        """Write the report and, where matplotlib is installed, the plot; the plot's URI or ``None``."""
        from pathways_airflow.plots import INSTALL_HINT, history_plot_png, plots_available

        with_plot = plots_available()
        markdown = report_markdown(comparison, history, title=title, plot_file=PLOT_FILE if with_plot else None)
        write_file(client, report_uri, markdown.encode(), "text/markdown; charset=utf-8")
        if not with_plot:
            self.log.warning("%s not written: matplotlib is not installed (%s adds it)", PLOT_FILE, INSTALL_HINT)
            return None
        png = history_plot_png(history, comparison, title=title)
        write_file(client, plot_uri, png, "image/png")
        return plot_uri


__all__ = [
    "BenchmarkRegressionOperator",
    "RegressionCheck",
    "StoredHistory",
    "default_report_dir",
    "recorded_at",
    "regression_message",
    "resolve_check",
]
