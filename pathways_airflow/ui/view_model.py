"""What the Pathways view draws for a workload task, from its XCom result. Pure: no I/O.

The page in the Airflow UI is a thin drawing of the dictionaries built here and in
:mod:`~pathways_airflow.ui.benchmark_view`: every decision (which phase a stretch of time was,
which lane a disruption belongs to, what each part of the goodput split is a share of) is made in
Python, where it is tested with real-shaped results, and the page only maps offsets and values to
pixels. So the view cannot drift from the task log or the report, which read the same records.

:func:`workload_view` turns one ``PathwaysJobOperator`` result into a lane per workload the task
submitted (a resubmission after a disruption is a new lane), the phases each went through with
its slices ready, each disruption with its evidence and what it cost, the checkpoint steps, and
the goodput split. Results written before the operator recorded ``timeline`` and ``goodput``
still show what they hold: their disruptions and checkpoint. The formatting helpers here are the
benchmark view's too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow.run.records import PROGRAM_RECOVERY
from pathways_airflow.run.timeline import FINISHED_KINDS, duration
from pathways_airflow.state.queue import QueuePlace


RESULT_KEYS = ("name", "namespace", "backend", "state")
"""Keys every ``PathwaysJobOperator`` result has had since its first version."""


# --- shared formatting ---------------------------------------------------------------------------


def utc_text(epoch: float | None) -> str | None:
    """An epoch time as ``2026-11-26 12:03:09 UTC``, or ``None`` when there is none."""
    if epoch is None or not math.isfinite(epoch):
        return None
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def to_json(value: Any) -> Any:
    """Dataclasses as dicts, tuples as lists, and ``nan``/``inf`` as ``null`` (JSON has neither)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- a workload's timeline and goodput -----------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A stretch of one lane in one phase; offsets in seconds from the task's first entry."""

    kind: str
    label: str
    start: float
    end: float
    slices_ready: int | None = None
    slices_total: int | None = None


@dataclass(frozen=True)
class Lane:
    """One workload the task submitted: attempt 0, then one per resubmission."""

    workload: str
    attempt: int
    start: float
    end: float
    segments: tuple[Segment, ...]
    resumed_from_step: int | None = None
    deleted: bool = False


@dataclass(frozen=True)
class DisruptionItem:
    """A disruption where it happened, why it is believed to be one, and what it cost."""

    index: int
    at: float | None
    when: str | None
    kind: str
    lane: int | None
    workload: str | None
    headline: str
    evidence: tuple[str, ...]
    resubmitted: bool
    reached_step: int | None = None
    resumed_from_step: int | None = None
    steps_recomputed: int | None = None
    seconds_lost: float | None = None
    next_workload: str | None = None


@dataclass(frozen=True)
class GoodputPart:
    key: str
    label: str
    seconds: float
    share: float | None
    """Of the held time, 0–1; ``None`` when nothing was held."""
    text: str


@dataclass(frozen=True)
class GoodputView:
    chips: int | None
    chip_hours: float | None
    held_seconds: float
    held_text: str
    queued_seconds: float
    queued_text: str
    goodput: float | None
    goodput_text: str
    parts: tuple[GoodputPart, ...]
    lost_parts: tuple[GoodputPart, ...]
    adds_up: bool


@dataclass(frozen=True)
class WorkloadView:
    is_workload: bool
    message: str
    name: str | None = None
    namespace: str | None = None
    backend: str | None = None
    state: str | None = None
    restarts: int | None = None
    queue_text: str | None = None
    """Where the last workload stood in Kueue's queue when last seen waiting there."""
    wall_time_text: str | None = None
    summary: str | None = None
    started: str | None = None
    span_seconds: float = 0.0
    lanes: tuple[Lane, ...] = ()
    disruptions: tuple[DisruptionItem, ...] = ()
    checkpoint: Mapping[str, Any] | None = None
    resubmissions: int = 0
    goodput: GoodputView | None = None
    notes: tuple[str, ...] = ()


def is_workload_result(result: Any) -> bool:
    """Whether an XCom value is what ``PathwaysJobOperator`` returns (any version of it)."""
    return isinstance(result, Mapping) and all(isinstance(result.get(key), str) for key in RESULT_KEYS)


