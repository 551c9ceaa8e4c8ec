"""A PNG of the benchmark history, for the regression report.

One small-multiples figure: a panel per watched metric, runs in the order they were recorded
along x (labelled with their dates), the metric along y. Runs flagged as regressed in that
metric are red, so a reader sees at once whether a jump is new or has been there for a week;
the current run is ringed.

matplotlib is imported inside the function, on its Agg (file-only) backend through its object
API rather than ``pyplot``: importing the provider's operators stays cheap for the DAG
processor, and no global figure state is shared between tasks of one worker. It is an optional
dependency (``pip install 'pathways-airflow[plots]'``, with numpy and pillow): an Airflow image
without it still gets every report, only without the PNG.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from pathways_airflow.benchmark_history import History, better_direction

PANEL_WIDTH_IN = 4.2
PANEL_HEIGHT_IN = 2.6
COLUMNS = 2
DPI = 100
MAX_DATE_TICKS = 6
NORMAL_COLOR = "#1f77b4"
REGRESSED_COLOR = "#d62728"
CURRENT_COLOR = "#111111"
INSTALL_HINT = "pip install 'pathways-airflow[plots]'"


def plots_available() -> bool:
    """Whether matplotlib can be imported (asked when a report is written, never at DAG parse)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _date_label(recorded_at: str) -> str:
    """``2025-06-01T00:00:00+00:00`` → ``06-01``: enough to place a nightly run."""
    date = recorded_at[:10]
    return date[5:] if len(date) == 10 else recorded_at


def _tick_positions(count: int) -> list[int]:
    if count <= MAX_DATE_TICKS:
        return list(range(count))
    step = math.ceil((count - 1) / (MAX_DATE_TICKS - 1))
    positions = list(range(0, count, step))
    if positions[-1] != count - 1:
        positions.append(count - 1)
    return positions


def _panel_title(metric: str) -> str:
    try:
        return f"{metric} ({better_direction(metric)} is better)"
    except ValueError:
        return metric


def history_plot_png(
    history: History,
    metrics: Sequence[str],
    *,
    title: str,
    current_run_id: str | None = None,
) -> bytes:
    """The history of ``metrics`` as a PNG.

    ``current_run_id`` is ringed (default: the newest run). Runs without a metric leave a gap in
    its panel. The PNG carries no software version or timestamp, so the same history always
    renders to the same bytes on one matplotlib version.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(dict.fromkeys(metrics))
    if not names:
        raise ValueError("history_plot_png: no metrics to plot")
    runs = history.runs
    current = current_run_id if current_run_id is not None else (runs[-1].run_id if runs else None)
    columns = min(COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    figure = Figure(figsize=(PANEL_WIDTH_IN * columns, PANEL_HEIGHT_IN * rows + 0.6), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False)
    positions = list(range(len(runs)))
    ticks = _tick_positions(len(runs))
    for index, name in enumerate(names):
        ax = axes[index // columns][index % columns]
        values = [run.metrics.get(name, math.nan) for run in runs]
        ax.plot(positions, values, color=NORMAL_COLOR, linewidth=1.2, marker="o", markersize=3, zorder=2)
        flagged = [(i, v) for i, (run, v) in enumerate(zip(runs, values)) if name in run.regressions]
        if flagged:
            ax.scatter(
                [i for i, _ in flagged],
                [v for _, v in flagged],
                color=REGRESSED_COLOR,
                s=28,
                zorder=3,
                label="regressed",
            )
        for i, (run, value) in enumerate(zip(runs, values)):
            if run.run_id == current and not math.isnan(value):
                ax.scatter(
                    [i],
                    [value],
                    s=90,
                    facecolors="none",
                    edgecolors=CURRENT_COLOR,
                    linewidths=1.5,
                    zorder=4,
                    label="this run",
                )
        ax.set_title(_panel_title(name), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        if runs:
            ax.set_xticks(ticks)
            ax.set_xticklabels([_date_label(runs[i].recorded_at) for i in ticks])
            ax.set_xlim(-0.5, len(runs) - 0.5)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    for index in range(len(names), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


__all__ = ["history_plot_png"]
