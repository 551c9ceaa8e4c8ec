"""``BatchJobTrigger``: wait in the triggerer until a Kubernetes batch/v1 Job has finished.

Short, single-pod work (a checkpoint conversion, an inference benchmark) runs as a plain Job,
not a Pathways workload: there are no slices to watch and no restarts to follow, so one ``GET``
of the Job is all a look needs. The look comes as soon as the Job changes — every trigger of a
namespace is woken by one shared watch of the Jobs this provider made (cached as bare names:
the watch only says *when* to look) — and at the latest every ``poll_interval``, so a Job that
finishes is seen at once, not up to an interval later. When the Job has finished is the pure
:func:`pathways_airflow.state.jobs.job_outcome`; an operator that does not defer runs this same
trigger in its worker (:func:`~pathways_airflow.operators.base.first_event_here`), so every path
decides alike.

It never raises out of ``run()``: an API that keeps failing ends in one ``error`` event. When
the task's ``execution_timeout`` passes, the Job is deleted here and a ``timeout`` event sent; a
user killing the deferred task deletes the Job and the task's other objects named in
``also_delete`` (``on_kill``: the benchmark's server). Either way no pod is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import TriggerEvent

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import BY_KIND, JOB
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS
from pathways_airflow.spec.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from pathways_airflow.state.jobs import (
    COMPLETE, ERROR, FAILED, GONE, OUTCOMES, RUNNING, TIMEOUT, JobEvent, JobOutcome, job_outcome,
)
from pathways_airflow.triggers.deletion import delete_outliving_the_caller
from pathways_airflow.triggers.kill import KillableTrigger
from pathways_airflow.triggers.pruning import pruned_to_name
from pathways_airflow.triggers.watch import Subscription, shared_watch, spread, wait_for_change

MAX_CONSECUTIVE_FAILURES = 10

__all__ = [
    "BatchJobTrigger", "COMPLETE", "ERROR", "FAILED", "GONE", "OUTCOMES", "RUNNING", "TIMEOUT", "JobEvent", "JobOutcome", "job_outcome",
]
"""The trigger, its event and the statuses it carries (defined in :mod:`pathways_airflow.state.jobs`)."""

OUR_JOBS = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
"""The Jobs the shared watch follows: the ones this provider's operators create."""


# --- the trigger ----------------------------------------------------------------------------------


class BatchJobTrigger(KillableTrigger):
    """Yield one event once Job ``namespace/name`` has finished, or the deadline has passed.

    Events are :class:`~pathways_airflow.state.jobs.JobEvent` payloads: the Job's outcome
    (``complete``, ``failed``, ``gone``), ``timeout`` after ``deadline`` (epoch seconds), or
    ``error`` when the API kept failing.

    ``also_delete`` (``[{"kind": "LeaderWorkerSet", "name": ...}, ...]`` in ``namespace``) is
    what the task created besides the Job; killing the deferred task deletes it too.
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        target: dict[str, Any],
        poll_interval: float = POLL_INTERVAL_SECONDS["job"],
        deadline: float | None = None,
        max_failures: int = MAX_CONSECUTIVE_FAILURES,
        also_delete: list[dict[str, str]] | None = None,
    ):
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.target = target
        self.poll_interval = float(poll_interval)
        self.deadline = deadline
        self.max_failures = max_failures
        self.also_delete = [dict(item) for item in also_delete or ()]

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
                "also_delete": self.also_delete,
            },
        )

    @property
    def cluster(self) -> ClusterTarget:
        return ClusterTarget.from_dict(self.target)

    @property
    def hook(self) -> AsyncPathwaysHook:
        return AsyncPathwaysHook(self.cluster)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with contextlib.aclosing(self._poll()) as events:  # its finally runs when the reader stops, not at loop shutdown
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting for Job %s/%s failed", self.namespace, self.name)
            yield self._event(ERROR, message=f"{type(error).__name__}: {error}")

    async def _poll(self) -> AsyncIterator[TriggerEvent]:
        watch = shared_watch(self.cluster, JOB, self.namespace, OUR_JOBS, prune=pruned_to_name)
        subscription = watch.subscribe([self.name])
        try:
            async for event in self._looks(subscription):
                yield event
        finally:
            watch.unsubscribe(subscription)

    async def _looks(self, changed: Subscription) -> AsyncIterator[TriggerEvent]:
        """Read the Job after each change of it (and every ``poll_interval``) until it has finished.

        After a failed read the wait is the plain interval, never the watch's wake-ups: a failing
        API fails the watch too, and its reconnects must not use up ``max_failures`` faster.
        """
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
                    yield self._event(ERROR, message=f"{failures} reads in a row failed; the last: {message}")
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
                        yield self._event(ERROR, message=f"{failures} unreadable answers in a row; the last: {error!r}")
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
                yield self._event(TIMEOUT, message=last_line, deleted=deleted)
                return
            pause = spread(self.poll_interval) if remaining is None else max(0.0, min(self.poll_interval, remaining))
            if failures:
                await asyncio.sleep(pause)
            else:
                await wait_for_change([changed], pause)

    def _event(self, status: str, **fields: Any) -> TriggerEvent:
        return TriggerEvent(JobEvent(status, self.name, self.namespace, **fields).to_payload())

    async def _delete(self, why: str) -> bool:
        self.log.info("deleting Job %s/%s: %s", self.namespace, self.name, why)
        return await self.hook.delete(JOB, self.namespace, self.name)

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed, clear): stop the Job it was waiting on and
        the task's other objects (``also_delete``), each on its own, each going on past this trigger
        while the API holds it up (:mod:`~pathways_airflow.triggers.deletion`)."""
        why = "the task was killed while deferred"
        items = [{"kind": JOB.kind, "name": self.name}, *self.also_delete]
        self.log.info("deleting %s: %s", ", ".join(f"{i['kind']} {self.namespace}/{i['name']}" for i in items), why)
        await asyncio.gather(
            *(delete_outliving_the_caller(self.cluster, BY_KIND[i["kind"]], self.namespace, i["name"], why) for i in items)
        )
