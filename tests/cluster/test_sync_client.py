"""The real ``kubernetes`` client, unchanged, against the local cluster."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tests.support.waiting import wait_for

PATHWAYS = ("pathways-job.pathways.domain", "v1", "pathwaysjobs")


@pytest.fixture(scope="module")
def api(pathways_cluster):
    return config.new_client_from_config(pathways_cluster.kubeconfig)


def test_discovery_and_version(api):
    assert client.VersionApi(api).get_code().git_version.startswith("v1.32")
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "jobset.x-k8s.io", "pathways-job.pathways.domain", "kueue.x-k8s.io", "leaderworkerset.x-k8s.io"} <= groups
    resources = client.CustomObjectsApi(api).get_api_resources("pathways-job.pathways.domain", "v1")
    assert [r.name for r in resources.resources] == ["pathwaysjobs", "pathwaysjobs/status"]


def test_configmap_crud_with_every_patch_type(api):
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": "crud", "labels": {"app": "x"}}, "data": {"a": "1"}}
    created = core.create_namespaced_config_map("default", body)
    assert created.metadata.uid and created.metadata.resource_version
    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_config_map("default", body)
    assert conflict.value.status == 409 and "AlreadyExists" in conflict.value.body

    patched = core.patch_namespaced_config_map("crud", "default", {"data": {"b": "2"}, "metadata": {"labels": {"tier": "t"}}})
    assert patched.data == {"a": "1", "b": "2"} and patched.metadata.labels == {"app": "x", "tier": "t"}
    patched = core.patch_namespaced_config_map("crud", "default", [{"op": "remove", "path": "/data/a"}])
    assert patched.data == {"b": "2"}

    stale = created
    stale.data = {"c": "3"}
    with pytest.raises(ApiException) as stale_write:
        core.replace_namespaced_config_map("crud", "default", stale)
    assert stale_write.value.status == 409 and "Conflict" in stale_write.value.body

    fresh = core.read_namespaced_config_map("crud", "default")
    fresh.data = {"c": "3"}
    assert core.replace_namespaced_config_map("crud", "default", fresh).data == {"c": "3"}
    listed = core.list_namespaced_config_map("default", label_selector="app=x,tier in (t)")
    assert [c.metadata.name for c in listed.items] == ["crud"]
    assert core.list_namespaced_config_map("default", label_selector="app!=x").items == []
    core.delete_namespaced_config_map("crud", "default")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("crud", "default")
    assert missing.value.status == 404


def test_a_job_runs_its_pod_to_completion_and_logs(api):
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "exit-three"},
            "spec": {
                "backoffLimit": 1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "bash", "command": ["bash", "-c", "exit 3"]}]}},
            },
        },
    )
    job = wait_for(lambda: (j := batch.read_namespaced_job("exit-three", "default")).status.conditions and j)
    failed = [c for c in job.status.conditions if c.type == "Failed"]
    assert failed and failed[0].reason == "BackoffLimitExceeded" and job.status.failed == 2
    pods = core.list_namespaced_pod("default", label_selector="batch.kubernetes.io/job-name=exit-three").items
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Failed"}
    assert pods[0].status.container_statuses[0].state.terminated.exit_code == 3
    response = core.read_namespaced_pod_log(pods[0].metadata.name, "default", container="main", _preload_content=False)
    assert response.data.decode().strip().endswith("3")
    by_field = core.list_namespaced_pod("default", field_selector=f"metadata.name={pods[0].metadata.name},status.phase=Failed")
    assert len(by_field.items) == 1
    batch.delete_namespaced_job("exit-three", "default", propagation_policy="Foreground")
    wait_for(lambda: not core.list_namespaced_pod("default", label_selector="batch.kubernetes.io/job-name=exit-three").items)


def test_a_pod_deleted_before_it_ends_counts_as_failed_and_suspend_does_not(api):
    """As Kubernetes' pod tracking finalizers count it: the Job keeps the loss after the pod is gone."""
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    selector = "batch.kubernetes.io/job-name=lost-pod"
    batch.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "lost-pod"},
            "spec": {
                "backoffLimit": 3,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "bash", "command": ["bash", "-c", "sleep 3600"]}]}},
            },
        },
    )
    try:
        first = wait_for(lambda: core.list_namespaced_pod("default", label_selector=selector).items)[0]
        core.delete_namespaced_pod(first.metadata.name, "default", grace_period_seconds=0)
        job = wait_for(lambda: (j := batch.read_namespaced_job("lost-pod", "default")).status.failed and j)
        assert job.status.failed == 1
        replacement = wait_for(lambda: [p for p in core.list_namespaced_pod("default", label_selector=selector).items if p.metadata.name != first.metadata.name])
        assert len(replacement) == 1

        batch.patch_namespaced_job("lost-pod", "default", {"spec": {"suspend": True}})
        wait_for(lambda: not core.list_namespaced_pod("default", label_selector=selector).items)
        time.sleep(0.3)
        assert batch.read_namespaced_job("lost-pod", "default").status.failed == 1
    finally:
        batch.delete_namespaced_job("lost-pod", "default", propagation_policy="Foreground")
        wait_for(lambda: not core.list_namespaced_pod("default", label_selector=selector).items)


