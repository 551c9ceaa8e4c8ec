"""Where a queued workload stands in Kueue's queue, from the visibility API's answer. Pure.

The summary is shaped as Kueue's docs print one (``site/.../pending_workloads_on_demand.md``,
``kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/user-queue/pendingworkloads``);
the ClusterQueue is the GKE multislice tutorial's (``upstream-samples/seed-kueue-tpu-queue.yaml``)
with the status Kueue writes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pathways_airflow.run.records import WorkloadEvent
from pathways_airflow.run.wait_memory import Readings, WaitMemory, queue_check_due, queue_line_to_log, remembered
from pathways_airflow.state.model import Observation, Phase, WorkloadState
from pathways_airflow.state.queue import FlavorQuota, QueuePlace, local_queue_of, queue_place, tpu_quota


def pending_item(name: str, in_cq: int, in_lq: int, queue: str = "user-queue") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2023-12-05T15:42:03Z",
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name[7:-6], "uid": "u"}]},
        "priority": 0, "localQueueName": queue, "positionInClusterQueue": in_cq, "positionInLocalQueue": in_lq,
    }


SUMMARY = {
    "kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {"creationTimestamp": None},
    "items": [pending_item("jobset-first-8d56e", 0, 0), pending_item("jobset-train-5f1a3", 2, 1)],
}
LOCAL_QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "user-queue", "namespace": "default"},
               "spec": {"clusterQueue": "cluster-queue"}}


@pytest.fixture
def cluster_queue(upstream_samples: Path) -> dict[str, Any]:
    documents = yaml.safe_load_all((upstream_samples / "seed-kueue-tpu-queue.yaml").read_text())
    queue = copy.deepcopy(next(d for d in documents if d and d["kind"] == "ClusterQueue"))
    queue["status"] = {"flavorsUsage": [{"name": "vlp-24", "resources": [{"name": "google.com/tpu", "total": "16", "borrowed": "0"}]}]}
    return queue


def test_the_place_says_how_many_wait_ahead_and_the_quota_in_use(cluster_queue):
    place = queue_place("jobset-train-5f1a3", SUMMARY, LOCAL_QUEUE, cluster_queue)
    assert place == QueuePlace("user-queue", "cluster-queue", 2, 1, (FlavorQuota("vlp-24", 16, 24),))
    assert place.line() == "2 ahead in ClusterQueue cluster-queue, 1 of them in LocalQueue user-queue; vlp-24: 16/24 chips in use"
    assert QueuePlace.from_dict(place.to_dict()) == place


def test_an_admitted_workload_has_no_place_and_an_unreadable_cluster_queue_no_quota():
    assert queue_place("jobset-gone-00000", SUMMARY, LOCAL_QUEUE) is None
    place = queue_place("jobset-first-8d56e", SUMMARY, LOCAL_QUEUE, None)
    assert place is not None and place.quota == () and place.line() == "0 ahead in ClusterQueue cluster-queue, 0 of them in LocalQueue user-queue"
    assert tpu_quota({"spec": {"resourceGroups": [{"flavors": [{"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}}) == ()


def queued_observation(queue: str | None = "user-queue") -> Observation:
    workload = {"metadata": {"name": "jobset-train-5f1a3"}, "spec": {"queueName": queue} if queue else {}}
    return Observation("jobset", "train", "default", kueue_workload=workload)


def test_the_queue_is_read_while_queued_at_most_every_check_and_said_only_when_it_moved():
    queued, running = WorkloadState(Phase.QUEUED), WorkloadState(Phase.RUNNING)
    observation, memory = queued_observation(), WaitMemory()
    assert local_queue_of(observation.kueue_workload) == "user-queue"
    assert queue_check_due(memory, observation, queued, now=100.0)
    assert not queue_check_due(memory, observation, running, now=100.0)
    assert not queue_check_due(memory, queued_observation(None), queued, now=100.0)

    place = QueuePlace("user-queue", "cluster-queue", 2, 1)
    read = Readings(queue_read=True, queued=place)
    assert queue_line_to_log(memory, read) == f"queued: {place.line()}"
    memory, _ = remembered(memory, observation, queued, 100.0, read)
    assert memory.queued == place and not queue_check_due(memory, observation, queued, now=110.0)
    assert queue_check_due(memory, observation, queued, now=131.0)
    assert queue_line_to_log(memory, read) is None, "the same place is not said again"

    admitted = Readings(queue_read=True, queued=None)  # admitted between the look and the read
    memory, _ = remembered(memory, observation, running, 131.0, admitted)
    assert memory.queued == place, "the last place seen is kept for the result"
    event = WorkloadEvent("finished", "train", state=WorkloadState(Phase.SUCCEEDED), queued=memory.queued.to_dict())
    assert WorkloadEvent.from_payload(event.to_payload()).queued == place.to_dict()
