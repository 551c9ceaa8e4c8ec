"""A slice that failed and healed while nobody watched is told by the nodes the workers ran on. Pure."""

from __future__ import annotations

import json

from pathways_airflow.state.disruption import Verdict
from pathways_airflow.state.ran_on import RAN_ON_ANNOTATION, went_down_under_it, where_workers_run
from pathways_airflow.state.verdicts import verdict_after_the_fact

STARTED = "2026-11-24T03:10:05Z"


def pod(name: str, job: str, node: str | None, phase: str = "Running", started: str = STARTED) -> dict:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-11-24T03:10:00Z",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": job, "jobset.sigs.k8s.io/restart-attempt": "0"},
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "startTime": started},
    }


def node(name: str, ready_since: str = "2026-11-24T01:00:00Z", created: str = "2026-11-24T00:00:00Z", ready: str = "True") -> dict:
    return {
        "metadata": {"name": name, "creationTimestamp": created, "labels": {"cloud.google.com/gke-nodepool": "tpu-v5e-2x4-0"}},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "lastTransitionTime": ready_since}]},
    }


def failed_pathwaysjob(notes: dict) -> dict:
    """As google/pathways-job leaves it when its JobSet fails naming the head (makeFailedCondition)."""
    return {
        "kind": "PathwaysJob",
        "metadata": {"name": "train", "annotations": notes},
        "spec": {"workers": [{"type": "ct5lp-hightpu-4t", "topology": "2x4", "numSlices": 1}]},
        "status": {
            "terminalState": "Failed",
            "conditions": [{"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
                            "message": "pathwaysJob failed: jobset failed due to reaching max number of restarts (first failed job: train-pathways-head-0)"}],
        },
    }


def test_the_nodes_are_written_once_every_worker_runs_with_the_last_start():
    workers = [pod("w-0", "worker", "node-a", started="2026-11-24T03:10:04Z"), pod("w-1", "worker", "node-b")]
    head = pod("h", "pathways-head", "cpu-0", started="2026-11-24T03:11:00Z")
    written = json.loads(where_workers_run([*workers, head], 0)[RAN_ON_ANNOTATION])
    assert written == {"restart": 0, "since": STARTED, "nodes": ["node-a", "node-b"]}
    assert where_workers_run([workers[0], pod("w-1", "worker", None, phase="Pending"), head], 0) is None
    assert where_workers_run([head], 0) is None


def test_a_node_it_ran_on_that_went_down_and_came_back_is_a_disruption():
    workload = {"metadata": {"annotations": where_workers_run([pod("w-0", "worker", "node-a")], 0)}}
    healthy = [node("node-a"), node("node-b", ready_since="2026-11-24T03:20:00Z")]
    assert went_down_under_it(workload, 0, healthy) is None, "node-b came back later, but the workers never ran there"
    flapped = went_down_under_it(workload, 0, [node("node-a", ready_since="2026-11-24T03:12:00Z")])
    assert flapped.verdict is Verdict.SLICE_FAILURE and "node node-a it ran on went down and came back" in flapped.evidence[0]
    recreated = went_down_under_it(workload, 0, [node("node-a", created="2026-11-24T03:15:00Z")])
    assert recreated is not None and "re-created" in recreated.evidence[0]
    assert went_down_under_it(workload, 0, []).evidence == ("node node-a it ran on: node is gone",)
    assert went_down_under_it(workload, 1, [node("node-a", ready_since="2026-11-24T03:12:00Z")]) is None, "another attempt's nodes"
    assert went_down_under_it(workload, 0, None) is None


def test_a_failure_nobody_watched_on_a_slice_that_healed_is_not_the_users_bug():
    notes = where_workers_run([pod("w-0", "worker", "node-a")], 0)
    healed = [node("node-a", ready_since="2026-11-24T03:12:00Z")]
    assert verdict_after_the_fact(failed_pathwaysjob(notes), healed).verdict is Verdict.SLICE_FAILURE
    assert verdict_after_the_fact(failed_pathwaysjob(notes), [node("node-a")]).verdict is Verdict.USER_ERROR
    assert verdict_after_the_fact(failed_pathwaysjob({}), healed).verdict is Verdict.USER_ERROR, "without the record, as before"
