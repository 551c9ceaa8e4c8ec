"""Kubernetes API URL paths → what is being asked for. Pure.

The API's paths are regular: ``/api/v1`` for the core group, ``/apis/<group>/<version>`` for the
rest, then ``[namespaces/<ns>/]<plural>[/<name>[/<subresource>[/<rest>]]]``. Parsing them
generically is what lets resource kinds be data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourcePath:
    """A request on a resource collection, one object, or one object's subresource."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    rest: str = ""
    """What follows the subresource (the path a ``proxy`` request forwards)."""
    legacy_watch: bool = False


@dataclass(frozen=True)
class DiscoveryPath:
    """``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>`` or ``/apis/<group>/<version>``."""

    group: str | None
    version: str | None
    legacy: bool


def parse_api_path(path: str) -> ResourcePath | DiscoveryPath | None:
    """Parse a request path; ``None`` for paths outside the resource API (e.g. ``/version``)."""
    parts = [p for p in path.split("/") if p != ""]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        if len(parts) == 1:
            return DiscoveryPath(None, None, legacy=True)
        group, version, rest = "", parts[1], parts[2:]
        if not rest:
            return DiscoveryPath("", version, legacy=True)
    else:
        if len(parts) == 1:
            return DiscoveryPath(None, None, legacy=False)
        if len(parts) == 2:
            return DiscoveryPath(parts[1], None, legacy=False)
        group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            return DiscoveryPath(group, version, legacy=False)
    legacy_watch = False
    if rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
        if not rest:
            return None
    namespace = None
    # "namespaces/<ns>/<plural>/..." is a namespaced resource; "namespaces/<name>[/status]" is a Namespace.
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    remainder = "/".join(rest[3:])
    if path.endswith("/") and subresource == "proxy":
        remainder += "/"
    return ResourcePath(group, version, plural, namespace, name, subresource, remainder, legacy_watch)
