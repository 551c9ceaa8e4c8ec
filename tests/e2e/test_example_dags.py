"""The example DAGs import cleanly and run end to end on the local cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_dags_folder_imports_without_errors_or_warnings(tmp_path):
    code = (
        "import warnings\n"
        "try:\n    from airflow.dag_processing.dagbag import DagBag\n"  # Airflow 3.2+
        "except ImportError:\n    from airflow.models.dagbag import DagBag\n"  # Airflow 3.1
        "warnings.simplefilter('error');"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r});"
        "print(sorted(bag.dag_ids)); print(bag.import_errors)"
    )
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    ids, errors = result.stdout.strip().splitlines()[-2:]
    assert ids == str(
        sorted(
            [
                "pathways_checkpoint_conversion",
                "pathways_checkpoint_conversion_on_commit",
                "pathways_janitor",
                "pathways_nightly_inference_benchmark",
                "pathways_train_convert_infer",
                "pathways_training",
            ]
        )
    ), result.stdout
    assert errors == "{}", result.stdout


def test_training_dag_runs_and_publishes_its_final_checkpoint(airflow_env):
    result = airflow_env.with_dags(REPO / "dags").run("dags", "test", "pathways_training", "-c", '{"steps": 30, "run_name": "e2e-weekly"}')
    output = result.stdout + result.stderr
    assert "slices before" not in output  # no disruption expected
    assert "RUNNING 2/2 slices" in output, output[-3000:]
    assert "no disruptions" in output
    assert "'step': 29" in output and "gs://pathways-demo/runs/e2e-weekly/checkpoints/29" in output
