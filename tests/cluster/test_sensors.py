"""The sensors and their triggers against the local cluster and its GCS emulator, in-process.

Sensors are driven the way Airflow drives them — ``poke()`` for a waiting worker, ``execute()``
raising ``TaskDeferred`` for a deferrable one — and each trigger is rebuilt from its
``serialize()`` output and run on a fresh event loop, as the triggerer would.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from urllib.parse import quote
from datetime import timedelta

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred
from airflow.sdk.module_loading import import_string

from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.exceptions import BadSpecError, UserCodeError
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, PathwaysHook
from pathways_airflow.resources import PATHWAYSJOB
from pathways_airflow.sensors import CheckpointSensor, PathwaysJobSensor, TpuSliceReadinessSensor
from pathways_airflow.hooks.storage import newest_committed_checkpoint
from pathways_airflow.exceptions import WorkloadEndedError
from pathways_airflow.sensors.workload import ended_early, failure_of, has_reached
from pathways_airflow.spec import build_workload, render
from pathways_airflow.state.model import FailureCause, Phase, WorkloadState
from pathways_airflow_testing.nodes import ACTIVE_MAINTENANCE_LABEL, SCHEDULED_MAINTENANCE_LABEL

BUCKET = "pathways-demo"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": pathways_cluster.kubeconfig}}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}),
    )


@pytest.fixture
def bucket(pathways_cluster):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": pathways_cluster.gcs_endpoint}
    )
    yield client.bucket(BUCKET)
    client.close()


def wait_for(predicate, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError("timed out")


def run_trigger(trigger, timeout=30.0):
    """Rebuild the trigger from ``serialize()`` and return its first event, as the triggerer would."""
    path, kwargs = trigger.serialize()
    revived = import_string(path)(**json.loads(json.dumps(kwargs)))

    async def first_event():
        events = revived.run()
        try:
            return await asyncio.wait_for(events.__anext__(), timeout)
        finally:
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    return asyncio.run(first_event())


# --- CheckpointSensor ------------------------------------------------------------------------


def a_checkpoint_dir() -> tuple[str, str]:
    prefix = f"sensors/{uuid.uuid4().hex[:8]}/checkpoints"
    return prefix, f"gs://{BUCKET}/{prefix}"


def save_step(bucket, prefix: str, step: int, *, files: int = 3, commit: bool = True) -> None:
    """Write a step as Orbax does on GCS: metadata first, arrays, the commit marker last."""
    bucket.blob(f"{prefix}/{step}/_CHECKPOINT_METADATA").upload_from_string(b'{"commit_timestamp_nsecs": null}')
    for index in range(files):
        bucket.blob(f"{prefix}/{step}/items/d/{index:04x}").upload_from_string(b"\0" * 64)
    if commit:
        commit_step(bucket, prefix, step)


def commit_step(bucket, prefix: str, step: int) -> None:
    bucket.blob(f"{prefix}/{step}/commit_success.txt").upload_from_string(b"Checkpoint commit was successful")


def test_checkpoint_sensor_ignores_a_partial_step_until_it_is_committed(bucket):
    prefix, directory = a_checkpoint_dir()
    save_step(bucket, prefix, 10)
    save_step(bucket, prefix, 20, commit=False)
    sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=directory, newer_than="10", poke_interval=0.1)

    assert not sensor.poke({}).is_done
    assert newest_committed_checkpoint(directory) == Checkpoint(10, f"{directory}/10")

    commit_step(bucket, prefix, 20)
    done = sensor.poke({})
    assert done.is_done and done.xcom_value == {"step": 20, "uri": f"{directory}/20"}
    assert newest_committed_checkpoint(directory, min_step=11) == Checkpoint(20, f"{directory}/20")


def test_deferred_checkpoint_sensor_reports_the_step_only_after_its_marker(bucket):
    prefix, directory = a_checkpoint_dir()
    save_step(bucket, prefix, 10)
    sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=directory, newer_than=10, deferrable=True, poke_interval=0.1)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    committed_at: list[float] = []

    def training_saves_step_20():
        save_step(bucket, prefix, 20, commit=False)
        time.sleep(0.6)  # the trigger looks several times while step 20 is partial
        commit_step(bucket, prefix, 20)
        committed_at.append(time.monotonic())

    writer = threading.Thread(target=training_saves_step_20)
    writer.start()
    event = run_trigger(deferred.value.trigger, timeout=20)
    reported_at = time.monotonic()
    writer.join()
    assert event.payload == {"status": "found", "checkpoint": {"step": 20, "uri": f"{directory}/20"}}
    assert committed_at and reported_at >= committed_at[0]
    assert sensor.execute_complete({}, event.payload) == {"step": 20, "uri": f"{directory}/20"}


def test_requests_per_poke_do_not_grow_with_files_per_step(bucket):
    requests_per_poke = {}
    for files in (2, 120):
        prefix, directory = a_checkpoint_dir()
        save_step(bucket, prefix, 10, files=files)
        save_step(bucket, prefix, 20, files=files, commit=False)
        sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=directory, poke_interval=0.1)
        assert sensor.poke({}).xcom_value["step"] == 10
        urls: list[str] = []
        sensor._client._http.hooks["response"].append(lambda response, *a, seen=urls, **k: seen.append(response.request.url))
        assert sensor.poke({}).xcom_value["step"] == 10
        # Only this poke's requests: the HTTP session is shared with anything else using the client.
        mine = quote(prefix, safe="")
        requests_per_poke[files] = [url for url in urls if mine in url]
    assert len(requests_per_poke[2]) == len(requests_per_poke[120]) == 3
    for listing, *markers in requests_per_poke.values():
        # One listing of step prefixes only, then the markers of step 20 (missing) and 10 (found).
        assert "delimiter=%2F" in listing and "fields=prefixes%2CnextPageToken" in listing
        assert [m.split("?")[0].rsplit("%2F", 2)[1:] for m in markers] == [["20", "commit_success.txt"], ["10", "commit_success.txt"]]


# --- TpuSliceReadinessSensor ----------------------------------------------------------------


def test_slice_readiness_waits_out_scheduled_and_active_maintenance(pathways_cluster):
    cluster = pathways_cluster
    pool, other = "tpu-v6e-4x4-1", "tpu-v6e-4x4-0"
    second = cluster.clock.speed  # one real second, in the cluster's simulated seconds
    plain = TpuSliceReadinessSensor(task_id="slices", tpu="v6e", topology="4x4", num_slices=2, poke_interval=0.1)
    assert plain.poke({}).xcom_value == [other, pool]

    cluster.maintenance(pool, notice=2 * second, duration=3 * second, wait=False)

    def pool_labels():
        return [n["metadata"]["labels"] for n in cluster.list("v1", "Node") if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == pool]

    wait_for(lambda: all(SCHEDULED_MAINTENANCE_LABEL in labels for labels in pool_labels()))
    # Scheduled, not started: ready, unless the run must not meet maintenance. The cluster's
    # clock runs ahead of the wall clock, so the window is wide.
    assert plain.poke({}).is_done
    careful = TpuSliceReadinessSensor(
        task_id="slices", tpu="v6e", topology="4x4", num_slices=2, no_maintenance_within=timedelta(days=30),
        deferrable=True, poke_interval=0.1,
    )
    with pytest.raises(TaskDeferred) as deferred:
        careful.execute({})
    assert f"{pool}: maintenance scheduled in" in careful._last_summary

    wait_for(lambda: all(ACTIVE_MAINTENANCE_LABEL in labels for labels in pool_labels()), timeout=10)
    assert not plain.poke({}).is_done
    assert f"{pool}: 4 of 4 nodes under active maintenance" in plain._last_summary

    started = time.monotonic()
    event = run_trigger(deferred.value.trigger, timeout=30)
    assert time.monotonic() - started > 1.0  # it waited for the window to end
    assert event.payload["status"] == "ready" and event.payload["ready"] == [other, pool]
    assert careful.execute_complete({}, event.payload) == [other, pool]
    assert plain.poke({}).xcom_value == [other, pool]


# --- PathwaysJobSensor ----------------------------------------------------------------------


SENSOR_TEST_LABEL = "pathways-airflow.test/sensor"


def idle_workload(name: str) -> dict:
    """An idle program whose workers only fit nodes labelled for this test: pending until then."""
    workload = build_workload(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir=f"gs://{BUCKET}/tmp", image="python:3.11",
        command=["python3", "serve.py"], env={"PATHWAYS_TESTING_PROGRAM": "idle"},
        node_selector={SENSOR_TEST_LABEL: name},
    )
    return render(workload, backend="pathwaysjob", name=name, namespace="default")


def label_a_free_v5e_slice(cluster, value: str | None) -> list[str]:
    """Label (or unlabel) the nodes of a schedulable v5e 2x4 pool; the node names."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(cluster.kubeconfig))
    nodes = cluster.list("v1", "Node")
    if value is None:
        chosen = [n for n in nodes if SENSOR_TEST_LABEL in n["metadata"]["labels"]]
    else:
        pools = sorted({n["metadata"]["labels"].get("cloud.google.com/gke-nodepool", "") for n in nodes})
        pool = next(
            p for p in pools
            if p.startswith("tpu-v5e-2x4")
            and not any(n["spec"].get("unschedulable") for n in nodes if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == p)
        )
        chosen = [n for n in nodes if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == pool]
    for node in chosen:
        core.patch_node(node["metadata"]["name"], {"metadata": {"labels": {SENSOR_TEST_LABEL: value}}})
    return [n["metadata"]["name"] for n in chosen]


