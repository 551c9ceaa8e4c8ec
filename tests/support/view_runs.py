"""Runs of the example DAGs for the Pathways view to show: a training with one host maintenance, and a nightly benchmark.

Each is a real ``airflow dags test`` against the local cluster, so the database ends up with the
DAG runs, task instances, rendered fields and XComs a deployment would hold.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from typing import Any

from pathways_airflow.benchmark_history import History, Run, to_document

from tests.support.airflow_cli import AIRFLOW, AirflowEnv, json_lines

JOB = ("pathways-job.pathways.domain/v1", "PathwaysJob")


def newest_run_id(airflow: AirflowEnv, dag_id: str) -> str:
    """The run id of the DAG's newest run (``airflow dags list-runs``)."""
    listed = json_lines(airflow.run("dags", "list-runs", dag_id, "-o", "json").stdout)
    assert listed, f"{dag_id} has no runs"
    return sorted(listed, key=lambda r: r.get("start_date") or "")[-1]["run_id"]


def _maintain_once_past(cluster: Any, dag_id: str, step: int) -> str | None:
    """Put the node pool of the DAG's live training workload under maintenance once its head logged ``step``."""
    jobs = cluster.list(*JOB, "default", labels={"pathways-airflow/dag-id": dag_id})
    live = [j for j in jobs if not j["metadata"].get("deletionTimestamp") and not (j.get("status") or {}).get("terminalState")]
    if not live:
        return None
    name = live[0]["metadata"]["name"]
    selector = {"jobset.sigs.k8s.io/jobset-name": name}
    heads = cluster.list("v1", "Pod", "default", labels={**selector, "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"})
    if not heads or not any(f"completed step: {step}," in line for line in cluster.read_log("default", heads[0]["metadata"]["name"], "main")):
        return None
    workers = cluster.list("v1", "Pod", "default", labels={**selector, "jobset.sigs.k8s.io/replicatedjob-name": "worker"})
    worker = next(p for p in workers if p["spec"].get("nodeName"))
    pool = cluster.get("v1", "Node", worker["spec"]["nodeName"], namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
    cluster.maintenance(pool, duration=300)
    return pool


def train_with_one_maintenance(airflow: AirflowEnv, cluster: Any, dag_id: str, conf: dict[str, Any], *,
                               at_step: int, timeout: float = 240) -> tuple[str, str]:
    """Run the training DAG, with host maintenance on one of its slices at ``at_step``: (run id, output)."""
    process = subprocess.Popen([AIRFLOW, "dags", "test", dag_id, "-c", json.dumps(conf)], env=airflow.env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    maintained = None
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if maintained is None:
            maintained = _maintain_once_past(cluster, dag_id, at_step)
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    output = process.communicate(timeout=60)[0]
    assert maintained, f"the training never reached step {at_step}:\n{output[-3000:]}"
    assert process.returncode == 0, output[-4000:]
    return newest_run_id(airflow, dag_id), output


def seed_history(bucket: Any, path: str, metrics: dict[str, float], nights: int, engine: str = "vllm") -> History:
    """A benchmark history of ``nights`` steady earlier nights at ``path``, as the regression gate writes it."""
    today = dt.datetime.now(dt.timezone.utc).replace(hour=2, minute=0, second=0, microsecond=0)
    runs = []
    for back in range(nights, 0, -1):
        when = today - dt.timedelta(days=back)
        runs.append(Run(run_id=f"scheduled__{when.isoformat()}", recorded_at=when.isoformat(), metrics=dict(metrics), engine=engine))
    history = History(tuple(runs))
    bucket.blob(path).upload_from_string(json.dumps(to_document(history)), content_type="application/json")
    return history
