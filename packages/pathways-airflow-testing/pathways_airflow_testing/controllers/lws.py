"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, LWS v0.6+) → groups of a leader pod and worker pods.

Group ``i`` is the leader pod ``<lws>-<i>`` (from ``leaderTemplate``, else ``workerTemplate``)
and the worker pods ``<lws>-<i>-<j>``, ``j = 1..size-1`` (from ``workerTemplate``), labelled and
annotated as LWS labels them (``name``, ``group-index``, ``worker-index`` — 0 for the leader —,
``group-key``, ``template-revision-hash``; ``size``; ``leader-name`` on workers), with LWS's
environment in every container (``LWS_LEADER_ADDRESS=<lws>-<i>.<lws>.<namespace>``,
``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``, and the ``TPU_*`` variables for containers requesting
TPUs), ``hostname``/``subdomain`` set so ``<lws>-<i>.<lws>`` resolves through the headless
Service ``<lws>``.

Simplification: real LWS creates a leader StatefulSet and, per leader, a worker StatefulSet
owned by the leader pod. Here the pods are created directly, each owned by the LWS with a
controller ownerReference; what a client observes of the pods (names, labels, env, restarts,
readiness, status) is the same, but ``kubectl get statefulsets`` shows nothing and a worker's
ownerReference names the LWS rather than a StatefulSet.

Behaviour kept from LWS: ``startupPolicy`` ``LeaderCreated`` (workers with the leader) or
``LeaderReady`` (workers once the leader is Ready); with the
``leaderworkerset.sigs.k8s.io/exclusive-topology`` annotation, workers wait for the leader to be
scheduled and are pinned to its topology domain (one group per node pool), and every pod carries
the annotation so the scheduler keeps other groups out. ``RecreateGroupOnPodRestart`` (the
default) deletes and recreates the whole group when any of its pods fails, restarts a container
or disappears; ``None`` replaces only the pod. A template change rolls groups over one at a
time (``maxUnavailable``; ``maxSurge`` and ``partition`` are not modelled), scaling adds or
removes whole groups. Status: ``replicas``, ``readyReplicas``, ``updatedReplicas``,
``hpaPodSelector``, conditions ``Available`` (``AllGroupsReady``), ``Progressing``
(``GroupsProgressing``), ``UpdateInProgress``, which LWS keeps mutually exclusive by flipping
the previous one to False (``Available`` appears only once every group has been ready).

Decisions are pure functions (:func:`leader_pod`, :func:`worker_pod`, :func:`group_breakage`,
:func:`lws_status`...); the controller reads pods and writes the differences.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow_testing.controllers.base import Controller, Key, is_true, owner_keys, owner_reference
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.scheduling import tpu_request
from pathways_airflow_testing.store import StoreEvent, copy_of

PREFIX = "leaderworkerset.sigs.k8s.io"
NAME_LABEL = f"{PREFIX}/name"
GROUP_INDEX_LABEL = f"{PREFIX}/group-index"
WORKER_INDEX_LABEL = f"{PREFIX}/worker-index"
GROUP_KEY_LABEL = f"{PREFIX}/group-key"
REVISION_LABEL = f"{PREFIX}/template-revision-hash"
SIZE_ANNOTATION = f"{PREFIX}/size"
LEADER_NAME_ANNOTATION = f"{PREFIX}/leader-name"
EXCLUSIVE_TOPOLOGY = f"{PREFIX}/exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY = f"{PREFIX}/subgroup-exclusive-topology"
SUBGROUP_INDEX_LABEL = f"{PREFIX}/subgroup-index"
SUBGROUP_KEY_LABEL = f"{PREFIX}/subgroup-key"
SUBGROUP_SIZE_ANNOTATION = f"{PREFIX}/subgroup-size"
SUBGROUP_POLICY_ANNOTATION = f"{PREFIX}/subgroup-policy-type"
SUBDOMAIN_POLICY_ANNOTATION = f"{PREFIX}/subdomainPolicy"
LEADER_REQUESTS_TPUS = f"{PREFIX}/leader-requests-tpus"

LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
TPU_PROCESS_DEFAULT_PORT = 8476

