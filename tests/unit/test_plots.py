"""The history plot (pathways_airflow.plots): a real PNG, one panel per metric, regressions in red."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

from pathways_airflow.benchmark_history import DEFAULT_WATCHED_METRICS, History, Run, with_run
from pathways_airflow.plots import history_plot_png

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METRICS = {"request_throughput": 12.0, "output_throughput": 1450.0, "median_ttft_ms": 110.0, "p99_ttft_ms": 300.0, "median_tpot_ms": 21.0}


def nights(count: int, *, regressed_at: int | None = None) -> History:
    history = History()
    for n in range(1, count + 1):
        flagged = n == regressed_at
        metrics = {**METRICS, "p99_ttft_ms": 900.0 if flagged else 300.0 + n}
        run = Run(f"scheduled__2025-06-{n:02d}", f"2025-06-{n:02d}T00:00:00+00:00", metrics, regressions=("p99_ttft_ms",) if flagged else ())
        history = with_run(history, run)
    return history


def decode(png: bytes) -> np.ndarray:
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")


def red_pixels(image: np.ndarray) -> int:
    red, green, blue = image[..., 0], image[..., 1], image[..., 2]
    return int(((red > 0.75) & (green < 0.3) & (blue < 0.3)).sum())


def test_the_plot_is_a_png_with_a_panel_per_metric():
    png = history_plot_png(nights(10), DEFAULT_WATCHED_METRICS, title="Nightly llama2-7b")

    assert png.startswith(PNG_MAGIC)
    image = decode(png)
    one = decode(history_plot_png(nights(10), ["p99_ttft_ms"], title="one"))
    # Five panels in two columns: three rows of panels, two columns.
    assert image.shape[0] > 2.5 * one.shape[0] and image.shape[1] == 2 * one.shape[1]


def test_regressed_runs_are_red_and_steady_ones_are_not():
    steady = decode(history_plot_png(nights(8), ["p99_ttft_ms"], title="t"))
    flagged = decode(history_plot_png(nights(8, regressed_at=5), ["p99_ttft_ms"], title="t"))

    assert red_pixels(steady) == 0
    assert red_pixels(flagged) > 20


def test_the_same_history_renders_to_the_same_bytes():
    history = nights(6, regressed_at=3)
    assert history_plot_png(history, DEFAULT_WATCHED_METRICS, title="t") == history_plot_png(history, DEFAULT_WATCHED_METRICS, title="t")


@pytest.mark.parametrize("count", [0, 1, 40])
def test_empty_single_and_long_histories_render(count):
    assert decode(history_plot_png(nights(count), DEFAULT_WATCHED_METRICS, title="t")).size > 0


def test_a_run_without_the_metric_leaves_a_gap():
    history = with_run(nights(3), Run("partial", "2025-06-04T00:00:00+00:00", {"request_throughput": 12.0}))
    assert history_plot_png(history, ["p99_ttft_ms", "request_throughput"], title="t").startswith(PNG_MAGIC)


def test_no_metrics_is_an_error():
    with pytest.raises(ValueError, match="no metrics"):
        history_plot_png(nights(2), [], title="t")


def test_importing_the_operators_does_not_import_matplotlib():
    code = (
        "import sys, pathways_airflow.operators, pathways_airflow.operators.regression, pathways_airflow.plots; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
