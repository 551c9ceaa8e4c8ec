"""``BatchJobTrigger``: wait in the triggerer until a Kubernetes batch/v1 Job has finished.

Short, single-pod work (a checkpoint conversion) runs as a plain Job, not a Pathways workload:
there are no slices to watch and no restarts to follow, so one ``GET`` of the Job every
``poll_interval`` is all the waiting needs — no shared watch. The pure part,
:func:`job_outcome`, reads the Job's terminal conditions; the operator's own wait in a worker
uses the same function, so both paths decide alike.

It never raises out of ``run()``: an API that keeps failing ends in one ``error`` event. When
the task's ``execution_timeout`` passes, the Job is deleted here and a ``timeout`` event sent; a
user killing the deferred task deletes the Job (``on_kill``). Either way no pod is left running.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping

from airflow.triggers.base import TriggerEvent

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import JOB
from pathways_airflow.triggers.kill import KillableTrigger

DEFAULT_POLL_INTERVAL = 10.0
MAX_CONSECUTIVE_FAILURES = 10
ON_KILL_TIMEOUT = 30.0

RUNNING = "running"
COMPLETE = "complete"
FAILED = "failed"
GONE = "gone"
OUTCOMES = (RUNNING, COMPLETE, FAILED, GONE)


# --- pure: what a Job's status says ------------------------------------------------------------


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
        """One line for the task log."""
        if self.status == RUNNING:
            return f"running ({self.active} active pod{'s' if self.active != 1 else ''})" if self.active else "pending"
        detail = ": ".join(p for p in (self.reason, self.message) if p)
        return f"{self.status} ({detail})" if detail else self.status

    def to_event(self, name: str, namespace: str) -> dict[str, Any]:
        """The event payload both waits hand to ``execute_complete``."""
        return {
            "status": self.status,
            "name": name,
            "namespace": namespace,
            "reason": self.reason,
            "message": self.message,
        }


def _true_condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for item in (job.get("status") or {}).get("conditions") or ():
        if item.get("type") == type_ and item.get("status") == "True":
            return item
    return None


def job_outcome(job: Mapping[str, Any] | None) -> JobOutcome:
    """Read a Job as its controller left it.

    Only the terminal conditions ``Complete`` and ``Failed`` end the wait: since Kubernetes 1.31
    ``SuccessCriteriaMet`` and ``FailureTarget`` come first, while pods may still be terminating
    and their logs still being written. A Job that is missing, or being deleted before it
    finished, was removed by someone else: waiting longer would wait forever.
    """
    if job is None:
        return JobOutcome(GONE, "NotFound", "the Job no longer exists")
    complete = _true_condition(job, "Complete")
    if complete is not None:
        return JobOutcome(COMPLETE, complete.get("reason") or "", complete.get("message") or "")
    failed = _true_condition(job, "Failed")
    if failed is not None:
        return JobOutcome(FAILED, failed.get("reason") or "", failed.get("message") or "")
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return JobOutcome(GONE, "Deleting", "the Job is being deleted before it finished")
    return JobOutcome(RUNNING, active=int((job.get("status") or {}).get("active") or 0))


# --- the trigger ----------------------------------------------------------------------------------


class BatchJobTrigger(KillableTrigger):
    """Yield one event once Job ``namespace/name`` has finished, or the deadline has passed.

    Events: ``{"status": "complete" | "failed" | "gone", "name", "namespace", "reason",
    "message"}``; ``{"status": "timeout", ..., "deleted": bool}`` after ``deadline`` (epoch
    seconds); ``{"status": "error", ..., "message"}`` when the API kept failing.
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        target: dict[str, Any],
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        deadline: float | None = None,
        max_failures: int = MAX_CONSECUTIVE_FAILURES,
    ):
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.target = target
        self.poll_interval = float(poll_interval)
        self.deadline = deadline
        self.max_failures = max_failures

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.job.BatchJobTrigger",
            {
                "name": self.name,
                "namespace": self.namespace,
                "target": self.target,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "max_failures": self.max_failures,
            },
        )

    @property
    def hook(self) -> AsyncPathwaysHook:
        return AsyncPathwaysHook(ClusterTarget.from_dict(self.target))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async for event in self._poll():
                yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting for Job %s/%s failed", self.namespace, self.name)
            yield TriggerEvent(
                {"status": "error", "name": self.name, "namespace": self.namespace, "message": f"{type(error).__name__}: {error}"}
            )

    async def _poll(self) -> AsyncIterator[TriggerEvent]:
        failures = 0
        last_line = ""
        while True:
            try:
                job = await self.hook.get(JOB, self.namespace, self.name)
            except Exception as error:
                failures += 1
                message = f"{type(error).__name__}: {error}"
                self.log.warning(
                    "reading Job %s/%s failed (%d of %d in a row): %s",
                    self.namespace, self.name, failures, self.max_failures, message,
                )
                if failures >= self.max_failures:
                    yield TriggerEvent(
                        {
                            "status": "error",
                            "name": self.name,
                            "namespace": self.namespace,
                            "message": f"{failures} reads in a row failed; the last: {message}",
                        }
                    )
                    return
            else:
                try:
                    outcome = job_outcome(job)
                except (AttributeError, TypeError, ValueError) as error:
                    # A body of the wrong shape (a proxy's answer, a half-upgraded server) is a
                    # failed read like any other: counted, and read again.
                    failures += 1
                    self.log.warning("Job %s/%s: unreadable answer (%d of %d in a row): %r", self.namespace, self.name, failures, self.max_failures, error)
                    if failures >= self.max_failures:
                        yield TriggerEvent({"status": "error", "name": self.name, "namespace": self.namespace, "message": f"{failures} unreadable answers in a row; the last: {error!r}"})
                        return
                    await asyncio.sleep(self.poll_interval)
                    continue
                failures = 0
                line = outcome.summary()
                if line != last_line:
                    self.log.info("Job %s/%s: %s", self.namespace, self.name, line)
                    last_line = line
                if outcome.finished:
                    yield TriggerEvent(outcome.to_event(self.name, self.namespace))
                    return
            remaining = None if self.deadline is None else self.deadline - time.time()
            if remaining is not None and remaining <= 0:
                deleted = await self._delete("the task's execution_timeout passed")
                yield TriggerEvent(
                    {
                        "status": "timeout",
                        "name": self.name,
                        "namespace": self.namespace,
                        "message": last_line,
                        "deleted": deleted,
                    }
                )
                return
            await asyncio.sleep(self.poll_interval if remaining is None else max(0.0, min(self.poll_interval, remaining)))

    async def _delete(self, why: str) -> bool:
        self.log.info("deleting Job %s/%s: %s", self.namespace, self.name, why)
        return await self.hook.delete(JOB, self.namespace, self.name, propagation="Foreground")

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed, clear): stop the Job it was waiting on."""
        await asyncio.wait_for(self._delete("the task was killed while deferred"), timeout=ON_KILL_TIMEOUT)
