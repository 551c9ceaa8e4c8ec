"""Authentication by bearer token and, optionally, RBAC as the API server enforces it.

Off by default (every request is the cluster admin). In RBAC mode a request is allowed only if a
Role or ClusterRole bound to its user or service account grants the verb on the resource — the
same evaluation as Kubernetes' RBAC authorizer, so a Role that works here works on GKE. The
decision itself is the pure function :func:`rules_allow`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pathways_airflow_testing.errors import ApiError, forbidden
from pathways_airflow_testing.kinds import Kind

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()


def rule_allows(
    rule: Mapping[str, Any], verb: str, group: str, resource: str, name: str | None
) -> bool:
    """One PolicyRule against one request (``resource`` may be ``plural/subresource``)."""
    if verb not in rule.get("verbs", ()) and "*" not in rule.get("verbs", ()):
        return False
    groups = rule.get("apiGroups", ())
    if group not in groups and "*" not in groups:
        return False
    resources = rule.get("resources", ())
    plural = resource.split("/", 1)[0]
    if resource not in resources and "*" not in resources and f"{plural}/*" not in resources:
        return False
    names = rule.get("resourceNames") or ()
    return not names or (name is not None and name in names)


def _subject_matches(subject: Mapping[str, Any], user: UserInfo, namespace: str | None) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return user.name == f"system:serviceaccount:{sa_namespace}:{subject.get('name')}"
    return False


def rules_allow(
    user: UserInfo,
    verb: str,
    group: str,
    resource: str,
    namespace: str | None,
    name: str | None,
    *,
    roles: Iterable[Mapping[str, Any]],
    cluster_roles: Iterable[Mapping[str, Any]],
    role_bindings: Iterable[Mapping[str, Any]],
    cluster_role_bindings: Iterable[Mapping[str, Any]],
) -> bool:
    """Kubernetes RBAC: any bound rule that grants the request allows it; nothing else does."""
    if ADMIN_GROUP in user.groups:
        return True
    roles_by_key = {(r["metadata"].get("namespace"), r["metadata"]["name"]): r for r in roles}
    cluster_by_name = {r["metadata"]["name"]: r for r in cluster_roles}

    def granted(role: Mapping[str, Any] | None) -> bool:
        return role is not None and any(
            rule_allows(rule, verb, group, resource, name) for rule in role.get("rules") or ()
        )

    for binding in cluster_role_bindings:
        if any(_subject_matches(s, user, None) for s in binding.get("subjects") or ()):
            if granted(cluster_by_name.get(binding["roleRef"]["name"])):
                return True
    if namespace is None:
        return False
    for binding in role_bindings:
        if binding["metadata"].get("namespace") != namespace:
            continue
        if not any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or ()):
            continue
        ref = binding["roleRef"]
        role = cluster_by_name.get(ref["name"]) if ref["kind"] == "ClusterRole" else roles_by_key.get((namespace, ref["name"]))
        if granted(role):
            return True
    return False


@dataclass
class Authorizer:
    """Tokens → users, and the RBAC switch. ``admin_token`` always works (kubectl, tests)."""

    store: Any = None
    enforce_rbac: bool = False
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    tokens: dict[str, UserInfo] = field(default_factory=dict)

    def add_service_account_token(self, namespace: str, name: str) -> str:
        token = secrets.token_hex(16)
        self.tokens[token] = UserInfo(f"system:serviceaccount:{namespace}:{name}", ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))
        return token

    def authenticate(self, header: str | None) -> UserInfo:
        token = header[7:] if header and header.startswith("Bearer ") else None
        if token == self.admin_token:
            return UserInfo(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        if token in self.tokens:
            return self.tokens[token]
        if not self.enforce_rbac:
            return UserInfo(ADMIN_USER, (ADMIN_GROUP, "system:authenticated"))
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def authorize(
        self, user: UserInfo, verb: str, kind: Kind, namespace: str | None, name: str | None, subresource: str | None
    ) -> None:
        if not self.enforce_rbac or ADMIN_GROUP in user.groups:
            return
        if kind.key == ("authorization.k8s.io", "selfsubjectaccessreviews"):
            return
        rbac = {plural: self.store.list(self.store.kinds.lookup("rbac.authorization.k8s.io", "v1", plural)) for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")}
        resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
        if not rules_allow(
            user,
            verb,
            kind.group,
            resource,
            namespace,
            name,
            roles=rbac["roles"],
            cluster_roles=rbac["clusterroles"],
            role_bindings=rbac["rolebindings"],
            cluster_role_bindings=rbac["clusterrolebindings"],
        ):
            raise forbidden(user.name, verb, kind.group, resource, namespace, name)
