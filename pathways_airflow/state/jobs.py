"""Whether a Kubernetes ``batch/v1`` Job has finished, and how: the one rule for every Job we run. Pure.

A checkpoint conversion and an inference benchmark are both plain Jobs, waited on in a worker or
in the triggerer (:class:`pathways_airflow.triggers.job.BatchJobTrigger`); all of those waits read
a Job with :func:`job_outcome`, so they end at the same moment and report the same cause, and
hand it to the task as one :class:`JobEvent`.

The rule follows kubernetes/api ``batch/v1/types.go`` (``JobStatus.Conditions`` and
``JobConditionType``): a Job is finished when it has the terminal condition ``Complete`` or
``Failed`` with status ``"True"``. ``SuccessCriteriaMet`` and ``FailureTarget`` are written first
(Kubernetes 1.31+), while the Job's remaining pods are still being terminated; a wait that ended
there would read pods whose exit codes and logs are not final yet, and would free the task while
the Job's pods still hold their nodes. So they do not end the wait. A Job that is missing, or
being deleted before it finished, was removed by someone else: waiting longer would wait forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow.state.conditions import true_condition

RUNNING = "running"
COMPLETE = "complete"
FAILED = "failed"
GONE = "gone"
OUTCOMES = (RUNNING, COMPLETE, FAILED, GONE)
TIMEOUT = "timeout"
"""A wait's end of its own: the task's deadline passed first (the Job was deleted then)."""
ERROR = "error"
"""A wait's end of its own: the API kept failing, so the Job's end is unknown."""


@dataclass(frozen=True)
class JobOutcome:
    """Where a Job stands: ``running``, ``complete``, ``failed`` or ``gone`` (deleted by someone)."""

    status: str
    reason: str = ""
    message: str = ""
    active: int = 0

    @property
    def finished(self) -> bool:
        return self.status != RUNNING

    def summary(self) -> str:
        """One line for the task log and for failure messages (``failed (Reason: message)``)."""
        if self.status == RUNNING:
            return f"running ({self.active} active pod{'s' if self.active != 1 else ''})" if self.active else "pending"
        detail = ": ".join(p for p in (self.reason, self.message) if p)
        return f"{self.status} ({detail})" if detail else self.status

    def to_event(self, name: str, namespace: str) -> dict[str, Any]:
        """The payload of the :class:`JobEvent` that says the Job ended so."""
        return JobEvent(self.status, name, namespace, self.reason, self.message).to_payload()

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> "JobOutcome":
        """The outcome an event of :meth:`to_event` carries."""
        return JobEvent.from_payload(event).outcome


@dataclass(frozen=True)
class JobEvent:
    """How a wait on a Job ended, as its trigger hands it to the task (in the worker or the triggerer).

    ``status`` is the Job's end (``complete``, ``failed``, ``gone``: :class:`JobOutcome`) or the
    wait's own: :data:`TIMEOUT` (``deleted``: the Job was deleted then) or :data:`ERROR`. The
    payload keeps the keys events have always had, no more, so a task deferred before an upgrade
    reads the event of its trigger after it.
    """

    status: str
    name: str
    namespace: str
    reason: str = ""
    message: str = ""
    deleted: bool = False

    @property
    def outcome(self) -> JobOutcome:
        return JobOutcome(self.status, self.reason, self.message)

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"status": self.status, "name": self.name, "namespace": self.namespace}
        if self.status in OUTCOMES:
            payload["reason"] = self.reason
        payload["message"] = self.message
        if self.status == TIMEOUT:
            payload["deleted"] = self.deleted
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "JobEvent":
        """Lenient: a key an older trigger did not send takes its default."""
        fields = ("status", "name", "namespace", "reason", "message")
        return cls(*(str(payload.get(key) or "") for key in fields), deleted=bool(payload.get("deleted")))


def job_outcome(job: Mapping[str, Any] | None) -> JobOutcome:
    """Read a Job as its controller left it (the module's rule: only ``Complete``/``Failed`` end it)."""
    if job is None:
        return JobOutcome(GONE, "NotFound", "the Job no longer exists")
    complete = true_condition(job, "Complete")
    if complete is not None:
        return JobOutcome(COMPLETE, complete.get("reason") or "", complete.get("message") or "")
    failed = true_condition(job, "Failed")
    if failed is not None:
        return JobOutcome(FAILED, failed.get("reason") or "", failed.get("message") or "")
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return JobOutcome(GONE, "Deleting", "the Job is being deleted before it finished")
    return JobOutcome(RUNNING, active=int((job.get("status") or {}).get("active") or 0))


def run_again_on_retry(job: Mapping[str, Any] | None) -> bool:
    """Whether an earlier try's Job is replaced rather than adopted: one that failed or is being
    deleted is, since a retry is there to try again; one running or complete is adopted, since a
    second copy writing the same output at the same time would delete what the first one wrote."""
    return job_outcome(job).status in (FAILED, GONE)
