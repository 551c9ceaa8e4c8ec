"""The Kubernetes resources the provider touches, and their REST paths. Pure.

One generic path builder instead of a client method per kind: the hooks speak to every kind
through the same five verbs and get plain JSON dicts back, which is what the pure ``state``
core reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    propagation: str = "Foreground"
    """How a DELETE of one hands its dependents over: foreground, so the owner stays (marked) until
    its pods are gone, unless its controller would bring a dependent back (:data:`PATHWAYSJOB`)."""

    def delete_body(self, propagation: str | None = None, uid: str | None = None) -> dict[str, Any]:
        """A DELETE's body: ``propagation``, or by default this resource's :attr:`propagation`;
        with ``uid``, only the object of that uid (``preconditions``: apimachinery ``DeleteOptions``)."""
        return {"propagationPolicy": propagation or self.propagation, **({"preconditions": {"uid": uid}} if uid else {})}

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """``/apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>[/<subresource>]]``."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


PATHWAYSJOB = Resource("pathways-job.pathways.domain", "v1", "pathwaysjobs", "PathwaysJob", propagation="Background")
"""Deleted in the background: google/pathways-job's controller creates the child JobSet whenever
the PathwaysJob exists and the JobSet does not, whatever its deletionTimestamp or terminal state
(internal/controller/pathwaysjob_controller.go, ``Reconcile``). A foreground delete keeps the
PathwaysJob until its JobSet is gone, and the JobSet's removal wakes that controller: it would
create the JobSet again. Gone at once, the PathwaysJob has nothing left to re-create its JobSet
from, and the JobSet is the collector's (or :mod:`~pathways_airflow.hooks.reclaim`'s) to delete."""
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
LEADERWORKERSET = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
KUEUE_WORKLOAD = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
LOCAL_QUEUE = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
CLUSTER_QUEUE = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
PENDING_IN_LOCAL_QUEUE = Resource("visibility.kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
"""Kueue's visibility API (``apis/visibility/v1beta2``): ``.path(namespace, queue, "pendingworkloads")``."""
JOB = Resource("batch", "v1", "jobs", "Job")
POD = Resource("", "v1", "pods", "Pod")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENT = Resource("", "v1", "events", "Event")
SERVICE = Resource("", "v1", "services", "Service")

WORKLOAD_KINDS = (PATHWAYSJOB, JOBSET)
"""What a training workload is, by backend: each runs a JobSet whose pods hold the slices."""

BY_KIND = {r.kind: r for r in (PATHWAYSJOB, JOBSET, LEADERWORKERSET, KUEUE_WORKLOAD, JOB, POD, NODE, EVENT, SERVICE)}


def resource_of(manifest: dict) -> Resource:
    """The resource a manifest creates; a clear error for a kind the provider does not manage."""
    kind = manifest.get("kind", "")
    resource = BY_KIND.get(kind)
    if resource is None or resource.api_version != manifest.get("apiVersion"):
        raise ValueError(
            f"kind={kind!r} apiVersion={manifest.get('apiVersion')!r}: not a resource this provider manages; "
            f"valid: {', '.join(f'{r.api_version} {r.kind}' for r in BY_KIND.values())}"
        )
    return resource


ObjectRef = tuple[Resource, str, str]
"""``(resource, namespace, name)`` of one object on the cluster."""


def workload_resource(backend: str) -> Resource:
    return PATHWAYSJOB if backend == "pathwaysjob" else JOBSET
