"""Inference benchmark operators with JetStream in-process against the local cluster: deploy, serve,
benchmark, tear down. (vLLM: ``test_vllm_operator.py``.)

Every test ends by checking that nothing of the task is left: no LeaderWorkerSet, Service, Job
or pod, including the headless Service LWS creates itself.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import BadSpecError, InfrastructureError, PathwaysError, UserCodeError
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.operators import (
    DeployInferenceServerOperator,
    InferenceBenchmarkOperator,
    TeardownInferenceServerOperator,
)
from pathways_airflow.resources import JOB, SERVICE
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.jetstream import METRIC_KEYS
from pathways_airflow.spec.serving import serving_names
from tests.support.connections import connect
from tests.support.gcs import gcs_bucket
from tests.support.serving import committed_serving_checkpoint, eventually_nothing_left, leftovers
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event, killed_after

BUCKET = "pathways-demo"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture(scope="module")
def bucket(pathways_cluster):
    with gcs_bucket(pathways_cluster, BUCKET) as bucket:
        yield bucket


@pytest.fixture(scope="module")
def checkpoint(bucket) -> dict:
    return committed_serving_checkpoint(bucket, "inference-tests/converted/checkpoints/0")


def server_params(checkpoint, **overrides) -> dict:
    params = dict(
        engine="jetstream",
        checkpoint=checkpoint,
        model_name="llama2-7b",
        tpu="v5e",
        topology="2x4",
        pathways_dir=f"gs://{BUCKET}/tmp",
        env={
            "PATHWAYS_TESTING_WARMUP_SECONDS": "30",
            "PATHWAYS_TESTING_TTFT_MS": "2",
            "PATHWAYS_TESTING_TPOT_MS": "1",
        },
        startup_timeout=60,
        poll_interval=0.05,
        cleanup_timeout=20,
    )
    params.update(overrides)
    return params


def benchmark(task_id: str, checkpoint, **overrides) -> InferenceBenchmarkOperator:
    params = server_params(
        checkpoint,
        num_prompts=6,
        request_rate="inf",
        max_output_length=8,
        dataset="test",
        results_uri=f"gs://{BUCKET}/inference-tests/results/",
    )
    params.update(overrides)
    return InferenceBenchmarkOperator(task_id=task_id, **params)


def test_benchmark_returns_every_metric_and_leaves_nothing(pathways_cluster, checkpoint, bucket):
    ti = TaskInstance("serving", "bench_ok", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    started = time.monotonic()

    result = benchmark("bench_ok", checkpoint).execute({"ti": ti})

    assert set(METRIC_KEYS) <= set(result)
    assert (
        result["completed"] == 6
        and result["duration"] > 0
        and result["p99_ttft_ms"] >= result["median_ttft_ms"] > 0
    )
    name = serving_names(identity).lws
    assert result["result_uri"] == f"gs://{BUCKET}/inference-tests/results/{name}.json" and result["engine"] == "jetstream"
    saved = json.loads(bucket.blob(f"inference-tests/results/{name}.json").download_as_bytes())
    assert saved["metrics"]["completed"] == 6 and saved["dimensions"]["server"] == f"{name}-svc:9000"
    assert leftovers(pathways_cluster, identity) == []  # the operator waited for the pods to go
    assert time.monotonic() - started < 20


def test_a_failing_benchmark_fails_with_its_exit_code_and_log_and_leaves_nothing(
    pathways_cluster, checkpoint
):
    ti = TaskInstance("serving", "bench_fails", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark(
        "bench_fails",
        checkpoint,
        benchmark_env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "3"},
    )

    with pytest.raises(UserCodeError) as failure:
        op.execute({"ti": ti})

    message = str(failure.value)
    assert failure.value.exit_code == 3
    assert f"benchmark Job default/{serving_names(identity).job} failed" in message
    assert "exited with code 3" in message and "| benchmark: exiting with code 3" in message
    assert leftovers(pathways_cluster, identity) == []


def test_a_benchmark_killed_by_the_system_is_an_infrastructure_failure_airflow_may_retry(pathways_cluster, checkpoint):
    """Exit 137 (SIGKILL: preempted, out of memory) is the system's, as for every Job we run."""
    ti = TaskInstance("serving", "bench_killed", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark(
        "bench_killed",
        checkpoint,
        benchmark_env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "137"},
    )

    with pytest.raises(InfrastructureError) as failure:
        op.execute({"ti": ti})

    assert not isinstance(failure.value, UserCodeError)
    assert "exited with code 137" in str(failure.value)
    assert leftovers(pathways_cluster, identity) == []


