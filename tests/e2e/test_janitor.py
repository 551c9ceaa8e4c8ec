"""The example janitor DAG, run with ``airflow dags test`` against the local cluster.

Workloads labelled for task instances Airflow no longer has, for a finished one, and one not ours:
a dry run deletes nothing; the real run deletes exactly the orphans, their pods go, and the log
names the chips freed. Airflow's answers are real: the task asks the Execution API through the
Task SDK, as it would in a deployment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.resources import JOBSET, PATHWAYSJOB, POD
from pathways_airflow.spec.names import TaskIdentity
from tests.support.airflow_cli import json_lines
from tests.support.waiting import wait_for
from tests.support.workloads import labelled_workload

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "pathways_janitor"
TASK_ID = "delete_orphaned_workloads"
NAMESPACE = "janitor-e2e"


def run_janitor(airflow_env, *, dry_run: bool) -> str:
    conf = {"namespace": NAMESPACE, "grace_period_seconds": 0, "dry_run": dry_run}
    result = airflow_env.with_dags(REPO / "dags").run("dags", "test", DAG_ID, "-c", json.dumps(conf))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


def present(hook: PathwaysHook) -> dict[str, int]:
    """Workload name → how many pods it has, for every workload in the namespace."""
    names = [w["metadata"]["name"] for r in (PATHWAYSJOB, JOBSET) for w in hook.list(r, NAMESPACE) if not w["metadata"].get("ownerReferences")]
    return {n: len(hook.list(POD, NAMESPACE, label_selector=f"{well_known.JOBSET_NAME}={n}")) for n in names}


def test_the_janitor_dag_deletes_exactly_the_workloads_airflow_lost_track_of(airflow_env, pathways_cluster):
    pathways_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    hook = PathwaysHook()
    labelled_workload(hook, "ghost-run", NAMESPACE, TaskIdentity(DAG_ID, TASK_ID, "manual__deleted-run"))
    labelled_workload(hook, "ghost-dag", NAMESPACE, TaskIdentity("deleted_dag", "train", "scheduled__1"), backend="pathwaysjob", num_slices=2)
    labelled_workload(hook, "not-ours", NAMESPACE, None)
    wait_for(lambda: len(present(hook)) == 3 and all(present(hook).values()), 30, what="every workload's pods")

    dry = run_janitor(airflow_env, dry_run=True)
    assert "dry run: 2 of 2 workloads are orphans holding 12 TPU chips; nothing deleted" in dry, dry[-4000:]
    assert f"JobSet {NAMESPACE}/ghost-run task={DAG_ID}/manual__deleted-run/{TASK_ID} state=not found decision=would delete chips=4" in dry
    assert f"PathwaysJob {NAMESPACE}/ghost-dag task=deleted_dag/scheduled__1/train state=not found decision=would delete chips=8" in dry
    assert "not-ours" not in dry
    before = present(hook)
    assert set(before) == {"ghost-run", "ghost-dag", "not-ours"}

    runs = json_lines(airflow_env.run("dags", "list-runs", DAG_ID, "-o", "json").stdout)
    assert len(runs) == 1, runs
    finished = TaskIdentity(DAG_ID, TASK_ID, runs[0]["run_id"])
    labelled_workload(hook, "finished", NAMESPACE, finished)
    wait_for(lambda: present(hook).get("finished"), 30, what="the finished task's workload's pods")

    acted = run_janitor(airflow_env, dry_run=False)
    assert f"JobSet {NAMESPACE}/finished task={DAG_ID}/{finished.run_id}/{TASK_ID} state=success decision=delete chips=4" in acted, acted[-4000:]
    assert "deleted 3 of 3 workloads, freeing 16 TPU chips" in acted
    assert "still terminating" not in acted
    assert present(hook) == {"not-ours": before["not-ours"]}
    assert {p["metadata"]["labels"].get(well_known.JOBSET_NAME) for p in hook.list(POD, NAMESPACE)} == {"not-ours"}
