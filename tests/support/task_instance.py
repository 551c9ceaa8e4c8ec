"""The task instance an operator is given when a test calls ``execute()`` in-process.

Only the fields the operators read: the identity (dag, task, run, map index, try) and XCom.
XCom values are kept as JSON, as Airflow stores them, so a value that would not survive the
database does not pass here either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TaskInstance:
    """One try of a task instance, as ``context["ti"]``."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int = 1
    map_index: int = -1
    max_tries: int | None = None
    """As Airflow sets it: the task's ``retries`` at first, the try number plus ``retries`` after a clear."""
    xcoms: dict = field(default_factory=dict)
    start_date: Any = None

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = json.loads(json.dumps(value, default=str))

    def xcom_pull(self, task_ids: Any = None, key: str | None = None) -> Any:
        return self.xcoms.get(key)


class StateStore:
    """Airflow 3.3's ``task_state_store`` for one task instance: kept across tries, JSON values."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def get(self, key: str) -> Any:
        value = self._values.get(key)
        return None if value is None else json.loads(value)

    def set(self, key: str, value: Any) -> None:
        self._values[key] = json.dumps(value, default=str)
