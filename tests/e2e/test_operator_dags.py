"""PathwaysJobOperator run by real Airflow (``airflow dags test``) against the local cluster."""

from __future__ import annotations

import pytest


def pathways_objects(cluster, kind="PathwaysJob", api="pathways-job.pathways.domain/v1"):
    return cluster.list(api, kind, "default", labels={"pathways-airflow/dag-id": "pw_submit_deferred"}) + cluster.list(
        api, kind, "default", labels={"pathways-airflow/dag-id": "pw_submit_sync"}
    )


@pytest.mark.parametrize("mode", ["deferred", "sync"])
def test_submit_wait_and_succeed(airflow_env, pathways_cluster, mode):
    run = airflow_env.dags_test(f"pw_submit_{mode}", {"steps": 20})
    assert run.states == {"train": "success"}, run.output[-4000:]
    output = run.output
    assert "submitted PathwaysJob default/train-" in output
    # each state transition in the task log, as seen (a fast cluster may skip PROVISIONING)
    assert "RUNNING 2/2 slices → SUCCEEDED" in output
    assert "completed step: 19" in output  # the main container's last lines
    assert "deleted PathwaysJob default/train-" in output
    assert not pathways_objects(pathways_cluster)


def test_a_user_failure_fails_the_task_with_the_exit_code_and_the_log(airflow_env, pathways_cluster):
    run = airflow_env.dags_test("pw_submit_deferred", {"steps": 40, "fail_at_step": "5", "exit_code": "3", "backend": "jobset"})
    assert run.states == {"train": "failed"}, run.output[-4000:]
    output = run.output
    assert "UserCodeError" in output
    assert "exited with code 3" in output
    assert "completed step: 4" in output  # the failing container's last lines
    assert "kubectl -n default describe jobset train-" in output
    assert not pathways_objects(pathways_cluster, "JobSet", "jobset.x-k8s.io/v1alpha2")
