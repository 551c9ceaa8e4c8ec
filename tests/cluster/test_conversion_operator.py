"""CheckpointConversionOperator and BatchJobTrigger against the local cluster and its GCS emulator, in-process.

The Job runs the cluster's ``generate_param_only_checkpoint`` stand-in, which reads the source
step from GCS and writes a real Orbax-layout serving checkpoint (commit marker last), so what the
operator reports is checked against what is actually in the bucket.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from airflow.providers.common.compat.sdk import AirflowTaskTimeout, TaskDeferred

from pathways_airflow.exceptions import BadSpecError, UserCodeError
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.operators import CheckpointConversionOperator
from pathways_airflow.spec.conversion import PROVENANCE_FILE
from pathways_airflow.resources import JOB
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.names import TASK_KEY_LABEL

from tests.support.connections import connect
from tests.support.gcs import gcs_bucket
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event, killed_after

BUCKET = "pathways-demo"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture
def bucket(pathways_cluster):
    with gcs_bucket(pathways_cluster, BUCKET) as bucket:
        yield bucket


@pytest.fixture
def base() -> str:
    """A fresh prefix per test: the emulator lives for the whole session."""
    return f"conversion/{uuid.uuid4().hex[:8]}"


def save_step(bucket, checkpoint_prefix: str, step: int, *, commit: bool = True) -> dict:
    """A training step as Orbax writes it on GCS (commit marker last); its XCom as CheckpointSensor returns it."""
    bucket.blob(f"{checkpoint_prefix}/{step}/_CHECKPOINT_METADATA").upload_from_string(b"{}")
    bucket.blob(f"{checkpoint_prefix}/{step}/items/_METADATA").upload_from_string(json.dumps({"step": step}).encode())
    bucket.blob(f"{checkpoint_prefix}/{step}/items/x").upload_from_string(b"\0" * 64)
    if commit:
        bucket.blob(f"{checkpoint_prefix}/{step}/commit_success.txt").upload_from_string(b"Checkpoint commit was successful")
    return {"step": step, "uri": f"gs://{BUCKET}/{checkpoint_prefix}/{step}"}


def converter(task_id: str, **params) -> CheckpointConversionOperator:
    return CheckpointConversionOperator(task_id=task_id, **{"image": "maxtext", "poll_interval": 0.1, "deferrable": False, **params})


def run(task: CheckpointConversionOperator, run_id: str = "run-1"):
    return task.execute({"ti": TaskInstance("dag", task.task_id, run_id)})


def job_was_created(cluster, task_id: str, run_id: str = "run-1") -> bool:
    """Did the task ever create its Job? The Job controller's events outlive the Job."""
    name = TaskIdentity("dag", task_id, run_id).workload_name()
    return any(e["involvedObject"].get("kind") == "Job" and e["involvedObject"]["name"] == name for e in cluster.list("v1", "Event", "default"))


def live_jobs(cluster, task_id: str, run_id: str = "run-1") -> list[dict]:
    key = TaskIdentity("dag", task_id, run_id).key
    return [j for j in cluster.list("batch/v1", "Job", "default", labels={TASK_KEY_LABEL: key}) if not j["metadata"].get("deletionTimestamp")]


def objects(bucket, prefix: str) -> dict[str, object]:
    return {b.name.removeprefix(prefix + "/"): b for b in bucket.client.list_blobs(BUCKET, prefix=prefix + "/")}


def test_a_conversion_writes_a_committed_serving_checkpoint_and_the_same_source_is_then_reused(pathways_cluster, bucket, base):
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    output_dir = f"gs://{BUCKET}/{base}/serving"
    expected_uri = f"{output_dir}/serving-step-10/checkpoints/0"

    # A templated XCom without render_template_as_native_obj arrives as its Python repr.
    result = run(converter("convert", checkpoint=repr(source), output_dir=output_dir))

    assert result == {
        "step": 0,
        "uri": expected_uri,
        "items_uri": f"{expected_uri}/items",
        "source": source,
        "quantization": None,
    }
    written = objects(bucket, f"{base}/serving/serving-step-10/checkpoints/0")
    assert "commit_success.txt" in written and any(name.startswith("items/") for name in written)
    header = json.loads(written["items/_METADATA"].download_as_bytes())
    assert (header["source_step"], header["force_unroll"], header["quantization"]) == (10, True, None)
    provenance = json.loads(written[PROVENANCE_FILE].download_as_bytes())
    assert provenance["source"] == source and provenance["quantization"] is None and provenance["force_unroll"] is True
    assert job_was_created(pathways_cluster, "convert")
    assert not live_jobs(pathways_cluster, "convert")
    marker = written["commit_success.txt"]
    marker.reload()

    again = run(converter("convert-again", checkpoint=source, output_dir=output_dir))

    assert again == result
    assert not job_was_created(pathways_cluster, "convert-again")
    unchanged = bucket.get_blob(marker.name)
    assert unchanged.generation == marker.generation