def later(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()))
    thread.start()
    return thread


def head_pod(cluster, name: str) -> str:
    return next(
        p["metadata"]["name"]
        for p in cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name})
        if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "pathways-head"
    )


def test_pathways_job_sensor_waits_for_running_then_fails_when_the_program_fails_before_succeeding(pathways_cluster):
    cluster = pathways_cluster
    name = f"sensor-{uuid.uuid4().hex[:6]}"
    watcher = PathwaysJobSensor(task_id="running", name=name, poke_interval=0.1)
    assert not watcher.poke({}).is_done  # not created yet: waited for, not failed

    cluster.apply(idle_workload(name))
    try:
        running = PathwaysJobSensor(task_id="running", name=name, deferrable=True, poke_interval=0.1)
        with pytest.raises(TaskDeferred) as deferred:
            running.execute({})
        assert not watcher.poke({}).is_done  # the workers are pending
        placing = later(0.3, lambda: label_a_free_v5e_slice(cluster, name))
        event = run_trigger(deferred.value.trigger, timeout=30)
        placing.join()
        state = running.execute_complete({}, event.payload)
        assert state["phase"] == "RUNNING" and state["slices_ready"] == state["slices_total"] == 1
        assert watcher.poke({}).xcom_value["phase"] == "RUNNING"

        finished = PathwaysJobSensor(task_id="finished", name=name, phase="SUCCEEDED", deferrable=True, poke_interval=0.1)
        with pytest.raises(TaskDeferred) as deferred:
            finished.execute({})
        failing = later(0.3, lambda: cluster.fail_pod("default", head_pod(cluster, name), exit_code=3, container="main"))
        event = run_trigger(deferred.value.trigger, timeout=30)
        failing.join()
        # Deterministic for the sensor whatever the cause: Airflow does not retry it.
        with pytest.raises(AirflowFailException) as failed:
            finished.execute_complete({}, event.payload)
        assert f"PathwaysJob default/{name} ended before reaching SUCCEEDED: FAILED" in str(failed.value)
        with pytest.raises(AirflowFailException, match="ended before reaching SUCCEEDED"):
            PathwaysJobSensor(task_id="finished", name=name, phase="SUCCEEDED").poke({})
    finally:
        PathwaysHook().delete(PATHWAYSJOB, "default", name)
        label_a_free_v5e_slice(cluster, None)