def test_a_server_that_crashes_while_starting_fails_at_once_with_its_log(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "server_crashes", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark("server_crashes", checkpoint, env={"PATHWAYS_TESTING_TTFT_MS": "-5"}, startup_timeout=120)
    started = time.monotonic()

    with pytest.raises(UserCodeError) as failure:
        op.execute({"ti": ti})

    message = str(failure.value)
    assert f"the server of default/{serving_names(identity).lws} exited with code 1" in message
    assert "PATHWAYS_TESTING_TTFT_MS=-5.0: must be >= 0" in message
    assert time.monotonic() - started < 30  # not the 120 s startup_timeout
    assert leftovers(pathways_cluster, identity) == []


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"results_uri": "gs://no-such-bucket-for-results/run.json"},
            "bucket 'no-such-bucket-for-results' does not exist",
        ),
        (
            {"checkpoint": f"gs://{BUCKET}/inference-tests/never-committed/checkpoints/0/items"},
            "is not committed",
        ),
    ],
    ids=["missing-results-bucket", "uncommitted-checkpoint"],
)
def test_a_benchmark_that_cannot_succeed_is_refused_before_a_slice_is_requested(
    pathways_cluster, checkpoint, bucket, overrides, expected
):
    bucket.blob("inference-tests/never-committed/checkpoints/0/items/params.bin").upload_from_string(
        b"partial"
    )
    ti = TaskInstance("serving", "refused", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    with pytest.raises(BadSpecError, match=expected):
        benchmark("refused", **{"checkpoint": checkpoint, **overrides}).execute({"ti": ti})

    assert leftovers(pathways_cluster, identity) == []
    assert (
        pathways_cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", serving_names(identity).lws)
        is None
    )


def test_a_server_that_is_still_loading_times_out_with_the_leaders_log(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "slow_server", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark(
        "slow_server", checkpoint, env={"PATHWAYS_TESTING_WARMUP_SECONDS": "100000"}, startup_timeout=2
    )

    with pytest.raises(PathwaysError) as failure:
        op.execute({"ti": ti})

    message = str(failure.value)
    assert "did not serve within startup_timeout=2s" in message
    assert "listening on ports 8000 and 9000; loading model llama2-7b" in message
    assert leftovers(pathways_cluster, identity) == []


def test_on_kill_while_the_server_starts_leaves_nothing(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "killed", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark(
        "killed", checkpoint, env={"PATHWAYS_TESTING_WARMUP_SECONDS": "100000"}, startup_timeout=300
    )
    outcome: dict = {}

    def run():
        try:
            op.execute({"ti": ti})
        except BaseException as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    leader = f"{serving_names(identity).lws}-0"
    deadline = time.monotonic() + 15
    while (
        not (pod := pathways_cluster.get("v1", "Pod", leader))
        or (pod.get("status") or {}).get("phase") != "Running"
    ):
        assert time.monotonic() < deadline, "the leader pod never ran"
        time.sleep(0.05)

    op.on_kill()
    worker.join(15)

    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), PathwaysError) and "was stopped" in str(outcome["error"])
    eventually_nothing_left(pathways_cluster, identity)


def test_deploy_serves_a_retry_adopts_it_and_teardown_deletes_it(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "deploy", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    server = DeployInferenceServerOperator(task_id="deploy", **server_params(checkpoint)).execute({"ti": ti})
    names = serving_names(identity)
    uid = pathways_cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", names.lws)["metadata"]["uid"]

    retried = DeployInferenceServerOperator(task_id="deploy", **server_params(checkpoint)).execute({"ti": ti})

    assert retried == server  # a retry adopts the live server instead of requesting a second slice
    assert (
        pathways_cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", names.lws)["metadata"]["uid"]
        == uid
    )
    assert server == {
        "name": names.lws,
        "service": names.service,
        "namespace": "default",
        "engine": "jetstream",
        "http_port": 8000,
        "benchmark_port": 9000,
        "task_key": identity.key,
    }
    reply = PathwaysHook().request(
        "POST",
        f"/api/v1/namespaces/default/services/{names.service}:8000/proxy/generate",
        body={"prompt": "hello tpu", "max_tokens": 3},
    )
    assert reply["response"] == "hello tpu hello"

    teardown = TeardownInferenceServerOperator(
        task_id="teardown", deploy_task_id="deploy", cleanup_timeout=20
    )
    deleted = teardown.execute({"ti": TaskInstance("serving", "teardown", "run-1")})

    assert sorted(deleted) == sorted([f"LeaderWorkerSet/{names.lws}", f"Service/{names.service}"])
    assert leftovers(pathways_cluster, identity) == []
    assert teardown.execute({"ti": TaskInstance("serving", "teardown", "run-1")}) == []


def test_a_deploy_whose_server_crashes_deletes_it_itself(pathways_cluster, checkpoint):
    """A teardown task does not run after its setup failed, so the setup cleans up after itself."""
    ti = TaskInstance("serving", "deploy_crashes", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = DeployInferenceServerOperator(
        task_id="deploy_crashes", **server_params(checkpoint, env={"PATHWAYS_TESTING_TTFT_MS": "-5"})
    )

    with pytest.raises(UserCodeError, match="exited with code 1"):
        op.execute({"ti": ti})

    assert leftovers(pathways_cluster, identity) == []


def test_teardown_by_name_never_deletes_what_pathways_airflow_did_not_create(pathways_cluster):
    hook = PathwaysHook()
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "someones-svc", "namespace": "default"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]},
    }
    hook.create(foreign)
    try:
        teardown = TeardownInferenceServerOperator(
            task_id="teardown", server={"name": "someones"}, cleanup_timeout=5
        )
        assert teardown.execute({"ti": TaskInstance("serving", "teardown", "run-2")}) == []
        assert pathways_cluster.get("v1", "Service", "someones-svc") is not None
    finally:
        hook.delete(SERVICE, "default", "someones-svc")


