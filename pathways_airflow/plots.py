"""A PNG of the benchmark history, for the regression report.

One small-multiples figure: a panel per watched metric, runs in the order they were recorded
along x (labelled with their dates), the metric along y. What a reader needs to judge tonight's
run is on the panel itself:

* **The baseline and the threshold band.** The line is the baseline this run was compared with
  (the median the comparison computed); the shaded band runs from it to the threshold on the
  *worse* side only, so a point inside the band is "worse, but within tolerance" and a point past
  it is a regression. A metric with no baseline yet has no band, and its panel says so: an empty
  panel must not look like a passing one.
* **The engine.** Runs are only ever compared with runs of the same serving engine, so the
  current run's engine is in the title and runs of other engines are drawn hollow and grey,
  off the line: they are history, not baseline.
* **Dates that tell runs apart.** Nightly runs read ``MM-DD``; as soon as two runs share a date
  (a manual rerun, a backfill) every label gains the time, so no two ticks read the same.

Runs flagged as regressed in a metric are red, so a reader sees at once whether a jump is new or
has been there for a week; the current run is ringed.

The figure's content is computed by :func:`plot_panels`, a pure function with no matplotlib in
it, and only drawn by :func:`history_plot_png`: what the plot shows is tested without decoding
pixels, and the drawing holds no decisions. Baselines and thresholds are taken from the
:class:`~pathways_airflow.benchmark_history.Comparison` the operator already made, never
recomputed here, so the picture cannot disagree with the verdict.

matplotlib is imported inside the function, on its Agg (file-only) backend through its object
API rather than ``pyplot``: importing the provider's operators stays cheap for the DAG
processor, and no global figure state is shared between tasks of one worker. It is an optional
dependency (``pip install 'pathways-airflow[plots]'``, with numpy and pillow): an Airflow image
without it still gets every report, only without the PNG.
"""

from __future__ import annotations

import datetime as dt
import io
import math
from dataclasses import dataclass

from pathways_airflow.benchmark_history import (
    LOWER,
    UNNAMED_RUN_ENGINE,
    Comparison,
    History,
    Row,
    Run,
    format_value,
    regression_limit,
)

PANEL_WIDTH_IN = 4.2
PANEL_HEIGHT_IN = 2.8
LEGEND_AND_TITLE_IN = 1.0
COLUMNS = 2
DPI = 100
MAX_DATE_TICKS = 6
NORMAL_COLOR = "#1f77b4"
REGRESSED_COLOR = "#d62728"
CURRENT_COLOR = "#111111"
OTHER_ENGINE_COLOR = "#9a9a9a"
BASELINE_COLOR = "#2ca02c"
BAND_COLOR = "#ff7f0e"
INSTALL_HINT = "pip install 'pathways-airflow[plots]'"

DATE_FORMATS = ("%m-%d", "%m-%d %H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S")
"""Tick labels, shortest first; the first that gives every run its own label is used."""

BASELINE_LABEL = "baseline this run was compared with"
BAND_LABEL = "threshold band (worse side)"
REGRESSED_LABEL = "regressed"
CURRENT_LABEL = "this run"


def plots_available() -> bool:
    """Whether matplotlib can be imported (asked when a report is written, never at DAG parse)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


# --- what the figure shows (pure) ----------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One run's value in a panel, at the run's place along x."""

    position: int
    value: float
    run_id: str
    engine: str


@dataclass(frozen=True)
class Band:
    """The baseline a metric was compared with and the edge of its tolerance on the worse side."""

    baseline: float
    limit: float
    """Past this value the metric regresses: above the baseline for latencies, below it for throughputs."""
    threshold_pct: float
    baseline_runs: int

    @property
    def low(self) -> float:
        return min(self.baseline, self.limit)

    @property
    def high(self) -> float:
        return max(self.baseline, self.limit)


@dataclass(frozen=True)
class Panel:
    """Everything one metric's panel shows.

    ``line`` holds every run of the current engine, in order, with ``nan`` where a run lacks the
    metric (a gap in the line, not a fall to zero). ``regressed`` are those flagged in this
    metric; ``other_engines`` the runs that were never compared with this one.
    """

    metric: str
    better: str
    title: str
    band: Band | None
    line: tuple[Point, ...]
    regressed: tuple[Point, ...]
    other_engines: tuple[Point, ...]
    current: Point | None


