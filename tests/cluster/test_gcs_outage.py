"""A GCS outage is waited out until the task's deadline, then reported naming the bucket and how long.

The provider's clients reach the emulator through a proxy that makes it unreachable for a few
seconds (connections reset, or 503); the workloads keep writing checkpoints to it directly.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import StorageUnavailableError
from pathways_airflow.hooks.storage import newest_committed_checkpoint
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.sensors import CheckpointSensor
from pathways_airflow.spec import TaskIdentity

from tests.support.connections import connect
from tests.support.gcs import BUCKET, gcs_behind_an_outage_proxy, gcs_bucket
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event
from tests.support.workloads import when_step

OUTAGE_SECONDS = 4.0


@pytest.fixture
def proxy(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)
    with gcs_behind_an_outage_proxy(pathways_cluster, monkeypatch) as proxy:
        yield proxy


@pytest.fixture
def committed_step(pathways_cluster):
    """A checkpoint directory holding committed step 10 and a partial step 20."""
    prefix = f"outage/{uuid.uuid4().hex[:8]}/checkpoints"
    with gcs_bucket(pathways_cluster) as bucket:
        for step, commit in ((10, True), (20, False)):
            bucket.blob(f"{prefix}/{step}/_CHECKPOINT_METADATA").upload_from_string(b"{}")
            if commit:
                bucket.blob(f"{prefix}/{step}/commit_success.txt").upload_from_string(b"ok")
    return f"gs://{BUCKET}/{prefix}"


def outage_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pathways_airflow.hooks.storage"]


def test_the_operator_result_waits_out_an_outage_as_the_workload_ends(pathways_cluster, proxy, caplog):
    task_id = "gcs-outage-result"
    run = f"runs-{task_id}-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    operator = PathwaysJobOperator(
        task_id=task_id, tpu="v5e", topology="2x4", num_slices=1, pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "base_output_directory=gs://pathways-demo/outage", f"run_name={run}", "steps=20", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2"}, checkpoint_dir=f"gs://pathways-demo/outage/{run}/checkpoints",
        deferrable=False, execution_timeout=None,
    )
    # From step 12 the last steps take well under the outage (8 × 2 simulated s, a fraction of a real
    # second on the test cluster), so the workload ends, and its result is read, while GCS is away.
    outage = when_step(pathways_cluster, identity, 12, lambda pool: proxy.unreachable_for(OUTAGE_SECONDS))

    with caplog.at_level(logging.INFO, logger="pathways_airflow.hooks.storage"):
        result = operator.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    outage.join(1)

    assert result["state"] == "SUCCEEDED"
    assert result["checkpoint"] == {"step": 19, "uri": f"gs://pathways-demo/outage/{run}/checkpoints/19"}
    lines = outage_lines(caplog)
    assert any("GCS bucket 'pathways-demo' unreachable since" in line and "gives up at" in line for line in lines), lines
    assert any("reachable again after" in line for line in lines), lines


@pytest.mark.parametrize("answer", ["refuse", "503"])
def test_a_poking_sensor_rides_out_an_outage(proxy, committed_step, caplog, answer):
    sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=committed_step, poke_interval=0.1, timeout=60)
    assert sensor.poke({}).xcom_value == {"step": 10, "uri": f"{committed_step}/10"}  # the client's connection is pooled
    proxy.unreachable_for(OUTAGE_SECONDS / 2, answer)
    started = time.monotonic()

    with caplog.at_level(logging.INFO, logger="pathways_airflow.hooks.storage"):
        done = sensor.poke({})

    assert done.xcom_value == {"step": 10, "uri": f"{committed_step}/10"}
    assert time.monotonic() - started >= OUTAGE_SECONDS / 2 - 0.5
    lines = outage_lines(caplog)
    assert [line for line in lines if "waiting, gives up at" in line] == lines[:1]  # said once, not per try
    assert "reachable again after" in lines[-1] and len(lines) == 2


def test_a_deferred_sensor_rides_out_an_outage(pathways_cluster, proxy, committed_step):
    sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=committed_step, newer_than=10, deferrable=True, poke_interval=0.2, timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})

    def outage_then_commit() -> None:
        proxy.unreachable_for(OUTAGE_SECONDS)
        with gcs_bucket(pathways_cluster) as bucket:  # the training, writing past the outage
            bucket.blob(committed_step.removeprefix(f"gs://{BUCKET}/") + "/20/commit_success.txt").upload_from_string(b"ok")

    payload = first_event(deferred.value.trigger, timeout=30, during=outage_then_commit, during_after=0.3)

    assert payload == {"status": "found", "checkpoint": {"step": 20, "uri": f"{committed_step}/20"}}


def test_an_outage_longer_than_the_deadline_fails_naming_the_bucket_and_how_long(proxy, committed_step):
    proxy.unreachable_for(60)
    try:
        with pytest.raises(StorageUnavailableError, match=r"GCS bucket 'pathways-demo' unreachable for [12]s \(since .*ConnectionError"):
            newest_committed_checkpoint(committed_step, deadline=time.time() + 1.5)
        sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir=committed_step, poke_interval=0.1, timeout=1)
        with pytest.raises(StorageUnavailableError, match="GCS bucket 'pathways-demo' unreachable for"):
            sensor.poke({})
    finally:
        proxy.reachable_again()
