"""The rule that does a late garbage collector's work, on the pods and Jobs the API shows of a
two-slice training workload (the ``running_two_slices`` fixture)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from pathways_airflow.state.reclaim import (
    COLLECTOR_MARGIN_SECONDS,
    alive,
    holds_tpus,
    left_behind,
    pod_chips,
    reclaimed_line,
    restart_held_up,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "status" / "running_two_slices.json").read_text())["observation"]
PODS = FIXTURE["pods"]
WORKERS = [p for p in PODS if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker"]
HEAD = [p for p in PODS if p not in WORKERS]
JOBSET = FIXTURE["jobset"]


def jobs_of(pods: list[dict]) -> list[dict]:
    """The child Jobs the pods name (the API's shape: name, and no deletionTimestamp yet)."""
    names = sorted({p["metadata"]["labels"]["batch.kubernetes.io/job-name"] for p in pods})
    return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": n, "namespace": "default"}} for n in names]


def marked(obj: dict) -> dict:
    changed = copy.deepcopy(obj)
    changed["metadata"]["deletionTimestamp"] = "2026-11-22T07:41:30Z"
    return changed


def test_a_worker_pod_holds_the_chips_of_its_vm_and_the_head_none():
    # two v5e 2x4 slices: two VMs of 4 chips each per slice
    assert [pod_chips(p) for p in WORKERS] == [4, 4, 4, 4] and [pod_chips(p) for p in HEAD] == [0]
    assert all(holds_tpus(p) for p in PODS)
    ended = copy.deepcopy(WORKERS[0])
    ended["status"]["phase"] = "Failed"
    assert not holds_tpus(ended), "a pod that ended gives its chips back even while its object stays"
    pending = copy.deepcopy(WORKERS[0])
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending"}
    assert not holds_tpus(pending) and alive(pending), "a pending pod holds nothing yet, but would take a slice"
    late = left_behind([], [], [pending, WORKERS[1]], waited=3600)
    assert late.pods == (pending["metadata"]["name"], WORKERS[1]["metadata"]["name"]) and late.chips == 4


def test_nothing_is_deleted_directly_while_the_collector_is_not_late_whatever_the_pods_grace():
    slow_to_stop = copy.deepcopy(PODS)
    for pod in slow_to_stop:
        pod["spec"]["terminationGracePeriodSeconds"] = 300  # a checkpoint on SIGTERM: how long to stop, once marked
    for pods in (PODS, slow_to_stop):
        early = left_behind([JOBSET], jobs_of(pods), pods, waited=COLLECTOR_MARGIN_SECONDS - 0.5)
        assert not early.to_delete and early.holding == len(PODS) and early.unmarked == len(PODS)
        assert not early.gone and not early.handed_over
        assert left_behind([JOBSET], jobs_of(pods), pods, waited=COLLECTOR_MARGIN_SECONDS).to_delete


def test_once_it_is_late_the_whole_unreached_chain_goes_top_down_and_the_chips_are_counted():
    late = left_behind([JOBSET], jobs_of(PODS), PODS, waited=COLLECTOR_MARGIN_SECONDS)
    assert late.jobsets == (JOBSET["metadata"]["name"],)
    assert late.jobs == tuple(j["metadata"]["name"] for j in jobs_of(PODS))
    assert set(late.pods) == {p["metadata"]["name"] for p in PODS} and late.chips == 16
    assert late.handed_over, "once these are deleted every pod is stopping"
    line = reclaimed_line("default", "steady", late, 46)
    assert line.startswith("default/steady: the garbage collector had not reached its JobSet, 3 Jobs and 5 pods 46 s after")
    assert line.endswith("reclaiming 16 TPU chips")


def test_what_the_collector_reached_is_left_to_it_and_its_kubelets():
    # A JobSet backend's JobSet is the workload, marked by our DELETE; one Job reached; one worker stopping.
    stopping = [marked(WORKERS[0]), *WORKERS[1:], *HEAD]
    jobs = jobs_of(PODS)
    late = left_behind([marked(JOBSET)], [marked(jobs[0]), *jobs[1:]], stopping, waited=3600)
    assert late.jobsets == () and late.jobs == tuple(j["metadata"]["name"] for j in jobs[1:])
    assert WORKERS[0]["metadata"]["name"] not in late.pods and late.chips == 12 and late.holding == 5 and late.unmarked == 4
    all_stopping = left_behind([], [], [marked(p) for p in PODS], waited=3600)
    assert not all_stopping.to_delete and all_stopping.handed_over and not all_stopping.gone, "never forced: the kubelet finishes"


def test_a_workload_whose_pods_ended_or_went_is_gone():
    ended = copy.deepcopy(PODS)
    for p in ended:
        p["status"]["phase"] = "Succeeded"
    assert left_behind([JOBSET], jobs_of(PODS), ended, waited=3600).gone
    assert left_behind([], [], [], waited=0).gone


def restarting(pods: list[dict]) -> tuple[list[dict], list[dict]]:
    """The Jobs and pods of an attempt whose JobSet restarts: the Jobs deleted in the foreground
    (jobset_controller.go deleteJobs), the workers' pods ended by the disruption, none marked yet."""
    uids = {r["uid"]: r["name"] for p in pods for r in p["metadata"]["ownerReferences"]}
    jobs = [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": n, "namespace": "default", "uid": u, "finalizers": ["foregroundDeletion"],
                                                               "deletionTimestamp": "2026-11-22T07:41:30Z"}}
        for u, n in sorted(uids.items())
    ]
    ended = copy.deepcopy(pods)
    for pod in ended:
        if pod in WORKERS:
            pod["status"]["phase"] = "Failed"
    return jobs, ended


