"""Maintenance mid-training under real Airflow: the task resumes and succeeds in its first try."""

from __future__ import annotations

import json
import subprocess
import time

from tests.support.airflow_cli import AIRFLOW


def test_maintenance_mid_training_resumes_without_spending_an_airflow_retry(airflow_env, pathways_cluster):
    process = subprocess.Popen(
        [AIRFLOW, "dags", "test", "pw_submit_deferred", "-c", json.dumps({"steps": 60, "step_seconds": "10"})],
        env=airflow_env.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    live_most, maintained = 0, None
    deadline = time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
        jobs = pathways_cluster.list("pathways-job.pathways.domain/v1", "PathwaysJob", "default", labels={"pathways-airflow/dag-id": "pw_submit_deferred"})
        live = [j for j in jobs if not j["metadata"].get("deletionTimestamp") and not (j.get("status") or {}).get("terminalState")]
        live_most = max(live_most, len(live))
        if maintained is None and live:
            name = live[0]["metadata"]["name"]
            heads = pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"})
            if heads and any("completed step: 25," in l for l in pathways_cluster.read_log("default", heads[0]["metadata"]["name"], "main")):
                worker = next(p for p in pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "worker"}) if p["spec"].get("nodeName"))
                pool = pathways_cluster.get("v1", "Node", worker["spec"]["nodeName"], namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
                pathways_cluster.maintenance(pool, duration=600)
                maintained = pool
        time.sleep(0.05)
    output = process.communicate(timeout=60)[0]
    assert maintained, output[-3000:]
    assert airflow_env.task_states("pw_submit_deferred") == {"train": "success"}, output[-4000:]
    assert live_most == 1, "never two live workloads for one task"
    assert "ended by MAINTENANCE" in output
    assert "(attempt 1), resuming from step" in output
    assert "1 disruption (1 maintenance)" in output
