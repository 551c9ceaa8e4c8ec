"""PATCH bodies applied the way the Kubernetes API server applies them.

``kubectl`` and the Python clients send three kinds of patch; the local cluster must apply each
exactly as a real API server would, and refuse what a real server refuses, so a test that passes
against the local cluster also passes on GKE. All functions here are pure: inputs are never
mutated, results never share structure with them.

* ``application/merge-patch+json`` -- RFC 7386 (``merge_patch``).
* ``application/json-patch+json`` -- RFC 6902 (``json_patch``).
* ``application/strategic-merge-patch+json`` -- Kubernetes' strategic merge patch
  (``strategic_merge_patch``), built-in kinds only: custom resources answer 415.
* ``application/apply-patch+yaml`` / ``+cbor`` (server-side apply) -- not supported: 415.

What the clients send (kubernetes 36.0.3 and kubernetes_asyncio 36.1.0 as installed, checked by
reading ``select_header_content_type`` / ``rest.py`` and by capturing real requests):

==============================================  ==========================  ==========================
call                                            dict body                   list body
==============================================  ==========================  ==========================
kubernetes ``CoreV1Api.patch_namespaced_pod``   strategic-merge-patch+json  json-patch+json
  (every built-in ``patch_*``)                  (``rest.py`` rewrites the
                                                 json-patch+json the API
                                                 client picked)
kubernetes_asyncio ``patch_namespaced_pod``     strategic-merge-patch+json  json-patch+json
kubernetes ``CustomObjectsApi.patch_*``         merge-patch+json            merge-patch+json (!)
kubernetes_asyncio ``CustomObjectsApi.patch_*`` json-patch+json (!)         json-patch+json
==============================================  ==========================  ==========================

The two (!) combinations fail on a real API server, and therefore fail here too, with a message
naming the fix: pass ``_content_type="application/json-patch+json"`` (sync client, list body) or
``_content_type="application/merge-patch+json"`` (asyncio client, dict body); both clients
honour ``_content_type``. A list sent as a merge patch replaces the whole object (RFC 7386),
which the server refuses with 422; an object sent as a JSON patch cannot be decoded: 400.

``kubectl`` (v1.32, captured): ``label``/``annotate`` send merge patches for every kind;
``patch`` defaults to strategic (415 on custom resources, as on a real cluster);
client-side ``apply`` sends a three-way strategic merge patch with ``$setElementOrder`` and
``$deleteFromPrimitiveList`` directives for built-ins and a merge patch for custom resources.

HTTP status on ``PatchError.status`` follows the API server: 400 for bodies that cannot be
decoded, 415 for unsupported media types, 413 for more than 10000 JSON patch operations, 422
for JSON patch operations that do not apply (including a failed ``test``) and for results that
are not objects, and 500 for malformed strategic merge patches the server rejects as internal
errors (e.g. a list element without its merge key).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = [
    "APPLY_PATCH_CBOR",
    "APPLY_PATCH_YAML",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
    "strategic_merge_kinds",
    "supports_strategic_merge",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH_YAML = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"

_REASONS = {
    400: "BadRequest",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
}


class PatchError(ValueError):
    """A patch the API server would refuse; ``status`` is the HTTP code it answers with."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status

    @property
    def reason(self) -> str:
        """The ``Status.reason`` a Kubernetes API server puts beside ``status``."""
        return _REASONS.get(self.status, "Unknown")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


