"""Where a pod may run: the scheduler's decision as a pure function of the pod and the nodes.

Modelled: node readiness and ``unschedulable``, taints and tolerations (a pod requesting
``google.com/tpu`` tolerates GKE's TPU taint, as GKE adds that toleration), ``nodeSelector``,
required node affinity, ``google.com/tpu`` capacity, and the exclusive-topology annotations of
JobSet and LeaderWorkerSet (one Job or group per node pool). Not modelled: CPU and memory
requests, pod (anti-)affinity other than exclusive topology, preemption by priority.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow_testing.nodes import TPU_RESOURCE

JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_JOB_KEY = "jobset.sigs.k8s.io/job-key"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"


def tpu_request(pod: Mapping[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers", []):
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(TPU_RESOURCE) or (resources.get("limits") or {}).get(TPU_RESOURCE)
        total += int(amount or 0)
    return total


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _tolerates(pod: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    if taint.get("key") == TPU_RESOURCE and tpu_request(pod) > 0:
        return True
    for toleration in pod["spec"].get("tolerations") or ():
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        operator = toleration.get("operator", "Equal")
        if operator == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if operator == "Equal" and toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def _affinity_allows(pod: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    required = (
        ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    if not required:
        return True
    return any(all(_expression_matches(e, labels) for e in term.get("matchExpressions") or ()) for term in required)


def is_ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's ``Ready`` condition is ``True``."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or ()
    )


def _exclusive(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(topology key, group key) when the pod asks for a topology domain of its own."""
    annotations = pod["metadata"].get("annotations") or {}
    labels = pod["metadata"].get("labels") or {}
    if JOBSET_EXCLUSIVE in annotations:
        return annotations[JOBSET_EXCLUSIVE], labels.get(JOBSET_JOB_KEY, pod["metadata"]["name"])
    if LWS_EXCLUSIVE in annotations:
        return annotations[LWS_EXCLUSIVE], labels.get(LWS_GROUP_KEY, pod["metadata"]["name"])
    return None


def choose_node(
    pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], running: Iterable[Mapping[str, Any]]
) -> tuple[str | None, str]:
    """``(node name, "")`` for the node to bind ``pod`` to, or ``(None, why not)``.

    ``running`` are the pods already bound to nodes (terminal ones are ignored).
    """
    bound = [p for p in running if p["spec"].get("nodeName") and not is_terminal(p)]
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for other in bound:
        by_node.setdefault(other["spec"]["nodeName"], []).append(other)
    node_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
    exclusive = _exclusive(pod)
    wanted_tpu = tpu_request(pod)
    selector = pod["spec"].get("nodeSelector") or {}
    reasons: dict[str, int] = {}

    def refuse(reason: str) -> None:
        reasons[reason] = reasons.get(reason, 0) + 1

    sibling_domains: set[str] = set()
    if exclusive:
        for other in bound:
            other_exclusive = _exclusive(other)
            if other_exclusive == exclusive:
                domain = node_labels.get(other["spec"]["nodeName"], {}).get(exclusive[0])
                if domain is not None:
                    sibling_domains.add(domain)

    candidates: list[tuple[int, str]] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        labels = node_labels[name]
        if not is_ready(node):
            refuse("node(s) were not ready")
            continue
        if node.get("spec", {}).get("unschedulable"):
            refuse("node(s) were unschedulable")
            continue
        untolerated = [t for t in node.get("spec", {}).get("taints") or () if not _tolerates(pod, t)]
        if untolerated:
            taint = untolerated[0]
            refuse(f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}")
            continue
        if any(labels.get(k) != v for k, v in selector.items()) or not _affinity_allows(pod, labels):
            refuse("node(s) didn't match Pod's node affinity/selector")
            continue
        if wanted_tpu:
            capacity = int((node.get("status") or {}).get("allocatable", {}).get(TPU_RESOURCE, 0))
            used = sum(tpu_request(p) for p in by_node.get(name, ()))
            if used + wanted_tpu > capacity:
                refuse(f"Insufficient {TPU_RESOURCE}")
                continue
        preference = 1
        if exclusive:
            topology_key, group = exclusive
            domain = labels.get(topology_key)
            if domain is None:
                refuse("node(s) didn't match pod topology spread constraints")
                continue
            domain_nodes = [n for n, l in node_labels.items() if l.get(topology_key) == domain]
            groups = {
                other_exclusive[1]
                for n in domain_nodes
                for other in by_node.get(n, ())
                if (other_exclusive := _exclusive(other)) and other_exclusive[0] == topology_key
            }
            if groups - {group} or (sibling_domains and domain not in sibling_domains):
                refuse("node(s) didn't match pod affinity/anti-affinity rules")
                continue
            preference = 0 if group in groups else 1
        candidates.append((preference, name))
    if candidates:
        return min(candidates)[1], ""
    summary = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return None, f"0/{len(nodes)} nodes are available: {summary}."
