"""Discovery documents (``/api``, ``/apis``, resource lists). Pure: built from the kind registry.

``kubectl`` and the dynamic client learn every resource from these; ``kubectl get pj`` works
because short names are listed here.
"""

from __future__ import annotations

from typing import Any

from pathways_airflow_testing.kinds import Kind, KindRegistry

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4-gke.pathways-airflow-local",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(kinds: KindRegistry) -> dict[str, Any]:
    groups = [_group(name, versions) for name, versions in sorted(kinds.groups().items()) if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(kinds: KindRegistry, name: str) -> dict[str, Any] | None:
    versions = kinds.groups().get(name)
    return _group(name, versions) if versions else None


def _resource_entries(kind: Kind) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    entries = [entry]
    for sub in kind.subresources:
        verbs = {"status": ["get", "patch", "update"], "log": ["get"], "proxy": ["create", "delete", "get", "patch", "update"]}
        sub_kind = {"log": "Pod", "proxy": kind.kind, "eviction": "Eviction", "scale": "Scale"}.get(sub, kind.kind)
        entries.append(
            {
                "name": f"{kind.plural}/{sub}",
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": sub_kind,
                "verbs": verbs.get(sub, ["create"] if sub == "eviction" else ["get", "patch", "update"]),
            }
        )
    return entries


def resource_list(kinds: KindRegistry, group: str, version: str) -> dict[str, Any] | None:
    served = kinds.in_group_version(group, version)
    if not served:
        return None
    group_version = f"{group}/{version}" if group else version
    resources = [entry for kind in sorted(served, key=lambda k: k.plural) for entry in _resource_entries(kind)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _definition_name(kind: Kind) -> str:
    group = ".".join(reversed(kind.group.split("."))) if kind.group else "core"
    return f"{group}.{kind.version}.{kind.kind}"


def _group_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_v3_index(kinds: KindRegistry) -> dict[str, Any]:
    """``/openapi/v3``: where each group version's document is (kubectl fetches them lazily)."""
    paths = {}
    for group, versions in sorted(kinds.groups().items()):
        for version in versions:
            path = _group_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash=local"}
    return {"paths": paths}


def openapi_v3_group(kinds: KindRegistry, group: str, version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group version.

    kubectl reads it to learn that the server validates fields itself (the ``fieldValidation``
    and ``dryRun`` parameters on PATCH), so ``kubectl apply`` asks the server for strict
    validation instead of validating client-side. Custom resources carry their CRD schema
    (``kubectl explain``); built-in kinds only their name.
    """
    served = kinds.in_group_version(group, version)
    if not served:
        return None
    parameters = [{"name": n, "in": "query", "schema": {"type": "string"}} for n in ("dryRun", "fieldManager", "fieldValidation")]
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for kind in served:
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        ref = {"$ref": f"#/components/schemas/{_definition_name(kind)}"}
        root = "/" + _group_path(group, version)
        collection = f"{root}/namespaces/{{namespace}}/{kind.plural}" if kind.namespaced else f"{root}/{kind.plural}"

        def operation(action: str) -> dict[str, Any]:
            return {
                "operationId": f"{action}{kind.kind}",
                "parameters": parameters,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            }

        paths[collection] = {"post": operation("post")}
        paths[f"{collection}/{{name}}"] = {"patch": operation("patch"), "put": operation("put")}
        schema = dict(kind.schema) if kind.schema else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        schema["x-kubernetes-group-version-kind"] = [gvk]
        schemas[_definition_name(kind)] = schema
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }
