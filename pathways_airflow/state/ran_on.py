"""Which nodes a restart attempt's workers ran on, and whether one of them went down under it. Pure.

A disruption can strike and heal while nobody watches: an API outage, a triggerer restart, a
worker between tries. Afterwards the pods are gone, the head is named as the first failed job
(it exits once its slice is lost, as JAX does), and every node is Ready again. Nodes of the
slice's shape that went down and came back cannot tell a slice the workload ran on from one it
never used (an earlier attempt's), so :func:`~pathways_airflow.state.disruption.slice_nodes_disrupted`
does not count them. The nodes this attempt's workers were seen running on can: a trigger writes
them on the workload once per attempt (:data:`RAN_ON_ANNOTATION`), with the moment the last of
them started (the pods' ``status.startTime``, on the API server's clock, as the nodes' times are).

One of those nodes that is gone, was re-created, is disrupted now, or whose ``Ready`` condition
changed after the workers started is evidence that the slice failed under the workload, and the
failure is not read as the user's bug.

An attempt no trigger saw run (every look failed during an API outage, or its triggers were
replaced while it ran) has no such record. On the ``pathwaysjob`` backend, whose failures no
policy sorts, the scheduler's ``Scheduled`` events, which outlive the pods (an hour, by
default), say the same: where each worker pod was bound, and when (:func:`bindings_by_jobset`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Iterable, Mapping, Sequence, TypedDict

from pathways_airflow import well_known
from pathways_airflow.spec.names import LABEL_PREFIX
from pathways_airflow.spec.render import WORKER_JOB
from pathways_airflow.state.api_time import from_unix, to_the_second
from pathways_airflow.state.conditions import condition
from pathways_airflow.state.disruption import Classification, Verdict, node_disruption
from pathways_airflow.state.workload_parts import Nodes, newest_pod_per_host, nodes_by_name

RAN_ON_ANNOTATION = f"{LABEL_PREFIX}/ran-on"
"""``{"restart": 0, "since": "2026-11-24T03:10:00Z", "nodes": ["gke-…-0", …]}``."""

MAX_NODES = 64
"""More than any slice a workload is written for here holds hosts (v5p-2048 is 256 hosts; the
first 64 are enough to see a slice that went down: a lost slice takes all of its hosts)."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def where_workers_run(pods: Iterable[Mapping[str, Any]], restart: int, worker_job: str = WORKER_JOB) -> dict[str, str] | None:
    """The annotation to write once every pod of the slices' replicated job (``worker_job``:
    :func:`~pathways_airflow.state.workload_parts.worker_job_name`) of attempt ``restart`` runs on a node, else ``None``."""
    workers = newest_pod_per_host([p for p in pods if (_meta(p).get("labels") or {}).get(well_known.REPLICATED_JOB) == worker_job])
    running = [p for p in workers if (p.get("status") or {}).get("phase") == "Running" and (p.get("spec") or {}).get("nodeName")]
    if not workers or len(running) < len(workers) or any(_meta(p).get("deletionTimestamp") for p in workers):
        return None
    since = max(str((p.get("status") or {}).get("startTime") or _meta(p).get("creationTimestamp") or "") for p in running)
    nodes = sorted({p["spec"]["nodeName"] for p in running})[:MAX_NODES]
    return {RAN_ON_ANNOTATION: json.dumps({"restart": restart, "since": since, "nodes": nodes})}


def with_where_they_ran_before(
    note: dict[str, str] | None, workload: Mapping[str, Any] | None, restart: int, not_before: str = ""
) -> dict[str, str] | None:
    """``note`` (:func:`where_workers_run`) joined with the nodes the record on ``workload``
    already names for the same attempt and placement, from the record's time: a program that
    does not ride out a slice loss fails of it some seconds after its lost workers were replaced
    on other nodes, and the nodes it lost are then what vouch that the failure was no bug. A wait
    that came after the replacement (a triggerer restart, a retry re-attaching) would otherwise
    record only the healthy new nodes. Their records share one time, the earlier: a new node that
    went down before the replacement started on it reads as a disruption, never as a bug."""
    if note is None:  # nothing to record at this look: the record on the workload is not read
        return None
    earlier = _ran_on(workload or {}, restart, not_before)
    if earlier is None:
        return note
    data = json.loads(note[RAN_ON_ANNOTATION])
    nodes = sorted({*earlier[1], *data["nodes"]})[:MAX_NODES]
    since = min(to_the_second(data["since"]), earlier[0]) + "Z"  # the API's times are UTC
    return {RAN_ON_ANNOTATION: json.dumps({"restart": restart, "since": since, "nodes": nodes})}


