"""What the triggers write on the workload, and read back when nobody watched it end. Pure.

A trigger sees a failure as it happens; a retry, a re-created trigger or a worker that died
before acting on an event sees only what is left afterwards, and by then the pods that showed
why are usually gone. So the triggers write what they saw onto the workload, in annotations:

* :data:`ENDED_BY_ANNOTATION`, the verdict on a finished workload, written before the event that
  reports it;
* :data:`DISRUPTION_SEEN_ANNOTATION`, a disruption seen while the workload still ran (a slice's
  pods shut down, workers lost), written at once: the trigger that saw it may be cancelled
  before the workload fails;
* :data:`RESTARTS_ANNOTATION`, the JobSet's in-place restarts seen (cause, step reached), written
  at every restart, so a re-created trigger (a triggerer restart, a hand-over) accounts for the
  ones it did not see; one made between two looks is recorded too;
* :data:`PHASES_ANNOTATION`, the phases the waits saw and when, written at each new phase, so a
  re-created trigger and a retry that re-attaches or reuses the workload count its chip time and
  goodput from its submission, not from the moment they arrived;
* :data:`RESUMED_FROM_ANNOTATION`, the step a resubmission's program said it restored, written
  once, so a re-created trigger does not read it again from a later head (after a Kueue eviction
  the re-admitted head restores a newer step, which is not where the resubmission resumed).

:func:`verdict_after_the_fact` reads them, then what the cluster still shows, in one order.
"No evidence" never reads as "the user's bug", and never as "resubmit" when the workload's own
status names the user's program as what failed first on healthy nodes.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from pathways_airflow.run.records import Disruption, PhaseSeen
from pathways_airflow.spec.names import LABEL_PREFIX
from pathways_airflow.state.conditions import condition
from pathways_airflow.state.ran_on import nodes_it_ran_on, went_down_under_it
from pathways_airflow.state.disruption import (
    NO_EVIDENCE,
    Classification,
    Verdict,
    head_failed_first,
    workers_nodes_disrupted,
)
from pathways_airflow.state.status import failed_by_the_user_error_rule
from pathways_airflow.state.workload_parts import Nodes, restarts_of

ENDED_BY_ANNOTATION = f"{LABEL_PREFIX}/ended-by"
"""``{"verdict": "USER_ERROR", "evidence": [...]}``: why the workload stopped, as classified."""

DISRUPTION_SEEN_ANNOTATION = f"{LABEL_PREFIX}/disruption-seen"
"""``{"restart": 0, "verdict": "SLICE_FAILURE", "evidence": [...]}``: a disruption seen during
restart attempt ``restart`` of the JobSet, before it ended."""

RESTARTS_ANNOTATION = f"{LABEL_PREFIX}/restarts"
"""A JSON list of the restarts seen (``Disruption.to_dict``), the newest :data:`MAX_KEPT`."""
RECOVERED_ANNOTATION = f"{LABEL_PREFIX}/recovered"
"""The slice losses the program rode out itself (elastic slices), as the restarts are kept."""
MAX_KEPT = 20
RESTART_EVIDENCE_CHARS = 200

PHASES_ANNOTATION = f"{LABEL_PREFIX}/phases"
"""A JSON list of the phases seen (``PhaseSeen.to_dict``; times on the waits' clock, as goodput's)."""

RESUMED_FROM_ANNOTATION = f"{LABEL_PREFIX}/resumed-from"
"""The step the workload's first program said it restored (``-1``: none; :mod:`~pathways_airflow.run.progress`)."""

MAX_EVIDENCE = 3
MAX_EVIDENCE_CHARS = 300


def _short(evidence: Sequence[str]) -> list[str]:
    return [e[:MAX_EVIDENCE_CHARS] for e in evidence[:MAX_EVIDENCE]]


def _annotation(obj: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("verdict"), str):
        return None
    return data


def _evidence(data: Mapping[str, Any]) -> list[str]:
    evidence = data.get("evidence")
    return [str(e) for e in evidence] if isinstance(evidence, list) else []


def ended_by_annotation(verdict: str, evidence: Sequence[str]) -> dict[str, str]:
    """The annotation recording a classified stop (a few lines of evidence, kept short)."""
    return {ENDED_BY_ANNOTATION: json.dumps({"verdict": verdict, "evidence": _short(evidence)})}


