"""A wait rides out a Kubernetes API that is down, even when it is down as the wait starts.

The outage is the local API server answering 503 to every request for a while (a control-plane
upgrade, a regional blip). A trigger started during it must not end the task (and leave the
workload running unwatched) after a fixed number of failures; it waits until the API answers,
and gives up only after ``api_outage_seconds`` of failures or at the task's deadline.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
from pathways_airflow.hooks.reclaim import delete_making_room
from pathways_airflow.spec import build_workload, render
from pathways_airflow.resources import JOBSET, PATHWAYSJOB
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from tests.support.triggers import first_event
from tests.support.waiting import wait_for
from tests.support.workloads import submit_training

PATHWAYS_API = "pathways-job.pathways.domain/v1"


def outage(cluster, seconds: float) -> threading.Thread:
    """Every request answers 503 from now for ``seconds`` real seconds (then the API is back)."""
    cluster.inject_fault(".*", status=503, count=1_000_000)

    def end() -> None:
        time.sleep(seconds)
        cluster.clear_faults()

    thread = threading.Thread(target=end, daemon=True)
    thread.start()
    return thread


def test_a_wait_started_during_an_outage_waits_for_the_api_and_sees_the_workload_finish(pathways_cluster):
    """Longer than the old limit of five rechecks before the first listing: the task still gets its result."""
    hook = submit_training("outage-start", steps=3)
    trigger = PathwaysJobTrigger(
        name="outage-start", namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=0.5
    )
    outage(pathways_cluster, 6.0)
    event = first_event(trigger, timeout=90)
    assert event["status"] == "finished" and event["state"]["phase"] == "SUCCEEDED", event
    hook.delete(JOBSET, "default", "outage-start")


def pathwaysjob(cluster, name: str, **env: str) -> None:
    """A PathwaysJob (no failure policy, ``max_restarts=0``) of a MaxText-like training."""
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext", max_restarts=0,
        command=["python3", "-m", "MaxText.train", "steps=400", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2", **env},
    )
    cluster.apply(render(workload, backend="pathwaysjob", name=name, namespace="default"))


def seen_running(cluster, name: str) -> None:
    """Until the trigger has written the nodes the workers run on (it has seen them run)."""
    wait_for(lambda: "pathways-airflow/ran-on" in (cluster.get(PATHWAYS_API, "PathwaysJob", name) or {}).get("metadata", {}).get("annotations", {}), timeout=30)


def ended_while_nobody_could_look(cluster, trigger, name: str, during_the_outage=lambda: None) -> dict:
    """The first trigger sees the workers run; then the API answers 503 for 6 s, the trigger is
    replaced during it (a triggerer restart), and ``during_the_outage`` runs. The workload ends
    unseen; the trigger re-created after the outage reports how it ended."""
    outages: list[threading.Thread] = []

    def go_blind() -> None:
        seen_running(cluster, name)
        outages.append(outage(cluster, 6.0))
        during_the_outage()

    with pytest.raises(TimeoutError):
        first_event(trigger, timeout=4, during=go_blind, during_after=0.2)
    outages[0].join()
    return first_event(trigger, timeout=90)


def test_a_users_bug_that_strikes_during_an_outage_is_still_the_users_bug(pathways_cluster):
    """The head exits 3 while the API answers 503; when it is back, the failed pod is gone, and the
    PathwaysJob naming the head as the first failed job on healthy nodes is what is left."""
    pathwaysjob(pathways_cluster, "bug-in-outage", PATHWAYS_TESTING_FAIL_AT_STEP="150", PATHWAYS_TESTING_EXIT_CODE="3")
    trigger = PathwaysJobTrigger(name="bug-in-outage", namespace="default", backend="pathwaysjob", target=ClusterTarget().to_dict())
    event = ended_while_nobody_could_look(pathways_cluster, trigger, "bug-in-outage")
    assert event["state"]["phase"] == "FAILED", event
    assert event["classification"]["verdict"] == "USER_ERROR", event["classification"]
    PathwaysHook().delete(PATHWAYSJOB, "default", "bug-in-outage")


def test_a_slice_lost_and_back_during_an_outage_is_not_the_users_bug(pathways_cluster):
    """The slice goes down and comes back while nobody can look (seed 8018 of the chaos suite):
    the head, named as the first failed job, exited 1 as JAX does, every node is Ready again, and
    only the nodes the workers were seen on tell the truth."""
    pathwaysjob(pathways_cluster, "lost-in-outage")
    trigger = PathwaysJobTrigger(name="lost-in-outage", namespace="default", backend="pathwaysjob", target=ClusterTarget().to_dict())

    def lose_the_slice() -> None:
        pods = pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": "lost-in-outage"})
        node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker")
        pathways_cluster.lose_slice(pathways_cluster.get("v1", "Node", node, namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"], downtime=60, wait=False)

    event = ended_while_nobody_could_look(pathways_cluster, trigger, "lost-in-outage", lose_the_slice)
    assert event["state"]["phase"] == "FAILED", event
    assert event["classification"]["verdict"] != "USER_ERROR", event["classification"]
    assert any("it ran on" in e for e in event["classification"]["evidence"]), event["classification"]
    PathwaysHook().delete(PATHWAYSJOB, "default", "lost-in-outage")


def test_a_disruption_the_pods_prove_is_judged_without_waiting_out_a_failing_node_listing(pathways_cluster):
    """Maintenance fails a PathwaysJob (``maxRestarts: 0``) while every node listing answers 503:
    the workers' ``DisruptionTarget`` already proves a disruption, so the nodes are asked once and
    the verdict does not wait out the hook's retry backoff (seeds 79499 and 80118 of the chaos suite
    lost 18–20 minutes each so) nor the nodes' budget."""
    from pathways_airflow.state.disruption import NODES_REFINE_WITHIN_SECONDS

    pathwaysjob(pathways_cluster, "nodes-down")
    trigger = PathwaysJobTrigger(name="nodes-down", namespace="default", backend="pathwaysjob", target=ClusterTarget().to_dict(), poll_interval=0.5)
    failed_at: list[float] = []

    def maintenance_while_nodes_fail() -> None:
        seen_running(pathways_cluster, "nodes-down")
        pathways_cluster.inject_fault(r"^/api/v1/nodes$", status=503, count=1_000_000, methods=["GET"], watch=False)
        pods = pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": "nodes-down"})
        node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker")
        pathways_cluster.maintenance(pathways_cluster.get("v1", "Node", node, namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"], duration=600, wait=False)
        wait_for(lambda: (pathways_cluster.get(PATHWAYS_API, "PathwaysJob", "nodes-down") or {}).get("status", {}).get("terminalState"), timeout=60)
        failed_at.append(time.monotonic())

    try:
        event = first_event(trigger, timeout=120, during=maintenance_while_nodes_fail)
    finally:
        pathways_cluster.clear_faults()
    assert event["state"]["phase"] == "FAILED" and event["classification"]["verdict"] != "USER_ERROR", event
    assert any("DisruptionTarget" in e for e in event["classification"]["evidence"]), event["classification"]
    assert not any("is gone" in e for e in event["classification"]["evidence"]), event["classification"]  # nodes unread are not nodes lost
    assert time.monotonic() - failed_at[0] < NODES_REFINE_WITHIN_SECONDS / 2
    PathwaysHook().delete(PATHWAYSJOB, "default", "nodes-down")


def test_a_relist_keeps_what_it_missed_in_its_last_known_state(pathways_cluster):
    """A pod deleted while its watch could not look (GETs failing, history compacted meanwhile) is
    missing from the relist: the watch keeps its last state among the deleted, as an informer
    hands such an object on, so the verdict still knows which node it ran on."""
    import asyncio

    from pathways_airflow.resources import POD
    from pathways_airflow.triggers.watch import SharedWatch, by_label

    label = {"pathways-relist": "kept"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "relist-kept", "labels": label},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}
    pathways_cluster.apply(pod)

    async def scenario() -> dict:
        watch = SharedWatch(ClusterTarget(), POD, "default", "pathways-relist=kept", index=by_label("pathways-relist"))
        watch.subscribe(["kept"])
        await asyncio.wait_for(watch.synced.wait(), 30)
        relists = watch.relists
        pathways_cluster.inject_fault(r"/namespaces/default/pods", status=503, count=1_000_000, methods=["GET"])
        pathways_cluster.drop_watches()
        await asyncio.to_thread(PathwaysHook().delete, POD, "default", "relist-kept")
        await asyncio.to_thread(wait_for, lambda: pathways_cluster.get("v1", "Pod", "relist-kept") is None, what="the pod gone")
        await asyncio.to_thread(pathways_cluster.compact)
        pathways_cluster.clear_faults()
        for _ in range(300):
            if watch.relists > relists:
                break
            await asyncio.sleep(0.1)
        kept = watch.related_deleted("kept")
        watch._task.cancel()
        await watch.hook.close_all()
        assert watch.relists > relists, "the watch listed again"
        assert watch.get("relist-kept", "default") is None
        return kept[0] if kept else {}

    kept = asyncio.run(scenario())
    assert kept, "the relist forgot the pod it missed"
    assert kept["metadata"]["name"] == "relist-kept" and kept["metadata"]["deletionTimestamp"], kept
    assert kept["spec"]["containers"][0]["name"] == "main"


def test_a_burst_of_errors_while_making_room_costs_a_few_looks_not_each_calls_backoff(pathways_cluster, caplog):
    """Before a resubmission the worker deletes the old attempt and looks until its pods are
    stopping. Four 503s in a row on the pods' listing cost four quick looks (0.1 s, doubling), not
    the hook's backoff (0.5 + 1.2 + 2.8 + 4.5 s: chaos seed 370031 lost nine real seconds so)."""
    hook = submit_training("room-burst", backend="pathwaysjob")
    wait_for(lambda: hook.get(JOBSET, "default", "room-burst"), timeout=30, what="the PathwaysJob's JobSet")
    pathways_cluster.inject_fault(r"/namespaces/default/pods$", status=503, count=4, methods=["GET"], watch=False)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="pathways_airflow.hooks.reclaim"):
        left = delete_making_room(hook, PATHWAYSJOB, "default", "room-burst")
    took = time.monotonic() - started
    pathways_cluster.clear_faults()
    assert left.handed_over
    assert took < 3.0, took
    looked_again = [r.getMessage() for r in caplog.records if "looking again" in r.getMessage()]
    assert len(looked_again) == 4 and "503" in looked_again[0], looked_again