# --- RFC 7386 merge patch ---------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a member, anything else replaces.

    A patch that is not an object replaces the whole target (``apply_patch`` then refuses a
    non-object result, as the API server does).
    """
    return _merge_into(copy.deepcopy(target), patch)


def _merge_into(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_into(result.get(key), value)
    return result


# --- RFC 6902 JSON patch ----------------------------------------------------------------------------

_MAX_JSON_PATCH_OPERATIONS = 10000  # the API server's limit; more answers 413
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE = re.compile(r"~(?![01])")


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers compare by value, but ``true`` is not ``1`` (unlike Python's ``==``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _pointer(pointer: Any, what: str) -> list[str]:
    """RFC 6901: ``""`` is the whole document; ``~1`` is ``/`` and ``~0`` is ``~``."""
    if not isinstance(pointer, str):
        raise PatchError(f'"{what}" must be a string JSON pointer, got {_compact(pointer)}', 400)
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'"{what}" {pointer!r} is not a JSON pointer: it must be "" or start with "/"')
    if _BAD_ESCAPE.search(pointer):
        raise PatchError(
            f'"{what}" {pointer!r} has a "~" not followed by 0 or 1 (write "~0" for "~", "~1" for "/")'
        )
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _render(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _index(container: list, token: str, tokens: list[str], *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchError(f"{_render(tokens)}: {token!r} is not an array index")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(
            f"{_render(tokens)}: index {index} is out of range (the array has {len(container)} items)"
        )
    return index


def _get(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for depth, token in enumerate(tokens):
        here = tokens[: depth + 1]
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"{_render(here)} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, here, allow_end=False)]
        else:
            parent = _render(tokens[:depth]) or "the document"
            raise PatchError(f"{_render(here)} does not exist: {parent} is not a container")
    return node


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1])
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], tokens, allow_end=True), value)
    else:
        raise PatchError(f"cannot add {_render(tokens)}: its parent is not an object or array")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1])
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise PatchError(f"cannot remove {_render(tokens)}: it does not exist")
        del parent[tokens[-1]]
    elif isinstance(parent, list):
        del parent[_index(parent, tokens[-1], tokens, allow_end=False)]
    else:
        raise PatchError(f"cannot remove {_render(tokens)}: its parent is not an object or array")
    return doc


def _replace(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1])
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise PatchError(f"cannot replace {_render(tokens)}: it does not exist (use op \"add\")")
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent[_index(parent, tokens[-1], tokens, allow_end=False)] = value
    else:
        raise PatchError(f"cannot replace {_render(tokens)}: its parent is not an object or array")
    return doc


def _value(operation: Mapping[str, Any]) -> Any:
    if "value" not in operation:
        raise PatchError(f'operation "{operation.get("op")}" needs a "value"')
    return copy.deepcopy(operation["value"])


def _apply_operation(doc: Any, operation: Mapping[str, Any]) -> Any:
    op = operation.get("op")
    if not isinstance(op, str) and op is not None:
        raise PatchError(f'"op" must be a string, got {_compact(op)}', 400)
    if "path" not in operation:
        raise PatchError("operation is missing \"path\"")
    path = _pointer(operation["path"], "path")
    if op == "add":
        return _add(doc, path, _value(operation))
    if op == "remove":
        return _remove(doc, path)
    if op == "replace":
        return _replace(doc, path, _value(operation))
    if op == "test":
        expected = _value(operation)
        actual = _get(doc, path)
        if not _json_equal(actual, expected):
            raise PatchError(
                f"test failed: {operation['path']} is {_compact(actual)}, not {_compact(expected)}"
            )
        return doc
    if op in ("move", "copy"):
        if "from" not in operation:
            raise PatchError(f'operation "{op}" is missing "from"')
        source = _pointer(operation["from"], "from")
        value = _get(doc, source)
        if op == "copy":
            return _add(doc, path, copy.deepcopy(value))
        if path == source:
            return doc
        if path[: len(source)] == source:
            raise PatchError(f"cannot move {_render(source)} into its own child {_render(path)}")
        return _add(_remove(doc, source), path, value)
    raise PatchError(
        f"unknown JSON patch operation {_compact(op)}: use add, remove, replace, move, copy or test"
    )


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, applied atomically to a copy of ``target``.

    Array indexes are strict RFC (no negative or zero-padded indexes); ``-`` appends on ``add``.
    """
    if not isinstance(operations, list):
        got = "null" if operations is None else type(operations).__name__
        raise PatchError(
            "error decoding patch: a JSON patch (Content-Type application/json-patch+json) must be a "
            f"JSON array of operations, got {got}",
            400,
        )
    if len(operations) > _MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            f"The allowed maximum operations in a JSON patch is {_MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(operations)}",
            413,
        )
    doc = copy.deepcopy(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, Mapping):
            raise PatchError(
                f"error decoding patch: operation {number} is not an object: {_compact(operation)}", 400
            )
        try:
            doc = _apply_operation(doc, operation)
        except PatchError as error:
            message = f"JSON patch operation {number} {_compact(operation)}: {error}"
            raise PatchError(message, error.status) from None
    return doc