def test_another_source_or_quantization_is_converted_again_over_the_old_output(pathways_cluster, bucket, base):
    checkpoints = f"{base}/train/checkpoints"
    first, second = save_step(bucket, checkpoints, 10), save_step(bucket, checkpoints, 20)
    output_dir = f"gs://{BUCKET}/{base}/serving"
    run(converter("first", checkpoint=first, output_dir=output_dir, run_name="latest"))

    result = run(converter("second", checkpoint_dir=f"gs://{BUCKET}/{checkpoints}", step="20", output_dir=output_dir, run_name="latest", quantization="int8"))

    assert job_was_created(pathways_cluster, "second")
    assert result["source"] == second and result["quantization"] == "int8"
    written = objects(bucket, f"{base}/serving/latest/checkpoints/0")
    header = json.loads(written["items/_METADATA"].download_as_bytes())
    assert (header["source_step"], header["quantization"]) == (20, "int8")
    provenance = json.loads(written[PROVENANCE_FILE].download_as_bytes())
    assert (provenance["source"], provenance["quantization"]) == (second, "int8")


@pytest.mark.parametrize(("commit", "why"), [(False, "has no commit_success.txt"), (None, "does not exist")])
def test_a_source_step_that_is_not_committed_is_refused_before_any_job(pathways_cluster, bucket, base, commit, why):
    checkpoints = f"{base}/train/checkpoints"
    if commit is not None:
        save_step(bucket, checkpoints, 30, commit=commit)
    source = {"step": 30, "uri": f"gs://{BUCKET}/{checkpoints}/30"}
    task_id = f"partial-{commit}".lower()

    with pytest.raises(BadSpecError) as refused:
        run(converter(task_id, checkpoint=json.dumps(source), output_dir=f"gs://{BUCKET}/{base}/serving"))

    assert f"not converting step 30 at {source['uri']}: it {why}" in str(refused.value)
    assert not job_was_created(pathways_cluster, task_id)
    assert not objects(bucket, f"{base}/serving")


def test_a_failing_conversion_reports_its_exit_code_and_log_and_leaves_no_job(pathways_cluster, bucket, base):
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    task = converter(
        "failing", checkpoint=source, output_dir=f"gs://{BUCKET}/{base}/serving",
        env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "3"},
    )

    with pytest.raises(UserCodeError) as failed:
        run(task)

    message = str(failed.value)
    assert failed.value.exit_code == 3
    assert "Container convert of pod failing-" in message and "exited with code 3" in message
    assert "| convert: exiting with code 3" in message
    assert job_was_created(pathways_cluster, "failing") and not live_jobs(pathways_cluster, "failing")
    assert not objects(bucket, f"{base}/serving")


@pytest.mark.parametrize("layout", ["current", "legacy"])
def test_each_maxtext_layout_converts_on_an_image_of_that_layout(pathways_cluster, bucket, base, layout):
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    task = converter(f"layout-{layout}", checkpoint=source, output_dir=f"gs://{BUCKET}/{base}/serving", maxtext_layout=layout,
                     env={"PATHWAYS_TESTING_MAXTEXT_LAYOUT": layout})
    module = "maxtext.utils.generate_param_only_checkpoint" if layout == "current" else "MaxText.generate_param_only_checkpoint"
    assert task.container(task.conversion()).command == ("python3", "-m", module)
    result = run(task)
    assert result["step"] == 0 and "serving-step-10/checkpoints/0/commit_success.txt" in objects(bucket, f"{base}/serving")


def test_the_legacy_module_on_a_current_image_fails_as_the_users_error_naming_the_module(pathways_cluster, bucket, base):
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    task = converter("layout-wrong", checkpoint=source, output_dir=f"gs://{BUCKET}/{base}/serving", maxtext_layout="legacy",
                     env={"PATHWAYS_TESTING_MAXTEXT_LAYOUT": "current"})
    with pytest.raises(UserCodeError, match="No module named 'MaxText'"):
        run(task)
    assert not live_jobs(pathways_cluster, "layout-wrong") and not objects(bucket, f"{base}/serving")


