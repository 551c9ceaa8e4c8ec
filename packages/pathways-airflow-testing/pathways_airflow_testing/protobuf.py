"""Kubernetes' protobuf encoding of request bodies, for the built-in kinds kubectl creates that way.

kubectl (client-go) sends ``application/vnd.kubernetes.protobuf`` bodies on its typed paths
(``create configmap``, ``create secret``, ``create namespace``, ``create serviceaccount``,
``create role``/``rolebinding``, …) and falls back to JSON only for CBOR, never for protobuf
(client-go ``rest/client.go``, ``UnsupportedMediaType``). So the local API server reads those
bodies and answers in JSON, which every client also accepts.

The wire format (k8s.io/apimachinery ``pkg/runtime/serializer/protobuf/protobuf.go``): the four
bytes ``k8s\\x00``, then a ``runtime.Unknown`` whose ``typeMeta`` names the kind and whose
``raw`` is the object's own message. The messages below carry the field numbers of
k8s.io/api ``core/v1`` and ``rbac/v1`` and k8s.io/apimachinery ``meta/v1`` and ``runtime``
``generated.proto``, for the fields a client sets when creating; the protobuf library skips the
rest (server-set timestamps, managed fields). A kind with no message here is refused with 415.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# message → fields: (name, number, type); type is a scalar, "Message", "[]T" (repeated) or
# "{T}" (map<string, T>).
MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    # k8s.io/apimachinery pkg/runtime
    "RuntimeTypeMeta": [("apiVersion", 1, "string"), ("kind", 2, "string")],
    "Unknown": [("typeMeta", 1, "RuntimeTypeMeta"), ("raw", 2, "bytes"), ("contentEncoding", 3, "string"), ("contentType", 4, "string")],
    # k8s.io/apimachinery pkg/apis/meta/v1
    "OwnerReference": [
        ("kind", 1, "string"), ("name", 3, "string"), ("uid", 4, "string"), ("apiVersion", 5, "string"),
        ("controller", 6, "bool"), ("blockOwnerDeletion", 7, "bool"),
    ],
    "ObjectMeta": [
        ("name", 1, "string"), ("generateName", 2, "string"), ("namespace", 3, "string"), ("uid", 5, "string"),
        ("resourceVersion", 6, "string"), ("labels", 11, "{string}"), ("annotations", 12, "{string}"),
        ("ownerReferences", 13, "[]OwnerReference"), ("finalizers", 14, "[]string"),
    ],
    "LabelSelectorRequirement": [("key", 1, "string"), ("operator", 2, "string"), ("values", 3, "[]string")],
    "LabelSelector": [("matchLabels", 1, "{string}"), ("matchExpressions", 2, "[]LabelSelectorRequirement")],
    # k8s.io/api core/v1
    "ConfigMap": [("metadata", 1, "ObjectMeta"), ("data", 2, "{string}"), ("binaryData", 3, "{bytes}"), ("immutable", 4, "bool")],
    "Secret": [
        ("metadata", 1, "ObjectMeta"), ("data", 2, "{bytes}"), ("type", 3, "string"), ("stringData", 4, "{string}"),
        ("immutable", 5, "bool"),
    ],
    "NamespaceSpec": [("finalizers", 1, "[]string")],
    "Namespace": [("metadata", 1, "ObjectMeta"), ("spec", 2, "NamespaceSpec")],
    "ObjectReference": [
        ("kind", 1, "string"), ("namespace", 2, "string"), ("name", 3, "string"), ("uid", 4, "string"),
        ("apiVersion", 5, "string"), ("resourceVersion", 6, "string"), ("fieldPath", 7, "string"),
    ],
    "LocalObjectReference": [("name", 1, "string")],
    "ServiceAccount": [
        ("metadata", 1, "ObjectMeta"), ("secrets", 2, "[]ObjectReference"), ("imagePullSecrets", 3, "[]LocalObjectReference"),
        ("automountServiceAccountToken", 4, "bool"),
    ],
    # k8s.io/api rbac/v1
    "PolicyRule": [
        ("verbs", 1, "[]string"), ("apiGroups", 2, "[]string"), ("resources", 3, "[]string"),
        ("resourceNames", 4, "[]string"), ("nonResourceURLs", 5, "[]string"),
    ],
    "AggregationRule": [("clusterRoleSelectors", 1, "[]LabelSelector")],
    "Role": [("metadata", 1, "ObjectMeta"), ("rules", 2, "[]PolicyRule")],
    "ClusterRole": [("metadata", 1, "ObjectMeta"), ("rules", 2, "[]PolicyRule"), ("aggregationRule", 3, "AggregationRule")],
    "Subject": [("kind", 1, "string"), ("apiGroup", 2, "string"), ("name", 3, "string"), ("namespace", 4, "string")],
    "RoleRef": [("apiGroup", 1, "string"), ("kind", 2, "string"), ("name", 3, "string")],
    "RoleBinding": [("metadata", 1, "ObjectMeta"), ("subjects", 2, "[]Subject"), ("roleRef", 3, "RoleRef")],
    "ClusterRoleBinding": [("metadata", 1, "ObjectMeta"), ("subjects", 2, "[]Subject"), ("roleRef", 3, "RoleRef")],
}

KINDS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
}
"""The kinds whose protobuf bodies are read: what kubectl's ``create`` subcommands make."""

