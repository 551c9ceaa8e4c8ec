"""Real Airflow against the local cluster: ``airflow dags test`` in a fresh AIRFLOW_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.airflow_cli import AirflowEnv
from tests.support.connections import cluster_environment

DAGS = Path(__file__).parent / "dags"


@pytest.fixture(scope="session")
def airflow_env(pathways_cluster, tmp_path_factory) -> AirflowEnv:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        **cluster_environment(pathways_cluster),
    }
    airflow = AirflowEnv(env)
    migrated = airflow.run("db", "migrate", timeout=600)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return airflow