def test_a_deferred_conversion_resumes_from_the_triggers_event(pathways_cluster, bucket, base):
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    task = converter("deferred", checkpoint=source, output_dir=f"gs://{BUCKET}/{base}/serving", deferrable=True)
    ti = TaskInstance("dag", "deferred", "run-1")
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    assert [j["metadata"]["name"] for j in live_jobs(pathways_cluster, "deferred")] == [deferred.value.trigger.name]

    event = first_event(deferred.value.trigger)

    assert event["status"] == "complete"
    result = getattr(task, deferred.value.method_name)({"ti": ti}, event)
    assert result["source"] == source and result["uri"].endswith("/serving-step-10/checkpoints/0")
    assert PROVENANCE_FILE in objects(bucket, f"{base}/serving/serving-step-10/checkpoints/0")
    assert not live_jobs(pathways_cluster, "deferred")


def slow_conversion(task_id: str, bucket, base: str) -> TaskDeferred:
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    task = converter(
        task_id, checkpoint=source, output_dir=f"gs://{BUCKET}/{base}/serving", deferrable=True,
        env={"PATHWAYS_TESTING_CONVERT_SECONDS": "36000"},
    )
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    return deferred.value


def test_killing_the_deferred_task_deletes_the_job(pathways_cluster, bucket, base):
    deferred = slow_conversion("killed", bucket, base)

    killed_after(deferred.trigger, 0.5)

    assert not live_jobs(pathways_cluster, "killed")
    assert not objects(bucket, f"{base}/serving/serving-step-10/checkpoints/0").get("commit_success.txt")


def test_the_execution_timeout_deletes_the_job_and_fails_the_task(pathways_cluster, bucket, base):
    deferred = slow_conversion("timed-out", bucket, base)
    deferred.trigger.deadline = time.time() + 0.5

    event = first_event(deferred.trigger)

    assert (event["status"], event["deleted"]) == ("timeout", True)
    assert not live_jobs(pathways_cluster, "timed-out")
    task = converter("timed-out", checkpoint={"step": 10, "uri": "gs://b/c/10"}, output_dir="gs://b/o")
    with pytest.raises(AirflowTaskTimeout, match="was deleted"):
        task.execute_complete({"ti": TaskInstance("dag", "timed-out", "run-1")}, event)


def test_a_retry_reattaches_to_the_running_job_and_replaces_a_failed_one(pathways_cluster, bucket, base):
    hook = PathwaysHook()
    source = save_step(bucket, f"{base}/train/checkpoints", 10)
    output_dir = f"gs://{BUCKET}/{base}/serving"
    identity = TaskIdentity("dag", "retried", "run-1")
    slow = {"PATHWAYS_TESTING_CONVERT_SECONDS": "120"}
    with pytest.raises(TaskDeferred):
        run(converter("retried", checkpoint=source, output_dir=output_dir, deferrable=True, env=slow))
    first_uid = hook.get(JOB, "default", identity.workload_name())["metadata"]["uid"]
    # The worker dies after submitting; the retry waits in the worker on the same Job.
    run(converter("retried", checkpoint=source, output_dir=output_dir, env=slow, delete_on_finish=False))
    assert hook.get(JOB, "default", identity.workload_name())["metadata"]["uid"] == first_uid

    # A Job of this task that failed is replaced, not reported again.
    hook.delete(JOB, "default", identity.workload_name())
    with pytest.raises(TaskDeferred):
        run(converter("retried", checkpoint=source, output_dir=output_dir, run_name="again", deferrable=True, env={"PATHWAYS_TESTING_PROGRAM": "exit"}))
    deadline = time.monotonic() + 20
    while not ((job := hook.get(JOB, "default", identity.workload_name())) and any(c["type"] == "Failed" for c in job.get("status", {}).get("conditions") or ())):
        assert time.monotonic() < deadline, "the failing Job never failed"
        time.sleep(0.05)

    result = run(converter("retried", checkpoint=source, output_dir=output_dir, run_name="again"))

    assert result["uri"] == f"{output_dir}/again/checkpoints/0"
    assert not live_jobs(pathways_cluster, "retried")
