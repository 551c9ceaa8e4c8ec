"""What importing the provider costs a DAG file, beyond ``airflow.sdk``, against the anchors.

Every DAG file the DAG processor parses pays for its imports, in every parse. For each target,
``--runs`` fresh interpreters each import ``airflow.sdk`` and then the target, timing both; the
figure is the median time of the target's import on top of ``airflow.sdk``:

* ours: ``from pathways_airflow.operators import ...`` and ``from pathways_airflow.sensors
  import ...`` (every public class, as DAG files write it);
* the anchors: ``airflow.providers.cncf.kubernetes.operators.job`` and
  ``airflow.providers.google.cloud.operators.kubernetes_engine``;
* each example DAG (``dags/*.py``): executing the file (imports and DAG construction); also
  with the google provider's ``gs://`` asset URI handler counted in the baseline, since any DAG
  declaring a ``gs://`` Asset loads it, whatever provider it uses.

``-X importtime`` of our import (modules loaded after ``airflow.sdk``) says where the time goes.

Every figure is taken twice: **with bytecode** (each interpreter reads ``.pyc`` files, as an
install made with compiled bytecode — ``scripts/setup-env``, pip's default, Airflow's images —
gives every DAG processor) and **without** (every module compiled from source on each import, as
in a virtualenv installed without bytecode and run with ``PYTHONDONTWRITEBYTECODE=1``). Both use a
``PYTHONPYCACHEPREFIX`` of their own, so neither depends on what the virtualenv holds: with
bytecode, the uncounted warm-up run writes the ``.pyc`` files the counted runs read; without, none
is ever written.

    python benchmarks/import_cost.py --json benchmarks/results/import_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

OURS = (
    "from pathways_airflow.operators import *\n"
    "import pathways_airflow.operators as _o, pathways_airflow.sensors as _s\n"
    "[getattr(_o, _n) for _n in _o.__all__]; [getattr(_s, _n) for _n in _s.__all__]"
)
TARGETS = {
    "pathways_airflow.operators + .sensors": OURS,
    "airflow.providers.cncf.kubernetes.operators.job": "import airflow.providers.cncf.kubernetes.operators.job",
    "airflow.providers.google.cloud.operators.kubernetes_engine": "import airflow.providers.google.cloud.operators.kubernetes_engine",
}
OURS_TARGET = "pathways_airflow.operators + .sensors"
GS_ASSET_HANDLER = "airflow.providers.google.assets.gcs"
TIMER = """
import sys, time, json
began = time.perf_counter()
import airflow.sdk
for name in filter(None, sys.argv[2].split(",")):
    __import__(name)
sdk = time.perf_counter() - began
began = time.perf_counter()
error = None
try:
    exec(compile(sys.argv[1], "<target>", "exec"), {"__name__": "__bench__"})
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"sdk": sdk, "extra": time.perf_counter() - began, "error": error}))
"""
DAG_RUNNER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[3])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
"""


BYTECODE_MODES = ("with_pyc", "without_pyc")


def environment(bytecode: str = "with_pyc") -> dict[str, str]:
    """The interpreters' environment; ``bytecode`` says whether they may read (and write) ``.pyc`` files."""
    env = dict(os.environ)
    env.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="import-cost-home-"))
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix=f"import-cost-{bytecode}-")
    if bytecode == "with_pyc":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def time_once(code: str, env: dict[str, str], extra_args: list[str] | None = None, baseline: str = "") -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", TIMER, code, baseline, *(extra_args or [])], capture_output=True, text=True, env=env, cwd=REPO, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(
    code: str, runs: int, env: dict[str, str], extra_args: list[str] | None = None, baseline: str = "", warm: bool = True
) -> dict[str, Any]:
    """``baseline``: modules imported after ``airflow.sdk`` and counted with it (comma-separated)."""
    if warm:
        time_once(code, env, extra_args, baseline)  # warm the bytecode caches; not counted
    samples = [time_once(code, env, extra_args, baseline) for _ in range(runs)]
    return {
        "extra_s_median": round(statistics.median(s["extra"] for s in samples), 3),
        "extra_s": [round(s["extra"], 3) for s in samples],
        "airflow_sdk_s_median": round(statistics.median(s["sdk"] for s in samples), 3),
        "error": next((s["error"] for s in samples if s["error"]), None),
    }