RECREATE_GROUP = "RecreateGroupOnPodRestart"
RECREATE_AFTER_START = "RecreateGroupAfterStart"
NO_RESTART = "None"


# --- the LeaderWorkerSet, defaulted ----------------------------------------------------------


@dataclass(frozen=True)
class LwsSpec:
    """A LeaderWorkerSet with the defaults of the LWS webhook applied."""

    name: str
    namespace: str
    replicas: int
    size: int
    startup_policy: str
    restart_policy: str
    subdomain_policy: str
    max_unavailable: int
    leader_template: Mapping[str, Any]
    worker_template: Mapping[str, Any]
    exclusive_topology: str | None = None
    subgroup_size: int | None = None
    subgroup_policy: str = "LeaderWorker"
    subgroup_exclusive_topology: str | None = None
    owner: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _scaled(value: Any, total: int, default: int) -> int:
    if value is None:
        return default
    text = str(value)
    if text.endswith("%"):
        return int(total * float(text[:-1]) / 100)
    return int(text)


def lws_spec(lws: Mapping[str, Any]) -> LwsSpec:
    spec = lws.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    annotations = lws["metadata"].get("annotations") or {}
    restart = template.get("restartPolicy") or RECREATE_GROUP
    if restart == "Default":
        restart = NO_RESTART
    replicas = int(spec.get("replicas", 1))
    rolling = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
    subgroup = template.get("subGroupPolicy") or {}
    worker_template = template.get("workerTemplate") or {}
    return LwsSpec(
        name=lws["metadata"]["name"],
        namespace=lws["metadata"]["namespace"],
        replicas=replicas,
        size=int(template.get("size", 1)),
        startup_policy=spec.get("startupPolicy") or "LeaderCreated",
        restart_policy=restart,
        subdomain_policy=(spec.get("networkConfig") or {}).get("subdomainPolicy") or "Shared",
        max_unavailable=max(1, _scaled(rolling.get("maxUnavailable"), replicas, 1)),
        leader_template=template.get("leaderTemplate") or worker_template,
        worker_template=worker_template,
        exclusive_topology=annotations.get(EXCLUSIVE_TOPOLOGY) or None,
        subgroup_size=int(subgroup["subGroupSize"]) if subgroup.get("subGroupSize") else None,
        subgroup_policy=subgroup.get("subGroupPolicyType") or "LeaderWorker",
        subgroup_exclusive_topology=annotations.get(SUBGROUP_EXCLUSIVE_TOPOLOGY) or None,
        owner=lws,
    )


def revision_hash(lws: Mapping[str, Any]) -> str:
    """The template revision: changes with ``leaderWorkerTemplate``, not with ``replicas``."""
    template = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    return hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def group_key(namespace: str, leader_name: str) -> str:
    """LWS's ``group-key``: sha1 of ``<namespace>/<leader pod>``, shared by every pod of the group."""
    return _sha1(f"{namespace}/{leader_name}")


def leader_name(lws: str, group: int) -> str:
    return f"{lws}-{group}"


def worker_name(lws: str, group: int, index: int) -> str:
    return f"{lws}-{group}-{index}"


def subdomain(spec: LwsSpec, leader: str) -> str:
    return leader if spec.subdomain_policy == "UniquePerReplica" else spec.name


# --- pods ------------------------------------------------------------------------------------


def _requests_tpus(pod_spec: Mapping[str, Any]) -> bool:
    return (
        tpu_request(
            {
                "spec": {
                    "containers": [
                        *(pod_spec.get("containers") or ()),
                        *(pod_spec.get("initContainers") or ()),
                    ]
                }
            }
        )
        > 0
    )


def with_lws_env(pod: dict[str, Any], lws_name: str) -> dict[str, Any]:
    """Every container gets ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX`` first.

    They come first (replacing any of the same name) so that ``$(LWS_LEADER_ADDRESS)`` in the
    container's own env and args expands, as the LWS pod webhook arranges.
    """
    meta, spec = pod["metadata"], pod["spec"]
    group = meta["labels"][GROUP_INDEX_LABEL]
    injected = [
        {"name": LEADER_ADDRESS_ENV, "value": f"{lws_name}-{group}.{spec['subdomain']}.{meta['namespace']}"},
        {"name": GROUP_SIZE_ENV, "value": meta["annotations"][SIZE_ANNOTATION]},
        {"name": WORKER_INDEX_ENV, "value": meta["labels"][WORKER_INDEX_LABEL]},
    ]
    names = {item["name"] for item in injected}
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        container["env"] = [
            *(dict(e) for e in injected),
            *(e for e in container.get("env") or () if e["name"] not in names),
        ]
    return pod


