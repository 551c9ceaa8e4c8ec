"""A workload whose parts the API refuses to create: it would wait forever, so the wait ends it. Pure.

JobSet creates its child Jobs itself; when the API refuses one (a ResourceQuota, an admission
webhook, a field the API rejects) the only trace is a Warning event ``JobCreationFailed`` on the
JobSet, repeated at every retry (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go,
reconcileReplicatedJobs and createJobs; reason in pkg/constants/constants.go). The message is
``job "<name>" creation failed with error: <the API's message>``. With the InOrder startup policy
the head Job runs and the workers never start: nothing fails, the slice's quota stays held.

The PathwaysJob controller (google/pathways-job) creates the JobSet in its first reconcile and
records no condition when that fails; a PathwaysJob a watcher has seen without a JobSet for
:data:`JOBSET_GRACE_SECONDS` is stuck the same way, and its Warning events (if any) say why.

Both are deterministic (the same spec is refused the same way on a retry), so the verdict is a
refused spec. Events are ``core/v1`` Event dicts whose ``involvedObject`` is the workload.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from pathways_airflow.state.api_time import to_the_second
from pathways_airflow.state.workload_parts import of_current_run

JOB_CREATION_FAILED = "JobCreationFailed"

CHECK_EVERY_SECONDS = 5.0
"""How often a wait whose child objects are not all there reads the workload's events (never while
everything exists): soon enough to end within seconds, rare enough to cost nothing in steady state."""

JOBSET_GRACE_SECONDS = 300.0
"""How long a PathwaysJob may exist without its JobSet. The controller creates it within a second;
five minutes also cover a controller restart or leader election."""


def events_selector(kind: str, name: str) -> str:
    """The ``fieldSelector`` of the events about one object."""
    return f"involvedObject.kind={kind},involvedObject.name={name}"


def children_missing(top: Mapping[str, Any] | None, jobset: Mapping[str, Any] | None, jobs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some child object should exist and does not: the PathwaysJob's JobSet, or a Job of the
    JobSet's current run. Only then are the events worth reading."""
    if top is None:
        return False
    if jobset is None:
        return top.get("kind") == "PathwaysJob"
    expected = sum(int(r.get("replicas", 1)) for r in (jobset.get("spec") or {}).get("replicatedJobs") or ())
    return len(of_current_run(jobs, jobset)) < expected


def _when(event: Mapping[str, Any]) -> str:
    return to_the_second(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))


def _about(event: Mapping[str, Any], kind: str, name: str) -> bool:
    involved = event.get("involvedObject") or {}
    return involved.get("kind") == kind and involved.get("name") == name


def _newest_creation(objects: Iterable[Mapping[str, Any]]) -> str:
    return max((to_the_second((o.get("metadata") or {}).get("creationTimestamp")) for o in objects), default="")


def rejected_child_job(jobset: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]) -> str | None:
    """``rejected child Job: <API message>`` from the JobSet's newest ``JobCreationFailed`` event, else ``None``.

    Only a refusal at or after the newest Job the JobSet did create counts (``jobs``: every Job of
    it known, deleted ones included): an older one was retried with success, and events outlive
    that by an hour. Both timestamps come from the API server's side, so no clock is compared to
    the triggerer's.
    """
    name = str((jobset.get("metadata") or {}).get("name"))
    since = _newest_creation([jobset, *jobs])
    failures = [
        e
        for e in events
        if _about(e, "JobSet", name) and e.get("reason") == JOB_CREATION_FAILED and e.get("type") == "Warning" and _when(e) >= since
    ]
    if not failures:
        return None
    newest = max(failures, key=_when)
    return f"rejected child Job: {newest.get('message') or 'no message'}"


def missing_jobset(pathwaysjob: Mapping[str, Any], events: Iterable[Mapping[str, Any]], waited: float) -> str | None:
    """Why a PathwaysJob has had no JobSet for ``waited`` seconds (measured by the watcher, on its
    own clock) past the grace period, else ``None``."""
    if waited < JOBSET_GRACE_SECONDS:
        return None
    name = str((pathwaysjob.get("metadata") or {}).get("name"))
    warnings = sorted((e for e in events if _about(e, "PathwaysJob", name) and e.get("type") == "Warning"), key=_when)
    said = f"; its last warning: {warnings[-1].get('reason')}: {warnings[-1].get('message')}" if warnings else ""
    return (
        f"the PathwaysJob controller created no JobSet in {waited:.0f} s (grace {JOBSET_GRACE_SECONDS:.0f} s){said}; "
        "check that the controller runs and may create JobSets in this namespace"
    )


def creation_failure(
    top: Mapping[str, Any],
    jobset: Mapping[str, Any] | None,
    jobs: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    waited_without_jobset: float,
) -> str | None:
    """The verdict on a workload whose child objects are missing: why the API refused them, or ``None`` (keep waiting)."""
    if jobset is not None:
        return rejected_child_job(jobset, jobs, events)
    if top.get("kind") == "PathwaysJob":
        return missing_jobset(top, events, waited_without_jobset)
    return None
