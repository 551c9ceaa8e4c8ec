"""The inference operators with vLLM (the default engine) in-process against the local cluster:
``vllm serve`` through MaxText's plugin on Pathways or alone on one VM, ``/health``,
``vllm bench serve``, the flat result JSON, and nothing left behind on any path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import PathwaysError, UserCodeError
from pathways_airflow.operators import DeployInferenceServerOperator, InferenceBenchmarkOperator, TeardownInferenceServerOperator
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.serving import serving_names
from pathways_airflow.spec.vllm import METRIC_KEYS
from pathways_airflow.testing import LocalCluster, NodePool, tpu_pool
from tests.support.connections import connect
from tests.support.gcs import gcs_bucket
from tests.support.serving import committed_serving_checkpoint, eventually_nothing_left, leftovers
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event, killed_after

BUCKET = "pathways-demo"
HF_MODEL = "meta-llama/Llama-2-7b-hf"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl") or "kubectl"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture(scope="module")
def bucket(pathways_cluster):
    with gcs_bucket(pathways_cluster, BUCKET) as bucket:
        yield bucket


@pytest.fixture(scope="module")
def checkpoint(bucket) -> dict:
    return committed_serving_checkpoint(bucket, "vllm-tests/converted/checkpoints/0")


def server_params(checkpoint, **overrides) -> dict:
    params = dict(
        checkpoint=checkpoint,
        model_name="llama2-7b",
        hf_model=HF_MODEL,
        image="us-docker.pkg.dev/my-project/maxtext/maxtext-vllm:latest",
        tpu="v5e",
        topology="2x4",
        pathways_dir=f"gs://{BUCKET}/tmp",
        env={"PATHWAYS_TESTING_WARMUP_SECONDS": "30", "PATHWAYS_TESTING_TTFT_MS": "2", "PATHWAYS_TESTING_TPOT_MS": "1"},
        startup_timeout=60,
        poll_interval=0.05,
        cleanup_timeout=20,
    )
    return {**params, **overrides}


def benchmark(task_id: str, checkpoint, **overrides) -> InferenceBenchmarkOperator:
    params = server_params(
        checkpoint,
        num_prompts=6,
        request_rate="inf",
        max_concurrency=3,
        max_output_length=8,
        results_uri=f"gs://{BUCKET}/vllm-tests/results/",
    )
    return InferenceBenchmarkOperator(task_id=task_id, **{**params, **overrides})


def test_vllm_serves_the_maxtext_checkpoint_benchmarks_it_and_leaves_nothing(pathways_cluster, checkpoint, bucket):
    ti = TaskInstance("serving", "vllm_ok", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    result = benchmark("vllm_ok", checkpoint).execute({"ti": ti})

    assert set(METRIC_KEYS) <= set(result) and result["engine"] == "vllm"
    assert result["completed"] == 6 and result["failed"] == 0
    assert result["p99_ttft_ms"] >= result["median_ttft_ms"] > 0 and result["mean_e2el_ms"] > 0
    name = serving_names(identity).lws
    assert result["result_uri"] == f"gs://{BUCKET}/vllm-tests/results/{name}.json"
    saved = json.loads(bucket.blob(f"vllm-tests/results/{name}.json").download_as_bytes())
    assert (saved["model_id"], saved["max_concurrency"], saved["request_rate"]) == (HF_MODEL, 3, "inf")
    assert saved["max_concurrent_requests"] <= 3
    assert leftovers(pathways_cluster, identity) == []


def test_a_benchmark_whose_requests_failed_is_refused_with_the_first_error(pathways_cluster, checkpoint, bucket):
    ti = TaskInstance("serving", "vllm_failed_requests", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    env = {**server_params(checkpoint)["env"], "PATHWAYS_TESTING_FAILED_REQUESTS": "2"}

    with pytest.raises(UserCodeError) as failure:
        benchmark("vllm_failed_requests", checkpoint, env=env).execute({"ti": ti})

    message = str(failure.value)
    assert message.startswith("2 of 6 benchmark requests failed, so the run measured a different load; the benchmark's log lists the errors")
    name = serving_names(identity).lws
    assert f"(result kept at gs://{BUCKET}/vllm-tests/results/{name}.json)" in message
    assert json.loads(bucket.blob(f"vllm-tests/results/{name}.json").download_as_bytes())["failed"] == 2
    assert leftovers(pathways_cluster, identity) == []


def test_vllm_that_exits_while_starting_fails_at_once_with_its_log(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "vllm_crashes", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    started = time.monotonic()

    with pytest.raises(UserCodeError) as failure:
        benchmark(
            "vllm_crashes", checkpoint, env={"PATHWAYS_TESTING_TTFT_MS": "-5"}, startup_timeout=120
        ).execute({"ti": ti})

    message = str(failure.value)
    assert f"the server of default/{serving_names(identity).lws} exited with code 1" in message
    assert f"log lines of {serving_names(identity).lws}-0/vllm:" in message  # the engine's container
    assert "| error: PATHWAYS_TESTING_TTFT_MS=-5.0: must be >= 0" in message
    assert time.monotonic() - started < 30  # not the 120 s startup_timeout
    assert leftovers(pathways_cluster, identity) == []


@pytest.fixture(scope="module")
def one_vm_cluster(crds, pytestconfig):
    """A cluster whose only TPU slice is one v5e VM (2x2): what single-host serving is for."""
    pools = [NodePool("default-pool", "n2-standard-64", nodes=1), tpu_pool("tpu-v5e-2x2-0", "ct5lp-hightpu-4t", "2x2")]
    speed = pytestconfig.getoption("--pathways-speed")
    with LocalCluster(node_pools=pools, crds=[crds], speed=speed) as cluster:
        with gcs_bucket(cluster, BUCKET):
            yield cluster


def test_on_one_vm_vllm_serves_hugging_face_weights_without_pathways_from_one_pod(one_vm_cluster, monkeypatch):
    connect(monkeypatch, one_vm_cluster)
    ti = TaskInstance("serving", "vllm_single_host", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    op = benchmark(
        "vllm_single_host", None, model_name=None, image=None, topology="2x2", pathways=False, pathways_dir=None
    )

    result = op.execute({"ti": ti})

    assert result["completed"] == 6 and result["engine"] == "vllm"
    assert leftovers(one_vm_cluster, identity) == []


def test_deploy_and_teardown_serve_the_openai_api_between_them(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "deploy_vllm", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)

    server = DeployInferenceServerOperator(task_id="deploy_vllm", **server_params(checkpoint)).execute({"ti": ti})

    assert (server["engine"], server["http_port"], server["benchmark_port"]) == ("vllm", 8000, 8000)
    models = subprocess.run(
        [KUBECTL, "--kubeconfig", pathways_cluster.kubeconfig, "get", "--raw",
         f"/api/v1/namespaces/default/services/{server['service']}:8000/proxy/v1/models"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    assert [m["id"] for m in json.loads(models)["data"]] == [HF_MODEL]
    deleted = TeardownInferenceServerOperator(task_id="teardown", deploy_task_id="deploy_vllm", cleanup_timeout=20).execute(
        {"ti": TaskInstance("serving", "teardown", "run-1")}
    )
    assert f"LeaderWorkerSet/{server['name']}" in deleted
    eventually_nothing_left(pathways_cluster, identity)


def test_on_kill_while_vllm_loads_leaves_nothing(pathways_cluster, checkpoint):
    ti = TaskInstance("serving", "vllm_killed", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    env = {**server_params(checkpoint)["env"], "PATHWAYS_TESTING_WARMUP_SECONDS": "100000"}
    op = benchmark("vllm_killed", checkpoint, env=env, startup_timeout=300)
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
    while not (pod := pathways_cluster.get("v1", "Pod", leader)) or (pod.get("status") or {}).get("phase") != "Running":
        assert time.monotonic() < deadline, "the leader pod never ran"
        time.sleep(0.05)

    op.on_kill()
    worker.join(15)

    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), PathwaysError) and "was stopped" in str(outcome["error"])
    eventually_nothing_left(pathways_cluster, identity)


def test_a_deferred_vllm_benchmark_resumes_from_the_triggers_event_and_leaves_nothing(pathways_cluster, checkpoint):
    op = benchmark("vllm_deferred", checkpoint, deferrable=True)
    ti = TaskInstance("serving", "vllm_deferred", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({"ti": ti})

    event = first_event(deferred.value.trigger, timeout=30)

    assert event["status"] == "complete"
    result = op.execute_complete({"ti": ti}, event, **(deferred.value.kwargs or {}))
    assert result["engine"] == "vllm" and result["completed"] == 6 and result["failed"] == 0
    assert leftovers(pathways_cluster, identity) == []


def test_killing_a_deferred_vllm_benchmark_deletes_the_job_and_the_server(pathways_cluster, checkpoint):
    op = benchmark("vllm_deferred_killed", checkpoint, deferrable=True, benchmark_env={"PATHWAYS_TESTING_PROGRAM": "idle"})
    ti = TaskInstance("serving", "vllm_deferred_killed", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({"ti": ti})

    killed_after(deferred.value.trigger, 0.5)

    eventually_nothing_left(pathways_cluster, identity)