def ended_by(obj: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """The recorded verdict and evidence of a stopped workload, if a trigger recorded one."""
    data = _annotation(obj, ENDED_BY_ANNOTATION)
    return None if data is None else (data["verdict"], _evidence(data))


def disruption_seen_annotation(restart: int, classification: Classification, at: float | None = None) -> dict[str, str]:
    """The annotation recording a disruption seen during JobSet restart attempt ``restart`` (``at`` then)."""
    data: dict[str, Any] = {"restart": restart, "verdict": classification.verdict.value, "evidence": _short(classification.evidence)}
    if at is not None:
        data["at"] = at
    return {DISRUPTION_SEEN_ANNOTATION: json.dumps(data)}


def disruption_seen(obj: Mapping[str, Any] | None, restart: int | None, ridden_out: Sequence[float] = ()) -> Classification | None:
    """The disruption a trigger saw during restart attempt ``restart``, if one was recorded.

    One of an earlier attempt says nothing of this one: the JobSet recovered from it. A
    PathwaysJob does not say which attempt its JobSet is on (``restart`` is ``None``): any counts.
    Nor does one the program rode out (a slice loss with elastic slices, :data:`RECOVERED_ANNOTATION`):
    the workload ran on, so it is not why it stopped later (a record older than the times, with
    no ``at``, was one of those losses too). ``ridden_out``: the times of such losses a wait knows
    of and may not have written yet.
    """
    data = _annotation(obj or {}, DISRUPTION_SEEN_ANNOTATION)
    if data is None or (restart is not None and data.get("restart") != restart):
        return None
    ridden_out = [*ridden_out, *(r.time for r in restarts_written(obj, RECOVERED_ANNOTATION))]
    if ridden_out and not (isinstance(data.get("at"), (int, float)) and data["at"] > max(ridden_out)):
        return None
    try:
        verdict = Verdict(data["verdict"])
    except ValueError:
        return None
    if not verdict.is_disruption:
        return None
    evidence = tuple(f"seen while it ran: {e}" for e in _evidence(data))
    return Classification(verdict, evidence or (f"seen while it ran: {verdict.value}",))


def disruption_seen_at(obj: Mapping[str, Any] | None) -> float | None:
    """When the disruption recorded on ``obj`` was seen, by the recording trigger's clock (``None``:
    no record, or one older than the times)."""
    at = (_annotation(obj or {}, DISRUPTION_SEEN_ANNOTATION) or {}).get("at")
    return float(at) if isinstance(at, (int, float)) else None


def verdict_after_the_fact(
    workload: Mapping[str, Any], nodes: Nodes | None
) -> Classification:
    """Why a finished, failed workload stopped, read afterwards from the workload and the nodes now.

    In order: the verdict a trigger recorded; a disruption a trigger saw during its last restart
    attempt, or a node it ran on that went down since its workers started
    (:mod:`~pathways_airflow.state.ran_on`); the ``jobset`` backend's failure policy ruling a user error; the JobSet (or the
    PathwaysJob, which repeats its message) naming the head as the first to fail while no node of
    the nodes its workers ran on (when a trigger recorded them), else of their slice shape, is
    disrupted now (``nodes`` is ``None`` when they could not be read: then no node vouches for a bug).
    Anything else is a disruption nobody could see: resubmitting, and resuming, is the answer.
    """
    recorded = ended_by(workload)
    if recorded is not None and recorded[0] in Verdict.__members__:
        return Classification(Verdict(recorded[0]), tuple(recorded[1]))
    attempt = None if workload.get("kind") == "PathwaysJob" else restarts_of(workload)
    seen = disruption_seen(workload, attempt) or went_down_under_it(workload, attempt, nodes)
    if seen is not None:
        return seen
    said = str((condition(workload, "Failed") or {}).get("message", ""))[:MAX_EVIDENCE_CHARS]
    if workload.get("kind") == "JobSet" and failed_by_the_user_error_rule(workload):
        return Classification(Verdict.USER_ERROR, (said,))
    head = head_failed_first(workload)
    if head is not None and nodes is not None and not workers_nodes_disrupted(workload, nodes, nodes_it_ran_on(workload, attempt)):
        return Classification(
            Verdict.USER_ERROR,
            (f"the first failed job is the head's ({head}), and no node of its slice shape is disrupted",),
        )
    return Classification(Verdict.UNKNOWN_INFRA, (NO_EVIDENCE,))


def restarts_annotation(restarts: Sequence[Disruption], key: str = RESTARTS_ANNOTATION) -> dict[str, str]:
    """The annotation holding ``restarts`` (short evidence: annotations share 256 KiB per object);
    ``key``: :data:`RECOVERED_ANNOTATION` for the slice losses the program rode out."""
    kept = [{**r.to_dict(), "evidence": [e[:RESTART_EVIDENCE_CHARS] for e in r.evidence[:2]]} for r in restarts[-MAX_KEPT:]]
    return {key: json.dumps(kept)}


def restarts_written(workload: Mapping[str, Any] | None, key: str = RESTARTS_ANNOTATION) -> list[Disruption]:
    """The restarts (or, by ``key``, recoveries) an earlier trigger wrote on the workload (none when absent or unreadable)."""
    text = (((workload or {}).get("metadata") or {}).get("annotations") or {}).get(key)
    try:
        data = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [Disruption.from_dict(d) for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def in_place_written(workload: Mapping[str, Any] | None) -> tuple[Disruption, ...]:
    """Every disruption the workload got through in place that its waits wrote on it, oldest
    first: the JobSet's restarts and the slice losses the program rode out (what a wait's
    ending reports, for a try that finds the workload already ended)."""
    written = (*restarts_written(workload), *restarts_written(workload, RECOVERED_ANNOTATION))
    return tuple(sorted(written, key=lambda d: d.time))


PHASES_EVERY_SECONDS = 300.0
"""The phases alone are written at most this often per workload (:func:`write_within`)."""


def write_within(notes: Mapping[str, str]) -> float:
    """How long ``notes`` may wait to be written: the phases alone :data:`PHASES_EVERY_SECONDS`,
    after everything else (a workload whose slices come and go changes phase at every flap, and
    a triggerer of thousands of waits spent its writes on them; a triggerer lost meanwhile loses
    at most that much of the timeline, and an ending writes its phases at once with its verdict);
    anything a verdict reads — where the workers ran, the restarts, a disruption seen, a
    recovery — at once."""
    return PHASES_EVERY_SECONDS if set(notes) <= {PHASES_ANNOTATION} else 0.0


def written_before_the_event(notes: Mapping[str, str], *, succeeded: bool) -> bool:
    """Whether an ending's ``notes`` go on the workload before its task hears of the end.

    A failure's verdict and everything beside it must: the task's next try reads them there.
    The phases of a success need not: the event carries them to the task, no try follows a
    success to read them, and written at once they were a PATCH awaited by every success (10,078
    in one finish window of 10,000 waits, ``benchmarks/README.md``), so they go as phases always
    go (:func:`write_within`)."""
    return bool(notes) and not (succeeded and set(notes) <= {PHASES_ANNOTATION})


def phases_annotation(phases: Sequence[PhaseSeen]) -> dict[str, str]:
    """The annotation holding the phases a wait saw."""
    return {PHASES_ANNOTATION: json.dumps([p.to_dict() for p in phases], separators=(",", ":"))}


def phases_written(workload: Mapping[str, Any] | None) -> tuple[PhaseSeen, ...]:
    """The phases earlier waits wrote on the workload (none when absent or unreadable)."""
    text = (((workload or {}).get("metadata") or {}).get("annotations") or {}).get(PHASES_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return ()
    return tuple(PhaseSeen.from_dict(d) for d in data if isinstance(d, dict)) if isinstance(data, list) else ()


def resumed_from_annotation(step: int) -> dict[str, str]:
    """The annotation holding the step the program said it restored."""
    return {RESUMED_FROM_ANNOTATION: str(step)}


def resumed_from_written(workload: Mapping[str, Any] | None) -> int | None:
    """The step an earlier wait read that the program restored (``None``: none read, or unreadable)."""
    text = (((workload or {}).get("metadata") or {}).get("annotations") or {}).get(RESUMED_FROM_ANNOTATION)
    return int(text) if isinstance(text, str) and text.lstrip("-").isdigit() else None
