"""The OpenLineage events a run wrote with the file transport, read back as a lineage chain. Pure but for the read.

The demo (and its test) turns the provider's listener on with OpenLineage's file transport
(``{"type": "file", "log_file_path": ..., "append": true}``: one JSON event per line) and reads
what the pipeline's tasks reported: which dataset each task read and wrote, and its run facets.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def file_transport(path: Path) -> str:
    """``AIRFLOW__OPENLINEAGE__TRANSPORT`` for events appended to ``path``, one JSON per line."""
    return json.dumps({"type": "file", "log_file_path": str(path), "append": True})


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event in the file (none when it does not exist: the provider is not installed)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _uri(dataset: Mapping[str, Any]) -> str:
    namespace, name = dataset.get("namespace", ""), dataset.get("name", "")
    return f"{namespace}/{name}" if namespace.startswith("gs://") else name


@dataclass(frozen=True)
class TaskLineage:
    """What one task reported on completion."""

    task: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    run_facets: Mapping[str, Any] = field(default_factory=dict)


def completed_tasks(events: Iterable[Mapping[str, Any]], dag_id: str) -> dict[str, TaskLineage]:
    """The newest COMPLETE event of each of ``dag_id``'s tasks, by task id."""
    found: dict[str, TaskLineage] = {}
    for event in events:
        job = (event.get("job") or {}).get("name", "")
        if event.get("eventType") != "COMPLETE" or not job.startswith(dag_id + "."):
            continue
        task = job[len(dag_id) + 1 :]
        found[task] = TaskLineage(
            task,
            tuple(_uri(d) for d in event.get("inputs") or ()),
            tuple(_uri(d) for d in event.get("outputs") or ()),
            (event.get("run") or {}).get("facets") or {},
        )
    return found


def chain(tasks: Mapping[str, TaskLineage], order: Sequence[str]) -> list[str]:
    """``train → gs://…/checkpoints/39 → convert → …``: each task in ``order`` and what it wrote, as
    long as the next task read it (a break in the graph ends the chain with ``✗``)."""
    links: list[str] = []
    for index, name in enumerate(order):
        task = tasks.get(name)
        if task is None:
            return [*links, f"✗ no lineage from {name}"]
        links.append(name)
        following = tasks.get(order[index + 1]) if index + 1 < len(order) else None
        shared = [uri for uri in task.outputs if following is None or uri in following.inputs]
        if not shared:
            return [*links, "✗" if following is not None else "(no output)"]
        links.append(shared[0])
    return links


__all__ = ["TaskLineage", "chain", "completed_tasks", "file_transport", "read_events"]
