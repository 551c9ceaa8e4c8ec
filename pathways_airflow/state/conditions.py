"""The one reader of ``status.conditions``, the list every Kubernetes kind reports its state in.

Conditions follow kubernetes/apimachinery ``pkg/apis/meta/v1/types.go`` (``Condition``: ``type``,
``status`` "True"/"False"/"Unknown", ``reason``, ``message``). Pods, Nodes, Jobs, JobSets,
PathwaysJobs, LeaderWorkerSets and Kueue Workloads all use that shape, so one pair of functions
reads them all, and a malformed entry (not a mapping) is skipped the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def conditions(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """Every well-formed condition of ``obj``, in the order the controller wrote them."""
    status = (obj or {}).get("status")
    items = status.get("conditions") if isinstance(status, Mapping) else None
    return [item for item in items or () if isinstance(item, Mapping)]


def condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_``, whatever its status; ``None`` when the object has none."""
    return next((item for item in conditions(obj) if item.get("type") == type_), None)


def true_condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` when its status is ``"True"``, else ``None``."""
    found = condition(obj, type_)
    return found if found is not None and found.get("status") == "True" else None


def is_true(obj: Mapping[str, Any] | None, type_: str) -> bool:
    """Whether ``obj`` has the condition ``type_`` with status ``"True"``."""
    return true_condition(obj, type_) is not None


def condition_text(found: Mapping[str, Any] | None) -> str:
    """``Reason: message`` of a condition, as a human reads it in ``kubectl describe``."""
    if not found:
        return ""
    reason, message = found.get("reason") or "", found.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message
