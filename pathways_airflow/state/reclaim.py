"""After a workload's DELETE is accepted, or its JobSet's restart deleted the last attempt's Jobs:
what still holds its TPUs, and what to delete directly.

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

from dataclasses import dataclass, field
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


def _uids(*groups: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["uid"] for group in groups for o in group if o["metadata"].get("uid")}


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
    uids: Mapping[str, str] = field(default_factory=dict)
    """The uid each object to delete was seen with, by name: its DELETE names it as a precondition,
    so an object re-created under that name since the look is left alone."""

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
    return Leftovers(len(holding), len(unmarked), _unmarked(jobsets), _unmarked(jobs), _unmarked(unmarked), chips, _uids(jobsets, jobs, unmarked))


FOREGROUND_DELETION = "foregroundDeletion"
"""The finalizer an object deleted in the foreground keeps until the collector has deleted its dependents."""


def _owned_by(pod: Mapping[str, Any], uids: set[str]) -> bool:
    return any(ref.get("uid") in uids for ref in pod["metadata"].get("ownerReferences") or ())


def restart_held_up(jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], waited: float) -> Leftovers:
    """What holds up a JobSet's restart in place, and what to delete directly.

    A JobSet restarting (a failure policy's restart, or ``RestartJob``) deletes the last attempt's
    Jobs in the foreground and creates the next attempt's under the same names once they are gone
    (jobset ``pkg/controllers/jobset_controller.go``, ``deleteJobs``). A Job deleted in the
    foreground stays until the collector has deleted every pod it owns, ended ones too: a late
    collector holds the restart for as long as it is late. ``waited`` seconds after this was first
    seen (the same :data:`COLLECTOR_MARGIN_SECONDS`), the Jobs are deleted again in the
    background, which takes them away at once (a DELETE's propagation policy replaces the
    finalizers of an object already being deleted: apiserver ``registry/generic/registry/store.go``,
    ``deletionFinalizersForGarbageCollection``), and their pods nothing has asked to stop are
    deleted directly. :attr:`Leftovers.holding` counts the pods the Jobs wait on.
    """
    held = [j for j in jobs if j["metadata"].get("deletionTimestamp") and FOREGROUND_DELETION in (j["metadata"].get("finalizers") or ())]
    if not held:  # every look of every wait asks: most have nothing held
        return Leftovers(0, 0)
    uids = {j["metadata"].get("uid") for j in held}
    theirs = [p for p in pods if _owned_by(p, uids)]
    unmarked = [p for p in theirs if not p["metadata"].get("deletionTimestamp")]
    if not unmarked or waited < COLLECTOR_MARGIN_SECONDS:
        return Leftovers(len(theirs), len(unmarked))
    chips = sum(pod_chips(p) for p in unmarked if holds_tpus(p))
    return Leftovers(len(theirs), len(unmarked), (), tuple(j["metadata"]["name"] for j in held), _unmarked(unmarked), chips, _uids(held, unmarked))


def reclaimed_line(namespace: str, workload: str, leftovers: Leftovers, waited: float, *, restart: bool = False) -> str:
    """The log line a human reads when we did the garbage collector's work (for a JobSet's
    ``restart`` in place: :func:`restart_held_up`)."""
    parts = ["its JobSet"] if leftovers.jobsets else []
    parts += [f"{len(leftovers.jobs)} Jobs"] if leftovers.jobs else []
    parts.append(f"{len(leftovers.pods)} pods")
    reached = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    if restart:
        return (
            f"{namespace}/{workload}: its JobSet's restart waited on the garbage collector, which had not reached the last "
            f"attempt's {reached} {waited:.0f} s after they were deleted; deleted them directly, so the next attempt can start"
        )
    return (
        f"{namespace}/{workload}: the garbage collector had not reached {reached} {waited:.0f} s after the delete; "
        f"deleted them directly, reclaiming {leftovers.chips} TPU chips"
    )
