"""What the triggerer's shared caches keep of each object: what the state core reads of it, no more. Pure.

One triggerer holds a cache entry per workload object for every wait it runs, for days
(:mod:`~pathways_airflow.triggers.watch`). A JobSet carries the pod templates of its head and
workers (containers, their args, env, ports, resources, probes; on a real API server its
``managedFields`` as well), a PathwaysJob the user's pod template, a Kueue Workload the JobSet's
pod templates once more (one per pod set); the waits read a handful of fields of each. Caching
them whole made the JobSets, then the Kueue Workloads, most of a triggerer's memory per wait.
Each function here keeps the fields some reader of the trigger path reads, names that reader,
and drops the rest before the object is cached, so every decision is the one the whole object
gives (``tests/unit/test_pruning.py`` compares the two on the recorded status fixtures).

Kept of every object: ``apiVersion``, ``kind`` (:func:`~pathways_airflow.state.creation.creation_failure`
tells a PathwaysJob by it) and ``status`` whole (every phase, count and condition is read
there). Of ``metadata``, small, everything but ``managedFields`` (the watch keys the cache by
``name`` and ``namespace``; the readers use ``uid``, ``labels``, ``creationTimestamp`` and
``deletionTimestamp``), and of its annotations only this provider's own, which the triggers write
and read back: :func:`~pathways_airflow.run.annotations.restarts_written`,
:func:`~pathways_airflow.run.annotations.disruption_seen` and
:func:`~pathways_airflow.state.ran_on.went_down_under_it`. A pod or a Job keeps one annotation,
JobSet's ``execution-attempt`` (KEP-1282), which
:func:`~pathways_airflow.state.workload_parts.is_of_an_earlier_execution` compares with the
JobSet's ``status.executionAttempts``; a Kueue Workload keeps none.

Measured (``tests/unit/test_pruning.py``), as JSON bytes and as the parsed dicts' deep
``sys.getsizeof``: a provider-rendered 2-slice MaxText training, with the running status the local
cluster's API gave one, caches its JobSet in 1,812 bytes instead of 7,993 (9.6 KB of Python
objects instead of 44.7 KB) and its PathwaysJob in 1,365 instead of 2,055 (6.6 KB instead of
10.3 KB); the recorded ``running_two_slices`` fixture's JobSet in 1,485 instead of 5,943. The Kueue
Workload Kueue makes for the 2-slice training's JobSet, admitted, is cached in 1,207 bytes instead
of 6,018 (6.7 KB of Python objects instead of 33.1 KB), the recorded ``queued_evicted`` one in
1,641 instead of 5,839. A real API server's ``managedFields`` and defaulted pod-template fields
only widen the gap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from pathways_airflow import well_known
from pathways_airflow.spec.names import LABEL_PREFIX

PROVIDER_ANNOTATIONS = f"{LABEL_PREFIX}/"
"""The prefix of the annotations the triggers write on a workload and read back."""

ELASTIC_FLAG = "--num_elastic_slices="
"""The proxy's flag :func:`~pathways_airflow.state.status.elastic_slices` reads from a JobSet's head template."""

POD_TEMPLATE_CONTAINERS = ("initContainers", "containers")

CHILD_ANNOTATIONS = (well_known.EXECUTION_ATTEMPT,)
"""The annotations of a pod or Job a reader looks at: which execution of its JobSet made it
(:func:`~pathways_airflow.state.workload_parts.is_of_an_earlier_execution`)."""


def _metadata(obj: Mapping[str, Any], *, annotations: bool, foreign: tuple[str, ...] = ()) -> dict[str, Any]:
    """``metadata`` without ``managedFields``; with this provider's annotations only (``annotations``)
    and the ``foreign`` ones named, or none."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("annotations", "managedFields")}
    kept = {
        k: v
        for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items()
        if (annotations and k.startswith(PROVIDER_ANNOTATIONS)) or k in foreign
    }
    if kept:
        meta["annotations"] = kept
    return meta


def _kept(obj: Mapping[str, Any], metadata: dict[str, Any], spec: dict[str, Any] | None) -> dict[str, Any]:
    pruned: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": metadata}
    if spec is not None:
        pruned["spec"] = spec
    pruned["status"] = obj.get("status") or {}
    return pruned


