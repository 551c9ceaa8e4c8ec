"""The local Kueue: Workloads, quota, FIFO admission, pending reasons, eviction — through the real client."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from pathways_airflow_testing.cluster import LocalCluster
from pathways_airflow_testing.controllers.kueue import (
    INJECTED_NODE_SELECTOR,
    JOB_UID_LABEL,
    FlavorQuota,
    PodSetRequest,
    QueuedWorkload,
    QueueView,
    admit,
    assign_flavors,
    workload_name,
)

from tests.support.waiting import wait_for

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY = "cloud.google.com/gke-tpu-topology"
V5E = {ACCELERATOR: "tpu-v5-lite-podslice", TOPOLOGY: "2x4"}
V6E = {ACCELERATOR: "tpu-v6e-slice", TOPOLOGY: "4x4"}


# --- pure decisions ------------------------------------------------------------------------------


def test_workload_names_follow_kueues_hash():
    # Kueue's own expectations (jobframework/workload_names_test.go)
    assert workload_name("Job", "batch", "name", "uid") == "job-name-ef3a1"
    long = "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-legal-and-ops-dept"
    assert workload_name("Job", "batch", long, "uid").endswith("-approved-by-l-218b8")
    assert len(workload_name("Job", "batch", long, "uid")) == 253
    assert workload_name("JobSet", "jobset.x-k8s.io", "train", "u1").startswith("jobset-train-")


def _slice_request(name: str, chips: int, selector: dict[str, str] = V5E) -> QueuedWorkload:
    pod = {
        "nodeSelector": dict(selector),
        "containers": [{"name": "c", "resources": {"limits": {"google.com/tpu": "4"}}}],
    }
    return QueuedWorkload("ns", name, (PodSetRequest("worker", chips // 4, 4, pod),))


QUEUE = QueueView("cq", (FlavorQuota("v5e", 16, V5E), FlavorQuota("v6e", 32, V6E)))


def test_flavor_assignment_explains_why_not_as_kueue_does():
    assignments, message = assign_flavors(_slice_request("a", 8), QUEUE, {"v5e": 8})
    assert message == "" and assignments is not None
    assert assignments[0].to_api() == {
        "name": "worker",
        "count": 2,
        "flavors": {"google.com/tpu": "v5e"},
        "resourceUsage": {"google.com/tpu": "8"},
    }

    _, busy = assign_flavors(_slice_request("b", 16), QUEUE, {"v5e": 8})
    assert busy == (
        "couldn't assign flavors to pod set worker: flavor v6e doesn't match node affinity, "
        "insufficient unused quota for google.com/tpu in flavor v5e, 8 more needed"
    )
    _, too_big = assign_flavors(_slice_request("c", 24), QUEUE, {})
    assert (
        "insufficient quota for google.com/tpu in flavor v5e, previously considered podsets requests (0) + current podset request (24) > maximum capacity (16)"
        in too_big
    )

    head = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "8"}}}]}
    mixed = QueuedWorkload(
        "ns", "m", (PodSetRequest("head", 1, 0, head), *_slice_request("m", 32, V6E).pod_sets)
    )
    assignments, _ = assign_flavors(mixed, QUEUE, {})
    assert assignments is not None and [(a.name, a.flavor, a.chips) for a in assignments] == [
        ("head", None, 0),
        ("worker", "v6e", 32),
    ]


def test_best_effort_fifo_lets_smaller_workloads_past_a_stuck_head_and_strict_fifo_does_not():
    queued = [_slice_request("big", 16), _slice_request("small", 8), _slice_request("later", 8)]
    best_effort = admit(queued, QUEUE, {"v5e": 8})
    assert [(d.workload.name, d.admitted) for d in best_effort] == [
        ("big", False),
        ("small", True),
        ("later", False),
    ]
    assert best_effort[2].message and "8 more needed" in best_effort[2].message
    strict = admit(queued, QueueView("cq", QUEUE.flavors, "StrictFIFO"), {"v5e": 8})
    assert [(d.workload.name, d.admitted, d.message is None) for d in strict] == [
        ("big", False, False),
        ("small", False, True),
        ("later", False, True),
    ]


# --- against the local cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(crds: Path):
    with LocalCluster(
        crds=[crds], gcs=False, kueue=False, speed=100, namespaces=("fifo", "lq", "evict", "quota", "jobs", "overtime")
    ) as running:
        yield running


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(cluster.kubeconfig)


@pytest.fixture(scope="module")
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def tpu_jobset(
    name: str,
    queue: str | None,
    *,
    hosts: int = 2,
    selector: dict[str, str] = V5E,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet of one TPU slice: ``hosts`` pods of 4 chips each."""
    all_labels = {**({"kueue.x-k8s.io/queue-name": queue} if queue else {}), **(labels or {})}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": hosts,
                            "completions": hosts,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "nodeSelector": dict(selector),
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "command": ["sleep", "infinity"],
                                            "resources": {"limits": {"google.com/tpu": "4"}},
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ]
        },
    }