def test_a_restart_held_up_by_a_late_collector_has_its_jobs_deleted_again_and_every_unmarked_pod_deleted():
    jobs, pods = restarting(PODS)
    early = restart_held_up(jobs, pods, COLLECTOR_MARGIN_SECONDS - 0.5)
    assert not early.to_delete and early.holding == len(PODS) and early.unmarked == len(PODS)
    late = restart_held_up(jobs, pods, COLLECTOR_MARGIN_SECONDS)
    assert late.jobs == tuple(j["metadata"]["name"] for j in jobs) and not late.jobsets
    assert sorted(late.pods) == sorted(p["metadata"]["name"] for p in PODS), "ended pods hold the Jobs too"
    assert late.chips == 0, "the ended workers' chips are already free; the head has none"
    # Each named with the uid it was seen with: the next attempt's Jobs come back under these names.
    assert {n: late.uids[n] for n in late.jobs} == {j["metadata"]["name"]: j["metadata"]["uid"] for j in jobs}
    assert all(late.uids[p] for p in late.pods)
    line = reclaimed_line("default", "steady", late, 12.0, restart=True)
    assert line.startswith("default/steady: its JobSet's restart waited on the garbage collector") and "3 Jobs and 5 pods 12 s" in line


def test_a_restart_the_collector_is_working_on_or_not_held_up_at_all_is_left_alone():
    jobs, pods = restarting(PODS)
    stopping = [marked(p) for p in pods]
    assert not restart_held_up(jobs, stopping, 3600).to_delete and restart_held_up(jobs, stopping, 3600).holding == len(PODS)
    unmarked_jobs = [{**j, "metadata": {k: v for k, v in j["metadata"].items() if k != "deletionTimestamp"}} for j in jobs]
    background = [{**j, "metadata": {**j["metadata"], "finalizers": []}} for j in jobs]
    for not_held in (unmarked_jobs, background, []):
        found = restart_held_up(not_held, pods, 3600)
        assert not found.to_delete and found.holding == 0, not_held


def test_a_delete_of_an_object_seen_with_a_uid_names_that_uid_as_its_precondition():
    """apimachinery's DeleteOptions.preconditions: the API server answers 409 if the name now holds another object."""
    from pathways_airflow.resources import JOB

    assert JOB.delete_body("Background", "0b5e-uid") == {"propagationPolicy": "Background", "preconditions": {"uid": "0b5e-uid"}}
    assert JOB.delete_body() == {"propagationPolicy": "Foreground"}