def test_an_evidence_write_the_api_holds_up_does_not_hold_up_the_verdict(pathways_cluster):
    """The trigger writes where the workers run on the PathwaysJob, as evidence for later; here the
    API holds that PATCH for 20 s (as a client backoff through a burst of 500s would: chaos seed
    370032 lost nine real seconds so) while maintenance ends the workload. The write goes on beside
    the watch: the verdict comes within the settle time, and the final verdict's own write, made
    before the event, is answered at once."""
    pathwaysjob(pathways_cluster, "evidence-write")
    pathways_cluster.inject_fault(r"/pathwaysjobs/evidence-write$", status=None, latency=20.0, count=1, methods=["PATCH"], watch=False)
    trigger = PathwaysJobTrigger(name="evidence-write", namespace="default", backend="pathwaysjob", target=ClusterTarget().to_dict(), poll_interval=0.5)
    ended_at: list[float] = []

    def maintenance_while_the_write_is_held() -> None:
        labels = {"jobset.sigs.k8s.io/jobset-name": "evidence-write", "jobset.sigs.k8s.io/replicatedjob-name": "worker"}
        workers = wait_for(lambda: [p for p in pathways_cluster.list("v1", "Pod", "default", labels=labels) if p["status"].get("phase") == "Running"], timeout=30)
        time.sleep(1.0)  # the trigger has seen them run and made its write
        node = pathways_cluster.get("v1", "Node", workers[0]["spec"]["nodeName"], namespace=None)
        pathways_cluster.maintenance(node["metadata"]["labels"]["cloud.google.com/gke-nodepool"], duration=600, wait=False)
        wait_for(lambda: (pathways_cluster.get(PATHWAYS_API, "PathwaysJob", "evidence-write") or {}).get("status", {}).get("terminalState"), timeout=60)
        ended_at.append(time.monotonic())

    try:
        event = first_event(trigger, timeout=120, during=maintenance_while_the_write_is_held)
    finally:
        pathways_cluster.clear_faults()
    took = time.monotonic() - ended_at[0]
    assert event["state"]["phase"] == "FAILED" and event["classification"]["verdict"] != "USER_ERROR", event
    assert took < 8.0, took
    PathwaysHook().delete(PATHWAYSJOB, "default", "evidence-write")


def test_the_waits_a_fault_imposes_are_recorded_in_cluster_time(pathways_cluster):
    """What the chaos suite leaves out of a disruption's cost: a slow answer's latency and the
    ``Retry-After`` a 429 asks for, each real second a second times the cluster's speed."""
    cluster, hook = pathways_cluster, PathwaysHook()
    before = len(cluster.faults.stalls)
    cluster.inject_fault("/namespaces/default/jobsets$", status=None, latency=0.2, methods=["GET"])
    cluster.inject_fault("/namespaces/default/jobsets$", status=429, retry_after=1, methods=["GET"])
    started = cluster.clock.now()
    hook.list(JOBSET, "default")  # slow, then served
    hook.list(JOBSET, "default")  # told to wait 1 s, then served
    slow, throttled = cluster.faults.stalls[before:]
    speed = cluster.clock.speed
    assert started <= slow[0] and slow[1] - slow[0] == pytest.approx(0.2 * speed)
    assert throttled[1] - throttled[0] == pytest.approx(1.0 * speed) and throttled[0] >= slow[1] - 1.0
