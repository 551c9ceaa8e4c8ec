"""A slice that failed and healed while nobody watched is told by the nodes the workers ran on. Pure."""

from __future__ import annotations

import json

from pathways_airflow.state.disruption import Verdict
from pathways_airflow.state.ran_on import RAN_ON_ANNOTATION, bindings_by_jobset, nodes_it_ran_on, went_down_under_it, where_workers_run
from pathways_airflow.run.annotations import verdict_after_the_fact

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


def test_after_a_slice_loss_ridden_out_the_workers_run_where_their_replacement_pods_run():
    """The lost slice's pod lingers (a deleted pod's last state, still Running on the old node):
    each worker host counts as its newest pod, so the record names the new node and start."""
    def host(name: str, index: str, node_name: str, created: str, started: str) -> dict:
        found = pod(name, "worker", node_name, started=started)
        found["metadata"]["creationTimestamp"] = created
        found["metadata"]["labels"].update({"batch.kubernetes.io/job-name": "t-worker-0", "batch.kubernetes.io/job-completion-index": index})
        return found

    lost = host("w-0-old", "0", "node-a", "2026-11-24T03:10:00Z", STARTED)
    replacement = host("w-0-new", "0", "spare-a", "2026-11-24T03:20:00Z", "2026-11-24T03:20:07Z")
    other = host("w-1", "1", "node-b", "2026-11-24T03:10:00Z", STARTED)
    written = json.loads(where_workers_run([lost, replacement, other], 0)[RAN_ON_ANNOTATION])
    assert written == {"restart": 0, "since": "2026-11-24T03:20:07Z", "nodes": ["node-b", "spare-a"]}
    pending = host("w-0-new", "0", None, "2026-11-24T03:20:00Z", "")
    pending["status"]["phase"] = "Pending"
    assert where_workers_run([lost, pending, other], 0) is None  # not until the replacement runs


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


def scheduled(pod_name: str, node_name: str, when: str) -> dict:
    """A ``Scheduled`` event as kube-scheduler records it (events.k8s.io/v1, read through core/v1)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod_name}.18a1f2c3d4e5f607", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod_name, "apiVersion": "v1"},
        "reason": "Scheduled",
        "message": f"Successfully assigned default/{pod_name} to {node_name}",
        "type": "Normal",
        "eventTime": f"{when[:-1]}.412345Z",
        "firstTimestamp": None,
        "lastTimestamp": None,
        "reportingComponent": "default-scheduler",
    }


def test_an_attempt_nobody_saw_run_is_told_by_where_the_scheduler_bound_its_workers():
    """Seed 91042: every look of the attempt's triggers failed (500s, replaced triggers, an API
    outage) while its slice was lost; the Job controller bound replacements on another slice
    before the head failed. The scheduler's events still say where each worker was bound, and when."""
    events = [
        scheduled("train-worker-0-0-bbbbb", "gke-tpu-1-0", "2026-11-24T03:10:02Z"),
        scheduled("train-worker-0-1-ccccc", "gke-tpu-1-1", "2026-11-24T03:10:03Z"),
        scheduled("train-worker-0-0-ggggg", "gke-tpu-2-0", "2026-11-24T03:12:30Z"),  # the replacements
        scheduled("train-worker-0-1-hhhhh", "gke-tpu-2-1", "2026-11-24T03:12:30Z"),
        scheduled("train-pathways-head-0-0-ddddd", "gke-cpu-0", "2026-11-24T03:10:01Z"),
        scheduled("other-worker-0-0-eeeee", "gke-tpu-3-0", "2026-11-24T03:10:04Z"),
        {**scheduled("train-worker-0-1-fffff", "gke-tpu-3-1", "2026-11-24T03:10:09Z"), "reason": "FailedScheduling"},
    ]
    bindings = bindings_by_jobset(events).get("train", [])
    assert bindings == [
        ("2026-11-24T03:10:02", "gke-tpu-1-0"), ("2026-11-24T03:10:03", "gke-tpu-1-1"),
        ("2026-11-24T03:12:30", "gke-tpu-2-0"), ("2026-11-24T03:12:30", "gke-tpu-2-1"),
    ]
    healthy = [node("gke-tpu-2-0"), node("gke-tpu-2-1")]
    healed = [node("gke-tpu-1-0", ready_since="2026-11-24T03:14:00Z"), node("gke-tpu-1-1", ready_since="2026-11-24T03:14:00Z"), *healthy]
    lost = went_down_under_it(None, None, healed, bindings)
    assert lost is not None and lost.verdict is Verdict.SLICE_FAILURE and "gke-tpu-1-0" in lost.evidence[0]
    # a slice that went down before the workers were bound there says nothing of them
    early = [node("gke-tpu-1-0", ready_since="2026-11-24T03:05:00Z"), node("gke-tpu-1-1", ready_since="2026-11-24T03:05:00Z"), *healthy]
    assert went_down_under_it(None, None, early, bindings) is None
    assert bindings_by_jobset(events).get("nothing", []) == []