@dataclass(frozen=True)
class HistoryPlot:
    """The whole figure: title, the engine compared, the x axis and a panel per watched metric."""

    title: str
    engine: str
    other_engines: tuple[str, ...]
    labels: tuple[str, ...]
    """One date label per run, in history order; distinct whenever the runs' times are."""
    ticks: tuple[int, ...]
    panels: tuple[Panel, ...]

    @property
    def other_engine_label(self) -> str:
        return f"{', '.join(self.other_engines)} (other engine, not compared)"


def band_of(row: Row) -> Band | None:
    """The band of a compared metric; ``None`` while it has no baseline.

    The limit is the baseline moved by the threshold towards worse, measured (as the comparison
    measures a change) relative to the baseline's size.
    """
    if row.baseline is None:
        return None
    return Band(row.baseline, regression_limit(row.baseline, row.threshold_pct, row.better), row.threshold_pct, row.baseline_runs)


def _moment(recorded_at: str) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(recorded_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(dt.timezone.utc) if when.tzinfo is not None else when


def date_labels(recorded: list[str]) -> tuple[str, ...]:
    """A label per run: ``MM-DD`` while every run has its own day, more as soon as two share one.

    The same format is used for every label so the axis reads evenly; a timestamp that does not
    parse is shown as written.
    """
    moments = [_moment(text) for text in recorded]
    labels: list[str] = []
    for form in DATE_FORMATS:
        labels = [when.strftime(form) if when is not None else text for when, text in zip(moments, recorded)]
        if len(set(labels)) == len(labels):
            break
    return tuple(labels)


def tick_positions(count: int, most: int = MAX_DATE_TICKS) -> tuple[int, ...]:
    """At most ``most`` evenly spaced runs, always the first and the newest."""
    if count <= most:
        return tuple(range(count))
    step = math.ceil((count - 1) / (most - 1))
    positions = list(range(0, count, step))
    if positions[-1] != count - 1:
        if count - 1 - positions[-1] < step / 2:
            positions.pop()
        positions.append(count - 1)
    return tuple(positions)


def _current_run(history: History, comparison: Comparison) -> Run | None:
    if comparison.run_id is not None:
        found = history.find(comparison.run_id)
        if found is not None:
            return found
    return history.runs[-1] if history.runs else None


def _panel_title(row: Row, band: Band | None, min_runs: int) -> str:
    head = f"{row.metric} ({row.better} is better)"
    if band is None:
        return f"{head}\nno baseline yet ({row.baseline_runs} of {min_runs} runs needed): no band"
    sign = "+" if row.better == LOWER else "−"
    return (
        f"{head}\nbaseline {format_value(band.baseline)} (median of {band.baseline_runs}), "
        f"band {sign}{band.threshold_pct:g}% to {format_value(band.limit)}"
    )


def _panel(row: Row, runs: tuple[Run, ...], engine: str, current_id: str | None, min_runs: int) -> Panel:
    line: list[Point] = []
    regressed: list[Point] = []
    others: list[Point] = []
    current: Point | None = None
    for position, run in enumerate(runs):
        value = run.metrics.get(row.metric)
        point = Point(position, math.nan if value is None else float(value), run.run_id, run.engine)
        if run.engine != engine:
            if value is not None:
                others.append(point)
            continue
        line.append(point)
        if value is None:
            continue
        if row.metric in run.regressions:
            regressed.append(point)
        if run.run_id == current_id:
            current = point
    band = band_of(row)
    return Panel(
        metric=row.metric,
        better=row.better,
        title=_panel_title(row, band, min_runs),
        band=band,
        line=tuple(line),
        regressed=tuple(regressed),
        other_engines=tuple(others),
        current=current,
    )


def plot_panels(history: History, comparison: Comparison, *, title: str) -> HistoryPlot:
    """What :func:`history_plot_png` draws: a panel per row of ``comparison``, over ``history``.

    ``history`` is the history with the compared run recorded (as the operator writes it);
    the current run is ``comparison.run_id``, else the newest run, and its engine is the one
    whose runs make the line. Raises ``ValueError`` for a comparison without rows.
    """
    if not comparison.rows:
        raise ValueError("history_plot_png: no metrics to plot")
    runs = history.runs
    current = _current_run(history, comparison)
    engine = current.engine if current is not None else UNNAMED_RUN_ENGINE
    current_id = current.run_id if current is not None else None
    others = tuple(dict.fromkeys(run.engine for run in runs if run.engine != engine))
    return HistoryPlot(
        title=f"{title} · engine: {engine}",
        engine=engine,
        other_engines=others,
        labels=date_labels([run.recorded_at for run in runs]),
        ticks=tick_positions(len(runs)),
        panels=tuple(_panel(row, runs, engine, current_id, comparison.min_runs) for row in comparison.rows),
    )


# --- drawing -------------------------------------------------------------------------------------


def _draw_panel(ax, panel: Panel, plot: HistoryPlot) -> None:
    """One panel, from its data alone; every label here is one the figure's legend collects."""
    if panel.band is not None:
        band = panel.band
        ax.axhspan(band.low, band.high, color=BAND_COLOR, alpha=0.18, linewidth=0, zorder=0, label=BAND_LABEL)
        ax.axhline(band.baseline, color=BASELINE_COLOR, linewidth=1.2, linestyle="--", zorder=1, label=BASELINE_LABEL)
    if panel.line:
        ax.plot(
            [p.position for p in panel.line],
            [p.value for p in panel.line],
            color=NORMAL_COLOR,
            linewidth=1.2,
            marker="o",
            markersize=3,
            zorder=2,
            label=f"{plot.engine} runs",
        )
    if panel.other_engines:
        ax.scatter(
            [p.position for p in panel.other_engines],
            [p.value for p in panel.other_engines],
            s=22,
            facecolors="none",
            edgecolors=OTHER_ENGINE_COLOR,
            linewidths=1.0,
            zorder=2,
            label=plot.other_engine_label,
        )
    if panel.regressed:
        ax.scatter(
            [p.position for p in panel.regressed],
            [p.value for p in panel.regressed],
            color=REGRESSED_COLOR,
            s=28,
            zorder=3,
            label=REGRESSED_LABEL,
        )
    if panel.current is not None:
        ax.scatter(
            [panel.current.position],
            [panel.current.value],
            s=90,
            facecolors="none",
            edgecolors=CURRENT_COLOR,
            linewidths=1.5,
            zorder=4,
            label=CURRENT_LABEL,
        )
    ax.set_title(panel.title, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    if plot.labels:
        ax.set_xticks(list(plot.ticks))
        ax.set_xticklabels([plot.labels[i].replace(" ", "\n") for i in plot.ticks])
        ax.set_xlim(-0.5, len(plot.labels) - 0.5)


def history_plot_png(history: History, comparison: Comparison, *, title: str) -> bytes:
    """The history of the metrics ``comparison`` watched, with its baselines and bands, as a PNG.

    See :func:`plot_panels` for what is shown. The legend is the figure's, below the panels, so
    it never covers a point. The PNG carries no software version or timestamp, so the same
    history and comparison always render to the same bytes on one matplotlib version.
    """
    plot = plot_panels(history, comparison, title=title)

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    columns = min(COLUMNS, len(plot.panels))
    rows = math.ceil(len(plot.panels) / columns)
    size = (PANEL_WIDTH_IN * columns, PANEL_HEIGHT_IN * rows + LEGEND_AND_TITLE_IN)
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False)
    for index, panel in enumerate(plot.panels):
        _draw_panel(axes[index // columns][index % columns], panel, plot)
    for index in range(len(plot.panels), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    legend: dict[str, object] = {}
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    if legend:
        figure.legend(
            list(legend.values()),
            list(legend),
            loc="outside lower center",
            ncols=min(3, len(legend)),
            fontsize=7,
            frameon=False,
        )
    figure.suptitle(plot.title, fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


__all__ = [
    "Band",
    "HistoryPlot",
    "Panel",
    "Point",
    "band_of",
    "date_labels",
    "history_plot_png",
    "plot_panels",
    "tick_positions",
]