def _ran_on(workload: Mapping[str, Any], restart: int | None, not_before: str = "") -> tuple[str, list[str]] | None:
    text = (_meta(workload).get("annotations") or {}).get(RAN_ON_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not isinstance(data.get("since"), str):
        return None
    if restart is not None and data.get("restart") != restart:
        return None
    if to_the_second(data["since"]) < to_the_second(not_before):  # placed again since (a Kueue re-admission)
        return None
    return to_the_second(data["since"]), [str(n) for n in data["nodes"]]


def nodes_it_ran_on(
    workload: Mapping[str, Any] | None, restart: int | None, scheduled: Sequence[tuple[str, str]] = (), not_before: str = ""
) -> tuple[str, ...]:
    """The nodes attempt ``restart``'s workers ran on, as a trigger recorded them, else as the
    scheduler bound them (:func:`bindings_by_jobset`); empty when neither is known. A record from
    before ``not_before`` (an API time: when Kueue last admitted the workload, which places its
    workers again within the same restart attempt) is not known."""
    recorded = _ran_on(workload or {}, restart, not_before)
    return tuple(recorded[1]) if recorded else tuple(dict.fromkeys(name for _, name in scheduled))


def went_down_under_it(
    workload: Mapping[str, Any] | None,
    restart: int | None,
    nodes: Nodes | None,
    scheduled: Sequence[tuple[str, str]] = (),
    not_before: str = "",
    outlived: Collection[str] = (),
) -> Classification | None:
    """A disruption of a node attempt ``restart`` ran on (``None``: any attempt, as a PathwaysJob
    does not say which its JobSet is on), or ``None`` when none shows or the nodes are unknown.
    Without a trigger's record, each node the scheduler bound a worker to, from the time it did
    (:func:`bindings_by_jobset`). ``not_before``: as for :func:`nodes_it_ran_on`; ``outlived``:
    nodes whose going down the program outlived (:func:`outlived_by_the_program`), which explain nothing."""
    recorded = _ran_on(workload or {}, restart, not_before)
    bindings = [(recorded[0], name) for name in recorded[1]] if recorded else list(scheduled)
    if not bindings or nodes is None:
        return None
    by_name = nodes_by_name(nodes)
    evidence = []
    verdict = Verdict.SLICE_FAILURE
    for since, name in bindings:
        if name in outlived:
            continue
        node = by_name.get(name)
        now = node_disruption(node)
        ready = condition(node, "Ready") if node is not None else None
        if now is not None:
            verdict = now[0] if verdict is Verdict.SLICE_FAILURE else verdict
            evidence.append(f"node {name} it ran on: {now[1]}")
        elif to_the_second(_meta(node).get("creationTimestamp")) > since:
            evidence.append(f"node {name} it ran on was re-created at {_meta(node)['creationTimestamp']}, after its workers started ({since})")
        elif ready is not None and to_the_second(ready.get("lastTransitionTime")) > since:
            evidence.append(f"node {name} it ran on went down and came back (Ready since {ready['lastTransitionTime']}) after its workers started ({since})")
    return Classification(verdict, tuple(dict.fromkeys(evidence))[:3]) if evidence else None


def outlived_by_the_program(
    workload: Mapping[str, Any] | None,
    restart: int | None,
    nodes: Nodes,
    saving_since: float | None,
    not_before: str = "",
    events: Iterable[Mapping[str, Any]] = (),
) -> frozenset[str]:
    """The nodes attempt ``restart`` ran on (as recorded) that showed they went down before a
    program with elastic slices began saving its newest committed checkpoint, at ``saving_since``
    (Unix seconds: :func:`~pathways_airflow.checkpoints.began_saving_at`).

    A program that rides out slice losses stops at one, waits for the slice to come back and
    restores; a save it begins after a node went down shows it got past that loss, so its later
    failure is not that loss's, even when the pods that showed the recovery are gone (an API
    outage that outlasted the run, a triggerer restart) and the node is still down. Asked only of
    such a program: one that cannot ride a loss out may keep going for a while after it (a step
    under way, an asynchronous save), and fails of it anyway.

    What a node shows is a lower bound on when it went down: ``Ready`` turns false a grace period
    after a host dies, a re-created node is made after the old one was lost; a node that came
    back (``Ready`` again) says when it went down only in the node controller's ``NodeNotReady``
    events (``events``: :func:`went_not_ready`), else it counts as down until it came back. A node
    with no such time (gone, or disrupted by a label or taint alone) is never counted as outlived."""
    recorded = _ran_on(workload or {}, restart, not_before)
    if recorded is None or saving_since is None:
        return frozenset()
    saving, by_name, marked = from_unix(saving_since), nodes_by_name(nodes), went_not_ready(events)
    found = set()
    for name in recorded[1]:
        shown = _shown_down_at(by_name.get(name), recorded[0], marked.get(name, ()))
        if shown and shown < saving:
            found.add(name)
    return frozenset(found)


def _shown_down_at(node: Mapping[str, Any] | None, since: str, marked: Sequence[str]) -> str:
    """When ``node`` showed that it went down after ``since`` (to the second), ``""`` when it did not say."""
    if node is None:
        return ""
    created = to_the_second(_meta(node).get("creationTimestamp"))
    if created > since:
        return created
    ready = condition(node, "Ready") or {}
    changed = to_the_second(ready.get("lastTransitionTime"))
    if changed <= since:
        return ""
    if ready.get("status") != "True":
        return changed
    if node_disruption(node) is not None:  # back, but disrupted by what no field dates
        return ""
    return max((t for t in marked if since < t <= changed), default=changed)  # back: it went down before


NODE_NOT_READY_REASON = "NodeNotReady"
"""The node lifecycle controller's event as a node's ``Ready`` leaves ``True`` (kubernetes
pkg/controller/util/node/controller_utils.go, ``RecordNodeStatusChange``): reason ``NodeNotReady``,
message ``Node <name> status is now: NodeNotReady``, on the Node."""
NODE_EVENTS_NAMESPACE = "default"
"""Where a cluster-scoped object's events are kept (client-go's recorder: ``metav1.NamespaceDefault``
for an object without a namespace)."""
NODE_NOT_READY_SELECTOR = f"involvedObject.kind=Node,reason={NODE_NOT_READY_REASON}"


def went_not_ready(events: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each node's ``NodeNotReady`` times, to the second, from ``events``."""
    found: dict[str, list[str]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") == NODE_NOT_READY_REASON and involved.get("kind") == "Node" and involved.get("name"):
            found.setdefault(str(involved["name"]), []).append(_event_time(event))
    return found


SCHEDULED_REASON = "Scheduled"
"""kube-scheduler's event on binding a pod (kubernetes pkg/scheduler/schedule_one.go):
reason ``Scheduled``, message ``Successfully assigned <namespace>/<pod> to <node>``."""
_ASSIGNED = " to "


def _event_time(event: Mapping[str, Any]) -> str:
    return to_the_second(event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp"))


_WORKER_POD = re.compile(rf"(?P<jobset>.+)-{WORKER_JOB}-[0-9]+-[0-9]+-[a-z0-9]+")


class _InvolvedObject(TypedDict, total=False):
    kind: Any
    name: Any


class ScheduledEventFields(TypedDict, total=False):
    """What :func:`bindings_by_jobset` reads of an Event: a list of them is decoded to these alone
    (:func:`~pathways_airflow.hooks.api.decoded`)."""

    involvedObject: _InvolvedObject
    reason: Any
    message: Any
    eventTime: Any
    lastTimestamp: Any
    firstTimestamp: Any


def bindings_by_jobset(events: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """When and to which node the scheduler bound each worker pod, by the JobSet it is of, so a
    node that went down after a worker was bound there counts. A pod the Job controller bound in
    place of a lost one is on a healthy node; the lost one's binding is what tells the story.

    A JobSet's pod is named ``<jobset>-<replicated job>-<job index>-<pod index>-<suffix>`` (its
    Job ``<jobset>-<replicated job>-<job index>``, jobset ``pkg/controllers/jobset_controller.go``;
    the pod an indexed Job's, with a suffix of no dash): the JobSet is what comes before the last
    ``-worker-<job index>-<pod index>-``. One pass indexes a namespace's events for every workload in it.
    """
    found: dict[str, set[tuple[str, str]]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        pod, message = _WORKER_POD.fullmatch(str(involved.get("name") or "")), str(event.get("message") or "")
        if pod and event.get("reason") == SCHEDULED_REASON and involved.get("kind") == "Pod" and _ASSIGNED in message:
            found.setdefault(pod["jobset"], set()).add((_event_time(event), message.rsplit(_ASSIGNED, 1)[1].strip()))
    return {jobset: sorted(bindings)[-MAX_NODES:] for jobset, bindings in found.items()}

