"""A scripted training run on the local cluster: checkpoints in GCS, maintenance, resume."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred
from google.cloud import storage

from pathways_airflow.spec import build_workload, render

from tests.support.waiting import wait_for

API = "pathways-job.pathways.domain/v1"


def training(run_name: str, **overrides):
    params = dict(
        tpu="v5e",
        topology="2x4",
        num_slices=1,
        pathways_dir="gs://pathways-demo/tmp",
        image="maxtext:latest",
        command=[
            "python3", "-m", "MaxText.train", "MaxText/configs/base.yml",
            "base_output_directory=gs://pathways-demo/runs", f"run_name={run_name}", "steps=80", "checkpoint_period=10",
        ],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2", "PATHWAYS_TESTING_SAVE_SECONDS": "4"},
    )
    params.update(overrides)
    return build_workload(**params)


def pods_of(cluster, name):
    return cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name})


def head_logs(cluster, name):
    lines = []
    for pod in sorted(pods_of(cluster, name), key=lambda p: p["metadata"]["creationTimestamp"]):
        if pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "pathways-head":
            lines += cluster.read_log("default", pod["metadata"]["name"], "main")
    return lines


def committed_steps(cluster, run_name):
    client = storage.Client(project="test", client_options={"api_endpoint": cluster.gcs_endpoint}, credentials=_anonymous())
    names = [b.name for b in client.list_blobs("pathways-demo", prefix=f"runs/{run_name}/checkpoints/")]
    return sorted(int(n.split("/")[3]) for n in names if n.endswith("/commit_success.txt"))


def _anonymous():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def worker_pool(cluster, name):
    nodes = {n["metadata"]["name"]: n for n in cluster.list("v1", "Node")}
    workers = [p for p in pods_of(cluster, name) if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker" and p["spec"].get("nodeName")]
    return nodes[workers[0]["spec"]["nodeName"]]["metadata"]["labels"]["cloud.google.com/gke-nodepool"]


@pytest.mark.parametrize("backend", ["pathwaysjob", "jobset"])
def test_maintenance_mid_run_restarts_the_jobset_and_resumes_from_the_newest_committed_step(pathways_cluster, backend):
    cluster = pathways_cluster
    name, run = f"maint-{backend[:3]}", f"maint-{backend}"
    workload = training(run, max_restarts=1 if backend == "pathwaysjob" else 0)
    cluster.apply(render(workload, backend=backend, name=name, namespace="default"))
    wait_for(lambda: any("completed step: 35" in l for l in head_logs(cluster, name)), timeout=60)
    cluster.maintenance(worker_pool(cluster, name), duration=600)

    kind = ("PathwaysJob", API) if backend == "pathwaysjob" else ("JobSet", "jobset.x-k8s.io/v1alpha2")
    final = wait_for(lambda: (obj := cluster.get(kind[1], kind[0], name)) and (obj.get("status") or {}).get("terminalState") and obj, timeout=90)
    assert final["status"]["terminalState"] == "Completed"
    jobset = cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name)
    assert jobset["status"]["restarts"] == 1
    # PathwaysJob: the restart counts against maxRestarts; JobSet backend: maintenance is free.
    assert jobset["status"].get("restartsCountTowardsMax", 0) == (1 if backend == "pathwaysjob" else 0)
    logs = head_logs(cluster, name)
    restored = [l for l in logs if l.startswith("restoring from this run's directory step")]
    assert restored, logs[-10:]
    resumed_from = int(restored[-1].rsplit(" ", 1)[1])
    steps = committed_steps(cluster, run)
    assert resumed_from >= 30 and resumed_from in steps and steps[-1] == 79
    events = [e["reason"] for e in cluster.list("v1", "Event", "default") if e["involvedObject"]["name"] == name]
    assert "Restarting" in events


def test_a_partial_checkpoint_is_never_resumed_from(pathways_cluster):
    """Maintenance while a save is being written: the run resumes from the previous committed step."""
    cluster = pathways_cluster
    name, run = "partial", "partial-run"
    workload = training(run, env={"PATHWAYS_TESTING_STEP_SECONDS": "1", "PATHWAYS_TESTING_SAVE_SECONDS": "40"})
    cluster.apply(render(workload, backend="jobset", name=name, namespace="default"))
    wait_for(lambda: any("saving checkpoint for step 20" in l for l in head_logs(cluster, name)), timeout=60)
    cluster.maintenance(worker_pool(cluster, name), duration=600)
    wait_for(lambda: (js := cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name)) and js["status"].get("restarts", 0) >= 1, timeout=60)
    wait_for(lambda: any(l.startswith("restoring from this run's directory step") or l.startswith("No existing checkpoints") for l in head_logs(cluster, name)[-80:]), timeout=60)
    restored = [l for l in head_logs(cluster, name) if l.startswith("restoring from this run's directory step")]
    assert restored and restored[-1] == "restoring from this run's directory step 10"
    from kubernetes import client, config

    custom = client.CustomObjectsApi(config.new_client_from_config(cluster.kubeconfig))
    custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", name, propagation_policy="Foreground")
    wait_for(lambda: not pods_of(cluster, name), timeout=60)


def test_user_failure_exit_code_fails_the_jobset_at_once(pathways_cluster):
    cluster = pathways_cluster
    name = "userbug"
    workload = training("userbug", max_restarts=3, env={"PATHWAYS_TESTING_FAIL_AT_STEP": "5", "PATHWAYS_TESTING_EXIT_CODE": "3"})
    cluster.apply(render(workload, backend="jobset", name=name, namespace="default"))
    final = wait_for(lambda: (js := cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name)) and js["status"].get("terminalState") and js, timeout=60)
    assert final["status"]["terminalState"] == "Failed" and final["status"]["restarts"] == 0
    failed = next(c for c in final["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailJobSetFailurePolicyAction"
    assert "(first failed job: userbug-pathways-head-0)" in failed["message"]


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_bug_on_the_pathwaysjob_backend_runs_once_though_max_restarts_allows_two(pathways_cluster, monkeypatch, deferrable):
    """A DAG as the README writes it (PathwaysJob backend, ``max_restarts=2``) whose program fails
    at a step: the PathwaysJob the task submits restarts nothing in place, so the bug runs once and
    the task fails with ``UserCodeError``; the two restarts stay for infrastructure failures."""
    from pathways_airflow.exceptions import UserCodeError
    from pathways_airflow.operators import PathwaysJobOperator
    from pathways_airflow.spec import TaskIdentity
    from tests.support.connections import connect
    from tests.support.task_instance import TaskInstance
    from tests.support.triggers import first_event

    connect(monkeypatch, pathways_cluster)
    task_id = f"bug-once-{int(deferrable)}"
    operator = PathwaysJobOperator(
        task_id=task_id, tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext:latest",
        command=["python3", "-m", "MaxText.train", f"run_name={task_id}", "steps=400"], max_restarts=2, deferrable=deferrable,
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2", "PATHWAYS_TESTING_FAIL_AT_STEP": "5", "PATHWAYS_TESTING_EXIT_CODE": "3"},
    )
    assert operator.render_manifest()["spec"]["maxRestarts"] == 0 and operator.disruption_budget == 5
    ti = TaskInstance("dag", task_id, "run-1")
    with pytest.raises(UserCodeError) as failure:
        try:
            operator.execute({"ti": ti})
        except TaskDeferred as deferred:
            operator.execute_complete({"ti": ti}, first_event(deferred.trigger, timeout=120), **deferred.kwargs)
    assert failure.value.exit_code == 3
    name = TaskIdentity("dag", task_id, "run-1").workload_name(0)
    heads = {e["involvedObject"]["name"] for e in pathways_cluster.list("v1", "Event", "default")
             if e["involvedObject"]["name"].startswith(f"{name}-pathways-head-") and e["involvedObject"].get("kind") == "Pod"}
    assert len(heads) == 1, heads  # one run of the program
    assert not any(e["involvedObject"]["name"].startswith(TaskIdentity("dag", task_id, "run-1").workload_name(1)) for e in pathways_cluster.list("v1", "Event", "default"))


def test_a_restart_seen_by_a_trigger_that_was_then_replaced_is_still_reported(pathways_cluster):
    """The first trigger sees the JobSet restart after maintenance and goes away (a triggerer
    restart); the one re-created from ``serialize()`` reports that restart, with its cause."""
    from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
    from pathways_airflow.resources import JOBSET
    from pathways_airflow.triggers.workload import PathwaysJobTrigger
    from tests.support.triggers import first_event

    cluster, name = pathways_cluster, "replaced-trigger"
    cluster.apply(render(training(name, command=["python3", "-m", "MaxText.train", f"run_name={name}", "steps=700", "checkpoint_period=10"]), backend="jobset", name=name, namespace="default"))
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=1)
    wait_for(lambda: any("completed step: 15" in l for l in head_logs(cluster, name)), timeout=60)

    def maintenance_then_restarted() -> None:
        # Once the trigger has seen the workers run (it writes where), the slice goes.
        wait_for(lambda: "pathways-airflow/ran-on" in cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name)["metadata"].get("annotations", {}), timeout=30)
        cluster.maintenance(worker_pool(cluster, name), duration=600)
        wait_for(lambda: (cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name) or {}).get("status", {}).get("restarts") == 1, timeout=60)
        wait_for(lambda: any(p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == "1" and p["status"].get("phase") == "Running" for p in pods_of(cluster, name)), timeout=60)

    with pytest.raises(TimeoutError):  # the first trigger never finishes: it is cancelled, as a triggerer restart does
        first_event(trigger, timeout=10, during=maintenance_then_restarted, during_after=0.2)
    payload = first_event(trigger, timeout=90)
    assert payload["state"]["phase"] == "SUCCEEDED" and payload["state"]["restarts"] == 1
    [restart] = payload["restarts"]
    assert restart["kind"] == "MAINTENANCE" and restart["handled_by"] == "JobSet restart", restart
    PathwaysHook().delete(JOBSET, "default", name)