READABLE_KINDS = ", ".join(kind for _, kind in KINDS)
"""The same kinds, for messages that say what the local cluster reads."""


class UnsupportedEncoding(ValueError):
    """A body the local API server cannot read: it answers 415 Unsupported Media Type."""


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == PROTOBUF


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (``apiVersion`` and ``kind`` included)."""
    from google.protobuf.message import DecodeError

    if not body.startswith(MAGIC):
        raise UnsupportedEncoding("the body does not start with the Kubernetes protobuf prefix 'k8s\\x00'")
    classes = _message_classes()
    try:
        envelope = classes["Unknown"].FromString(body[len(MAGIC):])
        api_version, kind = envelope.typeMeta.apiVersion, envelope.typeMeta.kind
        message = KINDS.get((api_version, kind))
        if message is None:
            raise UnsupportedEncoding(
                f"{api_version} {kind} in protobuf is not read by the local cluster (it reads "
                f"{READABLE_KINDS}); send application/json"
            )
        obj = classes[message].FromString(envelope.raw)
    except DecodeError as error:
        raise UnsupportedEncoding(f"the protobuf body could not be decoded: {error}") from None
    return {"apiVersion": api_version, "kind": kind, **as_json(obj)}


def as_json(message: Any) -> dict[str, Any]:
    """A message as the API server's JSON shows it after decoding it into Go structs.

    Go writes every plain string field to protobuf, empty ones too, and the JSON form omits them
    (``omitempty``): an empty string is dropped here, except as a map value (``data: {k: ""}``
    is a value). Bytes are base64, as in Kubernetes' JSON.
    """
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _scalar(value_field, v) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [as_json(v) if field.message_type is not None else _scalar(field, v) for v in value]
        elif field.message_type is not None:
            out[field.name] = as_json(value)
        elif value != "":
            out[field.name] = _scalar(field, value)
    return out


def _repeated(field: Any) -> bool:
    # protobuf 7 replaced FieldDescriptor.label with is_repeated; older releases have only label.
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _scalar(field: Any, value: Any) -> Any:
    return base64.b64encode(value).decode() if field.type == field.TYPE_BYTES else value


@lru_cache(maxsize=1)
def _message_classes() -> dict[str, Any]:
    """Message classes built once from the table (no generated code, no .proto files at run time)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    package = "pathways_airflow_testing.k8s"
    scalars = {
        "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    }
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    message_type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

    def set_type(field: Any, type_name: str) -> None:
        if type_name in scalars:
            field.type = scalars[type_name]
        else:
            field.type = message_type
            field.type_name = f".{package}.{type_name}"

    file = descriptor_pb2.FileDescriptorProto(name="pathways_airflow_testing_k8s.proto", package=package, syntax="proto2")
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, type_name in fields:
            field = message.field.add(name=field_name, number=number, json_name=field_name)
            if type_name.startswith("{"):
                entry_name = field_name[0].upper() + field_name[1:] + "Entry"
                entry = message.nested_type.add(name=entry_name)
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=optional, type=scalars["string"], json_name="key")
                value = entry.field.add(name="value", number=2, label=optional, json_name="value")
                set_type(value, type_name[1:-1])
                field.label = repeated
                field.type = message_type
                field.type_name = f".{package}.{name}.{entry_name}"
            elif type_name.startswith("[]"):
                field.label = repeated
                set_type(field, type_name[2:])
            else:
                field.label = optional
                set_type(field, type_name)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}")) for name in MESSAGES}