def visibility(cluster: LocalCluster, path: str, *, status: int = 200) -> dict[str, Any]:
    """A GET of Kueue's visibility API, as ``kubectl get --raw`` sends it."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{cluster.server}/apis/visibility.kueue.x-k8s.io/v1beta2{path}", headers={"Authorization": f"Bearer {cluster.token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            got, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        got, body = error.code, error.read()
    assert got == status, body
    return json.loads(body)


def queue_objects(
    name: str, namespace: str, chips: int, flavor: str = "vlp-24"
) -> list[tuple[str, dict[str, Any]]]:
    """A ClusterQueue ``name`` over ``flavor`` and a LocalQueue ``name`` in ``namespace``."""
    return [
        (
            "clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["google.com/tpu"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [{"name": "google.com/tpu", "nominalQuota": chips}],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        (
            "localqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": name},
            },
        ),
    ]


def create_queues(custom: client.CustomObjectsApi, objects: list[tuple[str, dict[str, Any]]]) -> None:
    for plural, body in objects:
        if body["metadata"].get("namespace"):
            custom.create_namespaced_custom_object(*KUEUE, body["metadata"]["namespace"], plural, body)
        else:
            custom.create_cluster_custom_object(*KUEUE, plural, body)


def workload_of(
    custom: client.CustomObjectsApi, namespace: str, jobset: dict[str, Any]
) -> dict[str, Any] | None:
    items = custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")["items"]
    return next(
        (w for w in items if w["metadata"]["labels"].get(JOB_UID_LABEL) == jobset["metadata"]["uid"]), None
    )


def cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return next(
        (c for c in ((obj or {}).get("status") or {}).get("conditions") or () if c["type"] == type_), {}
    )


def workload_when(
    custom: client.CustomObjectsApi, namespace: str, jobset: dict[str, Any], type_: str, **wanted: str
) -> dict[str, Any]:
    """The Workload of ``jobset`` once its condition ``type_`` has the ``wanted`` fields (default status True)."""
    wanted = {"status": "True", **wanted}

    def ready() -> dict[str, Any] | None:
        workload = workload_of(custom, namespace, jobset)
        found = cond(workload, type_)
        return workload if all(found.get(k) == v for k, v in wanted.items()) else None

    return wait_for(ready, what=f"{type_} {wanted} on the Workload of {jobset['metadata']['name']}")


def jobset_when(
    custom: client.CustomObjectsApi, namespace: str, name: str, *, suspended: bool
) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        jobset = custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", name)
        return jobset if jobset["spec"].get("suspend") is suspended else None

    return wait_for(ready, what=f"JobSet {namespace}/{name} suspend={suspended}")


def running_pods(cluster: LocalCluster, namespace: str) -> int:
    return sum(
        1 for p in cluster.list("v1", "Pod", namespace) if (p.get("status") or {}).get("phase") == "Running"
    )


def events_for(cluster: LocalCluster, namespace: str, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in cluster.list("v1", "Event", namespace)
        if e["involvedObject"]["name"] == name
    ]


def finish_pods(cluster: LocalCluster, namespace: str, jobset: str) -> None:
    """Every pod of the JobSet exits 0 now."""
    pods = cluster.list("v1", "Pod", namespace, labels={"jobset.sigs.k8s.io/jobset-name": jobset})
    for pod in pods:
        name = pod["metadata"]["name"]
        wait_for(lambda name=name: cluster.fail_pod(namespace, name, exit_code=0), what=f"{name} running")


def test_jobsets_are_admitted_in_creation_order_while_quota_lasts(
    cluster, custom, upstream_samples, schema_validator
):
    # The GKE multislice tutorial's queue objects (kueue.x-k8s.io/v1beta1), shrunk to two slices of chips.
    seed = [d for d in yaml.safe_load_all((upstream_samples / "seed-kueue-tpu-queue.yaml").read_text()) if d]
    for document in seed:
        cluster.apply(document)
    cluster.set_quota("cluster-queue", "vlp-24", 16)

    names = ["first", "second", "third"]
    for name in names:
        custom.create_namespaced_custom_object(
            *JOBSET, "default", "jobsets", tpu_jobset(name, "multislice-queue")
        )
    jobsets = {n: custom.get_namespaced_custom_object(*JOBSET, "default", "jobsets", n) for n in names}

    third = workload_when(
        custom, "default", jobsets["third"], "QuotaReserved", status="False", reason="Pending"
    )
    assert cond(third, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set worker: "
        "insufficient unused quota for google.com/tpu in flavor vlp-24, 8 more needed"
    )
    assert jobset_when(custom, "default", "third", suspended=True)
    first = workload_when(custom, "default", jobsets["first"], "Admitted")
    workload_when(custom, "default", jobsets["second"], "Admitted")

    uid = jobsets["first"]["metadata"]["uid"]
    assert first["metadata"]["name"] == workload_name("JobSet", "jobset.x-k8s.io", "first", uid)
    assert first["metadata"]["labels"] == {JOB_UID_LABEL: uid}
    assert first["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "first",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert first["spec"]["queueName"] == "multislice-queue" and first["spec"]["podSets"][0]["count"] == 2
    assert first["status"]["admission"] == {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": "worker",
                "count": 2,
                "flavors": {"google.com/tpu": "vlp-24"},
                "resourceUsage": {"google.com/tpu": "8"},
            }
        ],
    }
    assert (cond(first, "QuotaReserved")["reason"], cond(first, "Admitted")["reason"]) == (
        "QuotaReserved",
        "Admitted",
    )
    assert schema_validator.errors(first) == []

    started = jobset_when(custom, "default", "first", suspended=False)
    assert json.loads(started["metadata"]["annotations"][INJECTED_NODE_SELECTOR]) == V5E
    assert started["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] == V5E
    assert ("Started", "Admitted by clusterQueue cluster-queue") in events_for(cluster, "default", "first")
    reasons = [r for r, _ in events_for(cluster, "default", first["metadata"]["name"])]
    assert "QuotaReserved" in reasons and "Admitted" in reasons

    def cluster_queue_status() -> dict[str, Any] | None:
        status = cluster.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cluster-queue", None)["status"]
        return status if status.get("pendingWorkloads") == 1 else None

    status = wait_for(cluster_queue_status, what="ClusterQueue status")
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (2, 2)
    assert status["flavorsReservation"] == [
        {"name": "vlp-24", "resources": [{"name": "google.com/tpu", "total": "16", "borrowed": "0"}]}
    ]
    local = cluster.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "multislice-queue", "default")
    assert (local["status"]["pendingWorkloads"], local["status"]["admittedWorkloads"]) == (1, 2)
    assert cond(local, "Active")["status"] == "True"

    # Kueue's visibility API lists the pending one, where it stands (apis/visibility/v1beta2/types.go).
    summary = visibility(cluster, "/namespaces/default/localqueues/multislice-queue/pendingworkloads")
    assert summary["kind"] == "PendingWorkloadsSummary"
    [pending] = summary["items"]
    assert pending["metadata"]["name"] == third["metadata"]["name"]
    assert pending["metadata"]["ownerReferences"] == [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "third", "uid": jobsets["third"]["metadata"]["uid"]}]
    assert (pending["localQueueName"], pending["positionInClusterQueue"], pending["positionInLocalQueue"], pending["priority"]) == ("multislice-queue", 0, 0, 0)
    assert visibility(cluster, "/clusterqueues/cluster-queue/pendingworkloads")["items"] == [pending]
    assert visibility(cluster, "/clusterqueues/cluster-queue/pendingworkloads?offset=1")["items"] == []
    assert visibility(cluster, "/namespaces/default/localqueues/nowhere/pendingworkloads", status=404)["reason"] == "NotFound"

    # When the first finishes, its quota goes to the third.
    finish_pods(cluster, "default", "first")
    done = workload_when(custom, "default", jobsets["first"], "Finished")
    assert cond(done, "Finished")["reason"] == "Succeeded"
    workload_when(custom, "default", jobsets["third"], "QuotaReserved", reason="QuotaReserved")
    for name in names:
        custom.delete_namespaced_custom_object(*JOBSET, "default", "jobsets", name)
    wait_for(
        lambda: not custom.list_namespaced_custom_object(*KUEUE, "default", "workloads")["items"],
        what="workloads collected with their JobSets",
    )


def test_a_missing_local_queue_leaves_the_jobset_waiting_not_failing(cluster, custom):
    jobset = custom.create_namespaced_custom_object(*JOBSET, "lq", "jobsets", tpu_jobset("orphan", "nope"))
    message = "LocalQueue nope doesn't exist"
    workload = workload_when(custom, "lq", jobset, "QuotaReserved", status="False", reason="Inadmissible")
    assert cond(workload, "QuotaReserved")["message"] == message
    assert ("Inadmissible", message) in events_for(cluster, "lq", workload["metadata"]["name"])
    assert jobset_when(custom, "lq", "orphan", suspended=True)

    objects = queue_objects("lq-cq", "lq", 8)
    objects[1][1]["metadata"]["name"] = "nope"
    create_queues(custom, objects)
    workload_when(custom, "lq", jobset, "Admitted")
    custom.delete_namespaced_custom_object(*JOBSET, "lq", "jobsets", "orphan")


def test_eviction_suspends_the_jobset_then_requeues_and_readmits_it(cluster, custom):
    create_queues(custom, queue_objects("evict-cq", "evict", 8))
    jobset = custom.create_namespaced_custom_object(
        *JOBSET, "evict", "jobsets", tpu_jobset("victim", "evict-cq")
    )
    wait_for(lambda: running_pods(cluster, "evict") == 2, what="pods running")
    name = cluster.workload_for("evict", "victim")
    assert name == workload_of(custom, "evict", jobset)["metadata"]["name"]

    cluster.evict_workload("evict", name, requeue_after=150)
    evicted = custom.get_namespaced_custom_object(*KUEUE, "evict", "workloads", name)
    assert (cond(evicted, "Evicted")["status"], cond(evicted, "Evicted")["reason"]) == ("True", "Preempted")
    assert (cond(evicted, "Preempted")["status"], cond(evicted, "Preempted")["reason"]) == (
        "True",
        "InClusterQueue",
    )
    assert cond(evicted, "Evicted")["message"].startswith("Preempted to accommodate a workload")

    released = workload_when(custom, "evict", jobset, "Requeued", reason="Preempted")
    assert jobset_when(custom, "evict", "victim", suspended=True)
    assert running_pods(cluster, "evict") == 0
    assert "admission" not in released["status"]
    assert (cond(released, "QuotaReserved")["status"], cond(released, "QuotaReserved")["reason"]) == (
        "False",
        "Pending",
    )
    assert (cond(released, "Admitted")["status"], cond(released, "Admitted")["reason"]) == (
        "False",
        "NoReservation",
    )
    assert ("Stopped", cond(evicted, "Evicted")["message"]) in events_for(cluster, "evict", "victim")
    assert "EvictedDueToPreempted" in [r for r, _ in events_for(cluster, "evict", name)]

    readmitted = workload_when(custom, "evict", jobset, "Admitted")
    assert cond(readmitted, "Evicted")["status"] == "False"
    assert cond(readmitted, "Evicted")["message"].startswith("Previously: Preempted")
    wait_for(lambda: running_pods(cluster, "evict") == 2, what="pods running again")
    with pytest.raises(ValueError, match="valid: Preempted, NodeFailures"):
        cluster.evict_workload("evict", name, reason="Bored")
    custom.delete_namespaced_custom_object(*JOBSET, "evict", "jobsets", "victim")
    with pytest.raises(ValueError, match="no such Workload"):
        cluster.evict_workload("evict", "jobset-gone-00000")


def test_a_full_queue_keeps_jobs_pending_until_quota_grows(cluster, custom):
    create_queues(custom, queue_objects("quota-cq", "quota", 0))
    jobset = custom.create_namespaced_custom_object(
        *JOBSET, "quota", "jobsets", tpu_jobset("waiting", "quota-cq")
    )
    workload = workload_when(custom, "quota", jobset, "QuotaReserved", status="False", reason="Pending")
    assert cond(workload, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set worker: insufficient quota for google.com/tpu in flavor vlp-24, "
        "previously considered podsets requests (0) + current podset request (8) > maximum capacity (0)"
    )
    with pytest.raises(ValueError, match="flavors: vlp-24"):
        cluster.set_quota("quota-cq", "v6e", 8)
    cluster.set_quota("quota-cq", "vlp-24", 8)
    workload_when(custom, "quota", jobset, "Admitted")
    custom.delete_namespaced_custom_object(*JOBSET, "quota", "jobsets", "waiting")



def test_a_deleted_jobs_quota_is_back_before_the_collector_reaches_its_workload(cluster, custom):
    """Kueue finishes the Workload of a job being deleted (``OwnerNotFound``): the next job in a
    full queue is admitted while a late collector has not yet deleted the Workload."""
    create_queues(custom, queue_objects("orphan-cq", "quota", 8))
    first = custom.create_namespaced_custom_object(*JOBSET, "quota", "jobsets", tpu_jobset("first", "orphan-cq"))
    workload_when(custom, "quota", first, "Admitted")
    second = custom.create_namespaced_custom_object(*JOBSET, "quota", "jobsets", tpu_jobset("second", "orphan-cq"))
    workload_when(custom, "quota", second, "QuotaReserved", status="False", reason="Pending")
    cluster.slow_garbage_collector(1e6)
    try:
        custom.delete_namespaced_custom_object(*JOBSET, "quota", "jobsets", "first", body={"propagationPolicy": "Foreground"})
        workload_when(custom, "quota", second, "Admitted")
        orphaned = workload_of(custom, "quota", first)
        assert orphaned is not None, "the collector has not reached it"
        assert cond(orphaned, "Finished") | {"lastTransitionTime": None} == {
            "type": "Finished", "status": "True", "reason": "OwnerNotFound",
            "message": "The workload's owner no longer exists", "lastTransitionTime": None,
        }
        assert "kueue.x-k8s.io/resource-in-use" not in (orphaned["metadata"].get("finalizers") or ())
    finally:
        cluster.slow_garbage_collector(0)
    custom.delete_namespaced_custom_object(*JOBSET, "quota", "jobsets", "second")

def test_a_plain_job_gets_a_workload_with_its_priority_and_is_unsuspended_on_admission(
    cluster, custom, api, schema_validator
):
    create_queues(custom, queue_objects("jobs-cq", "jobs", 8))
    urgent = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "urgent"},
    }
    custom.create_cluster_custom_object(*KUEUE, "workloadpriorityclasses", {**urgent, "value": 1000})
    batch = client.BatchV1Api(api)
    pod_spec = tpu_jobset("x", None)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {ACCELERATOR: "tpu-v5-lite-podslice"}
    labels = {"kueue.x-k8s.io/queue-name": "jobs-cq", "kueue.x-k8s.io/priority-class": "urgent"}
    body = {
        "metadata": {"name": "solo", "labels": labels},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {"spec": {**pod_spec, "restartPolicy": "Never"}},
        },
    }
    job = batch.create_namespaced_job("jobs", body)
    assert job.spec.suspend is True
    workload = workload_when(custom, "jobs", api.sanitize_for_serialization(job), "Admitted")
    assert workload["metadata"]["name"] == workload_name("Job", "batch", "solo", job.metadata.uid)
    assert (workload["spec"]["podSets"][0]["name"], workload["spec"]["podSets"][0]["count"]) == ("main", 2)
    assert workload["spec"]["priority"] == 1000
    assert workload["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "urgent",
    }
    assert schema_validator.errors(workload) == []
    started = wait_for(lambda: (j := batch.read_namespaced_job("solo", "jobs")).spec.suspend is False and j)
    assert started.spec.template.spec.node_selector == V5E
    batch.delete_namespaced_job("solo", "jobs", propagation_policy="Background")
    wait_for(
        lambda: not custom.list_namespaced_custom_object(*KUEUE, "jobs", "workloads")["items"],
        what="workload collected",
    )


def test_a_jobset_past_its_max_exec_time_is_deactivated_with_nobody_watching(cluster, custom):
    """Kueue's own backstop: no Airflow anywhere, the Workload is stopped after that much admitted time."""
    create_queues(custom, queue_objects("overtime-cq", "overtime", 8))
    limit = {"kueue.x-k8s.io/max-exec-time-seconds": "300"}  # 3 s of real time at speed 100
    jobset = custom.create_namespaced_custom_object(
        *JOBSET, "overtime", "jobsets", tpu_jobset("long", "overtime-cq", labels=limit)
    )
    admitted = workload_when(custom, "overtime", jobset, "Admitted")
    assert admitted["spec"]["maximumExecutionTimeSeconds"] == 300
    wait_for(lambda: running_pods(cluster, "overtime") == 2, what="pods running")

    stopped = workload_when(custom, "overtime", jobset, "Requeued", status="False")
    name = stopped["metadata"]["name"]
    assert stopped["spec"]["active"] is False and "admission" not in stopped["status"]
    assert (cond(stopped, "Evicted")["reason"], cond(stopped, "Evicted")["message"]) == (
        "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time",
    )
    assert cond(stopped, "Requeued")["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert not cond(stopped, "DeactivationTarget"), "Kueue removes the target once it has evicted"
    ran = stopped["status"]["accumulatedPastExecutionTimeSeconds"]
    assert 300 <= ran < 400, ran
    assert jobset_when(custom, "overtime", "long", suspended=True)
    wait_for(lambda: running_pods(cluster, "overtime") == 0, what="pods gone")
    reasons = dict(events_for(cluster, "overtime", name))
    assert reasons["MaximumExecutionTimeExceeded"] == "The maximum execution time (300s) exceeded"
    assert "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded" in reasons

    time.sleep(0.5)  # 50 simulated seconds, more than the requeue backoff: an inactive Workload stays out
    assert not cond(workload_of(custom, "overtime", jobset), "Admitted").get("status") == "True"
    assert running_pods(cluster, "overtime") == 0
