"""The JobSet's in-place restarts of a workload, kept on the workload itself. Pure.

A trigger records each restart it sees (what caused it, the step reached), but a trigger lives
only as long as the triggerer keeps it: a re-created one (a triggerer restart, a hand-over)
starts with what ``serialize()`` gave it, which is what the task knew when it deferred. So the
list is written on the workload at every restart (:data:`RESTARTS_ANNOTATION`), read back by the
next trigger. A trigger records every restart the JobSet counts that is not on the list yet,
also one made between two of its looks, so the result's ``disruptions`` account for its
``restarts``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from pathways_airflow.spec.names import LABEL_PREFIX
from pathways_airflow.state.records import Disruption

RESTARTS_ANNOTATION = f"{LABEL_PREFIX}/restarts"
"""A JSON list of the restarts seen (``Disruption.to_dict``), the newest :data:`MAX_KEPT`."""
MAX_KEPT = 20
MAX_EVIDENCE_CHARS = 200


def restarts_annotation(restarts: Sequence[Disruption]) -> dict[str, str]:
    """The annotation holding ``restarts`` (short evidence: annotations share 256 KiB per object)."""
    kept = [{**r.to_dict(), "evidence": [e[:MAX_EVIDENCE_CHARS] for e in r.evidence[:2]]} for r in restarts[-MAX_KEPT:]]
    return {RESTARTS_ANNOTATION: json.dumps(kept)}


def restarts_written(workload: Mapping[str, Any] | None) -> list[Disruption]:
    """The restarts an earlier trigger wrote on the workload (none when absent or unreadable)."""
    text = (((workload or {}).get("metadata") or {}).get("annotations") or {}).get(RESTARTS_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [Disruption.from_dict(d) for d in data if isinstance(d, dict)] if isinstance(data, list) else []
