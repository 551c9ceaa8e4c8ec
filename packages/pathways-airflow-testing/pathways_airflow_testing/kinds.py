"""The resource kinds the local cluster serves: data, not code per kind.

Built-in kinds are listed here; custom resources are served for the CRDs the cluster is started
with (or that are later created through the API, as ``kubectl apply -f crd.yaml`` does on a
real cluster). The kinds the provider needs are always known by name so that discovery and
``kubectl get pathwaysjobs`` work even without schemas; with a CRD's schema, objects that do not
match it are refused with 422 as on a real API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from pathways_airflow_testing.crds import ResourceKind


@dataclass(frozen=True)
class Kind:
    """One resource type at one group/version."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    categories: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    printer_columns: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one store per group/resource, whichever version it is read at."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def is_custom(self) -> bool:
        return self.group not in BUILTIN_GROUPS


_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

BUILTIN_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",), subresources=("status",)),
    Kind("", "v1", "Node", "nodes", namespaced=False, short_names=("no",), subresources=("status",)),
    Kind("", "v1", "Pod", "pods", short_names=("po",), subresources=("status", "log", "proxy", "eviction"), categories=("all",)),
    Kind("", "v1", "Event", "events", short_names=("ev",)),
    Kind("", "v1", "ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    Kind("", "v1", "Service", "services", short_names=("svc",), subresources=("status", "proxy"), categories=("all",)),
    Kind("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    Kind("", "v1", "Secret", "secrets"),
    Kind("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",)),
    Kind("batch", "v1", "Job", "jobs", subresources=("status",), categories=("all",)),
    Kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False, short_names=("pc",)),
    Kind("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    Kind(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short_names=("crd", "crds"),
        subresources=("status",),
    ),
    Kind(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        namespaced=False,
        verbs=("create",),
    ),
)

BUILTIN_GROUPS = frozenset(k.group for k in BUILTIN_KINDS)

# The custom resources the provider works with, known even before their CRDs are loaded.
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
"""Kueue's visibility API (``apis/visibility/v1beta2/types.go``): an aggregated API of read-only
``pendingworkloads`` subresources on LocalQueues and ClusterQueues, answered by the Kueue controller."""

KNOWN_CUSTOM_KINDS: tuple[Kind, ...] = (
    Kind("pathways-job.pathways.domain", "v1", "PathwaysJob", "pathwaysjobs", subresources=("status",)),
    Kind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", subresources=("status",)),
    Kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", short_names=("lws",), subresources=("status", "scale")),
    *(
        Kind("kueue.x-k8s.io", version, kind, plural, namespaced=namespaced, short_names=shorts, subresources=subs)
        for version in ("v1beta2", "v1beta1")
        for kind, plural, namespaced, shorts, subs in (
            ("Workload", "workloads", True, ("wl",), ("status",)),
            ("LocalQueue", "localqueues", True, ("queue", "queues", "lq"), ("status",)),
            ("ClusterQueue", "clusterqueues", False, ("cq",), ("status",)),
            ("ResourceFlavor", "resourceflavors", False, ("flavor", "flavors", "rf"), ()),
            ("WorkloadPriorityClass", "workloadpriorityclasses", False, (), ()),
        )
    ),
    Kind(VISIBILITY_GROUP, "v1beta2", "LocalQueue", "localqueues", subresources=("pendingworkloads",), verbs=("get",)),
    Kind(VISIBILITY_GROUP, "v1beta2", "ClusterQueue", "clusterqueues", namespaced=False, subresources=("pendingworkloads",), verbs=("get",)),
)


def kind_from_resource_kind(resource: ResourceKind, short_names: Iterable[str] = ()) -> Kind:
    return Kind(
        group=resource.group,
        version=resource.version,
        kind=resource.kind,
        plural=resource.plural,
        namespaced=resource.namespaced,
        short_names=tuple(short_names),
        subresources=("status",) if resource.has_status else (),
        schema=resource.schema,
        printer_columns=resource.printer_columns,
    )


class KindRegistry:
    """Every kind served, looked up by (group, version, plural) or by (apiVersion, kind)."""

    def __init__(self, kinds: Iterable[Kind] = ()):
        self._by_path: dict[tuple[str, str, str], Kind] = {}
        for kind in (*BUILTIN_KINDS, *KNOWN_CUSTOM_KINDS, *kinds):
            self.add(kind)

    def add(self, kind: Kind) -> None:
        """Serve ``kind``; a later definition (e.g. one carrying a schema) replaces an earlier one."""
        existing = self._by_path.get((kind.group, kind.version, kind.plural))
        if existing and not kind.short_names and existing.short_names:
            kind = replace(kind, short_names=existing.short_names)
        if existing and existing.subresources and not kind.subresources:
            kind = replace(kind, subresources=existing.subresources)
        self._by_path[(kind.group, kind.version, kind.plural)] = kind

    def add_crd(self, crd: Mapping[str, Any]) -> list[Kind]:
        """Serve every version of a ``CustomResourceDefinition`` object."""
        from pathways_airflow_testing.crds import kinds_from_crd

        shorts = crd.get("spec", {}).get("names", {}).get("shortNames", ())
        added = [kind_from_resource_kind(r, shorts) for r in kinds_from_crd(crd)]
        for kind in added:
            self.add(kind)
        return added

    def lookup(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> Kind | None:
        group, _, version = api_version.rpartition("/")
        return next(
            (k for k in self._by_path.values() if (k.group, k.version, k.kind) == (group, version, kind)),
            None,
        )

    def all(self) -> list[Kind]:
        return list(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        """``{group: [versions, preferred first]}`` for discovery (the core group is ``""``)."""
        found: dict[str, list[str]] = {}
        for kind in self._by_path.values():
            versions = found.setdefault(kind.group, [])
            if kind.version not in versions:
                versions.append(kind.version)
        return found

    def in_group_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self._by_path.values() if (k.group, k.version) == (group, version)]