# --- strategic merge patch: which fields merge by which key ------------------------------------------


@dataclass(frozen=True)
class _Field:
    """Patch metadata of one field, from the ``patchStrategy``/``patchMergeKey`` struct tags."""

    strategy: str = ""  # "merge", "replace", or "" (maps merge, lists replace)
    merge_key: str = ""  # for lists of objects with strategy "merge"
    struct: str | None = None  # the struct of the value (of each element, for lists)


_PLAIN = _Field()


def _merge_by(key: str, struct: str | None = None) -> _Field:
    return _Field("merge", key, struct)


def _child(struct: str) -> _Field:
    return _Field(struct=struct)


_CONDITIONS = {"conditions": _merge_by("type")}

# Only fields with a patch strategy, and the path down to them, are listed; everything else follows
# the defaults. Tags from k8s.io/api (core, apps, batch, policy) and apimachinery's ObjectMeta.
_STRUCTS: dict[str, dict[str, _Field]] = {
    "ObjectMeta": {"finalizers": _Field("merge"), "ownerReferences": _merge_by("uid")},
    "Object": {"metadata": _child("ObjectMeta")},
    "ObjectWithConditions": {"metadata": _child("ObjectMeta"), "status": _child("ConditionsStatus")},
    "ConditionsStatus": _CONDITIONS,
    "Pod": {"metadata": _child("ObjectMeta"), "spec": _child("PodSpec"), "status": _child("PodStatus")},
    "PodTemplate": {"metadata": _child("ObjectMeta"), "template": _child("PodTemplateSpec")},
    "PodTemplateSpec": {"metadata": _child("ObjectMeta"), "spec": _child("PodSpec")},
    "PodSpec": {
        "volumes": _merge_by("name"),  # merge,retainKeys: $retainKeys is honoured wherever it appears
        "initContainers": _merge_by("name", "Container"),
        "containers": _merge_by("name", "Container"),
        "ephemeralContainers": _merge_by("name", "Container"),
        "imagePullSecrets": _merge_by("name"),
        "hostAliases": _merge_by("ip"),
        "topologySpreadConstraints": _merge_by("topologyKey"),
        "schedulingGates": _merge_by("name"),
        "resourceClaims": _merge_by("name"),
        # tolerations, readinessGates, ...: no strategy upstream, so a patch replaces them whole.
    },
    "Container": {
        "ports": _merge_by("containerPort"),
        "env": _merge_by("name"),
        "volumeMounts": _merge_by("mountPath"),
        "volumeDevices": _merge_by("devicePath"),
        # envFrom, args, command, resizePolicy: replaced whole.
    },
    "PodStatus": {
        **_CONDITIONS,
        "podIPs": _merge_by("ip"),
        "hostIPs": _merge_by("ip"),
        "resourceClaimStatuses": _merge_by("name"),
        # containerStatuses and friends: replaced whole.
    },
    "Job": {
        "metadata": _child("ObjectMeta"),
        "spec": _child("JobSpec"),
        "status": _child("ConditionsStatus"),
    },
    "JobSpec": {"template": _child("PodTemplateSpec")},
    "CronJob": {"metadata": _child("ObjectMeta"), "spec": _child("CronJobSpec")},
    "CronJobSpec": {"jobTemplate": _child("JobTemplateSpec")},
    "JobTemplateSpec": {"metadata": _child("ObjectMeta"), "spec": _child("JobSpec")},
    "Workload": {
        "metadata": _child("ObjectMeta"),
        "spec": _child("WorkloadSpec"),
        "status": _child("ConditionsStatus"),
    },
    "WorkloadSpec": {"template": _child("PodTemplateSpec")},
    "Service": {
        "metadata": _child("ObjectMeta"),
        "spec": _child("ServiceSpec"),
        "status": _child("ConditionsStatus"),
    },
    "ServiceSpec": {"ports": _merge_by("port")},
    "Node": {"metadata": _child("ObjectMeta"), "spec": _child("NodeSpec"), "status": _child("NodeStatus")},
    "NodeSpec": {"podCIDRs": _Field("merge")},  # taints: replaced whole
    "NodeStatus": {**_CONDITIONS, "addresses": _merge_by("type")},
    "ServiceAccount": {"metadata": _child("ObjectMeta"), "secrets": _merge_by("name")},
    "PodDisruptionBudget": {
        "metadata": _child("ObjectMeta"),
        "spec": _child("PodDisruptionBudgetSpec"),
        "status": _child("ConditionsStatus"),
    },
    "PodDisruptionBudgetSpec": {"selector": _Field("replace")},
}

