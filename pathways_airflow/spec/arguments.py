"""Readers of operator and sensor arguments that may not be known until the task runs. Pure.

Airflow renders templated fields (``"{{ ds }}"``) and resolves XCom references only when the
task runs, so a check made when the DAG is parsed must skip what is not known yet and make it
again on the rendered value.
"""

from __future__ import annotations

from typing import Any, Mapping


def looks_templated(value: Any) -> bool:
    """True if ``value`` (or anything inside it) will only be known after Jinja or XCom resolution."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(looks_templated(k) or looks_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(looks_templated(v) for v in value)
    # XComArg and other lazy values resolve at run time.
    return hasattr(value, "resolve") or hasattr(value, "iter_references")