def test_a_record_from_before_kueue_admitted_the_workload_again_says_nothing_of_where_it_runs():
    """Kueue evicted and re-admitted the workload within one restart attempt: its workers run on
    other nodes since, so the record of where they ran before (seed 930040: maintenance on the new
    slice read as the user's bug) is not known; the scheduler's bindings tell instead."""
    workload = {"metadata": {"annotations": where_workers_run([pod("w-0", "worker", "node-a")], 0)}}
    flapped = [node("node-a", ready_since="2026-11-24T03:12:00Z")]
    readmitted = "2026-11-24T03:30:00Z"
    assert nodes_it_ran_on(workload, 0) == ("node-a",) and went_down_under_it(workload, 0, flapped) is not None
    assert nodes_it_ran_on(workload, 0, not_before=readmitted) == ()
    assert went_down_under_it(workload, 0, flapped, not_before=readmitted) is None
    assert nodes_it_ran_on(workload, 0, [("2026-11-24T03:31:00Z", "node-c")], not_before=readmitted) == ("node-c",)
    assert nodes_it_ran_on(workload, 0, not_before="2026-11-24T03:00:00Z") == ("node-a",), "admitted before the workers started"


def test_a_wait_that_came_after_a_lost_worker_was_replaced_keeps_the_nodes_it_was_lost_on():
    """Chaos 1060320: a slice lost while a retry re-attached; the worker Job replaced the pods on
    another slice; the new wait recorded only those healthy nodes, and when the head failed of the
    loss seconds later, no node it named vouched: the verdict was the user's bug."""
    from pathways_airflow.state.ran_on import with_where_they_ran_before

    first = {"metadata": {"annotations": where_workers_run([pod("w-0", "worker", "node-a")], 0)}}
    replaced = where_workers_run([pod("w-0b", "worker", "spare-a", started="2026-11-24T03:11:30Z")], 0)
    joined = with_where_they_ran_before(replaced, first, 0)
    assert json.loads(joined[RAN_ON_ANNOTATION]) == {"restart": 0, "since": STARTED, "nodes": ["node-a", "spare-a"]}
    lost = [node("node-a", ready="False", ready_since="2026-11-24T03:11:00Z"), node("spare-a")]
    assert went_down_under_it({"metadata": {"annotations": joined}}, 0, lost).verdict is Verdict.SLICE_FAILURE
    assert went_down_under_it({"metadata": {"annotations": replaced}}, 0, lost) is None, "the new nodes alone vouch for nothing"
    # Another attempt's record, or one from before Kueue placed the workload again, is not joined.
    assert with_where_they_ran_before(replaced, first, 1) == replaced
    assert with_where_they_ran_before(replaced, first, 0, not_before="2026-11-24T03:11:00Z") == replaced
    assert with_where_they_ran_before(None, first, 0) is None and with_where_they_ran_before(replaced, None, 0) == replaced


