"""What to submit for a task, given the workloads it already has. Pure.

Never two live workloads for one task, never a duplicate on retry: before submitting, the
operator lists the workloads carrying its task key and asks :func:`plan_submission`. A live one
is re-attached (a retry, or a worker that crashed after submitting); a succeeded one is reused;
a finished, failed one is not reused — the next attempt gets a new name — and is deleted.

Unless the user's own program failed it: the trigger that saw a workload fail writes its verdict
on the workload (:data:`ENDED_BY_ANNOTATION`) before reporting, so a retry that finds the
failure without that report (the worker died before acting on it) still never resubmits a
deterministic bug.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pathways_airflow.spec.names import ATTEMPT_LABEL, LABEL_PREFIX
from pathways_airflow.state.conditions import condition, conditions
from pathways_airflow.state.disruption import Verdict
from pathways_airflow.state.status import failed_by_the_user_error_rule

ENDED_BY_ANNOTATION = f"{LABEL_PREFIX}/ended-by"
"""``{"verdict": "USER_ERROR", "evidence": [...]}``: why the workload stopped, as classified."""


def ended_by_annotation(verdict: str, evidence: Sequence[str]) -> dict[str, str]:
    """The annotation recording a classified stop (a few lines of evidence, kept short)."""
    return {ENDED_BY_ANNOTATION: json.dumps({"verdict": verdict, "evidence": [e[:300] for e in evidence[:3]]})}


def ended_by(obj: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """The recorded verdict and evidence of a stopped workload, if a trigger recorded one."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ENDED_BY_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("verdict"), str):
        return None
    evidence = data.get("evidence")
    return data["verdict"], [str(e) for e in evidence] if isinstance(evidence, list) else []


def finished_as(obj: Mapping[str, Any]) -> str | None:
    """``"Completed"`` or ``"Failed"`` when a PathwaysJob or JobSet has finished, else ``None``."""
    status = obj.get("status") or {}
    terminal = status.get("terminalState")
    if terminal in ("Completed", "Failed"):
        if obj.get("kind") == "PathwaysJob":
            return terminal
    for item in conditions(obj):
        if item.get("type") in ("Completed", "Failed") and item.get("status") == "True":
            return str(item["type"])
    return terminal if terminal in ("Completed", "Failed") else None


def users_error(obj: Mapping[str, Any]) -> str | None:
    """Why a finished workload counts as the user's bug, if it does: a trigger's recorded verdict,
    or the JobSet's own failure policy ruling it so.

    The second matters when the bug struck while no trigger was watching (between a cancelled
    trigger and the next try): the JobSet still says why it failed, and "no verdict of ours"
    must not read as "resubmit".
    """
    verdict = ended_by(obj)
    if verdict is not None and verdict[0] == Verdict.USER_ERROR.value:
        return "; ".join(verdict[1][:2])
    if obj.get("kind") == "JobSet" and failed_by_the_user_error_rule(obj):
        return str((condition(obj, "Failed") or {}).get("message", ""))[:300]
    return None


def attempt_of(obj: Mapping[str, Any]) -> int:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(ATTEMPT_LABEL, "0")
    return int(value) if str(value).isdigit() else 0


@dataclass(frozen=True)
class SubmissionPlan:
    """``attempt`` to run (submit or re-attach); ``adopt`` a live one; ``reuse`` a success."""

    attempt: int
    adopt: Mapping[str, Any] | None = None
    reuse: Mapping[str, Any] | None = None
    delete: tuple[str, ...] = field(default_factory=tuple)
    reason: str = ""
    user_error: Mapping[str, Any] | None = None
    """The newest workload, when the user's program failed it in an earlier try."""


def plan_submission(existing: Sequence[Mapping[str, Any]], recorded_attempt: int | None = None) -> SubmissionPlan:
    """Decide from the task's own workloads (found by its task-key label)."""
    ordered = sorted(existing, key=attempt_of)
    live = [o for o in ordered if finished_as(o) is None and not (o.get("metadata") or {}).get("deletionTimestamp")]
    if live:
        keep = live[-1]
        extra = tuple(o["metadata"]["name"] for o in live[:-1])
        return SubmissionPlan(
            attempt_of(keep),
            adopt=keep,
            delete=extra,
            reason=f"re-attaching to the live workload {keep['metadata']['name']} from an earlier try",
        )
    if ordered:
        newest = ordered[-1]
        if finished_as(newest) == "Completed":
            return SubmissionPlan(
                attempt_of(newest), reuse=newest, reason=f"{newest['metadata']['name']} already succeeded in an earlier try"
            )
        finished = tuple(o["metadata"]["name"] for o in ordered)
        said = users_error(newest)
        if said is not None:
            return SubmissionPlan(
                attempt_of(newest),
                delete=finished,
                user_error=newest,
                reason=f"{newest['metadata']['name']} failed in an earlier try with the user's error: {said}",
            )
        return SubmissionPlan(
            attempt_of(newest) + 1,
            delete=finished,
            reason=f"{newest['metadata']['name']} failed in an earlier try; submitting attempt {attempt_of(newest) + 1}",
        )
    return SubmissionPlan(recorded_attempt or 0, reason="")
