"""Server-side printing: the ``Table`` that ``kubectl get`` asks for. Pure.

kubectl asks with ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the columns
the server chose: pods get READY, STATUS, RESTARTS, AGE (and IP, NODE with ``-o wide``), custom
resources the ``additionalPrinterColumns`` of their CRD. Ages are computed on the cluster's
clock, which may run faster than the wall clock.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Callable, Iterable, Mapping

from pathways_airflow_testing.kinds import Kind

Column = tuple[str, str, str, int]  # name, type, description, priority (1 = only with -o wide)


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's short durations: 45s, 3m12s, 5h3m, 2d4h."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60}m" if hours < 8 and minutes % 60 else f"{hours}h"
    return f"{hours // 24}d{hours % 24}h" if hours < 192 and hours % 24 else f"{hours // 24}d"


def age(obj: Mapping[str, Any], now: float) -> str:
    created = _parse_time(obj["metadata"].get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


_FILTER = re.compile(r"^\[\?\(@\.([A-Za-z0-9_]+)\s*==\s*[\"']([^\"']*)[\"']\)\]")
_INDEX = re.compile(r"^\[(\d+)\]")
_FIELD = re.compile(r"^\.([A-Za-z0-9_-]+)")


def json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: ``.a.b``, ``[0]``, ``[?(@.type=="X")]``."""
    values = [obj]
    rest = path.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    while rest and values:
        if match := _FIELD.match(rest):
            values = [v.get(match.group(1)) for v in values if isinstance(v, Mapping) and match.group(1) in v]
        elif match := _INDEX.match(rest):
            index = int(match.group(1))
            values = [v[index] for v in values if isinstance(v, list) and len(v) > index]
        elif match := _FILTER.match(rest):
            key, wanted = match.groups()
            values = [item for v in values if isinstance(v, list) for item in v if isinstance(item, Mapping) and str(item.get(key)) == wanted]
        else:
            return None
        rest = rest[match.end():]
    if not values:
        return None
    return values[0] if len(values) == 1 else ",".join(str(v) for v in values)


def _pod_row(pod: Mapping[str, Any], now: float) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    total = len(pod["spec"].get("containers") or [])
    shown = status.get("reason") or status.get("phase", "Pending")
    for container in statuses:
        state = container.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason") not in (None, "ContainerCreating"):
            shown = state["waiting"]["reason"]
        elif "terminated" in state and status.get("phase") not in ("Succeeded",):
            shown = state["terminated"].get("reason") or shown
    if status.get("phase") == "Succeeded":
        shown = "Completed"
    if pod["metadata"].get("deletionTimestamp"):
        shown = "Terminating"
    restarts = sum(c.get("restartCount", 0) for c in statuses)
    return [pod["metadata"]["name"], f"{ready}/{total}", shown, restarts, age(pod, now), status.get("podIP") or "<none>", pod["spec"].get("nodeName") or "<none>"]


def _node_row(node: Mapping[str, Any], now: float) -> list[Any]:
    conditions = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or ()}
    ready = "Ready" if conditions.get("Ready") == "True" else "NotReady"
    if node.get("spec", {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [node["metadata"]["name"], ready, "<none>", age(node, now), info.get("kubeletVersion", "")]


def _job_row(job: Mapping[str, Any], now: float) -> list[Any]:
    status = job.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
    state = "Complete" if conditions.get("Complete") == "True" else "Failed" if conditions.get("Failed") == "True" else "Suspended" if job["spec"].get("suspend") else "Running"
    completions = job["spec"].get("completions", 1)
    start, end = _parse_time(status.get("startTime")), _parse_time(status.get("completionTime"))
    duration = human_duration((end or now) - start) if start else ""
    return [job["metadata"]["name"], state, f"{status.get('succeeded', 0)}/{completions}", duration, age(job, now)]


_BUILTIN: dict[tuple[str, str], tuple[list[Column], Callable[[Mapping[str, Any], float], list[Any]]]] = {
    ("", "pods"): (
        [("Name", "string", "", 0), ("Ready", "string", "", 0), ("Status", "string", "", 0), ("Restarts", "integer", "", 0), ("Age", "string", "", 0), ("IP", "string", "", 1), ("Node", "string", "", 1)],
        _pod_row,
    ),
    ("", "nodes"): (
        [("Name", "string", "", 0), ("Status", "string", "", 0), ("Roles", "string", "", 0), ("Age", "string", "", 0), ("Version", "string", "", 0)],
        _node_row,
    ),
    ("batch", "jobs"): (
        [("Name", "string", "", 0), ("Status", "string", "", 0), ("Completions", "string", "", 0), ("Duration", "string", "", 0), ("Age", "string", "", 0)],
        _job_row,
    ),
}


def columns_and_rows(kind: Kind, objects: Iterable[Mapping[str, Any]], now: float) -> tuple[list[Column], list[list[Any]]]:
    if kind.key in _BUILTIN:
        columns, row = _BUILTIN[kind.key]
        return columns, [row(o, now) for o in objects]
    columns: list[Column] = [("Name", "string", "", 0)]
    printers = list(kind.printer_columns)
    for column in printers:
        columns.append((column["name"], column.get("type", "string"), column.get("description", ""), column.get("priority", 0)))
    if not any(c["name"] == "Age" for c in printers):
        columns.append(("Age", "date", "", 0))
    rows = []
    for obj in objects:
        cells: list[Any] = [obj["metadata"]["name"]]
        for column in printers:
            value = json_path(obj, column["jsonPath"])
            if column.get("type") == "date" and isinstance(value, str):
                created = _parse_time(value)
                value = human_duration(now - created) if created is not None else value
            cells.append("" if value is None else value)
        if not any(c["name"] == "Age" for c in printers):
            cells.append(age(obj, now))
        rows.append(cells)
    return columns, rows


def table(kind: Kind, objects: list[Mapping[str, Any]], now: float, resource_version: str, include: str = "Metadata") -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (``include``: None, Metadata or Object)."""
    columns, rows = columns_and_rows(kind, objects, now)

    def row_object(obj: Mapping[str, Any]) -> Any:
        if include == "None":
            return None
        if include == "Object":
            return obj
        return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}

    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": name, "type": type_ if type_ != "date" else "string", "format": "name" if name == "Name" else "", "description": desc, "priority": priority}
            for name, type_, desc, priority in columns
        ],
        "rows": [{"cells": cells, "object": row_object(obj)} for cells, obj in zip(rows, objects)],
    }


def wants_table(accept: str | None) -> bool:
    return bool(accept) and "as=Table" in accept  # type: ignore[operator]
