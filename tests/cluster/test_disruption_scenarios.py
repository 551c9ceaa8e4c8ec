"""Spot preemption, slice loss and user failures, as the cluster shows them to clients."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client, config

from pathways_airflow import well_known
from pathways_airflow.spec import build_workload, render
from pathways_airflow.state.slices import is_ready, is_terminating, is_under_maintenance, scheduled_maintenance
from pathways_airflow.testing import LocalCluster, NodePool, tpu_pool

from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def cluster(crds):
    pools = [NodePool("default-pool", "n2-standard-64", nodes=2), *(tpu_pool(f"spot-{i}", "ct5lp-hightpu-4t", "2x4", spot=True) for i in range(3))]
    with LocalCluster(node_pools=pools, crds=[crds], speed=60, kueue=False) as local:
        yield local


def submit(cluster, name, **env):
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="python:3.11", command=["python3", "serve.py"],
        env={"PATHWAYS_TESTING_PROGRAM": "idle", **env}, spot=True,
    )
    cluster.apply(render(workload, backend="jobset", name=name, namespace="default"))
    return wait_for(lambda: len(running(cluster, name)) == 3 and running(cluster, name))


@pytest.fixture
def cleanup(cluster):
    names = []
    yield names
    custom = client.CustomObjectsApi(config.new_client_from_config(cluster.kubeconfig))
    for name in names:
        custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", name, propagation_policy="Foreground")
        wait_for(lambda n=name: not cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": n}))


def running(cluster, name):
    return [p for p in cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name}) if p["status"].get("phase") == "Running"]


def pool_of(cluster, pod):
    return cluster.get("v1", "Node", pod["spec"]["nodeName"], namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"]


def worker(pods):
    return next(p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker")


@pytest.mark.parametrize(("scenario", "reason"), [("preempt_spot", "TerminationByKubelet"), ("lose_slice", "DeletionByTaintManager")])
def test_losing_a_slice_marks_pods_as_disrupted_and_the_jobset_restarts_for_free(cluster, cleanup, scenario, reason):
    name = f"{scenario.replace('_', '-')}"
    cleanup.append(name)
    pods = submit(cluster, name)
    victim = worker(pods)
    seen = []
    core = client.CoreV1Api(config.new_client_from_config(cluster.kubeconfig))
    from kubernetes import watch

    def observe():
        for event in watch.Watch().stream(core.list_namespaced_pod, "default", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}", timeout_seconds=5):
            pod = event["object"]
            if pod.metadata.name == victim["metadata"]["name"] and pod.status.conditions:
                seen.extend((c.type, c.reason) for c in pod.status.conditions if c.type == "DisruptionTarget")

    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    time.sleep(0.3)
    getattr(cluster, scenario)(pool_of(cluster, victim), downtime=60)
    jobset = wait_for(lambda: (js := cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name)) and js["status"].get("restarts") == 1 and js)
    assert jobset["status"].get("restartsCountTowardsMax", 0) == 0
    observer.join(10)
    assert ("DisruptionTarget", reason) in seen
    restarted = wait_for(lambda: len(running(cluster, name)) == 3 and running(cluster, name))
    assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for p in restarted} == {"1"}
    assert pool_of(cluster, worker(restarted)) != pool_of(cluster, victim)


def test_fail_pod_makes_the_program_exit_with_the_code(cluster, cleanup):
    cleanup.append("crash")
    pods = submit(cluster, "crash")
    head = next(p for p in pods if "pathways-head" in p["metadata"]["name"])
    assert cluster.fail_pod("default", head["metadata"]["name"], exit_code=2)
    jobset = wait_for(lambda: (js := cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", "crash")) and js["status"].get("terminalState") and js)
    assert jobset["status"]["terminalState"] == "Failed"
    pod = cluster.get("v1", "Pod", head["metadata"]["name"])
    main = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "main")
    assert main["state"]["terminated"]["exitCode"] == 2


def test_following_a_log_streams_until_the_container_ends(cluster, cleanup):
    cleanup.append("follow")
    pods = submit(cluster, "follow")
    head = next(p for p in pods if "pathways-head" in p["metadata"]["name"])
    core = client.CoreV1Api(config.new_client_from_config(cluster.kubeconfig))
    stream = core.read_namespaced_pod_log(head["metadata"]["name"], "default", container="main", follow=True, _preload_content=False)
    threading.Timer(0.5, lambda: cluster.fail_pod("default", head["metadata"]["name"], exit_code=1)).start()
    started = time.monotonic()
    text = stream.read().decode()
    assert "idling" in text and 0.4 < time.monotonic() - started < 10


def test_a_spot_vm_back_from_preemption_keeps_the_maintenance_announced_for_its_pool(cluster):
    """The nodes return Ready without the termination taint, and GKE's announcement stays: only the
    maintenance itself, when it has passed, clears its labels (a run minding it must still see it)."""
    pool = "spot-2"
    cluster.preempt_spot(pool, downtime=120)
    cluster.maintenance(pool, notice=240, duration=30, wait=False)

    def nodes():
        return [n for n in cluster.list("v1", "Node", None) if n["metadata"]["labels"][well_known.NODEPOOL] == pool]

    back = wait_for(lambda: (found := nodes()) and all(is_ready(n) for n in found) and found)
    assert all(scheduled_maintenance(n) is not None for n in back)
    assert not any(is_terminating(n) for n in back)
    # The maintenance begins and passes on its own: the module's other tests get a clean pool.
    wait_for(lambda: all(is_under_maintenance(n) for n in nodes()))
    wait_for(lambda: not any(is_under_maintenance(n) or scheduled_maintenance(n) is not None for n in nodes()))
