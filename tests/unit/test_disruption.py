"""The disruption classifier on real-shaped nodes, pods, Jobs and Kueue Workloads."""

from __future__ import annotations

import copy

import pytest

from pathways_airflow.run.messages import summarize
from pathways_airflow.state.disruption import ExitCodePolicy, Verdict, classify, worth_a_second_look
from pathways_airflow.run.progress import last_completed_step, steps_recomputed
from pathways_airflow_testing.nodes import node_manifests, tpu_pool

NODE = node_manifests(tpu_pool("tpu-v5e-2x4-0", "ct5lp-hightpu-4t", "2x4"))[0]
NODE_NAME = NODE["metadata"]["name"]


def node(**labels) -> dict:
    changed = copy.deepcopy(NODE)
    changed["metadata"]["labels"].update(labels)
    return changed


def tainted(base: dict) -> dict:
    changed = copy.deepcopy(base)
    changed["spec"]["taints"].append({"key": "cloud.google.com/impending-node-termination", "value": "true", "effect": "NoSchedule"})
    return changed


def pod(name="train-worker-0-0-abcde", *, job="worker", exit_code=None, disruption=None, reason=None, last_exit=None) -> dict:
    status = {"phase": "Failed" if exit_code is not None or reason else "Running", "conditions": []}
    if disruption:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": disruption, "message": "Pod was terminated in response to imminent node shutdown."})
    if reason:
        status["reason"] = reason
    state = {"terminated": {"exitCode": exit_code, "reason": "Error"}} if exit_code is not None else {"running": {}}
    container = {"name": "main" if job == "pathways-head" else "pathways-worker", "state": state}
    if last_exit is not None:
        container["lastState"] = {"terminated": {"exitCode": last_exit}}
    status["containerStatuses"] = [container]
    return {
        "metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/replicatedjob-name": job, "jobset.sigs.k8s.io/restart-attempt": "0"}},
        "spec": {"nodeName": NODE_NAME},
        "status": status,
    }


def test_host_maintenance():
    verdict = classify(pods=[pod(exit_code=143, disruption="TerminationByKubelet", reason="Terminated")], nodes=[tainted(node(**{"cloud.google.com/active-node-maintenance": "ONGOING"}))])
    assert verdict.verdict is Verdict.MAINTENANCE
    assert any("active-node-maintenance=ONGOING" in e for e in verdict.evidence)
    assert any("DisruptionTarget (TerminationByKubelet)" in e for e in verdict.evidence)


def test_scheduled_maintenance_with_the_termination_taint_is_maintenance():
    verdict = classify(pods=[pod(reason="Terminated")], nodes=[tainted(node(**{"cloud.google.com/scheduled-maintenance-time": "1790000000"}))])
    assert verdict.verdict is Verdict.MAINTENANCE


def test_spot_preemption():
    verdict = classify(pods=[pod(exit_code=143, disruption="TerminationByKubelet")], nodes=[tainted(node(**{"cloud.google.com/gke-spot": "true"}))])
    assert verdict.verdict is Verdict.PREEMPTION


def test_preemption_by_the_scheduler_without_node_evidence():
    assert classify(pods=[pod(disruption="PreemptionByScheduler")], nodes=[NODE]).verdict is Verdict.PREEMPTION