def top_imports(code: str, env: dict[str, str], count: int = 15) -> list[dict[str, Any]]:
    """The slowest imports (cumulative, µs) loaded after ``airflow.sdk`` for ``code``."""
    script = "import airflow.sdk, sys; print('--- after sdk ---', file=sys.stderr, flush=True)\n" + code
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", script], capture_output=True, text=True, env=env, cwd=REPO)
    lines = result.stderr.split("--- after sdk ---", 1)[-1].splitlines()
    rows = []
    for line in lines:
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|")
        rows.append({"module": name.strip(), "cumulative_ms": round(int(cumulative_us) / 1000, 1), "self_ms": round(int(self_us) / 1000, 1), "depth": (len(name) - len(name.lstrip()) - 1) // 2})
    rows.sort(key=lambda r: r["cumulative_ms"], reverse=True)
    return rows[:count]


def measure_all(env: dict[str, str], runs: int, *, quick: bool, headline: bool = True) -> dict[str, Any]:
    """Every target and example DAG file, in interpreters with ``env``. A quick run measures one DAG
    file and the slowest imports only for the headline figures (``headline``), ours alone otherwise."""
    part: dict[str, Any] = {"modules": {}, "dags": {}, "dags_beyond_gs_asset_handler": {}}
    warm = "PYTHONDONTWRITEBYTECODE" not in env  # with bytecode: an uncounted run writes the .pyc files
    targets = {OURS_TARGET: TARGETS[OURS_TARGET]} if quick else TARGETS
    for name, code in targets.items():
        part["modules"][name] = measure(code, runs, env, warm=warm)
    dag_files = sorted((REPO / "dags").glob("*.py"))
    for path in (dag_files[:1] if headline else []) if quick else dag_files:
        part["dags"][path.name] = measure(DAG_RUNNER, runs, env, [str(path)], warm=warm)
        # A gs:// Asset makes Airflow load the google provider's URI handler, which imports the
        # GCS hook: the same figure with that import counted as part of the baseline.
        part["dags_beyond_gs_asset_handler"][path.name] = measure(DAG_RUNNER, runs, env, [str(path)], baseline=GS_ASSET_HANDLER, warm=warm)
    part["ours_top_imports"] = top_imports(TARGETS[OURS_TARGET], env) if headline or not quick else []
    return part


def print_table(part: dict[str, Any]) -> None:
    width = max(len(n) for n in [*part["modules"], *("dags/" + d for d in part["dags"])])
    print(f"{'import (beyond airflow.sdk)':<{width}}  median s  airflow.sdk s")
    for name, row in part["modules"].items():
        print(f"{name:<{width}}  {row['extra_s_median']:>8.3f}  {row['airflow_sdk_s_median']:>13.3f}  {row['error'] or ''}")
    for name, row in part["dags"].items():
        beyond = part["dags_beyond_gs_asset_handler"][name]["extra_s_median"]
        print(f"{'dags/' + name:<{width}}  {row['extra_s_median']:>8.3f}  {row['airflow_sdk_s_median']:>13.3f}  {row['error'] or ''}(without the gs:// asset handler: {beyond:.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per target")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 interpreter per target, ours and one DAG file with .pyc, ours alone without")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    report: dict[str, Any] = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]}, "runs": runs, "bytecode": {}}
    for mode in BYTECODE_MODES:
        report["bytecode"][mode] = measure_all(environment(mode), runs, quick=args.quick, headline=mode == BYTECODE_MODES[0])
    report.update(report["bytecode"]["with_pyc"])  # the headline figures: what a deployment's DAG processor pays
    report["targets"] = {}

    for mode, part in report["bytecode"].items():
        print(f"\n{mode.replace('_', ' ')}:")
        print_table(part)
    print("\nslowest imports under ours, with .pyc (cumulative ms):")
    for row in report["ours_top_imports"][:10]:
        print(f"  {row['cumulative_ms']:>8.1f}  {'  ' * row['depth']}{row['module']}")

    ours = report["modules"][OURS_TARGET]
    report["targets"]["ours_le_0.1s"] = ours["extra_s_median"] <= 0.1 and not ours["error"]
    report["targets"]["each_dag_le_0.3s"] = all(r["extra_s_median"] <= 0.3 and not r["error"] for r in report["dags"].values())
    report["targets"]["each_dag_le_0.3s_beyond_gs_asset_handler"] = all(
        r["extra_s_median"] <= 0.3 and not r["error"] for r in report["dags_beyond_gs_asset_handler"].values()
    )
    for name in TARGETS:
        if name != OURS_TARGET and name in report["modules"]:
            anchor = report["modules"][name]["extra_s_median"]
            report["targets"][f"fraction_of {name}"] = round(ours["extra_s_median"] / anchor, 3) if anchor else None
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
