"""What each example DAG file costs a real dag-processor, beyond a DAG file that imports only ``airflow.sdk``.

``import_cost.py`` times DAG files in fresh interpreters; a deployment parses them in
``airflow dag-processor``, whose parent process imports each file's top-level ``airflow.*``
imports once and then forks a child per parse (``airflow/dag_processing/processor.py``,
``_pre_import_airflow_modules`` and ``DagFileProcessorProcess.start``). What a parse costs there
is what the dag-processor records itself: ``last_parse_duration`` of the ``dag`` table, the
seconds from the fork to the result's collection (``airflow/dag_processing/manager.py``,
``handle_parsing_result``; ``airflow/dag_processing/collection.py`` stores it).

For each variant, ``--repeats`` runs of ``airflow dag-processor --num-runs`` (one parsing process,
files parsed back to back; the variants take turns) parse copies of ``dags/*.py`` and a trivial
DAG file that imports only ``airflow.sdk``, each in an ``AIRFLOW_HOME`` of its own; the script
reads every parse's duration from the metadata database while it runs. The first parse of each
file in each dag-processor is not counted (it writes the ``.pyc`` files). A file's figure is the
median of its pooled parses minus the trivial file's: a median, because a recorded duration now
and then carries up to one second of the manager's loop (``manager.py``: the loop sleeps up to
``poll_time``, and a child whose sockets closed before it could be reaped is only collected on the
next turn, ``processor.py`` ``is_ready``). The variants:

* ``without_pre_import_line``: the DAG files with the line ``import
  airflow.providers.google.assets.gcs`` removed (how they were before it was added): each parse
  with a ``gs://`` Asset imports the google provider's URI handler in the child;
* ``as_shipped``: the DAG files as they are; the dag-processor's parent imports the handler once
  and every child inherits it;
* ``as_shipped_no_pre_import`` (not in ``--quick``): as shipped with ``[dag_processor]
  parsing_pre_import_modules = False``, the setting the line relies on.

    python benchmarks/dag_processor_cost.py --json benchmarks/results/dag_processor_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
PRE_IMPORT_LINE = "import airflow.providers.google.assets.gcs"
TRIVIAL_FILE = "dag_processor_cost_trivial.py"
TRIVIAL_DAG = '''"""A DAG file that imports only airflow.sdk: the baseline each example DAG file is measured against."""

from airflow.sdk import DAG, task

with DAG("dag_processor_cost_trivial", schedule=None):

    @task
    def noop() -> None:
        """Nothing: the DAG only has to exist."""

    noop()
'''
VARIANTS: dict[str, dict[str, Any]] = {
    "without_pre_import_line": {"drop_pre_import_line": True, "pre_import_modules": True},
    "as_shipped": {"drop_pre_import_line": False, "pre_import_modules": True},
    "as_shipped_no_pre_import": {"drop_pre_import_line": False, "pre_import_modules": False},
}
QUICK_VARIANTS = ("without_pre_import_line", "as_shipped")


def base_environment(pycache: Path) -> dict[str, str]:
    """The environment every Airflow process here shares; ``.pyc`` files go to ``pycache``.

    A prefix of its own keeps the figures independent of what the virtualenv holds: the uncounted
    first parse of each file writes the bytecode the counted ones read, as on a deployment
    installed with compiled bytecode.
    """
    env = dict(os.environ)
    for name in [n for n in env if n.startswith("AIRFLOW__") or n == "AIRFLOW_HOME"]:
        del env[name]
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    return env


def migrated_database(workdir: Path, env: dict[str, str]) -> Path:
    """One migrated metadata database, which each dag-processor starts from a copy of: one migration for the whole run."""
    home = workdir / "template"
    home.mkdir()
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env={**env, "AIRFLOW_HOME": str(home)}, cwd=home, check=True, capture_output=True, text=True,
    )
    return home / "airflow.db"


def dags_folder(target: Path, dag_files: list[Path], *, drop_pre_import_line: bool) -> None:
    """Copies of ``dag_files`` and the trivial DAG file; ``drop_pre_import_line`` gives the files as they were before it."""
    target.mkdir(parents=True)
    for path in dag_files:
        text = path.read_text()
        if drop_pre_import_line:
            text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(PRE_IMPORT_LINE))
        (target / path.name).write_text(text)
    (target / TRIVIAL_FILE).write_text(TRIVIAL_DAG)


def read_parses(database: Path, seen: dict[str, list[float]], keys: set[tuple[str, float]]) -> None:
    """Adds each parse recorded since the last read; a file's DAGs share one duration per parse."""
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as connection:
            rows = connection.execute(
                "SELECT relative_fileloc, last_parse_duration FROM dag WHERE last_parse_duration IS NOT NULL"
            ).fetchall()
    except sqlite3.OperationalError:  # locked by a write in progress, or the table not written yet
        return
    for relative_fileloc, duration in rows:
        if (relative_fileloc, duration) not in keys:
            keys.add((relative_fileloc, duration))
            seen.setdefault(relative_fileloc, []).append(duration)


