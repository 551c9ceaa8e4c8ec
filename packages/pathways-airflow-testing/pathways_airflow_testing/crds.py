"""Validate manifests against CustomResourceDefinition schemas, as the API server would.

The API server checks a custom resource against ``openAPIV3Schema`` and silently *prunes*
fields the schema does not know. A pruned field is a bug that never shows up as an error (a
misspelt ``podFailurePolicy`` would simply vanish), so validation here is strict by default:
unknown fields are errors, as with ``kubectl apply --validate=strict``.

CRDs are read from YAML files as their projects publish them (``kubectl apply``-able documents).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import jsonschema
import yaml

# CRDs run to megabytes of YAML: libyaml's loader reads them ten times faster where it exists.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ResourceKind:
    """One served version of a custom resource, with its schema."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema: Mapping[str, Any]
    has_status: bool
    printer_columns: tuple[Mapping[str, Any], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def kinds_from_crd(crd: Mapping[str, Any]) -> Iterator[ResourceKind]:
    """Every served version of a ``CustomResourceDefinition`` document."""
    spec = crd["spec"]
    names = spec["names"]
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        yield ResourceKind(
            group=spec["group"],
            version=version["name"],
            kind=names["kind"],
            plural=names["plural"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            schema=version.get("schema", {}).get("openAPIV3Schema", {"type": "object"}),
            has_status="status" in version.get("subresources", {}),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        )


def load_crds(paths: Iterable[str | Path]) -> dict[tuple[str, str], ResourceKind]:
    """CRDs from files or directories of YAML → ``{(apiVersion, kind): ResourceKind}``."""
    kinds: dict[tuple[str, str], ResourceKind] = {}
    for path in paths:
        path = Path(path)
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            for document in yaml.load_all(file.read_text(), Loader=_YAML_LOADER):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    for kind in kinds_from_crd(document):
                        kinds[(kind.api_version, kind.kind)] = kind
    return kinds


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which objects with declared properties reject unknown fields.

    Objects marked ``x-kubernetes-preserve-unknown-fields`` or with ``additionalProperties``
    keep accepting anything, as on the API server. ``metadata`` is left to the API server's own
    ObjectMeta rules.
    """

    def tighten(node: Any) -> Any:
        if isinstance(node, dict):
            node = {key: tighten(value) for key, value in node.items()}
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            return node
        if isinstance(node, list):
            return [tighten(item) for item in node]
        return node

    tightened = tighten(copy.deepcopy(dict(schema)))
    properties = tightened.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"type": "object"}
    return tightened


class SchemaValidator:
    """Validate manifests of the kinds in a set of CRDs; errors read as the API server's do."""

    def __init__(self, kinds: Mapping[tuple[str, str], ResourceKind], *, strict: bool = True):
        self.kinds = dict(kinds)
        self._validators: dict[tuple[str, str], jsonschema.Draft202012Validator] = {}
        self._strict = strict

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path], *, strict: bool = True) -> "SchemaValidator":
        return cls(load_crds(paths), strict=strict)

    def _validator(self, key: tuple[str, str]) -> jsonschema.Draft202012Validator:
        if key not in self._validators:
            schema = self.kinds[key].schema
            self._validators[key] = jsonschema.Draft202012Validator(
                strict_schema(schema) if self._strict else dict(schema)
            )
        return self._validators[key]

    def knows(self, manifest: Mapping[str, Any]) -> bool:
        return (manifest.get("apiVersion"), manifest.get("kind")) in self.kinds

    def errors(self, manifest: Mapping[str, Any]) -> list[str]:
        """Every schema violation as ``<path>: <message>``; empty when valid."""
        key = (manifest.get("apiVersion"), manifest.get("kind"))
        if key not in self.kinds:
            return [f"no CRD for apiVersion={key[0]!r} kind={key[1]!r}"]
        found = sorted(self._validator(key).iter_errors(dict(manifest)), key=lambda e: list(e.path))
        return [f"{'.'.join(str(p) for p in error.path) or '<root>'}: {error.message}" for error in found]
