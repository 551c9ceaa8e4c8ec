"""Where a queued workload stands in Kueue: its place in line and the quota it waits for. Pure.

"Why is my job queued?" is answered by Kueue's visibility API
(``visibility.kueue.x-k8s.io/v1beta2``, ``apis/visibility/v1beta2/types.go``): a LocalQueue's
``pendingworkloads`` subresource lists its pending Workloads in the order their ClusterQueue will
try them, each with ``positionInClusterQueue`` and ``positionInLocalQueue`` (0-based,
``pkg/visibility/storage/pending_workloads_lq.go``). The ClusterQueue says how much of each
flavor's quota is in use (``status.flavorsUsage[].resources[].total``) of its nominal quota
(``spec.resourceGroups[].flavors[].resources[].nominalQuota``). The hook reads them
(:meth:`~pathways_airflow.hooks.pathways.AsyncPathwaysHook.queue_place`); this module turns them
into one :class:`QueuePlace` and the sentence a human reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow.state.workload_parts import as_int

TPU_RESOURCE = "google.com/tpu"
"""The resource a TPU slice's quota is kept in (GKE's TPU device plugin)."""

CHECK_EVERY_SECONDS = 30.0
"""How often a wait reads the queue again while its workload is queued: a place in line moves on
the scale of other jobs' admissions, minutes, and one read serves every wait on that LocalQueue."""


@dataclass(frozen=True)
class FlavorQuota:
    """One flavor of the ClusterQueue: TPU chips in use of its nominal quota."""

    flavor: str
    used: int
    nominal: int

    def to_dict(self) -> dict[str, Any]:
        return {"flavor": self.flavor, "used": self.used, "nominal": self.nominal}


@dataclass(frozen=True)
class QueuePlace:
    """A pending Workload's place: ``ahead_in_cluster_queue`` Workloads before it in its ClusterQueue,
    ``ahead_in_local_queue`` of them from its own LocalQueue; ``quota``: the ClusterQueue's TPU
    flavors (empty when the ClusterQueue cannot be read)."""

    local_queue: str
    cluster_queue: str
    ahead_in_cluster_queue: int
    ahead_in_local_queue: int
    quota: tuple[FlavorQuota, ...] = ()

    def line(self) -> str:
        """``3 ahead in ClusterQueue cluster-queue, 1 of them in LocalQueue team-a; v5e: 16/16 chips in use``."""
        said = (f"{self.ahead_in_cluster_queue} ahead in ClusterQueue {self.cluster_queue}, "
                f"{self.ahead_in_local_queue} of them in LocalQueue {self.local_queue}")
        if self.quota:
            said += "; " + ", ".join(f"{q.flavor}: {q.used}/{q.nominal} chips in use" for q in self.quota)
        return said

    def to_dict(self) -> dict[str, Any]:
        return {
            "local_queue": self.local_queue,
            "cluster_queue": self.cluster_queue,
            "ahead_in_cluster_queue": self.ahead_in_cluster_queue,
            "ahead_in_local_queue": self.ahead_in_local_queue,
            "quota": [q.to_dict() for q in self.quota],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueuePlace:
        return cls(
            local_queue=str(data.get("local_queue", "")),
            cluster_queue=str(data.get("cluster_queue", "")),
            ahead_in_cluster_queue=as_int(data.get("ahead_in_cluster_queue"), 0),
            ahead_in_local_queue=as_int(data.get("ahead_in_local_queue"), 0),
            quota=tuple(FlavorQuota(str(q.get("flavor", "")), as_int(q.get("used"), 0), as_int(q.get("nominal"), 0)) for q in data.get("quota") or ()),
        )


def local_queue_of(kueue_workload: Mapping[str, Any] | None) -> str | None:
    """The LocalQueue a Kueue Workload waits in (``spec.queueName``)."""
    return ((kueue_workload or {}).get("spec") or {}).get("queueName") or None


def tpu_quota(cluster_queue: Mapping[str, Any] | None) -> tuple[FlavorQuota, ...]:
    """Each flavor's TPU chips in use of its nominal quota, as the ClusterQueue states them."""
    if not cluster_queue:
        return ()
    used = {
        str(f.get("name")): as_int(r.get("total"), 0)
        for f in (cluster_queue.get("status") or {}).get("flavorsUsage") or ()
        for r in f.get("resources") or ()
        if r.get("name") == TPU_RESOURCE
    }
    return tuple(
        FlavorQuota(str(flavor.get("name")), used.get(str(flavor.get("name")), 0), as_int(resource.get("nominalQuota"), 0))
        for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ()
        for flavor in group.get("flavors") or ()
        for resource in flavor.get("resources") or ()
        if resource.get("name") == TPU_RESOURCE
    )


def queue_place(
    workload: str,
    pending: Mapping[str, Any],
    local_queue: Mapping[str, Any],
    cluster_queue: Mapping[str, Any] | None = None,
) -> QueuePlace | None:
    """The place of Kueue Workload ``workload`` in ``pending`` (a LocalQueue's
    ``PendingWorkloadsSummary``), or ``None`` when it is not pending there (admitted meanwhile)."""
    item = next((i for i in pending.get("items") or () if (i.get("metadata") or {}).get("name") == workload), None)
    if item is None:
        return None
    return QueuePlace(
        local_queue=str((local_queue.get("metadata") or {}).get("name", item.get("localQueueName", ""))),
        cluster_queue=str((local_queue.get("spec") or {}).get("clusterQueue", "")),
        ahead_in_cluster_queue=as_int(item.get("positionInClusterQueue"), 0),
        ahead_in_local_queue=as_int(item.get("positionInLocalQueue"), 0),
        quota=tpu_quota(cluster_queue),
    )


__all__ = ["CHECK_EVERY_SECONDS", "FlavorQuota", "QueuePlace", "local_queue_of", "queue_place", "tpu_quota"]