# kind -> the struct its objects are. Kinds not listed get only the ObjectMeta rules
# (ConfigMap, Secret, Event, Role, Lease, PriorityClass, ...).
_KIND_STRUCTS: dict[str, str] = {
    "Pod": "Pod",
    "PodTemplate": "PodTemplate",
    "Job": "Job",
    "CronJob": "CronJob",
    "Deployment": "Workload",
    "ReplicaSet": "Workload",
    "StatefulSet": "Workload",
    "DaemonSet": "Workload",
    "ReplicationController": "Workload",
    "Service": "Service",
    "Node": "Node",
    "Namespace": "ObjectWithConditions",
    "PersistentVolumeClaim": "ObjectWithConditions",
    "HorizontalPodAutoscaler": "ObjectWithConditions",
    "ServiceAccount": "ServiceAccount",
    "PodDisruptionBudget": "PodDisruptionBudget",
}

# API groups served by kube-apiserver itself, whose types carry strategic merge metadata. Exact
# names: several custom resource groups also end in ".k8s.io" (metrics.k8s.io,
# gateway.networking.k8s.io, snapshot.storage.k8s.io) and do not support strategic merge patch.
_BUILTIN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)


def supports_strategic_merge(group: str) -> bool:
    """True for built-in API groups; custom resources answer 415 to a strategic merge patch."""
    return group in _BUILTIN_GROUPS


def strategic_merge_kinds() -> frozenset[str]:
    """Kinds with list-merge rules beyond ObjectMeta's (finalizers, ownerReferences)."""
    return frozenset(_KIND_STRUCTS)


def _field(struct: str | None, key: str) -> _Field:
    if struct is None:
        return _PLAIN
    return _STRUCTS.get(struct, {}).get(key, _PLAIN)


# --- strategic merge patch: the algorithm (k8s.io/apimachinery/pkg/util/strategicpatch) -------------

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList"


def _kind_of(value: Any) -> str:
    """The Go type a decoded JSON value has on the server (ints and floats differ, as there)."""
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    return type(value).__name__  # str, bool, int, float


def _scalar_key(value: Any) -> tuple[str, Any]:
    """Hashable identity with Go's interface equality: ``1``, ``1.0`` and ``true`` all differ."""
    kind = _kind_of(value)
    return (kind, _compact(value) if kind in ("map", "list") else value)


def _is_directive(key: str) -> bool:
    return key in (_PATCH, _RETAIN_KEYS) or key.startswith((_SET_ORDER + "/", _DELETE_PRIMITIVE + "/"))


def _directive_target(key: str, prefix: str) -> str:
    head, sep, target = key.partition("/")
    if head != prefix or not sep:
        which = "primitive list" if prefix == _DELETE_PRIMITIVE else "setElementOrder list"
        raise PatchError(f"invalid patch format of {which}: {key!r} must be {prefix}/<field>", 400)
    return target


def _discard_nulls(value: Any) -> Any:
    """Values added where nothing was before lose their nulls (nothing to delete there)."""
    if isinstance(value, dict):
        return {k: _discard_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_discard_nulls(v) for v in value]
    return value


_DROP = object()


