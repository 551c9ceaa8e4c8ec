"""PathwaysJob → JobSet, and the PathwaysJob status mirrored from the JobSet, as google/pathways-job does.

The child JobSet is the one ``spec.render.render_jobset`` draws with the controller's own
failure policy (``maxRestarts`` only). The status follows only the *last* JobSet condition, and
a new condition is appended when its type changes, the previous one flipping to False — so the
PathwaysJob keeps saying ``Running`` while its JobSet restarts, exactly the quirk the provider
must see through. An invalid topology fails the job with ``terminalState: Failed`` and no
condition, as the controller does.

Like the upstream ``Reconcile`` (internal/controller/pathwaysjob_controller.go), it creates the
JobSet whenever the PathwaysJob exists and the JobSet does not: a PathwaysJob being deleted in the
foreground, or one that has finished, gets its JobSet back once that is deleted.
"""

from __future__ import annotations

from typing import Any, Iterable

from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.parse import workload_from_pathwaysjob
from pathways_airflow.spec.render import PATHWAYSJOB_FAILURE_POLICY, render_jobset
from pathways_airflow_testing.controllers.base import Controller, Key, owner_keys, owner_reference
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.store import StoreEvent, copy_of

# JobSet condition type → (PathwaysJob condition type, message prefix, terminal state)
_MIRROR = {
    "StartupPolicyInProgress": ("Pending", "pathwaysJob pending : jobSet is getting created", None),
    "StartupPolicyCompleted": ("Running", "pathwaysJob running: jobSet is running", None),
    "Suspended": ("Suspended", "pathwaysJob suspended: ", None),
    "Completed": ("Completed", "pathwaysJob completed: ", "Completed"),
    "Failed": ("Failed", "pathwaysJob failed: ", "Failed"),
}


def mirrored_status(pathwaysjob_status: dict[str, Any], jobset: dict[str, Any]) -> dict[str, Any]:
    """The PathwaysJob status after seeing its JobSet: append-only timeline of the last condition."""
    status = copy_of(pathwaysjob_status)
    conditions = (jobset.get("status") or {}).get("conditions") or []
    if not conditions:
        return status
    last = conditions[-1]
    if last.get("status") != "True" or last.get("type") not in _MIRROR:
        return status
    kind, prefix, terminal = _MIRROR[last["type"]]
    if kind == "Suspended" and status.get("terminalState"):
        return status
    message = prefix if last["type"].startswith("StartupPolicy") else prefix + last.get("message", "")
    timeline = status.setdefault("conditions", [])
    if timeline and timeline[-1]["type"] == kind:
        return status
    for previous in timeline:
        previous["status"] = "False"
    timeline.append(
        {
            "type": kind,
            "status": "True",
            "reason": last.get("reason", kind),
            "message": message,
            "lastTransitionTime": last.get("lastTransitionTime", ""),
        }
    )
    if terminal:
        status["terminalState"] = terminal
    return status


class PathwaysJobController(Controller):
    name = "pathways-job-controller"

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.pathwaysjobs = self.kind("pathways-job.pathways.domain", "v1", "pathwaysjobs")
        self.jobsets = self.kind("jobset.x-k8s.io", "v1alpha2", "jobsets")

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.pathwaysjobs, self.jobsets)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        if event.kind.plural == "pathwaysjobs":
            return ((event.namespace, event.name),) if event.type != "DELETED" else ()
        return owner_keys(event, "PathwaysJob")

    async def reconcile(self, namespace: str, name: str) -> None:
        job = self.store.find(self.pathwaysjobs, namespace, name)
        if job is None:
            return
        status = job.get("status") or {}
        jobset = self.store.find(self.jobsets, namespace, name)
        if jobset is None:
            try:
                workload, user_pod_spec = workload_from_pathwaysjob(job)
            except InvalidWorkloadSpec as error:
                if status.get("terminalState") != "Failed":
                    self.set_status(self.pathwaysjobs, job, {**status, "terminalState": "Failed"})
                    self.event(job, "InvalidSpec", f"Invalid topology!!! {error}", type_="Warning")
                return
            manifest = render_jobset(
                workload,
                name=name,
                namespace=namespace,
                failure_policy=PATHWAYSJOB_FAILURE_POLICY,
                user_pod_spec=user_pod_spec,
            )
            manifest["metadata"]["ownerReferences"] = [owner_reference(job)]
            self.store.create(self.jobsets, manifest)
            self.event(job, "Created", f"created JobSet {name}")
            return
        self.set_status(self.pathwaysjobs, job, mirrored_status(status, jobset))
