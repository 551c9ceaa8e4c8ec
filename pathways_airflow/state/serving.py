"""Where a serving engine's start-up stands, read from its LeaderWorkerSet and pods, and which of
a Job's pods crashed; how either failure is worded is :mod:`pathways_airflow.run.messages`. Pure.

The LeaderWorkerSet's ``Available`` condition and the ``leaderworkerset.sigs.k8s.io/worker-index``
label follow kubernetes-sigs/lws ``api/leaderworkerset/v1/leaderworkerset_types.go``; pod phases,
conditions (``PodScheduled``, ``Ready``, ``DisruptionTarget``) and ``containerStatuses`` follow
kubernetes/api ``core/v1/types.go``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow import well_known
from pathways_airflow.resources import JOB, LEADERWORKERSET, Resource
from pathways_airflow.state.conditions import condition, is_true


@dataclass(frozen=True)
class ContainerExit:
    """A container that ended with a non-zero code (``restarted``: it was then started again)."""

    pod: str
    container: str
    exit_code: int
    reason: str = ""
    restarted: bool = False


def crashed_container(pod: Mapping[str, Any], container: str) -> ContainerExit | None:
    """``container`` of ``pod`` if it exited non-zero, now or before its last restart."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") != container:
            continue
        for key, restarted in (("state", False), ("lastState", True)):
            ended = (status.get(key) or {}).get("terminated") or {}
            code = ended.get("exitCode")
            if isinstance(code, int) and code != 0:
                return ContainerExit(
                    pod["metadata"]["name"], container, code, ended.get("reason", ""), restarted
                )
    return None


def first_crash(pods: Sequence[Mapping[str, Any]], container: str) -> ContainerExit | None:
    """The first of ``pods`` whose ``container`` exited non-zero (a Job's failed attempt)."""
    return next((c for c in (crashed_container(p, container) for p in pods) if c is not None), None)


@dataclass(frozen=True)
class ServerProgress:
    """Where a server's start-up stands, from its LeaderWorkerSet and pods."""

    available: bool
    leader: str | None
    leader_uid: str | None
    crash: ContainerExit | None
    summary: str


def pod_state(pod: Mapping[str, Any]) -> str:
    """One word or phrase for the log: ``terminating``, ``unschedulable (why)`` or the phase."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return "terminating"
    phase = status.get("phase", "Pending")
    if phase == "Pending":
        scheduled = condition(pod, "PodScheduled")
        if scheduled is not None and scheduled.get("status") == "False":
            return f"unschedulable ({scheduled.get('message') or scheduled.get('reason', '')})".strip()
    return phase.lower()


def server_progress(
    lws: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], server_container: str
) -> ServerProgress:
    """Is the server's group Available, who leads it, and did its ``server_container`` crash?

    Only the engine's server container counts: a server that exits during start-up (a bad setting,
    an unreadable checkpoint) exits again every time LWS recreates its group, so waiting on it
    only holds the slice. A pod stopped by the platform (``DisruptionTarget``: maintenance,
    preemption) did not crash: LWS recreates its group and the wait goes on.
    """
    if lws is None:
        return ServerProgress(False, None, None, None, "the LeaderWorkerSet is gone")
    size = int(((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size", 1))
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    leader = next(
        (p for p in live if (p["metadata"].get("labels") or {}).get(well_known.LWS_WORKER_INDEX) == "0"), None
    )
    disrupted = leader is not None and is_true(leader, "DisruptionTarget")
    crash = crashed_container(leader, server_container) if leader and not disrupted else None
    running = sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running")
    ready = sum(1 for p in live if is_true(p, "Ready"))
    if is_true(lws, "Available"):
        summary = f"all {size} pods ready (LeaderWorkerSet Available)"
    elif leader is None:
        summary = f"waiting for the leader pod ({len(live)}/{size} pods exist)"
    else:
        state = f"leader {leader['metadata']['name']} {pod_state(leader)}"
        summary = f"{running}/{size} pods running, {ready} ready; {state}"
    return ServerProgress(
        available=is_true(lws, "Available"),
        leader=leader["metadata"]["name"] if leader else None,
        leader_uid=leader["metadata"].get("uid") if leader else None,
        crash=crash,
        summary=summary,
    )


def pod_selectors(objects: Iterable[tuple[Resource, str]]) -> list[str]:
    """Label selectors of the pods the LeaderWorkerSets and Jobs among ``objects`` own.

    The keys are the ones LWS (``leaderworkerset.sigs.k8s.io/name``) and the Job controller
    (``batch.kubernetes.io/job-name``) put on every pod they create.
    """
    selectors = {LEADERWORKERSET: well_known.LWS_NAME, JOB: well_known.JOB_NAME}
    return [f"{selectors[resource]}={name}" for resource, name in objects if resource in selectors]