def _remove_directives(value: Any) -> Any:
    """Added values keep no directives: a map holding ``$patch`` disappears entirely."""
    if isinstance(value, dict):
        if _PATCH in value:
            return _DROP
        kept = {k: _remove_directives(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not _DROP}
    if isinstance(value, list):
        return [v for v in (_remove_directives(item) for item in value) if v is not _DROP]
    return value


def _assign(target: dict, key: str, value: Any) -> None:
    cleaned = _remove_directives(_discard_nulls(value))
    if cleaned is _DROP:
        target.pop(key, None)
    else:
        target[key] = cleaned


def _as_typed_object(value: Any) -> Any:
    """What survives the server decoding the result into its Go type: directive keys nested in
    replaced or appended values are unknown fields (dropped) and null fields become absent."""
    if isinstance(value, dict):
        return {k: _as_typed_object(v) for k, v in value.items() if v is not None and not _is_directive(k)}
    if isinstance(value, list):
        return [_as_typed_object(v) for v in value]
    return value


def _merge_map(original: dict, patch: dict, struct: str | None) -> dict:
    """Merge ``patch`` into ``original``. Both are private copies and are modified in place."""
    if _PATCH in patch:
        directive = patch[_PATCH]
        if directive == "replace":
            return {k: v for k, v in patch.items() if k != _PATCH}
        if directive == "delete":
            return {}
        raise PatchError(
            f"unknown patch type: {directive} in map: {_compact(patch)} "
            '(a map takes "$patch": "replace" or "delete")',
            500,
        )
    _retain_keys(original, patch)
    _merge_ordered_lists(original, patch, struct)
    for key, value in list(patch.items()):
        deletion_list = key.startswith(_DELETE_PRIMITIVE)
        if deletion_list:
            key = _directive_target(key, _DELETE_PRIMITIVE)
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or _kind_of(original[key]) != _kind_of(value):
            if not deletion_list:
                _assign(original, key, value)
            continue
        meta = _field(struct, key)
        current = original[key]
        if isinstance(current, dict):
            original[key] = value if meta.strategy == "replace" else _merge_map(current, value, meta.struct)
        elif isinstance(current, list):
            if meta.strategy == "merge" or deletion_list:
                original[key] = _merge_list(current, value, meta, key, deletion_list)[0]
            else:
                original[key] = value
        else:
            _assign(original, key, value)
    return original


def _retain_keys(original: dict, patch: dict) -> None:
    """``$retainKeys``: clear every field of ``original`` the list does not name."""
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(
            f"invalid patch format of retainKeys: {_RETAIN_KEYS} must be a list of field names", 400
        )
    kept = {_scalar_key(k) for k in retain}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_PRIMITIVE, _SET_ORDER)):
            continue
        if _scalar_key(key) not in kept:
            raise PatchError(
                f"invalid patch format of retainKeys: the patch sets {key!r}, "
                f"which {_RETAIN_KEYS} does not list",
                400,
            )
    for key in [k for k in original if _scalar_key(k) not in kept]:
        del original[key]


def _element_kind(field: str, *lists: list) -> str | None:
    kinds = {_kind_of(item) for items in lists for item in items}
    if not kinds:
        return None
    if "list" in kinds:
        raise PatchError(f"lists of lists are not supported ({field})", 422)
    if len(kinds) > 1:
        raise PatchError(f"list element types are not identical in {field}: {sorted(kinds)}", 500)
    return kinds.pop()


def _merge_key_value(item: Any, merge_key: str, field: str) -> tuple[str, Any]:
    if not isinstance(item, dict):
        raise PatchError(
            f"{field}: expected a map in a list merged by {merge_key!r}, got {_compact(item)}", 500
        )
    if merge_key not in item:
        raise PatchError(
            f"map: {_compact(item)} does not contain declared merge key: {merge_key} ({field})", 500
        )
    return _scalar_key(item[merge_key])


def _identity(item: Any, merge_key: str, field: str) -> tuple[str, Any]:
    return _merge_key_value(item, merge_key, field) if merge_key else _scalar_key(item)


def _find(items: list, merge_key: str, wanted: tuple[str, Any], field: str) -> int:
    """Position of the first map whose merge key equals ``wanted``; -1 if none."""
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchError(f"{field}: value for key {position} is not a map", 500)
        if merge_key in item and _scalar_key(item[merge_key]) == wanted:
            return position
    return -1