def with_tpu_env(pod: dict[str, Any], size: int) -> dict[str, Any]:
    """``TPU_WORKER_HOSTNAMES``, ``TPU_WORKER_ID``, ``TPU_NAME``... for the containers requesting TPUs.

    The hosts of a group form one TPU slice: the leader (when it requests TPUs) and the workers
    ``<leader>-1..size-1``, addressed through the group's subdomain. Sub-group layouts are not
    modelled.
    """
    meta, spec = pod["metadata"], pod["spec"]
    if SUBGROUP_SIZE_ANNOTATION in meta["annotations"]:
        return pod
    containers = [
        c
        for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
        if _requests_tpus({"containers": [c]})
    ]
    if not containers or any(
        e["name"] in ("TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID") for e in containers[0].get("env") or ()
    ):
        return pod
    is_leader = meta["labels"][WORKER_INDEX_LABEL] == "0"
    leader_requests = meta["annotations"].get(LEADER_REQUESTS_TPUS) == "true"
    leader = meta["name"] if is_leader else meta["annotations"][LEADER_NAME_ANNOTATION]
    worker_index = 0 if is_leader else int(meta["labels"][WORKER_INDEX_LABEL]) - (0 if leader_requests else 1)
    ports = [
        next((e.get("value") for e in c.get("env") or () if e["name"] == "TPU_PROCESS_PORT"), None)
        or str(TPU_PROCESS_DEFAULT_PORT + i)
        for i, c in enumerate(containers)
    ]
    hosts = [f"{leader}.{spec['subdomain']}"] if (is_leader or leader_requests) else []
    hosts += [f"{leader}-{i}.{spec['subdomain']}" for i in range(1, size)]
    hostnames = [host for host in hosts for _ in containers]
    addresses = [f"{host}:{ports[j]}" for host in hosts for j in range(len(containers))]
    for i, container in enumerate(containers):
        env = container.setdefault("env", [])
        has_port = any(e["name"] == "TPU_PROCESS_PORT" for e in env)
        env += [
            {"name": "TPU_WORKER_HOSTNAMES", "value": ",".join(hostnames)},
            {"name": "TPU_WORKER_ID", "value": str(worker_index * len(containers) + i)},
            {"name": "TPU_NAME", "value": leader},
            {"name": "TPU_PROCESS_ADDRESSES", "value": ",".join(addresses)},
        ]
        if not has_port:
            env.append({"name": "TPU_PROCESS_PORT", "value": ports[i]})
    return pod


def _exclusive_affinity(pod_spec: dict[str, Any], key: str, topology_key: str, label: str) -> None:
    """The pod (anti-)affinity the LWS webhook adds for exclusive placement (shown; our scheduler reads the annotation)."""
    affinity = pod_spec.setdefault("affinity", {})
    affinity.setdefault("podAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    ).append(
        {
            "labelSelector": {"matchExpressions": [{"key": label, "operator": "In", "values": [key]}]},
            "topologyKey": topology_key,
        }
    )
    affinity.setdefault("podAntiAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    ).append(
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": label, "operator": "Exists"},
                    {"key": label, "operator": "NotIn", "values": [key]},
                ]
            },
            "topologyKey": topology_key,
        }
    )


def _subgroup_index(size: int, subgroup_size: int, worker_index: int) -> int:
    if (size - 1) % subgroup_size == 0 and size % subgroup_size != 0:
        return (worker_index - 1) // subgroup_size
    return worker_index // subgroup_size


