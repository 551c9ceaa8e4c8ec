"""Real Airflow against the local cluster: ``airflow dags test`` in a fresh AIRFLOW_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

DAGS = Path(__file__).parent / "dags"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@dataclass
class DagRun:
    returncode: int
    output: str
    states: dict[str, str]


class AirflowEnv:
    def __init__(self, env: dict[str, str]):
        self.env = env

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def dags_test(self, dag_id: str, conf: dict | None = None, run_id: str | None = None, timeout: float = 300) -> DagRun:
        args = ["dags", "test", dag_id]
        if conf:
            args += ["-c", json.dumps(conf)]
        if run_id:
            args += ["--run-id", run_id] if self._supports_run_id() else []
        result = self.run(*args, timeout=timeout)
        output = result.stdout + result.stderr
        return DagRun(result.returncode, output, self.task_states(dag_id))

    def _supports_run_id(self) -> bool:
        return False

    def task_states(self, dag_id: str) -> dict[str, str]:
        """Task states of the DAG's newest run, read back through the Airflow CLI."""
        listed = _json_lines(self.run("dags", "list-runs", dag_id, "-o", "json").stdout)
        if not listed:
            return {}
        newest = sorted(listed, key=lambda r: r.get("start_date") or "")[-1]
        states = _json_lines(self.run("tasks", "states-for-dag-run", dag_id, newest["run_id"], "-o", "json").stdout)
        return {t["task_id"]: t["state"] for t in states}


def _json_lines(stdout: str) -> list[dict]:
    """The JSON array a CLI command printed, skipping any log lines around it."""
    for line in stdout.splitlines():
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    return []


@pytest.fixture(scope="session")
def airflow_env(pathways_cluster, tmp_path_factory) -> AirflowEnv:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": pathways_cluster.kubeconfig}}),
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}),
        "STORAGE_EMULATOR_HOST": pathways_cluster.gcs_endpoint,
        "KUBECONFIG": pathways_cluster.kubeconfig,
    }
    airflow = AirflowEnv(env)
    migrated = airflow.run("db", "migrate", timeout=600)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return airflow