def test_watch_from_a_resource_version_and_410_after_compaction(api, pathways_cluster):
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(3):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"w{i}"}})
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1):
        seen.append((event["type"], event["object"].metadata.name))
    assert [s for s in seen if s[1].startswith("w")] == [("ADDED", "w0"), ("ADDED", "w1"), ("ADDED", "w2")]

    pathways_cluster.compact()
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1):
            pass
    assert gone.value.status == 410
    for i in range(3):
        core.delete_namespaced_config_map(f"w{i}", "default")


def test_bookmarks_arrive_when_asked_for(api):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    raw = core.list_namespaced_config_map(
        "default", watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=2, _preload_content=False
    )
    events = [json.loads(line) for line in raw.read().decode().splitlines() if line]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_injected_errors_reach_the_client(api, pathways_cluster):
    core = client.CoreV1Api(api)
    path = r"/api/v1/namespaces/default/configmaps$"
    pathways_cluster.inject_fault(path, status=500, count=1, methods=["GET"])
    pathways_cluster.inject_fault(path, status=429, count=1, methods=["POST"], retry_after=7)
    with pytest.raises(ApiException) as first:
        core.list_namespaced_config_map("default")
    assert first.value.status == 500 and "InternalError" in first.value.body
    with pytest.raises(ApiException) as second:
        core.create_namespaced_config_map("default", {"metadata": {"name": "after-429"}})
    assert second.value.status == 429 and second.value.headers["Retry-After"] == "7"
    core.create_namespaced_config_map("default", {"metadata": {"name": "after-429"}})
    core.delete_namespaced_config_map("after-429", "default")


def test_the_client_itself_retries_an_idempotent_429_after_retry_after(api, pathways_cluster):
    """urllib3 under the client honours Retry-After on GET: the caller only sees the delay."""
    core = client.CoreV1Api(api)
    rule = pathways_cluster.inject_fault(r"/api/v1/namespaces/default/configmaps$", status=429, count=1, methods=["GET"], retry_after=1)
    started = time.monotonic()
    assert core.list_namespaced_config_map("default").items is not None
    assert time.monotonic() - started >= 1.0 and rule.served == 1


def test_a_dropped_watch_ends_the_stream(api, pathways_cluster):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    ended = threading.Event()

    def consume():
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=30):
            pass
        ended.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    wait_for(lambda: pathways_cluster.api.open_watches, timeout=5)
    started = time.monotonic()
    assert pathways_cluster.drop_watches() >= 1
    assert ended.wait(5) and time.monotonic() - started < 5


def test_invalid_pathwaysjob_is_refused_with_422(api):
    custom = client.CustomObjectsApi(api)
    bad = {
        "apiVersion": "pathways-job.pathways.domain/v1",
        "kind": "PathwaysJob",
        "metadata": {"name": "bad-type"},
        "spec": {
            "workers": [{"type": "ct9-imaginary-4t", "topology": "2x4", "numSlices": 1}],
            "pathwaysDir": "gs://pathways-demo/tmp",
            "controller": {"deploymentMode": "default"},
        },
    }
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(*PATHWAYS[:2], "default", PATHWAYS[2], bad)
    assert refused.value.status == 422
    assert 'spec.workers[0].type: Unsupported value: \\"ct9-imaginary-4t\\"' in refused.value.body


def test_pathwaysjob_reconciles_into_jobset_jobs_and_pods_and_cascades(api, pathways_cluster):
    from pathways_airflow.spec import build_workload, render

    custom, batch, core = client.CustomObjectsApi(api), client.BatchV1Api(api), client.CoreV1Api(api)
    workload = build_workload(
        tpu="v5e", topology="2x4", num_slices=2, pathways_dir="gs://pathways-demo/tmp", image="python:3.11",
        command=["python3", "-c", "import time; time.sleep(1e9)"], env={"PATHWAYS_TESTING_PROGRAM": "idle"},
    )
    manifest = render(workload, backend="pathwaysjob", name="cascade", namespace="default")
    custom.create_namespaced_custom_object(*PATHWAYS[:2], "default", PATHWAYS[2], manifest)
    wait_for(lambda: len(core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=cascade").items) == 5)
    jobset = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "cascade")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "PathwaysJob"
    jobs = sorted(j.metadata.name for j in batch.list_namespaced_job("default", label_selector="jobset.sigs.k8s.io/jobset-name=cascade").items)
    assert jobs == ["cascade-pathways-head-0", "cascade-worker-0", "cascade-worker-1"]
    pods = core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/replicatedjob-name=worker").items
    pools = {}
    for pod in pods:
        labels = pod.metadata.labels
        assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
        assert labels["jobset.sigs.k8s.io/coordinator"] == "cascade-pathways-head-0-0.cascade"
        node = core.read_node(wait_for(lambda p=pod: core.read_namespaced_pod(p.metadata.name, "default").spec.node_name))
        pools.setdefault(labels["jobset.sigs.k8s.io/job-index"], set()).add(node.metadata.labels["cloud.google.com/gke-nodepool"])
    # one slice per node pool: each worker Job's pods share a pool, and no two Jobs share one
    assert all(len(p) == 1 for p in pools.values()) and len(set().union(*pools.values())) == 2

    custom.delete_namespaced_custom_object(*PATHWAYS[:2], "default", PATHWAYS[2], "cascade", propagation_policy="Foreground")
    wait_for(lambda: not core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=cascade").items)
    assert not batch.list_namespaced_job("default", label_selector="jobset.sigs.k8s.io/jobset-name=cascade").items
    with pytest.raises(ApiException):
        custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "cascade")
