"""The ``airflow`` command of this virtualenv, run with a given environment (its own
``AIRFLOW_HOME``, DAGs folder and connections): ``airflow dags test`` and the task states it left."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@dataclass
class DagRun:
    """What ``airflow dags test`` printed and the task states it left in the database."""

    returncode: int
    output: str
    states: dict[str, str]


class AirflowEnv:
    """The Airflow CLI with a fixed environment."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def with_dags(self, folder: Path | str) -> AirflowEnv:
        """The same Airflow (home, database, connections) reading its DAGs from ``folder``."""
        return AirflowEnv({**self.env, "AIRFLOW__CORE__DAGS_FOLDER": str(folder)})

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
        listed = json_lines(self.run("dags", "list-runs", dag_id, "-o", "json").stdout)
        if not listed:
            return {}
        newest = sorted(listed, key=lambda r: r.get("start_date") or "")[-1]
        states = json_lines(self.run("tasks", "states-for-dag-run", dag_id, newest["run_id"], "-o", "json").stdout)
        return {t["task_id"]: t["state"] for t in states}


def json_lines(stdout: str) -> list[dict]:
    """The JSON array a CLI command printed, skipping any log lines around it."""
    for line in stdout.splitlines():
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    return []
