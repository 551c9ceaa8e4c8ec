"""The triggerer caches pruned JobSets, PathwaysJobs and Kueue Workloads: every decision is the one the whole objects give.

The observations are the recorded status fixtures (``fixtures/status/``, what the local cluster's
API returned in each state: queued, provisioning, running, elastic, restarting, failed by a
disruption, by the user's code, by a refused spec, succeeded), each as recorded and edited the
ways the trigger path reads differently (suspended, elastic from the JobSet, provider and foreign
annotations, pods gone, a rejected spec, pods and Jobs of an execution before a Kueue re-admission; a Kueue Workload admitted, preempted, evicted at its
PodsReady timeout, admitted again, past its time limit, finished, found by its label or by its
owner only). For each, everything the trigger path decides from the JobSet, the PathwaysJob and
the Kueue Workload is computed on the whole objects and on what the caches keep
(:mod:`pathways_airflow.triggers.pruning`, pods and Jobs pruned too), and must be equal.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.spec import TaskIdentity, build_workload, render
from pathways_airflow.spec.parse import workload_from_pathwaysjob
from pathways_airflow.state import creation
from pathways_airflow.state.disruption import (
    Classification,
    Verdict,
    classify,
    has_the_user_error_rule,
    head_failed_first,
    slice_nodes_disrupted,
    worker_node_selector,
)
from pathways_airflow.state.kueue_timeout import max_exec_time_exceeded
from pathways_airflow.state.model import Observation, kueue_workload_of
from pathways_airflow.run.outcome import verdict_of
from pathways_airflow.state.ran_on import RAN_ON_ANNOTATION, went_down_under_it
from pathways_airflow.run.records import JOBSET_RESTART, Disruption
from pathways_airflow.run.annotations import restarts_annotation, restarts_written
from pathways_airflow.run.result import tpu_of
from pathways_airflow.state.status import controller_objections, state_from_kueue, workload_state
from pathways_airflow.state.workload_parts import (
    current_attempt,
    elastic_slices,
    failed_container,
    head_job_name,
    worker_job_name,
    head_pod,
    pods_per_slice,
    slices_ready,
    slices_total,
)
from pathways_airflow.run.annotations import disruption_seen, disruption_seen_annotation, verdict_after_the_fact
from pathways_airflow.triggers.pruning import (
    pruned_job,
    pruned_jobset,
    pruned_kueue_workload,
    pruned_node,
    pruned_pathwaysjob,
    pruned_pod,
    pruned_to_name,
    DECODED_FIELDS,
)
from pathways_airflow.hooks.api import JsonLines, decoded, event_of, list_of
from pathways_airflow.triggers.watch import by_owner
from pathways_airflow.triggers.workload import workload_watches
from pathways_airflow_testing.controllers import kueue
from pathways_airflow_testing.nodes import node_manifests, tpu_pool

FIXTURES = Path(__file__).parent / "fixtures" / "status"
SCENARIOS = sorted(p.stem for p in FIXTURES.glob("*.json"))
Fields = dict[str, Any]

def _as_gke_registers_them(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes with what a real node carries beside what the verdicts read: the kubelet's and
    GKE's annotations, managed fields, the images it holds, its node info and addresses."""
    for node in nodes:
        node["metadata"]["creationTimestamp"] = "2026-11-22T06:00:00Z"
        node["metadata"]["annotations"] = {
            "node.alpha.kubernetes.io/ttl": "0", "container.googleapis.com/instance_id": "4410926380126475812",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
        node["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}}]
        node["status"]["images"] = [{"names": [f"us-docker.pkg.dev/demo/maxtext/runner@sha256:{i:064x}"], "sizeBytes": 9_000_000_000} for i in range(8)]
        node["status"]["nodeInfo"] = {"kubeletVersion": "v1.34.1-gke.1200", "containerRuntimeVersion": "containerd://2.0.6", "osImage": "Container-Optimized OS"}
        node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.128.0.7"}, {"type": "Hostname", "address": node["metadata"]["name"]}]
        for condition in node["status"].get("conditions") or ():
            condition.setdefault("lastTransitionTime", "2026-11-22T06:01:00Z")
    return nodes


HEALTHY = _as_gke_registers_them(
    node_manifests(tpu_pool("tpu-v5e-2x4-0", "ct5lp-hightpu-4t", "2x4")) + node_manifests(tpu_pool("tpu-v6e-4x4-0", "ct6e-standard-4t", "4x4"))
)


def _disrupted(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same nodes, the first of each pool tainted for termination."""
    changed = copy.deepcopy(nodes)
    seen: set[str] = set()
    for node in changed:
        pool = node["metadata"]["labels"].get("cloud.google.com/gke-nodepool")
        if pool not in seen:
            seen.add(pool)
            node.setdefault("spec", {}).setdefault("taints", []).append(
                {"key": well_known.IMPENDING_TERMINATION, "value": "true", "effect": "NoSchedule"}
            )
    return changed


NODE_SETS = {"none": [], "healthy": HEALTHY, "disrupted": _disrupted(HEALTHY)}


def fixture(name: str) -> Fields:
    return json.loads((FIXTURES / f"{name}.json").read_text())["observation"]


def _top(fields: Fields) -> dict[str, Any] | None:
    return fields["pathwaysjob"] if fields["backend"] == "pathwaysjob" else fields["jobset"]


def _jobs(jobset: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The child Jobs a JobSet makes for its current attempt, a worker Job counting one lost pod;
    where the JobSet counts executions (KEP-1282), the first Job of each replicated job still
    annotated with the execution before."""
    if jobset is None:
        return []
    name, attempt = jobset["metadata"]["name"], str((jobset.get("status") or {}).get("restarts", 0))
    executions = (jobset.get("status") or {}).get("executionAttempts")
    jobs = []
    for replicated in jobset["spec"]["replicatedJobs"]:
        for index in range(int(replicated.get("replicas", 1))):
            labels = {well_known.JOBSET_NAME: name, well_known.REPLICATED_JOB: replicated["name"], well_known.RESTART_ATTEMPT: attempt}
            annotations = {"batch.kubernetes.io/job-tracking": ""}
            if executions is not None:
                annotations[well_known.EXECUTION_ATTEMPT] = str(executions - (index == 0))
            jobs.append({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": f"{name}-{replicated['name']}-{index}", "namespace": "default", "labels": labels,
                             "annotations": annotations, "creationTimestamp": "2026-11-22T07:40:46Z"},
                "spec": {"parallelism": 2, "template": replicated["template"]["spec"]["template"]},
                "status": {"failed": int(replicated["name"] == "worker" and index == 0), "active": 1},
            })
    return jobs


def _events(name: str) -> list[dict[str, Any]]:
    return [
        {"involvedObject": {"kind": kind, "name": name}, "reason": reason, "type": "Warning", "message": f"{reason}: refused by quota",
         "lastTimestamp": "2026-11-22T08:00:00Z"}
        for kind, reason in (("JobSet", creation.JOB_CREATION_FAILED), ("PathwaysJob", "FailedCreate"))
    ]


def decisions(fields: Fields) -> dict[str, Any]:
    """Everything the trigger path decides or reports from one observation (and the operator's
    after-the-fact verdict on the same objects), keyed by the reader."""
    node_sets = fields.get("node_sets") or NODE_SETS
    observation = Observation(**{**{k: v for k, v in fields.items() if k != "node_sets"}, "pods": tuple(fields["pods"])})
    jobset, pathwaysjob, top = observation.jobset, observation.pathwaysjob, _top(fields)
    jobs = tuple(fields.get("jobs") or ())
    attempt = current_attempt(observation)
    state = workload_state(observation)
    head = head_pod(observation)
    found: dict[str, Any] = {
        "workload_state": state, "slices_total": slices_total(jobset), "pods_per_slice": pods_per_slice(jobset),
        "slices_ready": slices_ready(observation), "elastic_slices": elastic_slices(observation), "current_attempt": attempt,
        "failed_container": failed_container(observation), "head_job_name": head_job_name(jobset),
        "head_pod": head and head["metadata"]["name"], "worker_job_name": worker_job_name(jobset),
        "head_failed_first": head_failed_first(jobset), "worker_node_selector": worker_node_selector(jobset),
        "kueue_workload": _name(kueue_workload_of((jobset or {}).get("metadata", {}).get("uid"), [fields["kueue_workload"]] if fields["kueue_workload"] else [])),
        "kueue_workload_owner": fields["kueue_workload"] and by_owner("JobSet")(fields["kueue_workload"]),
        "state_from_kueue": state_from_kueue(observation), "max_exec_time_exceeded": max_exec_time_exceeded(observation.kueue_workload),
        "restarts_written": restarts_written(top), "disruption_seen": disruption_seen(top, attempt),
        "disruption_seen_any": disruption_seen(top, None),
        "children_missing": creation.children_missing(top, jobset, jobs),
        "children_missing_one_job_gone": creation.children_missing(top, jobset, jobs[1:]),
    }
    if jobset is not None:
        found["has_the_user_error_rule"] = has_the_user_error_rule(jobset)
    if top is not None:
        for waited in (0.0, 600.0):
            found[f"creation_failure_{waited}"] = creation.creation_failure(top, jobset, jobs[1:], _events(fields["name"]), waited)
    if pathwaysjob is not None:
        found["controller_objections"] = controller_objections(pathwaysjob)
        found["pathwaysjob_node_selector"] = worker_node_selector(pathwaysjob)
        found["tpu"] = _tpu(pathwaysjob)
    for label, nodes in node_sets.items():
        recorded = disruption_seen(top, attempt) or went_down_under_it(top, attempt, nodes)
        classification = classify(
            pods=observation.pods, nodes=nodes, jobs=jobs, jobset=jobset, kueue_workload=observation.kueue_workload, recorded=recorded
        )
        found[f"{label}:went_down_under_it"] = went_down_under_it(top, attempt, nodes)
        found[f"{label}:classify"] = classification
        found[f"{label}:verdict_of"] = verdict_of(state, classification)
        found[f"{label}:slice_nodes_disrupted"] = slice_nodes_disrupted(jobset, nodes)
        if top is not None:
            found[f"{label}:verdict_after_the_fact"] = verdict_after_the_fact(top, nodes)
    return found


def _name(obj: Any) -> str | None:
    return obj and obj["metadata"].get("name")


def _tpu(pathwaysjob: dict[str, Any]) -> Any:
    try:
        return tpu_of(workload_from_pathwaysjob(pathwaysjob)[0])
    except Exception as error:  # a spec the controller refuses: its problems are the decision
        return repr(error)


def as_cached(fields: Fields) -> Fields:
    """The observation as the triggerer's caches hold it."""
    cached = copy.deepcopy(fields)
    cached["jobset"] = fields["jobset"] and pruned_jobset(copy.deepcopy(fields["jobset"]))
    cached["pathwaysjob"] = fields["pathwaysjob"] and pruned_pathwaysjob(copy.deepcopy(fields["pathwaysjob"]))
    cached["pods"] = [pruned_pod(copy.deepcopy(p)) for p in fields["pods"]]
    cached["jobs"] = [pruned_job(copy.deepcopy(j)) for j in fields.get("jobs") or ()]
    cached["kueue_workload"] = fields["kueue_workload"] and pruned_kueue_workload(copy.deepcopy(fields["kueue_workload"]))
    # by name, as a triggerer's node cache hands them to a verdict (SharedWatch.by_name)
    cached["node_sets"] = {label: {n["metadata"]["name"]: pruned_node(copy.deepcopy(n)) for n in nodes} for label, nodes in NODE_SETS.items()}
    return cached


# --- the edits --------------------------------------------------------------------------------


def _annotated(fields: Fields) -> None:
    """What the triggers write on a workload, and what a real API server and kubectl add."""
    attempt = int(((fields["jobset"] or {}).get("status") or {}).get("restarts", 0))
    since = "2026-11-22T07:00:00Z"
    ours = {
        **restarts_annotation([Disruption(1.0, "MAINTENANCE", ("pod a: DisruptionTarget",), 10, JOBSET_RESTART)]),
        **disruption_seen_annotation(attempt, Classification(Verdict.SLICE_FAILURE, ("pod b: NodeShutdown",))),
        RAN_ON_ANNOTATION: json.dumps({"restart": attempt, "since": since, "nodes": [n["metadata"]["name"] for n in HEALTHY[:2]]}),
        "pathways-airflow/dag-id": "training",
    }
    for obj in (fields["jobset"], fields["pathwaysjob"]):
        if obj is None:
            continue
        meta = obj["metadata"]
        meta["annotations"] = {**ours, "kubectl.kubernetes.io/last-applied-configuration": json.dumps(obj["spec"]), **(meta.get("annotations") or {})}
        meta["managedFields"] = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicatedJobs": {}}}}]


def _suspended(fields: Fields) -> None:
    if fields["jobset"] is not None:
        fields["jobset"]["spec"]["suspend"] = True


def _elastic_from_the_jobset(fields: Fields) -> None:
    """The PathwaysJob does not say: the proxy's flag in the JobSet's head template does."""
    if fields["pathwaysjob"] is not None:
        fields["pathwaysjob"]["spec"]["controller"].pop("elasticSlices", None)


def _pods_gone(fields: Fields) -> None:
    fields["pods"] = []


def _head_failed_first(fields: Fields) -> None:
    """The JobSet failed naming its head, and no pod is left to say why."""
    jobset = fields["jobset"]
    if jobset is None:
        return
    name = jobset["metadata"]["name"]
    status = jobset.setdefault("status", {})
    status["conditions"] = [*(status.get("conditions") or ()), {
        "type": "Failed", "status": "True", "reason": "ReachedMaxRestarts", "lastTransitionTime": "2026-11-22T08:00:00Z",
        "message": f"jobset failed due to reaching max number of restarts (first failed job: {name}-pathways-head-0)",
    }]
    fields["pods"] = []


def _rejected_spec(fields: Fields) -> None:
    """The controller failed the PathwaysJob without a word, and made no JobSet."""
    if fields["pathwaysjob"] is not None:
        fields["pathwaysjob"]["spec"]["workers"][0]["topology"] = "9x9"
        fields["pathwaysjob"]["status"] = {"terminalState": "Failed"}
        fields["jobset"] = None


def _readmitted_by_kueue(fields: Fields) -> None:
    """Kueue evicted the JobSet and admitted it again: JobSet counts the execution (KEP-1282,
    ``status.executionAttempts`` 1) and every other pod is still the one before's, its
    ``execution-attempt`` annotation among those no reader needs."""
    if fields["jobset"] is None:
        return
    fields["jobset"].setdefault("status", {})["executionAttempts"] = 1
    for index, pod in enumerate(sorted(fields["pods"], key=lambda p: p["metadata"]["name"])):
        meta = pod["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), well_known.EXECUTION_ATTEMPT: str(index % 2), "example.com/note": "x"}


def _empty_template(fields: Fields) -> None:
    if fields["pathwaysjob"] is not None:
        fields["pathwaysjob"]["spec"]["controller"]["template"] = {}


# --- the Kueue Workload, as the local Kueue writes it ------------------------------------------

LIMIT = 3600
ADMITTED_AT, EVICTED_AT, LATER = "2026-11-22T07:41:00Z", "2026-11-22T07:50:00Z", "2026-11-22T08:00:00Z"
V5E = "tpu-v5-lite-podslice-2x4"


def _kueue_workload(fields: Fields) -> dict[str, Any] | None:
    """The recorded Workload, or for a JobSet recorded without one the Workload Kueue makes for
    it (:func:`~pathways_airflow_testing.controllers.kueue.new_workload`); with a time limit."""
    if fields["kueue_workload"] is None and fields["jobset"] is not None:
        high = kueue.Priority(100, kueue.KUEUE_GROUP, "WorkloadPriorityClass", "high")
        fields["kueue_workload"] = kueue.new_workload(fields["jobset"], high)
    workload = fields["kueue_workload"]
    if workload is not None:
        workload["spec"].setdefault("maximumExecutionTimeSeconds", LIMIT)
    return workload


def _admitted(fields: Fields) -> dict[str, Any] | None:
    workload = _kueue_workload(fields)
    if workload is not None:
        assignments = [kueue.PodSetAssignment(p["name"], p["count"], V5E, 4 * p["count"]) for p in workload["spec"]["podSets"]]
        workload["status"] = kueue.admitted_status(workload.get("status") or {}, "cluster-queue", assignments, ADMITTED_AT)
    return workload


def _admission_only(fields: Fields) -> None:
    """Admitted, the conditions not written yet: ``status.admission`` alone says so."""
    workload = _admitted(fields)
    if workload is not None:
        workload["status"] = {"admission": workload["status"]["admission"]}


def _evicted(reason: str, requeued: bool) -> Callable[[Fields], None]:
    def edit(fields: Fields) -> None:
        workload = _admitted(fields)
        if workload is not None:
            status = kueue.evicted_status(workload["status"], reason, f"evicted: {reason}", EVICTED_AT)
            workload["status"] = kueue.requeued_status(status, LATER) if requeued else status

    return edit


def _readmitted(fields: Fields) -> None:
    """Admitted again after an eviction, the ``Evicted`` condition not reset yet."""
    workload = _admitted(fields)
    if workload is not None:
        status = kueue.requeued_status(kueue.evicted_status(workload["status"], "Preempted", "preempted", EVICTED_AT), EVICTED_AT)
        for type_ in ("QuotaReserved", "Admitted"):
            status["conditions"] = kueue.set_condition(status["conditions"], type_, "True", type_, f"{type_} again", LATER)
        workload["status"] = status


def _past_its_time_limit(fields: Fields) -> None:
    """Kueue's first step at the limit: ``DeactivationTarget``, not yet evicted."""
    workload = _admitted(fields)
    if workload is not None:
        workload["status"] = kueue.deactivation_target_status(workload["status"], LATER)


def _kueue_finished(fields: Fields) -> None:
    workload = _admitted(fields)
    if workload is not None:
        workload["status"] = kueue.finished_status(workload["status"], True, "jobset completed successfully", LATER)


def _kueue_annotated(fields: Fields) -> None:
    workload = _admitted(fields)
    if workload is not None:
        workload["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(workload["spec"])}
        workload["metadata"]["managedFields"] = [{"manager": "kueue", "operation": "Update", "fieldsV1": {"f:status": {}}}]


def _owned_by_label_only(fields: Fields) -> None:
    workload = _admitted(fields)
    if workload is not None:
        workload["metadata"].pop("ownerReferences", None)


def _owned_by_reference_only(fields: Fields) -> None:
    workload = _admitted(fields)
    if workload is not None:
        workload["metadata"].pop("labels", None)


EDITS: dict[str, Callable[[Fields], None]] = {
    "as recorded": lambda fields: None,
    "annotated": _annotated,
    "suspended": _suspended,
    "elastic from the JobSet": _elastic_from_the_jobset,
    "pods gone": _pods_gone,
    "head failed first": _head_failed_first,
    "rejected spec": _rejected_spec,
    "empty template": _empty_template,
    "readmitted by Kueue": _readmitted_by_kueue,
    "Kueue admitted": _admitted,
    "Kueue admission only": _admission_only,
    "Kueue preempted": _evicted("Preempted", requeued=True),
    "Kueue PodsReady timeout": _evicted("PodsReadyTimeout", requeued=False),
    "Kueue readmitted": _readmitted,
    "Kueue past its time limit": _past_its_time_limit,
    "Kueue finished": _kueue_finished,
    "Kueue annotated": _kueue_annotated,
    "Kueue owned by label only": _owned_by_label_only,
    "Kueue owned by reference only": _owned_by_reference_only,
}


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_decision_is_the_same_on_the_cached_objects(scenario: str, edit: str) -> None:
    fields = fixture(scenario)
    EDITS[edit](fields)
    fields["jobs"] = _jobs(fields["jobset"])
    assert decisions(as_cached(fields)) == decisions(fields)


def test_the_edits_reach_the_readers_they_are_for() -> None:
    """The comparison above means something: the fields pruning keeps change these decisions."""
    elastic = fixture("running_elastic_two_of_three")
    _elastic_from_the_jobset(elastic)
    assert decisions(as_cached(elastic))["elastic_slices"] == 1
    suspended = fixture("running_two_slices")
    _suspended(suspended)
    assert decisions(as_cached(suspended))["workload_state"].phase.value == "QUEUED"
    annotated = fixture("running_two_slices")
    _annotated(annotated)
    cached = decisions(as_cached(annotated))
    assert cached["restarts_written"] and cached["disruption_seen"] is not None
    assert cached["disrupted:went_down_under_it"] is not None
    head_first = fixture("failed_user_code_pathwaysjob")
    _head_failed_first(head_first)
    cached = decisions(as_cached(head_first))
    assert cached["head_failed_first"] and cached["healthy:classify"].verdict is Verdict.USER_ERROR
    assert cached["disrupted:classify"].verdict is Verdict.UNKNOWN_INFRA
    rejected = fixture("running_two_slices")
    _rejected_spec(rejected)
    assert decisions(as_cached(rejected))["controller_objections"]
    user_rule = fixture("failed_user_code_jobset")
    user_rule["jobs"] = _jobs(user_rule["jobset"])
    cached = decisions(as_cached(user_rule))
    assert cached["has_the_user_error_rule"] and cached["workload_state"].cause.value == "USER_CODE"
    assert cached["children_missing_one_job_gone"] and cached["creation_failure_0.0"].startswith("rejected child Job")
    readmitted = fixture("running_two_slices")
    _readmitted_by_kueue(readmitted)
    readmitted["jobs"] = _jobs(readmitted["jobset"])
    cached = decisions(as_cached(readmitted))
    assert cached["slices_ready"] == 0 and cached["children_missing"] and cached["workload_state"].execution_attempts == 1
    assert all(set(pruned_pod(p)["metadata"]["annotations"]) == {well_known.EXECUTION_ATTEMPT} for p in readmitted["pods"])


def test_the_kueue_edits_reach_the_readers_they_are_for() -> None:
    """The Workload's kept fields change these decisions: its limit, its conditions, its owner and label."""
    timed_out = fixture("running_two_slices")
    _past_its_time_limit(timed_out)
    cached = decisions(as_cached(timed_out))
    assert cached["workload_state"].cause.value == "TIMEOUT" and f"after {LIMIT}s" in cached["max_exec_time_exceeded"]
    for edit, phase in ((_evicted("PodsReadyTimeout", requeued=False), "QUEUED"), (_readmitted, "RUNNING")):
        evicted = fixture("running_two_slices")
        edit(evicted)
        cached = decisions(as_cached(evicted))
        assert cached["workload_state"].phase.value == phase and cached["healthy:classify"].verdict is Verdict.QUEUE_EVICTION
    admission_only = fixture("queued_waiting_for_quota")
    _admission_only(admission_only)
    assert decisions(as_cached(admission_only))["state_from_kueue"] is None
    recorded = fixture("queued_evicted")
    for edit in (_owned_by_label_only, _owned_by_reference_only):
        fields = fixture("queued_evicted")
        edit(fields)
        assert decisions(as_cached(fields))["kueue_workload"] == recorded["kueue_workload"]["metadata"]["name"]
    assert decisions(as_cached(recorded))["kueue_workload_owner"] == (recorded["name"],)


def test_only_the_providers_annotations_and_no_managed_fields_are_kept() -> None:
    fields = fixture("running_two_slices")
    _annotated(fields)
    for obj, prune in ((fields["jobset"], pruned_jobset), (fields["pathwaysjob"], pruned_pathwaysjob)):
        meta = prune(obj)["metadata"]
        assert "managedFields" not in meta
        assert meta["annotations"] and all(k.startswith("pathways-airflow/") for k in meta["annotations"])
        assert {k: v for k, v in meta.items() if k != "annotations"} == {
            k: v for k, v in obj["metadata"].items() if k not in ("annotations", "managedFields")
        }
        assert prune(obj)["status"] == obj["status"]


def test_a_cached_kueue_workload_keeps_its_metadata_but_annotations_its_status_its_limit_and_its_queue() -> None:
    fields = fixture("failed_kueue_max_exec_time")
    _kueue_annotated(fields)
    workload = fields["kueue_workload"]
    cached = pruned_kueue_workload(workload)
    assert cached["metadata"] == {k: v for k, v in workload["metadata"].items() if k not in ("annotations", "managedFields")}
    assert cached["status"] == workload["status"]
    spec = workload["spec"]
    assert cached["spec"] == {"maximumExecutionTimeSeconds": spec["maximumExecutionTimeSeconds"], "queueName": spec["queueName"]}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_pruning_twice_is_pruning_once(scenario: str) -> None:
    fields = fixture(scenario)
    _kueue_workload(fields)
    for obj, prune in (
        (fields["jobset"], pruned_jobset), (fields["pathwaysjob"], pruned_pathwaysjob), (fields["kueue_workload"], pruned_kueue_workload)
    ):
        if obj is not None:
            assert prune(prune(obj)) == prune(obj)


def _size(obj: dict[str, Any]) -> int:
    return len(json.dumps(obj))


def realistic(backend: str) -> dict[str, Any]:
    """A provider-rendered 2-slice MaxText training (as the operator labels and annotates it),
    with the metadata and running status the local cluster's API gave a 2-slice workload."""
    workload = build_workload(
        tpu="v5e", topology="2x4", num_slices=2, pathways_dir="gs://pathways-demo/tmp", image="us-docker.pkg.dev/demo/maxtext/runner:2026-11-20",
        command=["python3", "-m", "MaxText.train", "MaxText/configs/base.yml", "run_name=llama2-7b", "model_name=llama2-7b",
                 "base_output_directory=gs://pathways-demo/runs", "dataset_type=synthetic", "steps=10000", "per_device_batch_size=4",
                 "checkpoint_period=500", "enable_checkpointing=true", "async_checkpointing=true", "dcn_data_parallelism=2"],
        env={"LIBTPU_INIT_ARGS": "--xla_tpu_enable_async_collective_fusion=true", "JAX_TRACEBACK_FILTERING": "off"},
        resources={"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "8", "memory": "32Gi"}},
    )
    identity = TaskIdentity("training", "train", "scheduled__2026-11-26T00:00:00+00:00")
    manifest = render(workload, backend=backend, name="train-llama", namespace="default", labels=identity.labels(), annotations=identity.annotations())
    recorded = fixture("running_two_slices")[backend]
    manifest["metadata"] = {**recorded["metadata"], **manifest["metadata"]}
    manifest["metadata"].pop("ownerReferences", None)
    manifest["status"] = recorded["status"]
    return manifest


def test_a_cached_node_keeps_what_a_verdict_reads_and_a_third_of_the_bytes_at_most() -> None:
    node = _disrupted(HEALTHY)[0]
    cached = pruned_node(node)
    assert cached["metadata"]["labels"] == node["metadata"]["labels"] and "annotations" not in cached["metadata"]
    assert cached["spec"]["taints"] == node["spec"]["taints"] and cached["status"] == {"conditions": node["status"]["conditions"]}
    assert pruned_node(cached) == cached
    assert _size(cached) <= 0.35 * _size(node)


def test_a_cached_jobset_is_a_quarter_of_the_whole_one_at_most() -> None:
    """The numbers in :mod:`pathways_airflow.triggers.pruning`'s docstring."""
    jobset, pathwaysjob = realistic("jobset"), realistic("pathwaysjob")
    assert _size(pruned_jobset(jobset)) <= 0.25 * _size(jobset)
    assert _size(pruned_pathwaysjob(pathwaysjob)) <= 0.7 * _size(pathwaysjob)
    recorded = fixture("running_two_slices")
    assert _size(pruned_jobset(recorded["jobset"])) <= 0.3 * _size(recorded["jobset"])
    assert _size(pruned_pathwaysjob(recorded["pathwaysjob"])) < _size(recorded["pathwaysjob"])


def realistic_kueue_workload() -> dict[str, Any]:
    """The Workload Kueue makes for the realistic JobSet above, admitted on two v5e slices."""
    fields = {"jobset": realistic("jobset"), "kueue_workload": None}
    workload = _admitted(fields)
    assert workload is not None
    return workload


def test_a_cached_kueue_workload_is_a_quarter_of_the_whole_one_at_most() -> None:
    """The numbers in :mod:`pathways_airflow.triggers.pruning`'s docstring: the pod sets' templates
    are most of a Workload (1,207 bytes of 6,018 kept; of the recorded evicted one 1,641 of 5,839)."""
    workload = realistic_kueue_workload()
    assert _size(pruned_kueue_workload(workload)) <= 0.25 * _size(workload)
    recorded = fixture("queued_evicted")["kueue_workload"]
    assert _size(pruned_kueue_workload(recorded)) <= 0.3 * _size(recorded)


def test_the_shared_watches_of_jobsets_pathwaysjobs_and_kueue_workloads_prune() -> None:
    async def watches() -> dict[str, Any]:
        return {key: watch.prune for key, watch in workload_watches(ClusterTarget(cluster_url="https://pruning.invalid"), "pruning", "pathwaysjob").items()}

    prunes = asyncio.run(watches())
    assert prunes["jobsets"] is pruned_jobset and prunes["pathwaysjobs"] is pruned_pathwaysjob
    assert prunes["pods"] is pruned_pod and prunes["jobs"] is pruned_job
    assert prunes["workloads"] is pruned_kueue_workload


def test_the_cache_keeps_the_coordinator_that_names_a_plain_multislice_jobsets_head():
    """A coordinator on job 1 makes that job's pod 0 the head: the pruned JobSet must still say so."""
    from pathways_airflow.state.model import Observation
    from pathways_airflow.state.workload_parts import head_pod
    from pathways_airflow.triggers.pruning import pruned_jobset

    fields = json.loads((FIXTURES / "running_multislice.json").read_text())["observation"]
    fields["jobset"]["spec"]["coordinator"] = {"replicatedJob": "slice", "jobIndex": 1, "podIndex": 0}
    whole = Observation(**{**fields, "pods": tuple(fields["pods"])})
    pruned = Observation(**{**fields, "jobset": pruned_jobset(fields["jobset"]), "pods": tuple(fields["pods"])})
    assert head_pod(whole)["metadata"]["name"].startswith("spmd-slice-1-0-")
    assert head_pod(pruned)["metadata"]["name"] == head_pod(whole)["metadata"]["name"]


def _held(objects: list[Any]) -> int:
    """The bytes ``objects`` hold, each object counted once however many refer to it (``sys.getsizeof``)."""
    import sys

    seen: set[int] = set()
    pending, total = list(objects), 0
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return total


def test_a_cached_pod_is_bytes_the_collector_never_walks_in_under_half_the_memory_of_its_dicts():
    """Pods of one workload as watch events bring them (msgspec-decoded to their shape, as the
    watch does): cached packed, no object the garbage collector tracks, in less than half of what
    the pruned dicts hold; read back, each is the pruned pod."""
    import gc
    import sys

    from pathways_airflow.resources import POD
    from pathways_airflow.triggers.watch import SharedWatch

    pods = [_with_managed_fields(pod) for pod in fixture("running_two_slices")["pods"]]
    lines = b"".join(json.dumps({"type": "ADDED", "object": pod}).encode() + b"\n" for pod in pods)
    watch = SharedWatch(ClusterTarget(), POD, pods[0]["metadata"]["namespace"], None, prune=pruned_pod)
    for event in JsonLines(event_of(DECODED_FIELDS[pruned_pod])).feed(lines):
        watch.apply(event["type"], event["object"])
    assert len(watch.objects) == len(pods)
    assert all(type(packed) is bytes and not gc.is_tracked(packed) for packed in watch.objects.values())
    held = sum(sys.getsizeof(packed) for packed in watch.objects.values())
    assert held <= 0.5 * _held([pruned_pod(pod) for pod in pods]), (held, _held([pruned_pod(pod) for pod in pods]))
    assert [watch.get(pod["metadata"]["name"]) for pod in pods] == [pruned_pod(pod) for pod in pods]


def _with_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a real API server serves it, with the ``managedFields`` of its writers."""
    changed = copy.deepcopy(obj)
    changed["metadata"]["managedFields"] = [
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "time": "2026-11-22T06:01:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}, "f:phase": {}}}},
    ]
    return changed


def _every_cached_kind(scenario: str) -> list[tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]]:
    fields = fixture(scenario)
    _kueue_workload(fields)
    _kueue_annotated(fields)
    objects = [(pod, pruned_pod) for pod in fields["pods"]] + [(job, pruned_job) for job in _jobs(fields["jobset"])]
    objects += [(obj, pruned_to_name) for obj, _ in objects]
    for key, prune in (("jobset", pruned_jobset), ("pathwaysjob", pruned_pathwaysjob), ("kueue_workload", pruned_kueue_workload)):
        if fields[key] is not None:
            objects.append((fields[key], prune))
    return [(_with_managed_fields(obj), prune) for obj, prune in objects]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_what_a_watch_decodes_of_an_object_prunes_to_what_the_whole_object_prunes_to(scenario: str) -> None:
    """The watches decode only the fields of :data:`DECODED_FIELDS`: in a list page, in a watch
    event, or alone, each object of every recorded state must be cached as it is cached whole."""
    cases = _every_cached_kind(scenario)
    if scenario == SCENARIOS[0]:
        cases += [(node, pruned_node) for node in NODE_SETS["healthy"] + NODE_SETS["disrupted"]]
        cases += [(realistic("jobset"), pruned_jobset), (realistic("pathwaysjob"), pruned_pathwaysjob), (realistic_kueue_workload(), pruned_kueue_workload)]
    for obj, prune in cases:
        shape = DECODED_FIELDS[prune]
        expected = prune(obj)
        assert prune(decoded(json.dumps(obj).encode(), shape)) == expected
        (listed,) = decoded(json.dumps({"kind": "List", "metadata": {"resourceVersion": "7"}, "items": [obj]}).encode(), list_of(shape))["items"]
        assert prune(listed) == expected
        (event,) = JsonLines(event_of(shape)).feed(json.dumps({"type": "MODIFIED", "object": obj}).encode() + b"\n")
        assert prune(event["object"]) == expected


def test_a_pod_event_decodes_into_half_the_memory_and_an_error_event_keeps_what_the_watch_reads() -> None:
    pods = [_with_managed_fields(pod) for pod in fixture("running_two_slices")["pods"]] * 20
    lines = b"".join(json.dumps({"type": "MODIFIED", "object": pod}).encode() + b"\n" for pod in pods)
    whole = JsonLines().feed(lines)
    shaped = JsonLines(event_of(DECODED_FIELDS[pruned_pod])).feed(lines)
    assert [pruned_pod(e["object"]) for e in shaped] == [pruned_pod(e["object"]) for e in whole]
    assert "managedFields" not in shaped[0]["object"]["metadata"] and set(shaped[0]["object"]["spec"]) <= {"containers", "nodeName"}
    assert _held(shaped) <= 0.6 * _held(whole), (_held(shaped), _held(whole))
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "too old resource version: 1 (2)", "reason": "Expired", "code": 410}}
    for prune in DECODED_FIELDS:
        (event,) = JsonLines(event_of(DECODED_FIELDS[prune])).feed(json.dumps(gone).encode() + b"\n")
        assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["message"].startswith("too old")


def test_text_that_does_not_fit_the_shape_is_decoded_whole_for_the_watch_to_skip() -> None:
    """A line or item the shape cannot hold (a ``null`` metadata, containers that are no list) is
    decoded as it is, so the watch skips that one object as it skips any malformed one, and the
    objects beside it in the same chunk or page are still read."""
    shape = DECODED_FIELDS[pruned_pod]
    good = {"metadata": {"name": "p", "namespace": "n", "resourceVersion": "3", "managedFields": []}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    odd = [{"metadata": None}, {"metadata": {"name": "q"}, "spec": {"containers": "c"}}]
    lines = b"".join(json.dumps({"type": "ADDED", "object": o}).encode() + b"\n" for o in [good, *odd])
    events = JsonLines(event_of(shape)).feed(lines)
    assert [e["object"] for e in events] == [good, *odd]
    page = decoded(json.dumps({"metadata": {}, "items": [good, *odd, 7]}).encode(), list_of(shape))
    assert page["items"] == [good, *odd, 7]
    assert decoded(json.dumps({"metadata": {}, "items": [good]}).encode(), list_of(shape))["items"][0]["metadata"] == {
        "name": "p", "namespace": "n", "resourceVersion": "3"
    }


def test_every_shared_watch_of_a_pruned_resource_decodes_only_its_fields() -> None:
    async def shapes() -> dict[str, Any]:
        return {key: watch.shape for key, watch in workload_watches(ClusterTarget(cluster_url="https://shapes.invalid"), "shapes", "pathwaysjob").items()}

    found = asyncio.run(shapes())
    assert found == {key: DECODED_FIELDS[prune] for key, prune in (
        ("jobsets", pruned_jobset), ("pathwaysjobs", pruned_pathwaysjob), ("pods", pruned_pod), ("jobs", pruned_job), ("workloads", pruned_kueue_workload)
    )}


def test_a_change_is_read_as_it_came_and_a_deleted_pod_keeps_its_last_state() -> None:
    """A watch event brings a whole pod back for one condition: the next read is the changed pod,
    pruned; a reader changing what it read changes nothing cached; a deletion keeps the last state,
    marked deleted, under the pod's workload."""
    from pathways_airflow.resources import POD
    from pathways_airflow.triggers.watch import SharedWatch, by_label

    pod = _with_managed_fields(fixture("running_two_slices")["pods"][1])
    changed = copy.deepcopy(pod)
    changed["metadata"]["resourceVersion"] = "999"
    changed["status"]["conditions"][-1]["status"] = "False"
    workload = pod["metadata"]["labels"][well_known.JOBSET_NAME]
    watch = SharedWatch(ClusterTarget(), POD, pod["metadata"]["namespace"], None, index=by_label(well_known.JOBSET_NAME), prune=pruned_pod)
    watch.apply("ADDED", copy.deepcopy(pod))
    assert watch.related(workload) == [pruned_pod(pod)]
    watch.apply("MODIFIED", copy.deepcopy(changed))
    (read,) = watch.related(workload)
    assert read == pruned_pod(changed)
    read["status"]["conditions"].clear()
    assert watch.get(pod["metadata"]["name"]) == pruned_pod(changed)
    watch.apply("DELETED", copy.deepcopy(changed))
    assert watch.related(workload) == [] and watch.get(pod["metadata"]["name"]) is None
    (last,) = watch.related_deleted(workload)
    assert last["metadata"]["deletionTimestamp"] == "deleted" and last["status"] == pruned_pod(changed)["status"]