def parent_rss_mb(process: psutil.Process) -> float:
    """The dag-processor's own resident memory: what it pre-imports, every forked child starts with."""
    try:
        return process.memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def run_dag_processor(home: Path, env: dict[str, str], num_runs: int, timeout: float) -> tuple[dict[str, list[float]], float]:
    """Every parse's ``last_parse_duration``, per file, of one ``airflow dag-processor --num-runs``; and its peak RSS (MB)."""
    database = home / "airflow.db"
    seen: dict[str, list[float]] = {}
    peak_rss = 0.0
    keys: set[tuple[str, float]] = set()
    log = (home / "dag-processor.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow", "dag-processor", "--num-runs", str(num_runs)],
        env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT,
    )
    parent = psutil.Process(process.pid)
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"dag-processor still running after {timeout:.0f} s; see {home / 'dag-processor.log'}")
            read_parses(database, seen, keys)
            peak_rss = max(peak_rss, parent_rss_mb(parent))
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    read_parses(database, seen, keys)
    if process.returncode != 0:
        raise RuntimeError(f"dag-processor exited {process.returncode}; see {home / 'dag-processor.log'}")
    return seen, peak_rss


def summarize(parses: dict[str, list[float]]) -> dict[str, Any]:
    """Per file: the counted parses, their median, and the median beyond the trivial file's."""
    trivial = statistics.median(parses[TRIVIAL_FILE]) if parses.get(TRIVIAL_FILE) else None
    trivial_min = min(parses[TRIVIAL_FILE]) if parses.get(TRIVIAL_FILE) else None
    files: dict[str, Any] = {}
    for name, durations in sorted(parses.items()):
        median = statistics.median(durations) if durations else None
        files[name] = {
            "parse_s": [round(d, 3) for d in durations],
            "parse_s_median": round(median, 3) if median is not None else None,
            "beyond_trivial_s_median": round(median - trivial, 3) if median is not None and trivial is not None else None,
            # The fastest parses carry the least of the manager's loop: a floor, next to the median.
            "beyond_trivial_s_min": round(min(durations) - trivial_min, 3) if durations and trivial_min is not None else None,
        }
    return {"trivial_parse_s_median": round(trivial, 3) if trivial is not None else None, "files": files}


def run_variant(
    name: str, home: Path, database: Path, env: dict[str, str], dag_files: list[Path], runs: int, timeout: float
) -> dict[str, Any]:
    """One dag-processor over the variant's DAG folder in ``home``: ``runs`` counted parses of each file.

    The first parse of each file is dropped: it compiles the ``.pyc`` files the others read.
    """
    settings = VARIANTS[name]
    home.mkdir()
    shutil.copy(database, home / "airflow.db")
    dags_folder(home / "dags", dag_files, drop_pre_import_line=settings["drop_pre_import_line"])
    variant_env = {
        **env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        # One child at a time on a 2-core machine: no parse waits for a core another parse holds.
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "0",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PRE_IMPORT_MODULES": str(settings["pre_import_modules"]),
    }
    began = time.monotonic()
    parses, peak_rss = run_dag_processor(home, variant_env, runs + 1, timeout)
    return {
        "wall_s": time.monotonic() - began,
        "peak_rss_mb": peak_rss,
        "parses": {file: durations[1:] for file, durations in parses.items()},
    }