def _merge_list(
    original: list, patch: list, meta: _Field, field: str, deletion_list: bool
) -> tuple[list, list]:
    """A list with strategy ``merge``: maps merge by ``meta.merge_key``, scalars form a set.

    Returns the merged list and the *server view*: the original list as upstream's caller still
    sees it afterwards. Upstream deletes list elements by shifting them inside the original Go
    slice and appends new ones into the freed slots, and ``$setElementOrder`` then places the
    server-only items by their index in that view. Modelling it keeps ``kubectl apply`` results
    (delete one env var, add another) in the same order as on a real cluster.
    """
    if not original and not patch:
        return original, original
    kind = _element_kind(field, original, patch)
    if kind != "map":
        if deletion_list:
            doomed = {_scalar_key(v) for v in patch}
            return [v for v in original if _scalar_key(v) not in doomed], original
        merged, seen = [], set()
        for item in original + patch:
            if _scalar_key(item) not in seen:
                seen.add(_scalar_key(item))
                merged.append(item)
        return _keep_order(merged, patch, original, "", field), original
    key = meta.merge_key
    if not key:
        raise PatchError(f"cannot merge lists without merge key for {field}", 500)
    view = list(original)
    remaining, plain, replace = _list_directives(view, patch, key, field)
    current = plain if replace else view[:remaining]
    additions = [] if replace else plain
    server_order = list(current)  # after deletions, before the patch's new items are appended
    for item in additions:
        wanted = _merge_key_value(item, key, field)
        position = _find(current, key, wanted, field)
        if position >= 0:
            current[position] = view[position] = _merge_map(current[position], item, meta.struct)
        else:
            if len(current) < len(view):
                view[len(current)] = item
            current.append(item)
    return _keep_order(current, additions, server_order, key, field), view


def _list_directives(view: list, patch: list, key: str, field: str) -> tuple[int, list, bool]:
    """Apply ``{"$patch": "delete", key: ...}`` list elements to ``view`` in place, shifting the
    survivors left as upstream does; note ``{"$patch": "replace"}``.

    Returns how many leading elements of ``view`` survive, the plain patch elements, and
    whether the patch replaces the list.
    """
    plain, replace, remaining = [], False, len(view)
    for item in patch:
        if _PATCH not in item:
            plain.append(item)
            continue
        directive = item[_PATCH]
        if directive == "delete":
            wanted = _merge_key_value(item, key, field)
            while (position := _find(view[:remaining], key, wanted, field)) >= 0:
                view[position : remaining - 1] = view[position + 1 : remaining]
                remaining -= 1
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError(f"merging lists cannot yet be specified in the patch ({field})", 500)
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {_compact(item)} ({field})", 500)
    return remaining, plain, replace


def _keep_order(merged: list, patch_order: list, server_order: list, key: str, field: str) -> list:
    """Items named by the patch come in the patch's order, interleaved with the items only the
    server has so that those keep their relative order (upstream ``normalizeElementOrder``)."""
    named = {_identity(item, key, field) for item in patch_order}
    from_patch = [item for item in merged if _identity(item, key, field) in named]
    server_only = [item for item in merged if _identity(item, key, field) not in named]
    patch_index = _positions(patch_order, key, field)
    server_index = _positions(server_order, key, field)
    from_patch.sort(key=lambda item: patch_index.get(_identity(item, key, field), -1))
    server_only.sort(key=lambda item: server_index.get(_identity(item, key, field), -1))
    result: list = []
    left, right = 0, 0
    while left < len(server_only) or right < len(from_patch):
        if right >= len(from_patch):
            result.append(server_only[left])
            left += 1
        elif left >= len(server_only):
            result.append(from_patch[right])
            right += 1
        else:
            li = server_index.get(_identity(server_only[left], key, field), -1)
            ri = server_index.get(_identity(from_patch[right], key, field), -1)
            if li >= 0 and ri >= 0 and li < ri:
                result.append(server_only[left])
                left += 1
            else:
                result.append(from_patch[right])
                right += 1
    return result


def _positions(items: Iterable[Any], key: str, field: str) -> dict[tuple[str, Any], int]:
    positions: dict[tuple[str, Any], int] = {}
    for position, item in enumerate(items):
        positions.setdefault(_identity(item, key, field), position)
    return positions