# --- deferred: the benchmark Job is waited for in the triggerer ---------------------------------


def deferred_benchmark(task_id: str, checkpoint, **overrides) -> tuple[InferenceBenchmarkOperator, TaskInstance, TaskDeferred]:
    """A benchmark that served, started its Job and deferred, as the worker leaves it."""
    op = benchmark(task_id, checkpoint, deferrable=True, **overrides)
    ti = TaskInstance("serving", task_id, "run-1")
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({"ti": ti})
    return op, ti, deferred.value


def test_a_deferred_benchmark_resumes_from_the_triggers_event_and_leaves_nothing(pathways_cluster, checkpoint, bucket):
    op, ti, deferred = deferred_benchmark("bench_deferred", checkpoint)
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    names = serving_names(identity)
    assert deferred.trigger.name == names.job and deferred.method_name == "execute_complete"
    assert {f"LeaderWorkerSet/{names.lws}", f"Service/{names.service}", f"Job/{names.job}"} <= set(
        leftovers(pathways_cluster, identity)
    )  # the server serves the Job while the task is deferred

    event = first_event(deferred.trigger, timeout=30)

    assert event["status"] == "complete"
    result = getattr(op, deferred.method_name)({"ti": ti}, event, **(deferred.kwargs or {}))
    assert set(METRIC_KEYS) <= set(result) and result["completed"] == 6
    assert result["result_uri"] == f"gs://{BUCKET}/inference-tests/results/{names.lws}.json"
    assert leftovers(pathways_cluster, identity) == []


def test_a_deferred_benchmark_that_fails_raises_the_one_failed_job_rule_and_leaves_nothing(pathways_cluster, checkpoint):
    op, ti, deferred = deferred_benchmark(
        "bench_deferred_fails",
        checkpoint,
        benchmark_env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "3"},
    )
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    event = first_event(deferred.trigger, timeout=30)

    assert (event["status"], event["reason"]) == ("failed", "BackoffLimitExceeded")
    with pytest.raises(UserCodeError) as failure:
        op.execute_complete({"ti": ti}, event, **(deferred.kwargs or {}))
    assert failure.value.exit_code == 3
    assert "| benchmark: exiting with code 3" in str(failure.value)
    assert leftovers(pathways_cluster, identity) == []


def test_killing_the_deferred_benchmark_deletes_the_job_and_the_server(pathways_cluster, checkpoint):
    _, ti, deferred = deferred_benchmark(
        "bench_deferred_killed", checkpoint, benchmark_env={"PATHWAYS_TESTING_PROGRAM": "idle"}
    )
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    killed_after(deferred.trigger, 0.5)

    eventually_nothing_left(pathways_cluster, identity)


def test_a_deferred_benchmark_past_its_deadline_deletes_the_job_then_the_server(pathways_cluster, checkpoint):
    op, ti, deferred = deferred_benchmark(
        "bench_deferred_late", checkpoint, benchmark_env={"PATHWAYS_TESTING_PROGRAM": "idle"}
    )
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    assert deferred.kwargs == {"limit": "3900s"}
    deferred.trigger.deadline = time.time() + 0.5

    event = first_event(deferred.trigger, timeout=30)

    assert (event["status"], event["deleted"]) == ("timeout", True)
    with pytest.raises(InfrastructureError, match="did not finish within 3900s"):
        op.execute_complete({"ti": ti}, event, **deferred.kwargs)
    assert leftovers(pathways_cluster, identity) == []


def test_a_task_left_deferred_and_run_again_reattaches_to_its_server_and_job(pathways_cluster, checkpoint):
    op, ti, deferred = deferred_benchmark(
        "bench_reattached", checkpoint, benchmark_env={"PATHWAYS_TESTING_PROGRAM": "idle"}
    )
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    names = serving_names(identity)
    hook = PathwaysHook()
    job_uid = hook.get(JOB, "default", names.job)["metadata"]["uid"]
    lws_uid = pathways_cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", names.lws)["metadata"]["uid"]

    with pytest.raises(TaskDeferred) as again:
        op.execute_complete({"ti": ti}, None)

    assert again.value.trigger.name == names.job
    assert hook.get(JOB, "default", names.job)["metadata"]["uid"] == job_uid
    assert pathways_cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", names.lws)["metadata"]["uid"] == lws_uid
    killed_after(again.value.trigger, 0.5)
    eventually_nothing_left(pathways_cluster, identity)
