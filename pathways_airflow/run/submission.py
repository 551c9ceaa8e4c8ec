"""What to submit for a task, given the workloads it already has. Pure.

Never two live workloads for one task, never a duplicate on retry: before submitting, the
operator lists the workloads carrying its task key and asks :func:`plan_submission`. A live one
is re-attached (a retry, or a worker that crashed after submitting); a succeeded one is reused;
a finished, failed one is not reused — the next attempt gets a new name — and is deleted.

Unless the user's own program failed it: what the triggers recorded on the workload and what the
cluster still shows decide that (:mod:`pathways_airflow.run.annotations`), so a retry that finds
the failure without a trigger's report (the worker died before acting on it, or nobody watched)
never resubmits a deterministic bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow.spec.names import ATTEMPT_LABEL
from pathways_airflow.state.conditions import is_true
from pathways_airflow.state.disruption import Verdict
from pathways_airflow.run.rounds import from_an_earlier_round
from pathways_airflow.run.annotations import ended_by, verdict_after_the_fact


def finished_as(obj: Mapping[str, Any]) -> str | None:
    """``"Completed"`` or ``"Failed"`` when a PathwaysJob or JobSet has finished, else ``None``."""
    status = obj.get("status") or {}
    terminal = status.get("terminalState")
    if terminal in ("Completed", "Failed"):
        if obj.get("kind") == "PathwaysJob":
            return terminal
    finished = next((kind for kind in ("Completed", "Failed") if is_true(obj, kind)), None)
    if finished is not None:
        return finished
    return terminal if terminal in ("Completed", "Failed") else None


def users_error(obj: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]] | None = None) -> str | None:
    """Why a finished workload counts as the user's bug, if it does (:func:`verdict_after_the_fact`)."""
    verdict = verdict_after_the_fact(obj, nodes)
    return "; ".join(verdict.evidence[:2]) if verdict.verdict is Verdict.USER_ERROR else None


def needs_nodes(existing: Sequence[Mapping[str, Any]]) -> bool:
    """Whether :func:`plan_submission` needs the nodes: the newest workload failed, and no trigger
    recorded why (only then may the nodes have to vouch that the user's program failed first)."""
    newest = sorted(existing, key=attempt_of)[-1:]
    return bool(newest) and finished_as(newest[0]) == "Failed" and ended_by(newest[0]) is None


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
    after_a_disruption: bool = False
    """The next attempt of this round, after one that failed by no fault of the user's: the
    resubmission an earlier try could not make (a worker lost between the verdict and the
    submission), which resumes at once, as that try's would have."""


def plan_submission(
    existing: Sequence[Mapping[str, Any]],
    recorded_attempt: int | None = None,
    nodes: Iterable[Mapping[str, Any]] | None = None,
    first_try: int | None = None,
) -> SubmissionPlan:
    """Decide from the task's own workloads (found by its task-key label) and the cluster's nodes
    (``None`` when they could not be read), which say whether a failure nobody watched was a bug.

    ``first_try``: the first try of the task's current round (:mod:`~pathways_airflow.run.rounds`).
    Workloads of an earlier round, before the user cleared the task, are deleted and never
    re-attached, reused or read for a verdict; the next attempt's name is one none of them holds.
    """
    earlier: list[Mapping[str, Any]] = []
    this_round: list[Mapping[str, Any]] = []
    for obj in existing:
        (earlier if from_an_earlier_round(obj, first_try) else this_round).append(obj)
    plan = _plan_in_this_round(this_round, recorded_attempt, nodes)
    if not earlier:
        return plan
    names = tuple(o["metadata"]["name"] for o in sorted(earlier, key=attempt_of))
    fresh = plan.adopt is None and plan.reuse is None and plan.user_error is None
    attempt = max(plan.attempt, max(attempt_of(o) for o in existing) + 1) if fresh else plan.attempt
    said = f"the task was cleared: {', '.join(names)} from before the clear {'is' if len(names) == 1 else 'are'} deleted, not reused"
    return replace(plan, attempt=attempt, delete=(*names, *plan.delete), reason="; ".join(r for r in (said, plan.reason) if r))


def _plan_in_this_round(
    existing: Sequence[Mapping[str, Any]], recorded_attempt: int | None, nodes: Iterable[Mapping[str, Any]] | None
) -> SubmissionPlan:
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
        said = users_error(newest, nodes)
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
            after_a_disruption=True,
        )
    return SubmissionPlan(recorded_attempt or 0, reason="")
