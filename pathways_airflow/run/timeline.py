"""A task's workloads as a timeline: what the wait saw, in order, for the result, the log and the UI. Pure.

The trigger notes each phase a workload enters (:func:`phases_with`); the operator keeps one
:class:`~pathways_airflow.run.records.WorkloadRun` per workload it submitted; at the end
:func:`timeline_of` lays them out with every disruption (its evidence included) as one list of
entries, oldest first. The same entries feed the goodput split
(:mod:`~pathways_airflow.run.goodput`), the task's XCom and the Pathways view in the Airflow UI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pathways_airflow.state.model import Phase, WorkloadState
from pathways_airflow.run.records import PROGRAM_RECOVERY, Disruption, PhaseSeen, WorkloadRun

MAX_PHASES = 64
"""Phases one wait keeps: a workload that restarts for days keeps its first and newest ones, so
a trigger's memory stays bounded (thousands of waits share one triggerer)."""

_KIND_OF_PHASE = {
    Phase.QUEUED.value: "queued",
    Phase.PROVISIONING.value: "provisioning",
    Phase.RUNNING.value: "running",
    Phase.RESTARTING.value: "restarting",
    Phase.SUCCEEDED.value: "succeeded",
    Phase.FAILED.value: "failed",
}
FINISHED_KINDS = (_KIND_OF_PHASE[Phase.SUCCEEDED.value], _KIND_OF_PHASE[Phase.FAILED.value])
"""Entry kinds of a workload that has ended: nothing follows them but its deletion."""


def phases_with(seen: Sequence[PhaseSeen], state: WorkloadState, at: float) -> tuple[PhaseSeen, ...]:
    """``seen`` plus ``state`` if it is a new phase (or more or fewer slices ready) than the newest seen."""
    entry = PhaseSeen(at, state.phase.value, state.slices_ready, state.slices_total)
    if seen and (seen[-1].phase, seen[-1].slices_ready, seen[-1].slices_total) == (entry.phase, entry.slices_ready, entry.slices_total):
        return tuple(seen)
    kept = (*seen, entry)
    if len(kept) > MAX_PHASES:
        kept = (kept[0], *kept[len(kept) - MAX_PHASES + 1 :])
    return kept


def phase_label(phase: PhaseSeen) -> str:
    """``RUNNING 2/2 slices``: the phase as the task log and the UI name it."""
    if phase.slices_total and phase.phase in (Phase.PROVISIONING.value, Phase.RUNNING.value, Phase.RESTARTING.value):
        return f"{phase.phase} {phase.slices_ready}/{phase.slices_total} slices"
    return phase.phase


def _entry(at: float, workload: str, kind: str, label: str, evidence: Sequence[str] = ()) -> dict[str, Any]:
    return {"at": round(at, 3), "workload": workload, "kind": kind, "label": label, "evidence": list(evidence)}


def _phase_entry(phase: PhaseSeen, workload: str) -> dict[str, Any]:
    """A phase entry; with the slices ready and wanted when the phase counts them."""
    entry = _entry(phase.at, workload, _KIND_OF_PHASE.get(phase.phase, phase.phase.lower()), phase_label(phase))
    if phase.slices_total:
        entry.update(slices_ready=phase.slices_ready, slices_total=phase.slices_total)
    return entry


def _disruption_label(disruption: Disruption) -> str:
    kind = disruption.kind.lower().replace("_", " ")
    if not disruption.resubmitted:
        how = "the program rode it out (elastic slices)" if disruption.handled_by == PROGRAM_RECOVERY else "the JobSet restarted in place"
        return f"{kind}: {how}" + (f" (step {disruption.reached_step} reached)" if disruption.reached_step is not None else "")
    reached = f"step {disruption.reached_step} reached" if disruption.reached_step is not None else "no step reported"
    resumed = f"resumed from step {disruption.resumed_from_step}" if disruption.resumed_from_step is not None else "no checkpoint to resume from"
    return f"{kind}: resubmitted ({reached}, {resumed})"


def timeline_of(runs: Sequence[WorkloadRun], disruptions: Sequence[Disruption]) -> list[dict[str, Any]]:
    """Every workload's submission, phases and deletion, and every disruption, oldest first.

    Entries: ``{"at", "workload", "kind", "label", "evidence"}``; ``kind`` is ``submitted``,
    a phase (``queued``, ``provisioning``, ``running``, ``restarting``, ``succeeded``, ``failed``),
    ``disruption`` or ``deleted``. A phase that counts slices also has ``slices_ready`` and
    ``slices_total``.
    """
    entries = []
    for run in runs:
        entries.append(_entry(run.submitted, run.workload, "submitted", f"submitted {run.workload}"))
        entries.extend(_phase_entry(p, run.workload) for p in run.phases)
        if run.deleted is not None:
            entries.append(_entry(run.deleted, run.workload, "deleted", f"deleted {run.workload}"))
    names = [run.workload for run in runs]
    for disruption in disruptions:
        workload = disruption.workload or _running_at(runs, disruption.time) or (names[-1] if names else "")
        entries.append(_entry(disruption.time, workload, "disruption", _disruption_label(disruption), disruption.evidence))
    return sorted(entries, key=lambda e: e["at"])


def _running_at(runs: Sequence[WorkloadRun], at: float) -> str | None:
    """The workload that was current at ``at`` (a JobSet restart names no workload of its own)."""
    current = None
    for run in runs:
        if run.submitted <= at:
            current = run.workload
    return current


# --- how a span of time reads in a log line, a summary or the UI: one format everywhere ---


def duration(seconds: float | None) -> str:
    """``4.2 s``, ``41 s``, ``3 min 12 s``, ``2 h 03 min``: a span as a person reads it, to the unit that matters."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {(whole % 3600) // 60:02d} min"


__all__ = ["FINISHED_KINDS", "MAX_PHASES", "duration", "phase_label", "phases_with", "timeline_of"]
