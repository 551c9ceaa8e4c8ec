"""Bind pending pods to nodes (the decision is :func:`~pathways_airflow_testing.scheduling.choose_node`)."""

from __future__ import annotations

from typing import Any, Iterable

from pathways_airflow_testing.controllers.base import Controller, Key, set_condition
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.scheduling import choose_node, is_terminal
from pathways_airflow_testing.store import StoreEvent, copy_of

_ALL: Key = ("", "*")


class Scheduler(Controller):
    """One pass over every unbound pod whenever pods or nodes change."""

    name = "default-scheduler"

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.pods = self.kind("", "v1", "pods")
        self.nodes = self.kind("", "v1", "nodes")
        self._reported: dict[str, str] = {}

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.pods, self.nodes)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        if event.kind.plural == "pods" and event.type == "MODIFIED" and event.obj["spec"].get("nodeName") and not is_terminal(event.obj):
            return ()  # a running pod changing status frees nothing
        return (_ALL,)

    async def reconcile(self, namespace: str, name: str) -> None:
        nodes = self.store.list(self.nodes)
        pods = self.store.list(self.pods)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = sorted(
            (p for p in pods if not p["spec"].get("nodeName") and not is_terminal(p) and not p["metadata"].get("deletionTimestamp")),
            key=lambda p: (p["metadata"]["creationTimestamp"], int(p["metadata"]["resourceVersion"])),
        )
        for pod in pending:
            if (pod["spec"].get("schedulerName") or "default-scheduler") != "default-scheduler":
                continue
            node, why = choose_node(pod, nodes, bound)
            if node is None:
                self._unschedulable(pod, why)
                continue
            bound.append(self._bind(pod, node))

    def _bind(self, pod: dict[str, Any], node: str) -> dict[str, Any]:
        updated = copy_of(pod)
        updated["spec"]["nodeName"] = node
        updated["metadata"].pop("resourceVersion", None)
        stored = self.store.replace(self.pods, updated)
        status = copy_of(stored.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions") or [], "PodScheduled", "True", "", "", self.clock.timestamp())
        self._reported.pop(pod["metadata"]["uid"], None)
        self.event(stored, "Scheduled", f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}")
        return self.set_status(self.pods, stored, status)

    def _unschedulable(self, pod: dict[str, Any], why: str) -> None:
        uid = pod["metadata"]["uid"]
        if self._reported.get(uid) == why:
            return
        self._reported[uid] = why
        status = copy_of(pod.get("status") or {})
        status.setdefault("phase", "Pending")
        status["conditions"] = set_condition(status.get("conditions") or [], "PodScheduled", "False", "Unschedulable", why, self.clock.timestamp())
        self.set_status(self.pods, pod, status)
        self.event(pod, "FailedScheduling", why, type_="Warning")
