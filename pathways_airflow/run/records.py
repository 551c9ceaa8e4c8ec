"""The records that travel between a trigger, its operator, XCom and the task state store. Pure.

A workload's life crosses processes: the trigger sees it end, the operator resubmits it, a retry
of the task reads where the last try left off. Each record here has one shape, written by
``to_dict`` and read by ``from_dict``, so every side agrees on it. Readers are lenient (a key
missing from a record an older version wrote takes its default) because records outlive
upgrades: a task deferred before one resumes after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from pathways_airflow.state.disruption import Classification
from pathways_airflow.state.model import WorkloadState

JOBSET_RESTART = "JobSet restart"
"""``handled_by`` of a disruption the JobSet absorbed by restarting itself (within ``maxRestarts``)."""
PROGRAM_RECOVERY = "the program (elastic slices)"
"""``handled_by`` of a slice loss the program rode out itself: Pathways with elastic slices kept its
head running, and it went on once the slice was back (MaxText's ``elastic_enabled``)."""
IN_PLACE = (JOBSET_RESTART, PROGRAM_RECOVERY)
NEWEST_COMMITTED = "newest_committed"
"""``resume_source`` of a resubmission's ``resumed_from_step`` that is the newest committed
checkpoint on GCS when the task resubmitted (what it handed the program, with ``resume="newest_committed"``)."""
PROGRAM_LOG = "program_log"
"""``resume_source`` of a ``resumed_from_step`` the next run's program logged it restored: the
truth, whichever tier (GCS, a local or a peer's copy) it came from."""


@dataclass(frozen=True)
class Disruption:
    """Maintenance, preemption or slice loss that ended a run of the program.

    Either the JobSet restarted in place (``handled_by == JOBSET_RESTART``, seen by the trigger)
    or the operator deleted the workload and submitted the next attempt (``workload`` is the one
    that ended, with the step it reached, the step the next resumed from, and the cost).
    """

    time: float
    kind: str
    evidence: tuple[str, ...] = ()
    reached_step: int | None = None
    handled_by: str | None = None
    workload: str | None = None
    resumed_from_step: int | None = None
    steps_recomputed: int | None = None
    seconds_lost: float = 0.0
    resume_source: str = NEWEST_COMMITTED
    resubmitted_as: str | None = None
    """The workload submitted in its stead: only that workload's program can say where it resumed
    (a later try may submit another after this one fails; ``None`` in records from before it was kept)."""

    @property
    def resubmitted(self) -> bool:
        """It cost a fresh workload (and counts against ``max_disruptions``)."""
        return self.handled_by not in IN_PLACE

    def to_dict(self) -> dict[str, Any]:
        if not self.resubmitted:
            return {
                "time": self.time,
                "kind": self.kind,
                "evidence": list(self.evidence),
                "handled_by": self.handled_by,
                "reached_step": self.reached_step,
                **({"seconds_lost": self.seconds_lost} if self.handled_by == PROGRAM_RECOVERY else {}),
            }
        return {
            "time": self.time,
            "kind": self.kind,
            "evidence": list(self.evidence),
            "workload": self.workload,
            "reached_step": self.reached_step,
            "resumed_from_step": self.resumed_from_step,
            "steps_recomputed": self.steps_recomputed,
            "seconds_lost": self.seconds_lost,
            **({"resume_source": self.resume_source} if self.resume_source != NEWEST_COMMITTED else {}),
            **({"resubmitted_as": self.resubmitted_as} if self.resubmitted_as else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Disruption:
        """Also reads a restart as the trigger reported it (``last_step`` for ``reached_step``)."""
        reached = data.get("reached_step", data.get("last_step"))
        return cls(
            time=float(data.get("time") or 0.0),
            kind=str(data.get("kind") or ""),
            evidence=tuple(data.get("evidence") or ()),
            reached_step=reached,
            handled_by=data.get("handled_by"),
            workload=data.get("workload"),
            resumed_from_step=data.get("resumed_from_step"),
            steps_recomputed=data.get("steps_recomputed"),
            seconds_lost=float(data.get("seconds_lost") or 0.0),
            resume_source=str(data.get("resume_source") or NEWEST_COMMITTED),
            resubmitted_as=data.get("resubmitted_as"),
        )


@dataclass(frozen=True)
class PhaseSeen:
    """A phase of a workload and when the wait first saw it (the wait's own clock)."""

    at: float
    phase: str
    slices_ready: int = 0
    slices_total: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "phase": self.phase, "slices_ready": self.slices_ready, "slices_total": self.slices_total}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhaseSeen:
        return cls(
            float(data.get("at") or 0.0),
            str(data.get("phase") or ""),
            int(data.get("slices_ready") or 0),
            int(data.get("slices_total") or 0),
        )


@dataclass(frozen=True)
class WorkloadRun:
    """One workload of a task from submission to deletion: what chip-hours and goodput are computed from.

    ``ended``: when the task learned that the workload ended (the trigger's verdict reached it);
    ``deleted``: when the task deleted it (``None``: not deleted, or not yet); ``queued``: its place
    in Kueue's queue when last seen waiting (:class:`~pathways_airflow.state.queue.QueuePlace`'s dict).
    """

    workload: str
    submitted: float
    phases: tuple[PhaseSeen, ...] = ()
    ended: float | None = None
    deleted: float | None = None
    queued: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "submitted": self.submitted,
            "phases": [p.to_dict() for p in self.phases],
            "ended": self.ended,
            "deleted": self.deleted,
            **({"queued": dict(self.queued)} if self.queued else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadRun:
        return cls(
            workload=str(data.get("workload") or ""),
            submitted=float(data.get("submitted") or 0.0),
            phases=tuple(PhaseSeen.from_dict(p) for p in data.get("phases") or ()),
            ended=data.get("ended"),
            deleted=data.get("deleted"),
            queued=data.get("queued") or None,
        )


@dataclass(frozen=True)
class Submission:
    """The workload a task is waiting on now, and what happened to the ones before it."""

    name: str
    namespace: str
    backend: str
    attempt: int = 0
    started: float = field(default_factory=time.time)
    disruptions: tuple[Disruption, ...] = ()
    first_try: int | None = None
    """The first try of the task's round that made this record (:mod:`~pathways_airflow.run.rounds`)."""
    submitted: float | None = None
    """When the current workload was submitted (``None``: at ``started``)."""
    runs: tuple[WorkloadRun, ...] = ()
    """The workloads of this round that have ended, oldest first."""
    maintenance: Mapping[str, Any] | None = None
    """What was done about maintenance announced inside the run before it was first submitted
    (:meth:`~pathways_airflow.state.slices.MaintenanceAhead.recorded`); ``None``: not looked at."""

    @property
    def resubmissions(self) -> int:
        """Disruptions that cost a fresh workload: what ``max_disruptions`` limits."""
        return sum(1 for d in self.disruptions if d.resubmitted)

    def with_disruptions(self, *more: Disruption) -> Submission:
        return replace(self, disruptions=(*self.disruptions, *more))

    def next_attempt(self, name: str, submitted: float | None = None) -> Submission:
        """The record of the workload submitted after this one was disrupted (at ``submitted``)."""
        return replace(self, name=name, attempt=self.attempt + 1, submitted=submitted)

    def ended(self, phases: tuple[PhaseSeen, ...], at: float, queued: Mapping[str, Any] | None = None) -> Submission:
        """The current workload ended (the task learned it ``at``), having passed through ``phases``:
        also phases seen before this try re-attached to it (written on the workload), from its
        submission; ``queued``: its last place in Kueue's queue, if it was seen waiting there."""
        submitted = self.started if self.submitted is None else self.submitted
        run = WorkloadRun(self.name, min(submitted, phases[0].at) if phases else submitted, phases, ended=at, queued=queued)
        return replace(self, runs=(*[r for r in self.runs if r.workload != self.name], run))

    def found_finished(self, phases: tuple[PhaseSeen, ...], in_place: tuple[Disruption, ...] = ()) -> Submission:
        """The current workload had already ended when this try found it (a success a retry reuses):
        its chip time is what the phases written on it say, up to its end, not up to this try, and
        the disruptions it got through in place are those its waits wrote on it (``in_place``; the
        try that saw them ended before it could record them), each once."""
        end = phases[-1].at if phases else self.started
        known = {(d.time, d.kind, d.handled_by) for d in self.disruptions}
        unrecorded = [d for d in in_place if (d.time, d.kind, d.handled_by) not in known]
        return self.with_disruptions(*unrecorded).ended(phases, end).deleted(end)

    def deleted(self, at: float) -> Submission:
        """The task deleted the workload that ended last (a deletion already recorded stands)."""
        if not self.runs or self.runs[-1].deleted is not None:
            return self
        return replace(self, runs=(*self.runs[:-1], replace(self.runs[-1], deleted=at)))

    def to_dict(self) -> dict[str, Any]:
        record = {
            "name": self.name,
            "namespace": self.namespace,
            "backend": self.backend,
            "attempt": self.attempt,
            "started": self.started,
            "disruptions": [d.to_dict() for d in self.disruptions],
        }
        if self.submitted is not None:
            record["submitted"] = self.submitted
        if self.runs:
            record["runs"] = [r.to_dict() for r in self.runs]
        if self.maintenance:
            record["maintenance"] = dict(self.maintenance)
        return record if self.first_try is None else {**record, "first_try": self.first_try}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, namespace: str = "default", backend: str = "pathwaysjob") -> Submission:
        """``namespace`` and ``backend`` fill in for a record that lacks them (the task's own)."""
        return cls(
            name=str(data.get("name") or ""),
            namespace=str(data.get("namespace") or namespace),
            backend=str(data.get("backend") or backend),
            attempt=int(data.get("attempt") or 0),
            started=float(data.get("started") or time.time()),
            disruptions=tuple(Disruption.from_dict(d) for d in data.get("disruptions") or ()),
            first_try=data["first_try"] if isinstance(data.get("first_try"), int) else None,
            submitted=data.get("submitted"),
            runs=tuple(WorkloadRun.from_dict(r) for r in data.get("runs") or ()),
            maintenance=data.get("maintenance") or None,
        )


@dataclass(frozen=True)
class WorkloadEvent:
    """What ``PathwaysJobTrigger`` sends when it stops watching, and the operator acts on.

    ``status``: ``finished`` (``state`` is final; ``classification`` says why a failure
    happened), ``timeout`` (the task's ``execution_timeout`` passed; ``deleted`` says whether
    the trigger deleted the workload) or ``error`` (the API kept failing; ``message``).
    """

    status: str
    name: str
    state: WorkloadState | None = None
    failure: Mapping[str, Any] | None = None
    classification: Classification | None = None
    last_step: int | None = None
    restarts: tuple[Disruption, ...] = ()
    running_since: float | None = None
    deleted: bool = False
    message: str = ""
    forbidden: bool = False
    """With ``error``: the API refused a verb the wait needs (RBAC); no retry gets further."""
    phases: tuple[PhaseSeen, ...] = ()
    """With ``finished``: each phase the wait saw the workload enter, and when."""
    queued: Mapping[str, Any] | None = None
    """With ``finished``: its last place in Kueue's queue, if the wait saw it waiting there."""
    resumed_from: int | None = None
    """With ``finished``: the step the program logged it restored at start-up (``-1``: none), when
    the wait was asked to read it (:func:`~pathways_airflow.run.progress.step_resumed_from`)."""

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"status": self.status, "name": self.name}
        if self.state is not None:
            payload["state"] = self.state.to_dict()
        if self.status == "finished":
            payload.update(
                failure=self.failure,
                classification=self.classification.to_dict() if self.classification else None,
                last_step=self.last_step,
                restarts=[r.to_dict() for r in self.restarts],
                running_since=self.running_since,
                phases=[p.to_dict() for p in self.phases],
                **({"queued": dict(self.queued)} if self.queued else {}),
                **({"resumed_from": self.resumed_from} if self.resumed_from is not None else {}),
            )
        elif self.status == "timeout":
            payload["deleted"] = self.deleted
        else:
            payload["message"] = self.message
            if self.forbidden:
                payload["forbidden"] = True
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> WorkloadEvent:
        return cls(
            status=str(payload.get("status") or "error"),
            name=str(payload.get("name") or ""),
            state=WorkloadState.from_dict(payload["state"]) if payload.get("state") else None,
            failure=payload.get("failure"),
            classification=Classification.from_dict(payload["classification"]) if payload.get("classification") else None,
            last_step=payload.get("last_step"),
            restarts=tuple(
                replace(d, handled_by=d.handled_by if d.handled_by in IN_PLACE else JOBSET_RESTART)
                for d in (Disruption.from_dict(r) for r in payload.get("restarts") or ())
            ),
            running_since=payload.get("running_since"),
            deleted=bool(payload.get("deleted")),
            message=str(payload.get("message") or ""),
            forbidden=bool(payload.get("forbidden")),
            phases=tuple(PhaseSeen.from_dict(p) for p in payload.get("phases") or ()),
            queued=payload.get("queued") or None,
            resumed_from=payload.get("resumed_from"),
        )
