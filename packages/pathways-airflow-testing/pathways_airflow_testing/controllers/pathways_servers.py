"""What the Pathways servers do when a slice goes away: the user's program on the head fails.

On a real cluster a JAX program talks to its TPU slices through the Pathways proxy and resource
manager; when a worker VM dies (maintenance, preemption, a lost host), the program's next
computation fails with an ``UNAVAILABLE`` error some seconds later and the process exits 1. The
stand-ins do not talk to each other, so this controller plays that part: when a worker pod of a
JobSet with a ``pathways-head`` fails or disappears while the head's main container is still
running, the main container exits 1 after ``detection_seconds`` — unless the JobSet has been
restarted by then (its failure policy acting on the worker's failure first, as it does on GKE).

With elastic slices (the proxy runs with ``--num_elastic_slices``, as the PathwaysJob controller
sets it from ``elasticSlices``: google/pathways-job internal/controller/pathwaysjob_controller.go,
``MakeProxyContainer``) and a program that handles lost slices itself (MaxText's
``elastic_enabled``), the head lives on: the program is told of the loss through its
:class:`SliceView` and waits for the worker Job to bring the slice's pods back.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Iterable

from pathways_airflow_testing.controllers.base import Controller, Key
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.store import StoreEvent

HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
LOST_SLICE_EXIT_CODE = 1
ELASTIC_FLAG = re.compile(r"--num_elastic_slices=(\d+)$")


@dataclass
class HeadSlices:
    """A head's slices as its program sees them (:class:`~pathways_airflow_testing.programs.base.SliceView`)."""

    servers: "PathwaysServers"
    namespace: str
    jobset: str
    attempt: str
    handles_losses: bool = False
    losses: int = 0

    def all_ready(self) -> bool:
        return self.servers.workers_all_running(self.namespace, self.jobset, self.attempt)


class PathwaysServers(Controller):
    name = "pathways-servers"

    def __init__(self, cluster: Any, *, detection_seconds: float = 30.0):
        super().__init__(cluster)
        self.pods = self.kind("", "v1", "pods")
        self.detection_seconds = detection_seconds
        self._pending: set[tuple[str, str, str]] = set()
        self.jobsets = self.kind("jobset.x-k8s.io", "v1alpha2", "jobsets")
        self._heads: dict[tuple[str, str], HeadSlices] = {}

    def slices_of(self, pod: dict[str, Any]) -> HeadSlices | None:
        """The elastic slices of a head pod about to run, or ``None`` (not a head, or not elastic)."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(REPLICATED_JOB) != HEAD_JOB or JOBSET_NAME not in labels:
            return None
        spec = pod.get("spec") or {}
        containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
        if not any(int(m.group(1)) > 0 for c in containers for a in c.get("args") or () if (m := ELASTIC_FLAG.match(str(a)))):
            return None
        for key in [k for k in self._heads if self.store.find(self.pods, *k) is None]:  # heads gone
            del self._heads[key]
        view = HeadSlices(self, meta["namespace"], labels[JOBSET_NAME], labels.get(RESTART_ATTEMPT, "0"))
        self._heads[(meta["namespace"], meta["name"])] = view
        return view

    def workers_all_running(self, namespace: str, jobset: str, attempt: str) -> bool:
        """Every worker pod the JobSet's worker Jobs run (replicas × parallelism) is Running."""
        found = self.store.find(self.jobsets, namespace, jobset)
        worker = next((r for r in ((found or {}).get("spec") or {}).get("replicatedJobs") or () if r.get("name") == WORKER_JOB), None)
        if worker is None:
            return False
        expected = int(worker.get("replicas", 1)) * int(((worker.get("template") or {}).get("spec") or {}).get("parallelism", 1))
        running = [
            p for p in self.store.list(self.pods, namespace)
            if (p["metadata"].get("labels") or {}).get(JOBSET_NAME) == jobset
            and (p["metadata"].get("labels") or {}).get(REPLICATED_JOB) == WORKER_JOB
            and (p["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "0") == attempt
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]
        return len(running) >= expected

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.pods,)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        labels = event.obj["metadata"].get("labels") or {}
        if labels.get(REPLICATED_JOB) != WORKER_JOB or JOBSET_NAME not in labels:
            return ()
        lost = event.type == "DELETED" or (event.obj.get("status") or {}).get("phase") == "Failed"
        if not lost:
            return ()
        return ((event.namespace, f"{labels[JOBSET_NAME]}/{labels.get(RESTART_ATTEMPT, '0')}"),)

    async def reconcile(self, namespace: str, name: str) -> None:
        if "/" not in name:
            return
        jobset, attempt = name.rsplit("/", 1)
        key = (namespace, jobset, attempt)
        if key in self._pending:
            return
        head = self._running_head(namespace, jobset, attempt)
        if head is None:
            return
        view = self._heads.get((namespace, head["metadata"]["name"]))
        if view is not None and view.handles_losses:  # the program rides it out: tell it, keep the head
            view.losses += 1
            return
        self._pending.add(key)
        asyncio.get_running_loop().create_task(self._fail_head_later(key))

    def _running_head(self, namespace: str, jobset: str, attempt: str) -> dict[str, Any] | None:
        for pod in self.store.list(self.pods, namespace):
            labels = pod["metadata"].get("labels") or {}
            if (
                labels.get(JOBSET_NAME) == jobset
                and labels.get(REPLICATED_JOB) == HEAD_JOB
                and labels.get(RESTART_ATTEMPT) == attempt
                and (pod.get("status") or {}).get("phase") == "Running"
            ):
                return pod
        return None

    async def _fail_head_later(self, key: tuple[str, str, str]) -> None:
        namespace, jobset, attempt = key
        try:
            await self.clock.sleep(self.detection_seconds)
            head = self._running_head(namespace, jobset, attempt)
            if head is None or self.cluster.kubelet is None:
                return
            main = head["spec"]["containers"][0]["name"]
            self.cluster.logs.log(namespace, head["metadata"]["name"], main).append(
                self.clock.now(),
                "jax.errors.JaxRuntimeError: UNAVAILABLE: lost connection to a TPU slice (a Pathways worker is gone)",
            )
            await self.cluster.kubelet.fail_container(namespace, head["metadata"]["name"], main, LOST_SLICE_EXIT_CODE)
        finally:
            self._pending.discard(key)