def _base_pod(
    spec: LwsSpec, template: Mapping[str, Any], name: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    template = copy_of(dict(template))
    meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    leader = name if labels[WORKER_INDEX_LABEL] == "0" else annotations[LEADER_NAME_ANNOTATION]
    pod_spec["hostname"] = name
    pod_spec["subdomain"] = subdomain(spec, leader)
    pod_spec.setdefault("restartPolicy", "Always")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": {**(meta.get("labels") or {}), **labels},
            "annotations": {**(meta.get("annotations") or {}), **annotations},
            "ownerReferences": [owner_reference(dict(spec.owner))] if spec.owner else [],
        },
        "spec": pod_spec,
    }


def _common_annotations(spec: LwsSpec) -> dict[str, str]:
    annotations = {SIZE_ANNOTATION: str(spec.size)}
    if spec.exclusive_topology:
        annotations[EXCLUSIVE_TOPOLOGY] = spec.exclusive_topology
    if spec.subgroup_size:
        annotations[SUBGROUP_POLICY_ANNOTATION] = spec.subgroup_policy
        annotations[SUBGROUP_SIZE_ANNOTATION] = str(spec.subgroup_size)
        if spec.subgroup_exclusive_topology:
            annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY] = spec.subgroup_exclusive_topology
    if spec.subdomain_policy == "UniquePerReplica":
        annotations[SUBDOMAIN_POLICY_ANNOTATION] = "UniquePerReplica"
    return annotations


def leader_pod(spec: LwsSpec, group: int, revision: str) -> dict[str, Any]:
    """The leader pod of ``group``, as the leader StatefulSet and the LWS pod webhook make it."""
    name = leader_name(spec.name, group)
    key = group_key(spec.namespace, name)
    labels = {
        NAME_LABEL: spec.name,
        WORKER_INDEX_LABEL: "0",
        REVISION_LABEL: revision,
        GROUP_INDEX_LABEL: str(group),
        GROUP_KEY_LABEL: key,
    }
    if spec.subgroup_size and spec.subgroup_policy != "LeaderExcluded":
        labels[SUBGROUP_INDEX_LABEL] = "0"
        labels[SUBGROUP_KEY_LABEL] = _sha1(f"{name}/0")
    pod = _base_pod(spec, spec.leader_template, name, labels, _common_annotations(spec))
    if spec.exclusive_topology:
        _exclusive_affinity(pod["spec"], key, spec.exclusive_topology, GROUP_KEY_LABEL)
    return with_tpu_env(with_lws_env(pod, spec.name), spec.size)


def worker_pod(
    spec: LwsSpec, leader: Mapping[str, Any], index: int, topology_value: str | None = None
) -> dict[str, Any]:
    """Worker ``index`` (1..size-1) of the group ``leader`` heads; pinned to ``topology_value`` when exclusive."""
    leader_meta = leader["metadata"]
    group = int(leader_meta["labels"][GROUP_INDEX_LABEL])
    labels = {
        NAME_LABEL: spec.name,
        WORKER_INDEX_LABEL: str(index),
        REVISION_LABEL: leader_meta["labels"][REVISION_LABEL],
        GROUP_INDEX_LABEL: str(group),
        GROUP_KEY_LABEL: leader_meta["labels"][GROUP_KEY_LABEL],
    }
    annotations = {**_common_annotations(spec), LEADER_NAME_ANNOTATION: leader_meta["name"]}
    if _requests_tpus(leader["spec"]):
        annotations[LEADER_REQUESTS_TPUS] = "true"
    if spec.subgroup_size:
        sub = str(_subgroup_index(spec.size, spec.subgroup_size, index))
        labels[SUBGROUP_INDEX_LABEL] = sub
        labels[SUBGROUP_KEY_LABEL] = _sha1(f"{leader_meta['name']}/{sub}")
    pod = _base_pod(spec, spec.worker_template, worker_name(spec.name, group, index), labels, annotations)
    if spec.exclusive_topology and topology_value is not None:
        pod["spec"]["nodeSelector"] = {
            **(pod["spec"].get("nodeSelector") or {}),
            spec.exclusive_topology: topology_value,
        }
    return with_tpu_env(with_lws_env(pod, spec.name), spec.size)