def _merge_ordered_lists(original: dict, patch: dict, struct: str | None) -> None:
    """``$setElementOrder/<field>``: merge ``<field>`` now and order it as the directive says.

    ``kubectl apply`` sends the full order of the list in the user's file, the list itself holding
    only changed items; items only the server has (e.g. injected env vars) keep their place.
    """
    for directive_key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(directive_key)
        field = _directive_target(directive_key, _SET_ORDER)
        if not isinstance(order, list):
            raise PatchError(
                f"invalid patch format of setElementOrder list: {directive_key} must be a list", 400
            )
        meta = _field(struct, field)
        in_original, in_patch = field in original, field in patch
        current, wanted = original.get(field), patch.get(field)
        for name, value, present in (
            ("the object's", current, in_original),
            ("the patch's", wanted, in_patch),
        ):
            if present and not isinstance(value, list):
                raise PatchError(f"{directive_key} orders {field}, but {name} {field} is not a list", 500)
        _check_order(wanted or [], order, meta.merge_key, directive_key)
        view = current or []
        if in_original and in_patch:
            if meta.strategy == "merge":
                merged, view = _merge_list(current, wanted, meta, field, False)
            else:
                merged = wanted
        elif in_patch:
            merged = _remove_directives(wanted)
        elif in_original:
            merged = current
        else:
            continue
        kind = _element_kind(field, current or [], wanted or [])
        if kind == "map" and not meta.merge_key:
            raise PatchError(
                f"{directive_key}: {field} is not a list merged by key, so it cannot be ordered", 500
            )
        original[field] = _keep_order(merged, order, view, meta.merge_key, field)
        patch.pop(field, None)


def _check_order(patch_list: list, order: list, key: str, directive_key: str) -> None:
    """Every item of the patch list must appear in ``$setElementOrder`` and in the same order."""
    if not patch_list or not order:
        return
    if key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise PatchError(f"{directive_key}: expected maps in the list, got {_compact(item)}", 500)
        items = [i for i in patch_list if i.get(_PATCH) != "delete"]
    else:
        items = patch_list
    pi = si = 0
    while pi < len(items) and si < len(order):
        if isinstance(items[pi], dict) and _PATCH in items[pi]:
            pi += 1
            continue
        if _identity(items[pi], key, directive_key) == _identity(order[si], key, directive_key):
            pi += 1
        si += 1
    if pi < len(items):
        raise PatchError(
            f"The order in patch list: {_compact(patch_list)} "
            f"doesn't match {_SET_ORDER} list: {_compact(order)}",
            500,
        )


def strategic_merge_patch(target: Mapping[str, Any], patch: Any, kind: str) -> dict:
    """Apply a Kubernetes strategic merge patch to an object of built-in ``kind``.

    Supported, as on the API server: ``null`` deletes; maps merge; lists whose field has patch
    strategy ``merge`` merge by their merge key (containers, initContainers, ephemeralContainers,
    env, volumes, imagePullSecrets by ``name``; container ports by ``containerPort``; service
    ports by ``port``; volumeMounts by ``mountPath``; conditions, node addresses by ``type``;
    ownerReferences by ``uid``; hostAliases, podIPs by ``ip``) or as sets of scalars
    (finalizers, node podCIDRs); every other list, tolerations and args included, is replaced.
    Directives: ``$patch: replace|delete`` in maps and list elements, ``$retainKeys``,
    ``$setElementOrder/<field>``, ``$deleteFromPrimitiveList/<field>``. ``$patch: merge`` is
    refused as the server refuses it. Pod templates inside Jobs, CronJobs and workloads follow
    the Pod rules; kinds not in ``strategic_merge_kinds()`` get the ObjectMeta rules only.
    Unknown fields merge with the defaults (the server would have dropped them on create).

    Order of merged lists, as upstream computes it (and the upstream test tables pin): items the
    patch names keep the patch's order; without ``$setElementOrder``, items new to the list come
    *before* the remaining existing ones (``kubectl patch`` adding a container puts it first).
    """
    if not isinstance(target, Mapping):
        raise PatchError(f"cannot patch {type(target).__name__}: the object must be a JSON object", 500)
    if not isinstance(patch, Mapping):
        shown = "array" if isinstance(patch, list) else _kind_of(patch)
        raise PatchError(
            f"json: cannot unmarshal {shown} into Go value of type map[string]interface {{}}: "
            "a strategic merge patch must be a JSON object "
            "(a list of operations is a JSON patch: application/json-patch+json)",
            400,
        )
    root = _KIND_STRUCTS.get(kind, "Object")
    merged = _merge_map(copy.deepcopy(dict(target)), copy.deepcopy(dict(patch)), root)
    return _as_typed_object(merged)