def test_nodes_that_went_down_before_the_program_began_a_save_it_committed_explain_no_later_failure():
    """Elastic slices: the program rode out a slice loss nobody saw (an API outage outlasted the
    run), saved steps after it, then failed by its own bug while the lost nodes were still down
    (or back). When its newest committed save began (Orbax's ``init_timestamp_nsecs``) says it got
    past their loss."""
    import datetime as dt

    from pathways_airflow.state.disruption import classify
    from pathways_airflow.state.ran_on import outlived_by_the_program

    def unix(text: str) -> float:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    workload = failed_pathwaysjob(where_workers_run([pod("w-0", "worker", "node-a"), pod("w-1", "worker", "node-b")], 0))
    down_at, later = "2026-11-24T03:12:00Z", unix("2026-11-24T03:14:30Z")
    nodes = [node("node-a", ready_since=down_at, ready="Unknown"), node("node-b")]
    assert went_down_under_it(workload, 0, nodes).verdict is Verdict.SLICE_FAILURE

    after = outlived_by_the_program(workload, 0, nodes, later)
    assert after == {"node-a"}
    assert went_down_under_it(workload, 0, nodes, outlived=after) is None
    judged = classify(pods=[], nodes=nodes, jobset=workload, ran_on=["node-a", "node-b"], outlived=after)
    assert judged.verdict is Verdict.USER_ERROR, judged
    assert classify(pods=[], nodes=nodes, jobset=workload, ran_on=["node-a", "node-b"]).verdict is Verdict.UNKNOWN_INFRA

    assert outlived_by_the_program(workload, 0, nodes, unix("2026-11-24T03:11:59Z")) == set(), "began before: the loss may have ended it"
    assert outlived_by_the_program(workload, 0, nodes, unix(down_at)) == set(), "the same second orders neither way"
    assert outlived_by_the_program(workload, 0, nodes, None) == set(), "no save time known"
    assert outlived_by_the_program(workload, 0, [node("node-b")], later) == set(), "a gone node tells no time"
    recreated = [node("node-a", created="2026-11-24T03:13:00Z"), node("node-b")]
    assert outlived_by_the_program(workload, 0, recreated, later) == {"node-a"}
    maintained = node("node-a", ready_since=down_at)
    maintained["metadata"]["labels"]["cloud.google.com/active-node-maintenance"] = "ONGOING"
    assert outlived_by_the_program(workload, 0, [maintained, node("node-b")], later) == set(), "disrupted since a time no field tells"

    back = [node("node-a", ready_since="2026-11-24T03:15:00Z"), node("node-b")]
    assert outlived_by_the_program(workload, 0, back, later) == set(), "back after the save began: when it went down, only an event says"
    said = [node_not_ready("node-a", "2026-11-24T03:12:40Z"), node_not_ready("node-b", "2026-11-24T03:09:00Z")]
    assert outlived_by_the_program(workload, 0, back, later, events=said) == {"node-a"}
    assert outlived_by_the_program(workload, 0, back, later, events=[node_not_ready("node-a", "2026-11-24T03:14:40Z")]) == set()


def node_not_ready(name: str, when: str) -> dict:
    """The node lifecycle controller's event (kubernetes pkg/controller/util/node/controller_utils.go, RecordNodeStatusChange)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.18a1f2c3d4e5f607", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": name, "uid": "5f0c1d2e-0000-4000-8000-000000000001", "apiVersion": "v1"},
        "reason": "NodeNotReady",
        "message": f"Node {name} status is now: NodeNotReady",
        "type": "Normal",
        "source": {"component": "node-controller"},
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }


def test_one_pass_over_a_namespaces_events_says_where_each_jobsets_workers_were_bound():
    """A JobSet whose name holds ``-worker-`` has its own bindings, not those of the JobSet its name begins with."""
    events = [
        scheduled("train-worker-0-0-bbbbb", "gke-tpu-1-0", "2026-11-24T03:10:02Z"),
        scheduled("train-worker-x-worker-0-0-ccccc", "gke-tpu-4-0", "2026-11-24T03:10:05Z"),
        scheduled("train-worker-x-pathways-head-0-0-ddddd", "gke-cpu-0", "2026-11-24T03:10:01Z"),
        scheduled("other-worker-1-0-eeeee", "gke-tpu-3-0", "2026-11-24T03:10:04Z"),
        {**scheduled("other-worker-1-1-fffff", "gke-tpu-3-1", "2026-11-24T03:10:09Z"), "reason": "FailedScheduling"},
    ]
    assert bindings_by_jobset(events) == {
        "train": [("2026-11-24T03:10:02", "gke-tpu-1-0")],
        "train-worker-x": [("2026-11-24T03:10:05", "gke-tpu-4-0")],
        "other": [("2026-11-24T03:10:04", "gke-tpu-3-0")],
    }
    assert bindings_by_jobset(events).get("train", []) == [("2026-11-24T03:10:02", "gke-tpu-1-0")]
