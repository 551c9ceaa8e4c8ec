"""After a workload's DELETE is accepted: what still holds its TPUs, and what to delete directly.

A delete hands the workload's JobSet, Jobs and pods to the cluster's garbage collector, which on
a busy GKE cluster can take 10–47 minutes to reach them while the pods keep their chips
(ml-auto-solutions #1380/#1383). A healthy collector marks every pod of the chain within a second
or two (the pods' grace period only runs after that: it says how long a marked pod takes to stop,
not how long the collector takes to mark it), so a pod still unmarked
:data:`COLLECTOR_MARGIN_SECONDS` after the delete is left behind. Then whatever in the chain the
collector has not reached is deleted directly, from the top down so that no controller re-creates
what goes below it: a PathwaysJob's JobSet (its Jobs' controller would re-create the Jobs; the
PathwaysJob itself is already gone, see :data:`~pathways_airflow.resources.PATHWAYSJOB`), the
JobSet's Jobs (theirs would re-create the pods), then the pods.

A pod already marked is left to its kubelet: forcing it (grace 0) could free the TPUs in the API
while its containers still run on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pathways_airflow.spec.tpu import pod_spec_chips

COLLECTOR_MARGIN_SECONDS = 5.0
"""How long after the delete the collector may take to mark the pods before we step in: a healthy
one marks them within a second or two. Stepping in early only repeats its DELETEs."""

_ENDED = ("Succeeded", "Failed")


def alive(pod: Mapping[str, Any]) -> bool:
    """A pod that has not ended, terminating or not: the scheduler counts every pod that is not
    ``Succeeded`` or ``Failed`` on its node, and a pending one takes a slice the moment it can."""
    return (pod.get("status") or {}).get("phase") not in _ENDED


def holds_tpus(pod: Mapping[str, Any]) -> bool:
    """An alive pod bound to a node keeps that node's chips."""
    return alive(pod) and bool((pod.get("spec") or {}).get("nodeName"))


def pod_chips(pod: Mapping[str, Any]) -> int:
    """The TPU chips the pod holds."""
    return pod_spec_chips(pod.get("spec") or {})


def _unmarked(objects: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(o["metadata"]["name"] for o in objects if not o["metadata"].get("deletionTimestamp"))


@dataclass(frozen=True)
class Leftovers:
    """One look at a deleted workload's chain: what still holds TPUs, and what to delete now."""

    holding: int
    """Pods that are :func:`alive`: the workload is gone when this is 0."""
    unmarked: int
    """Of those, the pods nothing has asked to stop yet."""
    jobsets: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    pods: tuple[str, ...] = ()
    chips: int = 0
    """The chips :attr:`pods` hold on their nodes: what deleting them directly gives back."""

    @property
    def gone(self) -> bool:
        return self.holding == 0

    @property
    def to_delete(self) -> bool:
        return bool(self.jobsets or self.jobs or self.pods)

    @property
    def handed_over(self) -> bool:
        """Every pod that holds chips is stopping (once :attr:`pods` are deleted): its kubelet
        gives the chips back within its grace period, with nobody left to wait on."""
        return self.unmarked == len(self.pods)


def left_behind(
    jobsets: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], waited: float
) -> Leftovers:
    """What of a workload deleted ``waited`` seconds ago is left, and what to delete directly.

    ``jobsets``, ``jobs`` and ``pods`` are the objects still carrying the workload's
    ``jobset-name`` (its JobSet by name; a JobSet that is itself the workload is already marked).
    Nothing is deleted directly within :data:`COLLECTOR_MARGIN_SECONDS` of the delete; after it,
    everything unmarked in the chain is.
    """
    holding = [p for p in pods if alive(p)]
    unmarked = [p for p in holding if not p["metadata"].get("deletionTimestamp")]
    if not unmarked or waited < COLLECTOR_MARGIN_SECONDS:
        return Leftovers(len(holding), len(unmarked))
    chips = sum(pod_chips(p) for p in unmarked if holds_tpus(p))
    return Leftovers(len(holding), len(unmarked), _unmarked(jobsets), _unmarked(jobs), _unmarked(unmarked), chips)


def reclaimed_line(namespace: str, workload: str, leftovers: Leftovers, waited: float) -> str:
    """The log line a human reads when we did the garbage collector's work."""
    parts = ["its JobSet"] if leftovers.jobsets else []
    parts += [f"{len(leftovers.jobs)} Jobs"] if leftovers.jobs else []
    parts.append(f"{len(leftovers.pods)} pods")
    reached = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    return (
        f"{namespace}/{workload}: the garbage collector had not reached {reached} {waited:.0f} s after the delete; "
        f"deleted them directly, reclaiming {leftovers.chips} TPU chips"
    )