# --- Content-Type dispatch ---------------------------------------------------------------------------


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _decode(body: Any) -> Any:
    if isinstance(body, (bytes, bytearray)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as error:
            raise PatchError(f"the patch body is not UTF-8 JSON: {error}", 400) from None
    if isinstance(body, str):
        try:
            return json.loads(body)
        except json.JSONDecodeError as error:
            raise PatchError(f"the patch body is not valid JSON: {error}", 400) from None
    if body is None or isinstance(body, (dict, list)):
        return body
    raise PatchError(f"the patch body must be JSON text, a dict or a list, got {type(body).__name__}", 400)


def apply_patch(
    target: Mapping[str, Any],
    body: bytes | str | list | dict,
    content_type: str,
    kind: str,
    group: str,
) -> dict:
    """Apply a PATCH request body as the API server would for ``group``/``kind``.

    ``content_type`` is the request's Content-Type header (parameters such as ``charset`` are
    ignored). The result is always a JSON object; checking that it is still a valid object of its
    kind (name, namespace, schema) is the caller's job, as it is a separate step on the server.
    """
    media = _media_type(content_type)
    builtin = supports_strategic_merge(group)
    accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_MERGE_PATCH] if builtin else [])
    if media in (APPLY_PATCH_YAML, APPLY_PATCH_CBOR):
        raise PatchError(
            f"{media}: server-side apply is not supported by the local cluster; use client-side "
            "`kubectl apply` (the default, or --server-side=false) or send a merge, strategic merge "
            "or JSON patch",
            415,
        )
    if media not in accepted:
        where = f"{group}/{kind}" if group else kind
        hint = (
            f" ({where} is a custom resource: strategic merge patch is for built-in kinds; use "
            "kubectl patch --type=merge or --type=json)"
            if media == STRATEGIC_MERGE_PATCH
            else ""
        )
        raise PatchError(
            f"{media or 'no Content-Type'}: the body of the request was in an unknown format - accepted "
            f"media types include: {', '.join(accepted)}{hint}",
            415,
        )
    patch = _decode(body)
    if media == JSON_PATCH:
        if isinstance(patch, dict):
            raise PatchError(
                "error decoding patch: json: cannot unmarshal object into Go value of type "
                "[]handlers.jsonPatchOp: a JSON patch must be a list of operations. "
                "kubernetes_asyncio's CustomObjectsApi.patch_* labels a dict body "
                'application/json-patch+json: pass _content_type="application/merge-patch+json"',
                400,
            )
        result = json_patch(target, patch)
    elif media == MERGE_PATCH:
        if patch is None or not isinstance(patch, (dict, list)):
            raise PatchError(
                f"Invalid JSON Patch: a merge patch must be a JSON object, got {_compact(patch)}", 400
            )
        if isinstance(patch, list):
            raise PatchError(
                f'"" is invalid: patch: Invalid value: "{_compact(patch)[:200]}": '
                "couldn't get version/kind; json parse error: json: cannot unmarshal array into an "
                "object: a JSON array sent as a merge patch replaces the whole object (RFC 7386). "
                "To send a list of operations use application/json-patch+json: the kubernetes "
                "client's CustomObjectsApi.patch_* sends any body as a merge patch, so pass "
                '_content_type="application/json-patch+json"',
                422,
            )
        result = merge_patch(target, patch)
    else:
        result = strategic_merge_patch(target, patch, kind)
    if not isinstance(result, dict):
        raise PatchError(
            f'"" is invalid: patch: the patched document is {_kind_of(result)}, not an object: '
            "couldn't get version/kind",
            422,
        )
    return result