def changes_nothing_a_wait_acts_on(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether ``after`` differs from ``before`` (both as cached) only in its ``resourceVersion``
    and this provider's own annotations: the echo of a note a wait wrote on its workload. The
    cache keeps it for the next look, which reads the notes; a look now would judge what the last
    one judged, and a fleet's notes would wake every wait once more per note."""
    if before.keys() != after.keys() or any(before[k] != after[k] for k in after if k != "metadata"):
        return False
    old, new = before.get("metadata") or {}, after.get("metadata") or {}
    quiet = ("resourceVersion", "annotations")
    if {k: v for k, v in old.items() if k not in quiet} != {k: v for k, v in new.items() if k not in quiet}:
        return False
    return _foreign_annotations(old) == _foreign_annotations(new)


def _foreign_annotations(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (metadata.get("annotations") or {}).items() if not k.startswith(PROVIDER_ANNOTATIONS)}


def pruned_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod as the state core reads it: metadata with only :data:`CHILD_ANNOTATIONS`, its status, and of its
    spec only the node (:func:`~pathways_airflow.state.disruption.classify`,
    :func:`~pathways_airflow.state.ran_on.where_workers_run`) and the container names
    (:func:`~pathways_airflow.state.workload_parts.main_container_status`); the rest is the template, already in the JobSet."""
    spec = pod.get("spec") or {}
    slim_spec: dict[str, Any] = {"containers": [{"name": c.get("name")} for c in spec.get("containers") or ()]}
    if spec.get("nodeName"):
        slim_spec["nodeName"] = spec["nodeName"]
    return _kept(pod, _metadata(pod, annotations=False, foreign=CHILD_ANNOTATIONS), slim_spec)


def pruned_job(job: dict[str, Any]) -> dict[str, Any]:
    """A Job as the classifier reads it (:func:`~pathways_airflow.state.disruption.lost_workers`,
    :func:`~pathways_airflow.state.creation.children_missing`): metadata with only :data:`CHILD_ANNOTATIONS`, and its status."""
    return _kept(job, _metadata(job, annotations=False, foreign=CHILD_ANNOTATIONS), None)


def pruned_to_name(obj: dict[str, Any]) -> dict[str, Any]:
    """Only its name and namespace: for a watch that says *when* to look and is never read
    (:class:`~pathways_airflow.triggers.job.BatchJobTrigger` reads its Job with a GET)."""
    meta = obj.get("metadata") or {}
    return {"metadata": {"name": meta.get("name", ""), "namespace": meta.get("namespace", "")}}


def pruned_jobset(jobset: dict[str, Any]) -> dict[str, Any]:
    """A JobSet as the trigger path reads it. Of its ``spec``:

    * ``suspend``: :func:`~pathways_airflow.state.status.is_suspended`;
    * ``coordinator``: :func:`~pathways_airflow.state.workload_parts.head_job_name` (which pod is the head);
    * of ``failurePolicy``, the rules' names (:func:`~pathways_airflow.state.disruption.has_the_user_error_rule`);
    * each of ``replicatedJobs`` as :func:`_replicated_job` keeps it.
    """
    spec = jobset.get("spec") or {}
    slim: dict[str, Any] = {k: spec[k] for k in ("suspend", "coordinator") if k in spec}
    if "failurePolicy" in spec:
        slim["failurePolicy"] = _failure_policy(spec["failurePolicy"])
    if "replicatedJobs" in spec:
        slim["replicatedJobs"] = [_replicated_job(r) if isinstance(r, Mapping) else r for r in spec.get("replicatedJobs") or ()]
    return _kept(jobset, _metadata(jobset, annotations=True), slim)


def _failure_policy(policy: Any) -> Any:
    """Each rule's ``name``; a policy or rule that is no object is kept as it is."""
    if not isinstance(policy, Mapping):
        return policy
    kept: dict[str, Any] = {}
    if "rules" in policy:
        rules = policy["rules"] or ()
        kept["rules"] = [{k: r[k] for k in ("name",) if k in r} if isinstance(r, Mapping) else r for r in rules]
    return kept


def _replicated_job(replicated: Mapping[str, Any]) -> dict[str, Any]:
    """``name`` and ``replicas`` (:func:`~pathways_airflow.state.status.slices_total`,
    :func:`~pathways_airflow.state.creation.children_missing`), the Job's ``parallelism``
    (:func:`~pathways_airflow.state.workload_parts.pods_per_slice`), and of its pod template what :func:`_pod_spec` keeps."""
    kept = {k: replicated[k] for k in ("name", "replicas") if k in replicated}
    job_spec = (replicated.get("template") or {}).get("spec") or {}
    slim_job: dict[str, Any] = {"parallelism": job_spec["parallelism"]} if "parallelism" in job_spec else {}
    pod_spec = _pod_spec((job_spec.get("template") or {}).get("spec") or {})
    if pod_spec:
        slim_job["template"] = {"spec": pod_spec}
    if slim_job:
        kept["template"] = {"spec": slim_job}
    return kept


def _pod_spec(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """``nodeSelector`` (:func:`~pathways_airflow.state.disruption.worker_node_selector`: which nodes a
    failure's slice is on), and of the containers only the args that are the elastic-slices flag
    (:func:`~pathways_airflow.state.status.elastic_slices`), in their order, with their container's name."""
    kept: dict[str, Any] = {"nodeSelector": pod_spec["nodeSelector"]} if "nodeSelector" in pod_spec else {}
    for key in POD_TEMPLATE_CONTAINERS:
        flagged = [
            {"name": c.get("name"), "args": [a for a in c.get("args") or () if str(a).startswith(ELASTIC_FLAG)]}
            for c in pod_spec.get(key) or ()
            if any(str(a).startswith(ELASTIC_FLAG) for a in c.get("args") or ())
        ]
        if flagged:
            kept[key] = flagged
    return kept


def pruned_pathwaysjob(pathwaysjob: dict[str, Any]) -> dict[str, Any]:
    """A PathwaysJob as the trigger path reads it: its ``spec`` whole but for the user's pod template.

    The spec is what :func:`~pathways_airflow.state.status.controller_objections` checks as the
    controller does (``workers``, ``maxRestarts``, ``controller``'s mode, ``elasticSlices`` and
    metrics flag; ``customComponents``, ``pathwaysDir`` and the rest are parsed with them), and it is
    small. Of ``controller.template``, whose containers no reader looks into, only its presence
    counts: :func:`~pathways_airflow.state.workload_parts._declared_main_container` (a headless job has
    none) and :func:`~pathways_airflow.spec.parse.workload_from_pathwaysjob` (a user's program or
    not); :func:`_template_presence` keeps exactly that.
    """
    spec = dict(pathwaysjob.get("spec") or {})
    controller = spec.get("controller")
    if isinstance(controller, Mapping) and "template" in controller:
        spec["controller"] = {**controller, "template": _template_presence(controller["template"])}
    return _kept(pathwaysjob, _metadata(pathwaysjob, annotations=True), spec)


def _template_presence(template: Any) -> Any:
    """A pod template reduced to what its readers test: an empty ``spec`` stands for a non-empty
    template. One that is empty or no object (the CRD allows neither in practice) is kept as it is,
    as is one whose ``spec`` is no object: the parse then fails the same way on both."""
    if not isinstance(template, Mapping) or not template:
        return template
    spec = template.get("spec")
    if spec and not isinstance(spec, Mapping):
        return template
    return {"spec": {}}


def pruned_kueue_workload(workload: dict[str, Any]) -> dict[str, Any]:
    """A Kueue Workload as the trigger path reads it: metadata without annotations, its status,
    and of its ``spec`` only ``maximumExecutionTimeSeconds``.

    * ``metadata``: the watch's index :func:`~pathways_airflow.triggers.watch.by_owner` reads the
      ``ownerReferences``' kinds and names, :func:`~pathways_airflow.state.model.kueue_workload_of`
      their ``uid`` and the ``kueue.x-k8s.io/job-uid`` label,
      :func:`~pathways_airflow.state.status.state_from_kueue` the ``name``;
    * ``status``: its conditions are every verdict Kueue gives (``Finished``, ``Evicted``,
      ``QuotaReserved``, ``Admitted`` in :func:`~pathways_airflow.state.status.state_from_kueue` and
      :func:`~pathways_airflow.state.status.readmitted_since`, ``DeactivationTarget`` in
      :func:`~pathways_airflow.state.kueue_timeout.max_exec_time_exceeded`, ``Evicted`` and
      ``Preempted`` in :func:`~pathways_airflow.state.disruption.classify`), and ``admission`` tells
      an admitted Workload that has no conditions yet;
    * ``spec.maximumExecutionTimeSeconds``: the limit
      :func:`~pathways_airflow.state.kueue_timeout.max_exec_time_exceeded` names;
    * ``spec.queueName``: the LocalQueue whose pending workloads say where a queued one stands
      (:func:`~pathways_airflow.state.queue.local_queue_of`).

    Dropped: ``podSets`` (each a whole pod template, the JobSet's own again), ``priority``,
    ``priorityClassRef`` and ``active``, which no reader looks at: a Workload Kueue
    deactivated says so in its conditions.
    """
    spec = workload.get("spec") or {}
    slim = {k: spec[k] for k in ("maximumExecutionTimeSeconds", "queueName") if k in spec}
    return _kept(workload, _metadata(workload, annotations=False), slim)


def pruned_node(node: dict[str, Any]) -> dict[str, Any]:
    """A node as a verdict reads it: metadata without annotations, its taints and
    ``unschedulable``, and of its status only the conditions.

    * ``metadata``: ``name`` (the pods' ``nodeName``), ``labels`` (node pool, Spot, TPU shape,
      maintenance: :func:`~pathways_airflow.state.disruption.node_disruption`,
      :func:`~pathways_airflow.state.disruption.slice_nodes_disrupted`) and ``creationTimestamp``
      (a node re-created under a workload: :func:`~pathways_airflow.state.ran_on.went_down_under_it`);
    * ``spec.taints``: termination, out of service (:func:`~pathways_airflow.state.disruption.node_disruption`);
    * ``status.conditions``: ``Ready`` and when it last changed
      (:func:`~pathways_airflow.state.disruption.node_disruption`, :func:`~pathways_airflow.state.ran_on.went_down_under_it`).

    Dropped: the images the node holds (often tens of kilobytes), ``nodeInfo``, addresses,
    capacity and allocatable, volumes, and every annotation: no verdict reads them.
    """
    spec = node.get("spec") or {}
    slim = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
    status = node.get("status") or {}
    return {
        "apiVersion": node.get("apiVersion"), "kind": node.get("kind"), "metadata": _metadata(node, annotations=False),
        "spec": slim, "status": {"conditions": status["conditions"]} if "conditions" in status else {},
    }


def _shape(name: str, fields: Mapping[str, Any]) -> type:
    """A ``TypedDict`` of ``fields``, none of them required (:func:`~pathways_airflow.hooks.api.decoded`)."""
    return TypedDict(name, dict(fields), total=False)  # type: ignore[operator]


_OBJECT_META = _shape(
    "ObjectMeta",
    dict.fromkeys(
        (
            "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
            "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
        ),
        Any,
    ),
)
"""Every field of apimachinery's ``ObjectMeta`` (``pkg/apis/meta/v1/types.go``) but ``managedFields``:
a superset of what :func:`_metadata` keeps."""


def _object(kind: str, **fields: Any) -> type:
    """The fields of a ``kind`` object a decoder keeps for its pruning: ``apiVersion``, ``kind``,
    ``metadata`` but ``managedFields``, ``status`` whole, and ``fields`` (besides, or instead); and ``code`` and
    ``message``, which an ``ERROR`` watch event's ``Status`` carries and the watch reads."""
    return _shape(kind, {"apiVersion": Any, "kind": Any, "metadata": _OBJECT_META, "status": Any, "code": Any, "message": Any, **fields})


_NAMED = _shape("Named", {"name": Any})
_FLAGGED = _shape("FlaggedContainer", {"name": Any, "args": Any})
_TEMPLATE_POD_SPEC = _shape("TemplatePodSpec", {"nodeSelector": Any, **dict.fromkeys(POD_TEMPLATE_CONTAINERS, list[_FLAGGED])})  # type: ignore[valid-type]
_JOB_SPEC = _shape("JobSpec", {"parallelism": Any, "template": _shape("PodTemplate", {"spec": _TEMPLATE_POD_SPEC})})
_REPLICATED_JOB = _shape("ReplicatedJob", {"name": Any, "replicas": Any, "template": _shape("JobTemplate", {"spec": _JOB_SPEC})})

DECODED_FIELDS: dict[Callable[[dict[str, Any]], dict[str, Any]], type] = {
    pruned_pod: _object("Pod", spec=_shape("PodSpec", {"containers": list[_NAMED], "nodeName": Any})),  # type: ignore[valid-type]
    pruned_job: _object("Job"),
    pruned_to_name: _shape("NameOnly", {"metadata": _shape("NameMeta", {"name": Any, "namespace": Any, "resourceVersion": Any}), "code": Any, "message": Any}),
    pruned_jobset: _object(
        "JobSet",
        spec=_shape(
            "JobSetSpec", {"suspend": Any, "coordinator": Any, "failurePolicy": Any, "replicatedJobs": list[_REPLICATED_JOB]}  # type: ignore[valid-type]
        ),
    ),
    pruned_pathwaysjob: _object("PathwaysJob", spec=Any),
    pruned_kueue_workload: _object("KueueWorkload", spec=_shape("WorkloadSpec", {"maximumExecutionTimeSeconds": Any, "queueName": Any})),
    pruned_node: _object(
        "Node", spec=_shape("NodeSpec", {"taints": Any, "unschedulable": Any}), status=_shape("NodeStatus", {"conditions": Any})
    ),
}
"""What is decoded of an object whose cache keeps what the function names: a superset of what that
function keeps, so that pruning the shaped object keeps what pruning the whole one would
(``tests/unit/test_pruning.py``), without the templates, images and ``managedFields`` being made
into Python objects first (:func:`~pathways_airflow.hooks.api.decoded`)."""