def test_slice_loss_from_a_node_that_is_not_ready_or_gone():
    lost = copy.deepcopy(NODE)
    lost["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]
    assert classify(pods=[pod(disruption="DeletionByTaintManager")], nodes=[lost]).verdict is Verdict.SLICE_FAILURE
    assert classify(pods=[pod(disruption="DeletionByTaintManager")], nodes=[]).verdict is Verdict.SLICE_FAILURE


def test_a_node_marked_out_of_service_lost_its_slice():
    """A non-graceful shutdown: the node is tainted ``node.kubernetes.io/out-of-service`` and the pod
    garbage collector deletes its pods (``DeletionByPodGC``) though it may still say Ready."""
    out = copy.deepcopy(NODE)
    out["spec"]["taints"].append({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"})
    verdict = classify(pods=[pod(disruption="DeletionByPodGC")], nodes=[out])
    assert verdict.verdict is Verdict.SLICE_FAILURE
    assert f"node {NODE_NAME}: node.kubernetes.io/out-of-service taint" in verdict.evidence


def restarted_alone(jobset_status: dict) -> tuple[dict, list[dict]]:
    """A JobSet whose worker Job 1 was restarted alone (``RestartJob``) after its slice went down, and
    whose head then exited 1 in the current run."""
    jobset = {
        "kind": "JobSet",
        "spec": {"replicatedJobs": [{"name": "pathways-head", "replicas": 1}, {"name": "worker", "replicas": 2}]},
        "status": jobset_status,
    }
    old_worker = pod("train-worker-1-0-old", disruption="DeletionByTaintManager")
    new_worker = pod("train-worker-1-0-new")
    for made, attempt in ((old_worker, "0"), (new_worker, "1")):
        made["metadata"]["labels"].update({"jobset.sigs.k8s.io/job-index": "1", "jobset.sigs.k8s.io/job-restart-attempt": attempt})
    head = pod("train-pathways-head-0-0-x", job="pathways-head", exit_code=1)
    return jobset, [head, old_worker, new_worker]


def test_a_slice_restarted_alone_under_the_running_head_is_what_the_head_died_of():
    """The head ran through the per-Job restart: a Pathways program loses its slice and exits 1,
    and the JobSet's bug rule may then fail it. The lost slice is the cause, not a bug; in the
    next restart attempt (a new head) that disruption no longer counts."""
    status = {"restarts": 0, "replicatedJobsStatus": [{"name": "worker", "ready": 1, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0, "jobRestarts": [0, 1]}]}
    jobset, pods = restarted_alone(status)
    verdict = classify(pods=pods, nodes=[NODE], jobset=jobset)
    assert verdict.verdict is Verdict.SLICE_FAILURE and any("train-worker-1-0-old" in e for e in verdict.evidence)
    for made in pods:
        made["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "0" if "old" in made["metadata"]["name"] else "1"
    verdict = classify(pods=pods, nodes=[NODE], jobset={**jobset, "status": {**status, "restarts": 1}})
    assert (verdict.verdict, verdict.exit_code) == (Verdict.USER_ERROR, 1)


def test_the_run_a_job_restarted_alone_ended_is_judged_with_its_pods():
    from pathways_airflow.state.workload_parts import as_of_restart, restarts_of

    status = {"restarts": 0, "replicatedJobsStatus": [{"name": "worker", "ready": 1, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0, "jobRestarts": [0, 1]}]}
    jobset, pods = restarted_alone(status)
    assert restarts_of(jobset) == 1
    ended = as_of_restart(jobset, 0)
    running = [p for p in pods if p["metadata"]["name"] != "train-pathways-head-0-0-x"]
    verdict = classify(pods=running, nodes=[NODE], jobset=ended)
    assert verdict.verdict is Verdict.SLICE_FAILURE and any("train-worker-1-0-old" in e for e in verdict.evidence)


def test_kueue_eviction():
    workload = {"status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"}]}}
    verdict = classify(pods=[], nodes=[], kueue_workload=workload)
    assert verdict.verdict is Verdict.QUEUE_EVICTION and "Preempted" in verdict.evidence[0]


def test_a_user_error_has_its_exit_code_and_container():
    verdict = classify(pods=[pod("train-pathways-head-0-0-x", job="pathways-head", exit_code=1)], nodes=[NODE])
    assert (verdict.verdict, verdict.exit_code, verdict.container) == (Verdict.USER_ERROR, 1, "main")


def test_a_restarted_container_is_judged_by_its_last_exit():
    verdict = classify(pods=[pod("h", job="pathways-head", last_exit=3)], nodes=[NODE])
    assert (verdict.verdict, verdict.exit_code) == (Verdict.USER_ERROR, 3)


def test_exit_143_with_a_disruption_target_is_a_disruption_even_on_a_healthy_node():
    head = pod("h", job="pathways-head", exit_code=143, disruption="EvictionByEvictionAPI")
    assert classify(pods=[head], nodes=[NODE]).verdict is Verdict.UNKNOWN_INFRA
    assert classify(pods=[head], nodes=[NODE]).verdict.is_disruption


@pytest.mark.parametrize(("code", "verdict"), [(143, Verdict.UNKNOWN_INFRA), (42, Verdict.UNKNOWN_INFRA), (1, Verdict.USER_ERROR), (2, Verdict.USER_ERROR)])
def test_without_disruption_evidence_the_exit_code_policy_decides(code, verdict):
    assert classify(pods=[pod("h", job="pathways-head", exit_code=code)], nodes=[NODE]).verdict is verdict


def test_exit_code_classes_can_be_overridden():
    policy = ExitCodePolicy(frozenset({1}))
    assert classify(pods=[pod("h", job="pathways-head", exit_code=1)], nodes=[NODE], exit_codes=policy).verdict is Verdict.UNKNOWN_INFRA
    assert classify(pods=[pod("h", job="pathways-head", exit_code=143)], nodes=[NODE], exit_codes=policy).verdict is Verdict.USER_ERROR


def test_evidence_from_an_earlier_restart_attempt_does_not_excuse_the_current_one():
    old = pod("w-old", disruption="TerminationByKubelet")
    old["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "0"
    head = pod("h", job="pathways-head", exit_code=1)
    head["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    verdict = classify(pods=[old, head], nodes=[NODE], jobset={"status": {"restarts": 1}})
    assert verdict.verdict is Verdict.USER_ERROR


def test_a_job_failed_by_its_pod_failure_policy_on_disruption_is_infrastructure():
    job = {"metadata": {"name": "train-worker-0"}, "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "Pod default/x has condition DisruptionTarget matching FailJob rule at index 0"}]}}
    assert classify(pods=[], nodes=[], jobs=[job]).verdict is Verdict.UNKNOWN_INFRA


def worker_job(failed: int, *, attempt: str = "0", deleting: bool = False) -> dict:
    meta = {
        "name": "train-worker-0",
        "labels": {
            "jobset.sigs.k8s.io/jobset-name": "train",
            "jobset.sigs.k8s.io/replicatedjob-name": "worker",
            "jobset.sigs.k8s.io/restart-attempt": attempt,
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T12:00:00Z"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "status": {"active": 2, "failed": failed, "ready": 2}}


def of_job(p: dict, job: str = "train-worker-0") -> dict:
    p["metadata"]["labels"]["batch.kubernetes.io/job-name"] = job
    return p


def test_a_head_exit_after_its_workers_were_lost_is_a_slice_failure():
    """The lost workers' pods are gone (a restarted triggerer never saw them); their Job's count stays."""
    head = pod("h", job="pathways-head", exit_code=1)
    replacements = [of_job(pod("train-worker-0-0-new")), of_job(pod("train-worker-0-1-new"))]
    verdict = classify(pods=[head, *replacements], nodes=[NODE], jobs=[worker_job(2)], jobset={"status": {"restarts": 0}})
    assert verdict.verdict is Verdict.SLICE_FAILURE
    assert any("2 worker pod(s) gone before they finished" in e for e in verdict.evidence)


def test_worker_failures_explained_by_their_own_exit_codes_are_not_lost_workers():
    crashed = of_job(pod("train-worker-0-0-abc", exit_code=1))
    head = pod("h", job="pathways-head", exit_code=1)
    verdict = classify(pods=[head, crashed], nodes=[NODE], jobs=[worker_job(1)])
    assert verdict.verdict is Verdict.USER_ERROR


@pytest.mark.parametrize(
    "job",
    [
        worker_job(0, attempt="1"),
        worker_job(2, attempt="1", deleting=True),  # the JobSet's own teardown of the failed attempt
        worker_job(2, attempt="0"),  # an earlier attempt's losses
    ],
    ids=["no-losses", "job-being-deleted", "earlier-attempt"],
)
def test_a_user_error_stays_one_without_live_evidence_of_lost_workers(job):
    head = pod("h", job="pathways-head", exit_code=1)
    head["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    verdict = classify(pods=[head], nodes=[NODE], jobs=[job], jobset={"status": {"restarts": 1}})
    assert verdict.verdict is Verdict.USER_ERROR


def test_only_verdicts_later_events_could_overturn_get_a_second_look():
    user_bug = classify(pods=[pod("h", job="pathways-head", exit_code=1)], nodes=[NODE])
    nothing_seen = classify(pods=[pod("h", job="pathways-head")], nodes=[NODE])
    maintenance = classify(pods=[pod(exit_code=143, disruption="TerminationByKubelet", reason="Terminated")], nodes=[tainted(node(**{"cloud.google.com/active-node-maintenance": "ONGOING"}))])
    system_exit = classify(pods=[pod("h", job="pathways-head", exit_code=137)], nodes=[NODE])
    assert nothing_seen.verdict is Verdict.UNKNOWN_INFRA
    assert worth_a_second_look(user_bug) and worth_a_second_look(nothing_seen)
    assert not worth_a_second_look(maintenance) and not worth_a_second_look(system_exit)


def test_summary_line():
    disruptions = [
        {"kind": "MAINTENANCE", "steps_recomputed": 60, "seconds_lost": 480},
        {"kind": "MAINTENANCE", "steps_recomputed": 40, "seconds_lost": 300},
        {"kind": "PREEMPTION", "steps_recomputed": 40, "seconds_lost": 300},
    ]
    assert summarize(disruptions, 1080.0) == "3 disruptions (2 maintenance, 1 preemption): 140 steps recomputed, 18 min 00 s lost"
    assert summarize(disruptions) == "3 disruptions (2 maintenance, 1 preemption): 140 steps recomputed"  # lost not known yet
    assert summarize([]) == "no disruptions"


def test_progress_from_maxtext_logs():
    lines = ["completed step: 34, seconds: 1.0", "saving checkpoint for step 29", "completed step: 35, seconds: 1.0"]
    assert last_completed_step(lines) == 35 and last_completed_step(["nothing"]) is None
    assert steps_recomputed(35, 30) == 5 and steps_recomputed(35, None) == 36 and steps_recomputed(None, 30) == 0


def test_the_operator_resubmits_only_for_infrastructure():
    from pathways_airflow.run.outcome import is_disruption as disrupted
    from pathways_airflow.state.disruption import Classification
    from pathways_airflow.state.model import FailureCause, Phase, WorkloadState

    def failed(cause):
        return WorkloadState(Phase.FAILED, cause=cause)

    maintenance = Classification(Verdict.MAINTENANCE, ("node x: active maintenance",))
    unknown = Classification(Verdict.UNKNOWN_INFRA, ("no pod shows why it stopped",))
    assert disrupted(failed(FailureCause.DISRUPTION), maintenance)
    assert disrupted(failed(FailureCause.USER_CODE), maintenance), "exit 1 after losing the slice"
    assert not disrupted(failed(FailureCause.USER_CODE), unknown), "a bug with no disruption evidence"
    assert disrupted(failed(FailureCause.UNKNOWN), unknown)
    for cause in (FailureCause.BAD_SPEC, FailureCause.QUOTA, FailureCause.DELETED):
        assert not disrupted(failed(cause), maintenance)
    assert not disrupted(failed(FailureCause.USER_CODE), Classification(Verdict.USER_ERROR, (), 1))


def failed_jobset(first_failed: str, reason: str = "ReachedMaxRestarts") -> dict:
    """A JobSet as kubernetes-sigs/jobset leaves it: the failure message names the first failed Job."""
    return {
        "metadata": {"name": "train"},
        "status": {
            "restarts": 0,
            "conditions": [
                {"type": "Failed", "status": "True", "reason": reason,
                 "message": f"jobset failed due to reaching max number of restarts (first failed job: {first_failed})"}
            ],
        },
    }


def test_with_the_pods_gone_a_head_that_failed_first_is_the_users_bug():
    """The failed head pod was deleted before any watch read it (a relist after 410): the JobSet
    still names the head as the first failed Job, and nothing shows a disruption."""
    verdict = classify(pods=[], nodes=[NODE], jobs=[], jobset=failed_jobset("train-pathways-head-0"))
    assert verdict.verdict is Verdict.USER_ERROR
    assert "first failed job is the head's (train-pathways-head-0)" in verdict.evidence[0]
    assert worth_a_second_look(verdict)


@pytest.mark.parametrize(
    "evidence",
    [
        {"jobset": failed_jobset("train-worker-0")},  # a worker failed first: not the head's program
        {"jobset": failed_jobset("train-pathways-head-0"), "jobs": [worker_job(2)]},  # workers were lost first
        {"jobset": failed_jobset("other-pathways-head-0")},  # another JobSet's head (names never mix)
    ],
    ids=["worker-first", "lost-workers", "not-this-jobset"],
)
def test_the_jobsets_message_never_overrides_disruption_evidence(evidence):
    verdict = classify(pods=[], nodes=[NODE], **{"jobs": [], **evidence})
    assert verdict.verdict is not Verdict.USER_ERROR


def test_a_head_that_failed_first_after_its_slice_was_lost_is_not_called_a_bug():
    """The workers' pods and Jobs were never seen (a restarted trigger), but a node of the workers'
    slice shape is NotReady: the head failed first because the slice was lost, as JAX notices."""
    jobset = failed_jobset("train-pathways-head-0")
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "2x4"}
    jobset["spec"] = {"replicatedJobs": [{"name": "worker", "template": {"spec": {"template": {"spec": {"nodeSelector": selector}}}}}]}
    down = node(**selector)
    down["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeStatusUnknown"}]}
    other = node(**{"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "4x4"})
    assert classify(pods=[], nodes=[down], jobs=[], jobset=jobset).verdict is not Verdict.USER_ERROR
    # A disruption on nodes of another slice shape says nothing about this workload's workers.
    other["status"] = down["status"]
    healthy = node(**selector)
    assert classify(pods=[], nodes=[other, healthy], jobs=[], jobset=jobset).verdict is Verdict.USER_ERROR


def test_where_the_workers_ran_is_known_only_their_nodes_vouch_against_the_head_first_rule():
    """Maintenance on another slice of the same shape, which the attempt never used, does not make
    a head that failed first (its pod gone before anyone read its exit) anything but a bug; the
    nodes its workers ran on still do when they are down."""
    jobset = failed_jobset("train-pathways-head-0")
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "2x4"}
    jobset["spec"] = {"replicatedJobs": [{"name": "worker", "template": {"spec": {"template": {"spec": {"nodeSelector": selector}}}}}]}
    used = node(**selector)
    elsewhere = tainted(node(**selector, **{"cloud.google.com/active-node-maintenance": "ONGOING"}))
    elsewhere["metadata"]["name"] = "gke-local-tpu-v5e-2x4-2-0"
    assert classify(pods=[], nodes=[used, elsewhere], jobs=[], jobset=jobset).verdict is not Verdict.USER_ERROR  # where unknown
    assert classify(pods=[], nodes=[used, elsewhere], jobs=[], jobset=jobset, ran_on=[NODE_NAME]).verdict is Verdict.USER_ERROR
    verdict = classify(pods=[], nodes=[used, elsewhere], jobs=[], jobset=jobset, ran_on=[NODE_NAME, "gke-local-tpu-v5e-2x4-2-0"])
    assert verdict.verdict is not Verdict.USER_ERROR
    assert classify(pods=[], nodes=[elsewhere], jobs=[], jobset=jobset, ran_on=[NODE_NAME]).verdict is not Verdict.USER_ERROR  # its node is gone


# --- slice losses the program rode out (elastic slices) -----------------------------------------

def _elastic_after_a_loss(replacement_phase: str = "Running", replacement_disrupted: bool = False):
    """The recorded elastic PathwaysJob with slice 1's pods lost (DisruptionTarget, their nodes shut
    down) and replaced by newer pods of the same hosts; slice 2 running too."""
    import json
    from pathlib import Path

    from pathways_airflow.state.model import Observation

    fields = json.loads((Path(__file__).parent / "fixtures" / "status" / "running_elastic_two_of_three.json").read_text())["observation"]
    pods = []
    for pod in fields["pods"]:
        pod = copy.deepcopy(pod)
        if "-worker-2-" in pod["metadata"]["name"]:
            pod["status"].update(phase="Running", startTime="2026-11-22T07:40:55Z")
            pod["spec"]["nodeName"] = "gke-local-tpu-v5e-2x4-2-" + pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        pods.append(pod)
        if "-worker-1-" in pod["metadata"]["name"]:
            pod["status"]["conditions"] = [*pod["status"].get("conditions", []), {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]
            new = copy.deepcopy(pod)
            new["metadata"].update(name=pod["metadata"]["name"] + "-new", creationTimestamp="2026-11-22T07:50:00Z")
            new["status"] = {"phase": replacement_phase, "startTime": "2026-11-22T07:50:05Z" if replacement_phase == "Running" else None,
                             "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}] if replacement_disrupted else []}
            new["spec"] = {**pod["spec"], "nodeName": "spare-" + pod["spec"]["nodeName"]}
            pods.append(new)
    return Observation(**{**fields, "pods": tuple(pods), "jobs": tuple(fields.get("jobs") or ())})


def test_a_program_that_rode_out_its_slice_loss_is_judged_on_the_pods_and_nodes_it_runs_on_now():
    from pathways_airflow.state.disruption import nodes_workers_run_on, rode_out_slice_losses, without_replaced_pods
    from pathways_airflow.state.status import workload_state

    observation = _elastic_after_a_loss()
    assert rode_out_slice_losses(observation)
    kept = {p["metadata"]["name"] for p in without_replaced_pods(observation.pods)}
    assert not any(n.startswith("elastic-worker-1-") and not n.endswith("-new") for n in kept)
    assert {"elastic-worker-1-0-l553m-new", "elastic-worker-1-1-6hoh3-new", "elastic-pathways-head-0-0-8xtlz"} <= kept
    running_now = {p["spec"]["nodeName"] for p in observation.pods if "-worker-" in p["metadata"]["name"] and p["metadata"]["name"] in kept}
    assert set(nodes_workers_run_on(observation)) == running_now and sum(n.startswith("spare-") for n in running_now) == 2
    assert workload_state(observation).phase.value == "RUNNING"
    # Not ridden out: the replacements have not started, or were disrupted in turn.
    assert not rode_out_slice_losses(_elastic_after_a_loss("Pending"))
    assert not rode_out_slice_losses(_elastic_after_a_loss(replacement_disrupted=True))


def test_a_node_cache_that_keeps_its_disrupted_nodes_gives_the_verdict_every_node_gives():
    """A triggerer's node cache indexes the nodes that show a disruption as each one changes
    (``triggers.workload.by_disruption``): whether a node of the workers' slice shape is disrupted
    is then read from those few, with the answer a look at every node gives."""
    from pathways_airflow.state.disruption import slice_nodes_disrupted
    from pathways_airflow.state.workload_parts import NodesByName
    from pathways_airflow.triggers.workload import DISRUPTED, by_disruption

    def of_pool(pool: str, machine: str, topology: str) -> list[dict]:
        return node_manifests(tpu_pool(pool, machine, topology))

    healthy = of_pool("tpu-v5e-2x4-0", "ct5lp-hightpu-4t", "2x4") + of_pool("tpu-v5p-2x2x2-0", "ct5p-hightpu-4t", "2x2x2")
    down = copy.deepcopy(of_pool("tpu-v5p-2x2x2-1", "ct5p-hightpu-4t", "2x2x2")[0])
    down["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "lastTransitionTime": "2026-11-24T03:12:00Z"}]
    fleet = [*healthy, down]
    indexed = NodesByName({n["metadata"]["name"]: n for n in fleet}, lambda: [n for n in fleet if by_disruption(n) == (DISRUPTED,)])
    assert [n["metadata"]["name"] for n in indexed.disrupted()] == [down["metadata"]["name"]]
    assert all(by_disruption(n) == () for n in healthy)

    def jobset(selector: dict) -> dict:
        template = {"spec": {"template": {"spec": {"nodeSelector": selector, "containers": [{"name": "worker"}]}}}}
        return {"kind": "JobSet", "spec": {"replicatedJobs": [{"name": "worker", "template": template}]}}

    v5p = jobset({"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice", "cloud.google.com/gke-tpu-topology": "2x2x2"})
    v5e = jobset({"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "2x4"})
    for workload, expected in ((v5p, True), (v5e, False)):
        assert slice_nodes_disrupted(workload, fleet) is expected
        assert slice_nodes_disrupted(workload, indexed) is expected
    assert indexed[down["metadata"]["name"]] is down and len(indexed) == len(fleet) and set(indexed) == {n["metadata"]["name"] for n in fleet}