def measure_variants(
    variants: tuple[str, ...], workdir: Path, env: dict[str, str], dag_files: list[Path], runs: int, repeats: int, timeout: float
) -> dict[str, Any]:
    """``repeats`` dag-processors per variant, the variants taking turns, so a slow minute of the machine
    falls on all of them rather than on one; each variant's parses are pooled."""
    database = migrated_database(workdir, env)
    pooled: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    rss: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(repeats):
        for name in variants:
            one = run_variant(name, workdir / f"{name}-{repeat}", database, env, dag_files, runs, timeout)
            for file, durations in one["parses"].items():
                pooled[name].setdefault(file, []).extend(durations)
            walls[name].append(round(one["wall_s"], 1))
            rss[name].append(round(one["peak_rss_mb"], 1))
    return {
        name: {
            "settings": VARIANTS[name],
            "dag_processors_wall_s": walls[name],
            "dag_processor_peak_rss_mb_median": round(statistics.median(rss[name]), 1),
            **summarize(pooled[name]),
        }
        for name in variants
    }


def print_table(report: dict[str, Any]) -> None:
    variants = list(report["variants"])
    print(f"parse duration beyond {TRIVIAL_FILE}, s: median (and fastest); the trivial file's own median below")
    print(f"{'file':<45}" + "".join(f"{v:>26}" for v in variants))
    names = sorted({f for v in report["variants"].values() for f in v["files"]} - {TRIVIAL_FILE})
    for file in names:
        rows = [report["variants"][v]["files"].get(file, {}) for v in variants]
        cells = [f"{r['beyond_trivial_s_median']:.3f} (min {r['beyond_trivial_s_min']:.3f})" if r else "-" for r in rows]
        print(f"{file:<45}" + "".join(f"{c:>26}" for c in cells))
    trivial = [report["variants"][v]["trivial_parse_s_median"] for v in variants]
    print(f"{TRIVIAL_FILE + ' (absolute)':<45}" + "".join(f"{c:>26.3f}" if c is not None else f"{'-':>26}" for c in trivial))
    rss = [report["variants"][v]["dag_processor_peak_rss_mb_median"] for v in variants]
    print(f"{'dag-processor peak RSS, MB':<45}" + "".join(f"{c:>26.1f}" for c in rss))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="counted parses of each file per dag-processor")
    parser.add_argument("--repeats", type=int, default=3, help="dag-processors per variant")
    parser.add_argument("--quick", action="store_true", help="a smoke run: one dag-processor per variant, 1 counted parse, one DAG file, two variants")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one dag-processor may take")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    runs, repeats = (1, 1) if args.quick else (args.runs, args.repeats)
    dag_files = sorted((REPO / "dags").glob("*.py"))
    if args.quick:
        dag_files = [p for p in dag_files if PRE_IMPORT_LINE in p.read_text()][:1]
    variants = QUICK_VARIANTS if args.quick else tuple(VARIANTS)

    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0], "airflow": metadata.version("apache-airflow")},
        "runs": runs,
        "repeats": repeats,
        "variants": {},
    }
    with tempfile.TemporaryDirectory(prefix="dag-processor-cost-") as tmp:
        workdir = Path(tmp)
        env = base_environment(workdir / "pycache")
        report["variants"] = measure_variants(variants, workdir, env, dag_files, runs, repeats, args.timeout)

    print_table(report)
    report["targets"] = {}
    for name, variant in report["variants"].items():
        beyond = [row["beyond_trivial_s_median"] for file, row in variant["files"].items() if file != TRIVIAL_FILE]
        report["targets"][f"each_dag_le_0.3s_beyond_airflow_sdk {name}"] = bool(beyond) and all(
            b is not None and b <= 0.3 for b in beyond
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