def _entries(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The timeline's well-formed entries, oldest first (a malformed one is left out, not fatal)."""
    found = []
    for entry in result.get("timeline") or ():
        if not isinstance(entry, Mapping):
            continue
        at = _number(entry.get("at"))
        if at is None or not isinstance(entry.get("kind"), str):
            continue
        evidence = entry.get("evidence") or ()
        found.append(
            {
                "at": at,
                "workload": str(entry.get("workload") or result.get("name") or ""),
                "kind": entry["kind"],
                "label": str(entry.get("label") or entry["kind"]),
                "evidence": tuple(str(e) for e in evidence) if isinstance(evidence, (list, tuple)) else (),
                "slices_ready": _step(entry.get("slices_ready")),
                "slices_total": _step(entry.get("slices_total")),
            }
        )
    return sorted(found, key=lambda e: e["at"])


def _lane(workload: str, attempt: int, entries: list[dict[str, Any]], t0: float, view_end: float) -> Lane:
    """One workload's lane: each phase lasts until its next entry; a finished one until deletion."""
    phases = [e for e in entries if e["kind"] != "disruption"]
    segments = []
    for index, entry in enumerate(phases):
        if entry["kind"] == "deleted":
            break
        following = phases[index + 1]["at"] if index + 1 < len(phases) else None
        if following is None:
            following = entry["at"] if entry["kind"] in FINISHED_KINDS else view_end
        segments.append(Segment(entry["kind"], entry["label"], entry["at"] - t0, following - t0, entry["slices_ready"], entry["slices_total"]))
    deleted = next((e["at"] for e in phases if e["kind"] == "deleted"), None)
    end = deleted if deleted is not None else (phases[-1]["at"] if phases and phases[-1]["kind"] in FINISHED_KINDS else view_end)
    start = entries[0]["at"] if entries else t0
    return Lane(workload, attempt, start - t0, end - t0, tuple(segments), deleted=deleted is not None)


def _lane_at(lanes: Sequence[Lane], offset: float) -> int | None:
    """The newest lane already started at ``offset`` (a disruption that names no workload)."""
    found = None
    for index, lane in enumerate(lanes):
        if lane.start <= offset + 1e-6:
            found = index
    return found


def _disruption_records(result: Mapping[str, Any], entries: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """The result's disruptions; from the timeline's entries when the result lists none."""
    listed = [d for d in result.get("disruptions") or () if isinstance(d, Mapping)]
    if listed:
        return listed
    return [{"time": e["at"], "kind": e["label"], "evidence": list(e["evidence"]), "workload": e["workload"]} for e in entries if e["kind"] == "disruption"]


def _headline(kind: str, workload: str | None, d: Mapping[str, Any], resubmitted: bool, next_workload: str | None) -> str:
    reached = _step(d.get("reached_step"))
    reached_text = f"step {reached} reached" if reached is not None else "no step reported"
    if not resubmitted:
        how = "the program rode it out (elastic slices)" if d.get("handled_by") == PROGRAM_RECOVERY else "the JobSet restarted in place"
        return f"{kind}: {how} ({reached_text})"
    resumed = _step(d.get("resumed_from_step"))
    head = f"{kind} on {workload} ({reached_text})" if workload else f"{kind} ({reached_text})"
    again = f"resubmitted as {next_workload}" if next_workload else "resubmitted"
    again += f", resuming from step {resumed}" if resumed is not None else " with no checkpoint to resume from"
    recomputed = _step(d.get("steps_recomputed"))
    cost = f"; {recomputed} steps recomputed" if recomputed is not None else ""  # the time lost is goodput's, shown once
    return f"{head}: {again}{cost}"


def _disruptions(
    result: Mapping[str, Any], entries: list[dict[str, Any]], lanes: Sequence[Lane], t0: float | None
) -> tuple[DisruptionItem, ...]:
    names = [lane.workload for lane in lanes]
    items = []
    for index, d in enumerate(_disruption_records(result, entries)):
        time = _number(d.get("time"))
        at = time - t0 if time is not None and t0 is not None else None
        workload = d.get("workload") if isinstance(d.get("workload"), str) else None
        if workload is None and time is not None:
            near = [e for e in entries if e["kind"] == "disruption" and abs(e["at"] - time) < 1.0]
            workload = near[0]["workload"] if near else None
        lane = names.index(workload) if workload in names else (_lane_at(lanes, at) if at is not None else None)
        if workload is None and lane is not None:
            workload = names[lane]
        resubmitted = d.get("handled_by") is None
        next_workload = names[lane + 1] if resubmitted and lane is not None and lane + 1 < len(names) else None
        kind = str(d.get("kind") or "disruption").upper().replace(" ", "_")
        evidence = d.get("evidence") or ()
        items.append(
            DisruptionItem(
                index=index,
                at=at,
                when=utc_text(time),
                kind=kind,
                lane=lane,
                workload=workload,
                headline=_headline(kind, workload, d, resubmitted, next_workload),
                evidence=tuple(str(e) for e in evidence) if isinstance(evidence, (list, tuple)) else (str(evidence),),
                resubmitted=resubmitted,
                reached_step=_step(d.get("reached_step")),
                resumed_from_step=_step(d.get("resumed_from_step")),
                steps_recomputed=_step(d.get("steps_recomputed")),
                seconds_lost=_number(d.get("seconds_lost")),
                next_workload=next_workload,
            )
        )
    return tuple(items)


def _with_resumed_steps(lanes: list[Lane], disruptions: Sequence[DisruptionItem]) -> list[Lane]:
    """Each resubmitted lane carries the step it resumed from, read off the disruption that caused it."""
    by_next = {d.next_workload: d.resumed_from_step for d in disruptions if d.next_workload}
    return [dataclasses.replace(lane, resumed_from_step=by_next.get(lane.workload)) for lane in lanes]


def goodput_view(goodput: Any) -> GoodputView | None:
    """The goodput split as parts of the held time, or ``None`` for a result that has none."""
    if not isinstance(goodput, Mapping):
        return None
    held = _number(goodput.get("held_seconds")) or 0.0
    lost = goodput.get("lost") if isinstance(goodput.get("lost"), Mapping) else {}

    def part(key: str, label: str, seconds: Any) -> GoodputPart:
        value = _number(seconds) or 0.0
        share = value / held if held > 0 else None
        text = f"{label}: {duration(value)}" + (f" ({share * 100:.1f}%)" if share is not None else "")
        return GoodputPart(key, label, value, share, text)

    lost_parts = (
        part("detection", "detection", lost.get("detection_seconds")),
        part("restart", "restart", lost.get("restart_seconds")),
        part("recomputed", "recomputed steps", lost.get("recomputed_seconds")),
    )
    lost_total = _number(goodput.get("lost_seconds"))
    parts = (
        part("provisioning", "provisioning", goodput.get("provisioning_seconds")),
        part("productive", "productive", goodput.get("productive_seconds")),
        part("lost", "lost to disruptions", lost_total if lost_total is not None else sum(p.seconds for p in lost_parts)),
        part("cleanup", "cleanup", goodput.get("cleanup_seconds")),
    )
    ratio = _number(goodput.get("goodput"))
    queued = _number(goodput.get("queued_seconds")) or 0.0
    chips = goodput.get("chips")
    return GoodputView(
        chips=chips if isinstance(chips, int) and not isinstance(chips, bool) else None,
        chip_hours=_number(goodput.get("chip_hours")),
        held_seconds=held,
        held_text=duration(held),
        queued_seconds=queued,
        queued_text=duration(queued),
        goodput=ratio,
        goodput_text=f"{ratio * 100:.1f}%" if ratio is not None else "–",
        parts=parts,
        lost_parts=lost_parts,
        adds_up=abs(sum(p.seconds for p in parts) - held) <= max(1.0, 0.01 * held),
    )


def workload_view(result: Any) -> WorkloadView:
    """Everything the task-instance view draws for one ``PathwaysJobOperator`` result."""
    if not is_workload_result(result):
        return WorkloadView(
            is_workload=False,
            message="This task's result is not a Pathways workload's: the view shows PathwaysJobOperator tasks.",
        )
    entries = _entries(result)
    notes = []
    t0 = entries[0]["at"] if entries else None
    lanes: list[Lane] = []
    span = 0.0
    if t0 is not None:
        view_end = entries[-1]["at"]
        span = view_end - t0
        order = list(dict.fromkeys(e["workload"] for e in entries if e["kind"] != "disruption"))
        lanes = [_lane(name, i, [e for e in entries if e["workload"] == name], t0, view_end) for i, name in enumerate(order)]
    else:
        notes.append("This result has no timeline (written before pathways-airflow recorded one): its disruptions and checkpoint are shown.")
    disruptions = _disruptions(result, entries, lanes, t0)
    lanes = _with_resumed_steps(lanes, disruptions)
    goodput = goodput_view(result.get("goodput"))
    if goodput is None:
        notes.append("This result has no goodput split (written before pathways-airflow measured it).")
    elif not goodput.adds_up:
        notes.append(f"The goodput parts add up to {duration(sum(p.seconds for p in goodput.parts))}, not the {goodput.held_text} held.")
    checkpoint = result.get("checkpoint") if isinstance(result.get("checkpoint"), Mapping) else None
    wall = _number(result.get("wall_time_seconds"))
    restarts = result.get("restarts")
    queued = result.get("queued")
    return WorkloadView(
        is_workload=True,
        message=f"{result['backend']} {result['namespace']}/{result['name']}: {result['state']}",
        name=result["name"],
        namespace=result["namespace"],
        backend=result["backend"],
        state=result["state"],
        restarts=restarts if isinstance(restarts, int) else None,
        queue_text=QueuePlace.from_dict(queued).line() if isinstance(queued, Mapping) else None,
        wall_time_text=duration(wall) if wall is not None else None,
        summary=str(result.get("disruption_summary") or "") or None,
        started=utc_text(t0),
        span_seconds=span,
        lanes=tuple(lanes),
        disruptions=disruptions,
        checkpoint=dict(checkpoint) if checkpoint else None,
        resubmissions=sum(1 for d in disruptions if d.resubmitted),
        goodput=goodput,
        notes=tuple(notes),
    )


__all__ = [
    "DisruptionItem",
    "GoodputView",
    "Lane",
    "Segment",
    "WorkloadView",
    "goodput_view",
    "is_workload_result",
    "to_json",
    "utc_text",
    "workload_view",
]
