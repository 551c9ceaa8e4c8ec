"""After a workload's DELETE is accepted: what still holds its TPUs, and what to delete directly.

A foreground delete hands the workload's JobSet, Jobs and pods to the cluster's garbage
collector, which on a busy GKE cluster can take 10–47 minutes to reach them while the pods keep
their chips (ml-auto-solutions #1380/#1383). Once the collector has marked a pod it needs only
its termination grace period to stop, so a pod still unmarked after the longest grace period
and :data:`COLLECTOR_MARGIN_SECONDS` is left behind. Then whatever in the chain the collector has
not reached is deleted directly, from the top down so that no controller re-creates what goes
below it: a PathwaysJob's JobSet (its controller would re-create the Jobs), the JobSet's Jobs
(theirs would re-create the pods), then the pods.

A pod already marked is left to its kubelet: forcing it (grace 0) could free the TPUs in the API
while its containers still run on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pathways_airflow.spec.tpu import pod_spec_chips

COLLECTOR_MARGIN_SECONDS = 15.0
"""How long past the pods' grace period the collector may take to mark them before we step in:
on a healthy cluster it marks them within a second or two of the delete."""

DEFAULT_GRACE_SECONDS = 30
"""``terminationGracePeriodSeconds`` of a pod spec that does not set it (kubernetes/api
core/v1/types.go, DefaultTerminationGracePeriodSeconds)."""

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


def collector_grace(pods: Sequence[Mapping[str, Any]]) -> float:
    """How long after the delete a pod may go unmarked: the longest grace period of the pods with
    TPUs (of all, when none has any) plus :data:`COLLECTOR_MARGIN_SECONDS`. A head pod's default
    30 s does not hold up the slices' return."""
    periods = [(p.get("spec") or {}).get("terminationGracePeriodSeconds") for p in [p for p in pods if pod_chips(p)] or pods]
    return max((DEFAULT_GRACE_SECONDS if s is None else int(s) for s in periods), default=DEFAULT_GRACE_SECONDS) + COLLECTOR_MARGIN_SECONDS


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
    Nothing is deleted directly while a pod that has not ended is still within
    :func:`collector_grace`; after it, everything unmarked in the chain is.
    """
    holding = [p for p in pods if alive(p)]
    unmarked = [p for p in holding if not p["metadata"].get("deletionTimestamp")]
    if not unmarked or waited < collector_grace(holding):
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