# --- groups ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """The pods of one group that exist: the leader (or ``None``) and workers by index."""

    index: int
    leader: Mapping[str, Any] | None
    workers: Mapping[int, Mapping[str, Any]]

    @property
    def pods(self) -> list[Mapping[str, Any]]:
        return [p for p in (self.leader, *self.workers.values()) if p is not None]


def groups_of(lws_name: str, pods: Iterable[Mapping[str, Any]]) -> dict[int, Group]:
    leaders: dict[int, Mapping[str, Any]] = {}
    workers: dict[int, dict[int, Mapping[str, Any]]] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(NAME_LABEL) != lws_name or GROUP_INDEX_LABEL not in labels:
            continue
        group, index = int(labels[GROUP_INDEX_LABEL]), int(labels.get(WORKER_INDEX_LABEL, "0"))
        if index == 0:
            leaders[group] = pod
        else:
            workers.setdefault(group, {})[index] = pod
    return {i: Group(i, leaders.get(i), workers.get(i, {})) for i in sorted({*leaders, *workers})}


def _phase(pod: Mapping[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return (
        _phase(pod) == "Running"
        and is_true(dict(pod), "Ready")
        and not pod["metadata"].get("deletionTimestamp")
    )


def _restarted(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") not in ("Running", "Pending", None):
        return False
    return any(
        c.get("restartCount", 0) > 0
        for c in [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    )


def group_breakage(group: Group, size: int, workers_started: bool, policy: str) -> str | None:
    """Why a group must be recreated as a whole under ``policy``, or ``None``.

    A pod that failed, finished, restarted a container or vanished breaks the group. Under
    ``RecreateGroupAfterStart`` a group with a pod still Pending is left alone.
    """
    if policy not in (RECREATE_GROUP, RECREATE_AFTER_START) or not group.pods:
        return None
    if policy == RECREATE_AFTER_START and any(_phase(p) == "Pending" for p in group.pods):
        return None
    for pod in group.pods:
        if _phase(pod) in ("Failed", "Succeeded"):
            return f"pod {pod['metadata']['name']} {_phase(pod).lower()}"
        if _restarted(pod):
            return f"pod {pod['metadata']['name']} restarted a container"
    if group.leader is None:
        return "the leader pod is gone"
    if (workers_started or group.workers) and len(group.workers) < size - 1:
        missing = sorted(set(range(1, size)) - set(group.workers))
        return f"worker pod {group.leader['metadata']['name']}-{missing[0]} is gone"
    return None


def group_ready(group: Group, size: int) -> bool:
    return (
        group.leader is not None
        and pod_ready(group.leader)
        and len(group.workers) >= size - 1
        and all(pod_ready(w) for w in group.workers.values())
    )


def group_updated(group: Group, revision: str) -> bool:
    return (
        group.leader is not None
        and (group.leader["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision
        and all(
            (w["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision
            for w in group.workers.values()
        )
    )


# --- status ----------------------------------------------------------------------------------

_EXCLUSIVE = {frozenset({"Available", "Progressing"}), frozenset({"Available", "UpdateInProgress"})}
_CONDITION_TEXT = {
    "Available": ("AllGroupsReady", "All replicas are ready"),
    "Progressing": ("GroupsProgressing", "Replicas are progressing"),
    "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress"),
}


def lws_conditions(
    conditions: Sequence[Mapping[str, Any]], wanted: Sequence[str], now: str
) -> list[dict[str, Any]]:
    """LWS's ``setConditions``: the wanted conditions True; a True rival flips to False, keeping its reason."""
    result = [dict(c) for c in conditions]
    for type_ in wanted:
        reason, message = _CONDITION_TEXT[type_]
        found = False
        for item in result:
            if item["type"] == type_:
                found = True
                if item["status"] != "True":
                    item.update(status="True", reason=reason, message=message, lastTransitionTime=now)
            elif frozenset({item["type"], type_}) in _EXCLUSIVE and item["status"] == "True":
                item.update(status="False", lastTransitionTime=now)
        if not found:
            result.append(
                {
                    "type": type_,
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": now,
                }
            )
    return result


def lws_status(
    previous: Mapping[str, Any],
    spec: LwsSpec,
    groups: Mapping[int, Group],
    revision: str,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """The LeaderWorkerSet status from its groups, as LWS's ``updateStatus`` computes it."""
    current = [g for i, g in groups.items() if i < spec.replicas and g.leader is not None]
    ready = [g for g in groups.values() if g.leader is not None and group_ready(g, spec.size)]
    updated = [g for g in groups.values() if group_updated(g, revision)]
    current_ready = [g for g in current if group_ready(g, spec.size)]
    current_updated = [g for g in current if group_updated(g, revision)]
    current_updated_ready = [g for g in current_updated if group_ready(g, spec.size)]
    if len(current_updated) < len(current):
        wanted = ["UpdateInProgress", "Progressing"]
    elif len(current_ready) == spec.replicas and len(current_updated_ready) == len(current):
        wanted = ["Available"]
    else:
        wanted = ["Progressing"]
    status = copy_of(dict(previous))
    status.update(
        replicas=sum(1 for g in groups.values() if g.leader is not None),
        readyReplicas=len(ready),
        updatedReplicas=len(updated),
        observedGeneration=generation,
        hpaPodSelector=f"{NAME_LABEL}={spec.name},{WORKER_INDEX_LABEL}=0",
        conditions=lws_conditions(status.get("conditions") or [], wanted, now),
    )
    return status


def headless_service(
    spec: LwsSpec, name: str, selector: Mapping[str, str], owner: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": {NAME_LABEL: spec.name},
            "ownerReferences": [owner_reference(dict(owner))],
        },
        "spec": {"clusterIP": "None", "selector": dict(selector), "publishNotReadyAddresses": True},
    }


# --- the controller ----------------------------------------------------------------------------


class LeaderWorkerSetController(Controller):
    name = "lws-controller-manager"

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.leaderworkersets = self.kind("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
        self.pods = self.kind("", "v1", "pods")
        self.services = self.kind("", "v1", "services")
        self.nodes = self.kind("", "v1", "nodes")
        self._workers_started: set[str] = set()

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.leaderworkersets, self.pods)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        if event.kind.plural == "leaderworkersets":
            return ((event.namespace, event.name),) if event.type != "DELETED" else ()
        return owner_keys(event, "LeaderWorkerSet")

    async def reconcile(self, namespace: str, name: str) -> None:
        if name == "*":
            for lws in self.store.list(self.leaderworkersets):
                self.enqueue((lws["metadata"]["namespace"], lws["metadata"]["name"]))
            return
        lws = self.store.find(self.leaderworkersets, namespace, name)
        if lws is None or lws["metadata"].get("deletionTimestamp"):
            return
        spec = lws_spec(lws)
        revision = revision_hash(lws)
        if spec.subdomain_policy != "UniquePerReplica":
            self._ensure_service(headless_service(spec, spec.name, {NAME_LABEL: spec.name}, lws))
        groups = groups_of(spec.name, self._pods_of(lws))

        for index, group in groups.items():
            if index >= spec.replicas:
                self._delete_group(group)
        budget = spec.max_unavailable - sum(
            1
            for i, g in groups.items()
            if i < spec.replicas and group_updated(g, revision) and not group_ready(g, spec.size)
        )
        for index in range(spec.replicas):
            group = groups.get(index, Group(index, None, {}))
            leader_uid = group.leader["metadata"]["uid"] if group.leader else ""
            why = group_breakage(group, spec.size, leader_uid in self._workers_started, spec.restart_policy)
            if why is not None:
                self._recreate(lws, group, why)
                group = Group(index, None, {})
            elif group.pods and not group_updated(group, revision):
                if budget <= 0 and group_ready(group, spec.size):
                    continue
                budget -= 1
                self._delete_group(group)
                self.event(lws, "GroupsUpdating", f"Rolling group {index} to template revision {revision}")
                group = Group(index, None, {})
            elif spec.restart_policy == NO_RESTART:
                group = self._replace_finished_pods(group)
            self._create_missing(spec, lws, group, revision)

        groups = groups_of(spec.name, self._pods_of(lws))
        status = lws_status(
            lws.get("status") or {},
            spec,
            groups,
            revision,
            lws["metadata"].get("generation", 1),
            self.clock.timestamp(),
        )
        before = {c["type"]: c["status"] for c in (lws.get("status") or {}).get("conditions") or ()}
        stored = self.set_status(self.leaderworkersets, lws, status)
        after = {c["type"]: c["status"] for c in status["conditions"]}
        if after != before:
            first = next(
                c
                for t in ("UpdateInProgress", "Available", "Progressing")
                for c in status["conditions"]
                if c["type"] == t and c["status"] == "True"
            )
            self.event(
                stored,
                first["reason"],
                f"{first['message']}, with {status['readyReplicas']} groups ready of total {spec.replicas} groups",
            )

    # --- reading -----------------------------------------------------------------------------

    def _pods_of(self, lws: Mapping[str, Any]) -> list[dict[str, Any]]:
        uid = lws["metadata"]["uid"]
        return [
            p
            for p in self.store.list(self.pods, lws["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or ())
            and not p["metadata"].get("deletionTimestamp")
        ]

    def _topology_value(self, spec: LwsSpec, leader: Mapping[str, Any]) -> str | None:
        node_name = leader["spec"].get("nodeName")
        if not node_name or not spec.exclusive_topology:
            return None
        node = self.store.find(self.nodes, None, node_name)
        return ((node or {}).get("metadata", {}).get("labels") or {}).get(spec.exclusive_topology)

    # --- writing -----------------------------------------------------------------------------

    def _create_missing(self, spec: LwsSpec, lws: dict[str, Any], group: Group, revision: str) -> None:
        leader = group.leader
        if leader is None:
            leader = self.store.create(self.pods, leader_pod(spec, group.index, revision))
            self.event(lws, "GroupsProgressing", f"Created leader pod {leader['metadata']['name']}")
            if spec.subdomain_policy == "UniquePerReplica":
                selector = {NAME_LABEL: spec.name, GROUP_INDEX_LABEL: str(group.index)}
                self._ensure_service(headless_service(spec, leader["metadata"]["name"], selector, leader))
        if spec.size <= 1 or len(group.workers) >= spec.size - 1:
            if group.workers:
                self._workers_started.add(leader["metadata"]["uid"])
            return
        if spec.startup_policy == "LeaderReady" and not pod_ready(leader):
            return
        topology = None
        if spec.exclusive_topology:
            topology = self._topology_value(spec, leader)
            if topology is None:
                return  # the leader's node decides the workers' topology domain
        for index in range(1, spec.size):
            if index not in group.workers:
                self.store.create(self.pods, worker_pod(spec, leader, index, topology))
        self._workers_started.add(leader["metadata"]["uid"])
        self.event(
            lws, "GroupsProgressing", f"Created worker pods for leader pod {leader['metadata']['name']}"
        )

    def _recreate(self, lws: dict[str, Any], group: Group, why: str) -> None:
        leader = leader_name(lws["metadata"]["name"], group.index)
        self._delete_group(group)
        self.event(
            lws,
            "RecreateGroup",
            f"{why}: deleted the pods of group {group.index} (leader {leader}) to recreate it",
        )

    def _delete_group(self, group: Group) -> None:
        if group.leader is not None:
            self._workers_started.discard(group.leader["metadata"]["uid"])
        for pod in group.pods:
            meta = pod["metadata"]
            if self.store.find(self.pods, meta["namespace"], meta["name"]) is not None:
                self.store.delete(self.pods, meta["namespace"], meta["name"])

    def _replace_finished_pods(self, group: Group) -> Group:
        """Under ``restartPolicy: None`` a failed pod is replaced alone, as its StatefulSet would."""
        leader, workers = group.leader, dict(group.workers)
        for pod in group.pods:
            if _phase(pod) in ("Failed", "Succeeded"):
                meta = pod["metadata"]
                self.store.delete(self.pods, meta["namespace"], meta["name"])
                if pod is leader:
                    leader = None
                else:
                    workers.pop(int(meta["labels"][WORKER_INDEX_LABEL]), None)
        return Group(group.index, leader, workers)

    def _ensure_service(self, service: dict[str, Any]) -> None:
        meta = service["metadata"]
        if self.store.find(self.services, meta["namespace"], meta["name"]) is None:
            self.store.create(self.services, service)