def test_sensor_verdicts_and_failures():
    running = WorkloadState(Phase.RUNNING, slices_ready=2, slices_total=2)
    degraded = WorkloadState(Phase.RUNNING, slices_ready=1, slices_total=2)
    succeeded = WorkloadState(Phase.SUCCEEDED)
    lost = WorkloadState(Phase.FAILED, "preempted", cause=FailureCause.DISRUPTION)
    assert has_reached(running, "RUNNING") and not has_reached(degraded, "RUNNING")
    assert has_reached(succeeded, "RUNNING") and not has_reached(running, "SUCCEEDED")
    assert ended_early(lost, "RUNNING") and not ended_early(degraded, "SUCCEEDED")
    error = failure_of(lost, "JobSet default/x", "SUCCEEDED")
    assert isinstance(error, WorkloadEndedError) and isinstance(error, AirflowFailException)
    assert str(error) == "JobSet default/x ended before reaching SUCCEEDED: FAILED (DISRUPTION): preempted"
    bug = WorkloadState(Phase.FAILED, "exit 3", cause=FailureCause.USER_CODE, exit_code=3)
    user_error = failure_of(bug, "JobSet default/x", "RUNNING")
    assert isinstance(user_error, UserCodeError) and user_error.exit_code == 3
    assert isinstance(failure_of(WorkloadState(Phase.FAILED, cause=FailureCause.BAD_SPEC), "w", "RUNNING"), BadSpecError)


def test_pathways_job_sensor_refuses_bad_arguments():
    with pytest.raises(ValueError) as refused:
        PathwaysJobSensor(task_id="s", name="x", namespace="Bad_NS", backend="argo", phase="QUEUED")
    assert refused.value.fields == ("namespace", "backend", "phase")
    assert "phase='QUEUED': cannot be waited for; valid: RUNNING, SUCCEEDED" in str(refused.value)
