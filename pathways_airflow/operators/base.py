"""``ClusterOperator``: what every operator that creates something on the cluster shares.

Four things, each written once: which task instance the operator's objects belong to
(:meth:`ClusterOperator.task_identity`), the wall-clock deadline a wait gives up at (the task's
``execution_timeout``), every object the task has created and not yet handed back (so that
killing the task stops its waits and deletes exactly those, the newest first: no leaked slice, no
second copy), and how a task that does not defer waits in its worker (:func:`first_event_here`:
the trigger it would have deferred to).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.connection import ClusterConnectionMixin
from pathways_airflow.exceptions import KubernetesApiError, PathwaysError
from pathways_airflow.resources import ObjectRef, Resource
from pathways_airflow.run.rounds import first_try_of
from pathways_airflow.spec.names import TaskIdentity

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow.triggers.base import BaseTrigger


STOP_CHECK_SECONDS = 0.2
"""How often a wait in the worker asks whether its task was killed."""


def first_event_here(trigger: "BaseTrigger", stopped: Callable[[], bool]) -> dict[str, Any] | None:
    """Run ``trigger`` in this worker, on a loop of its own, until its first event; its payload, or
    ``None`` once ``stopped()`` is true first.

    A task that does not defer waits with the same trigger it would have deferred to: the same
    watches, the same state core, the same events, so both paths decide alike.
    """
    from pathways_airflow.hooks.pathways import AsyncPathwaysHook
    from pathways_airflow.triggers.deletion import deletes_done
    from pathways_airflow.triggers.notes import notes_written

    async def first() -> dict[str, Any] | None:
        events = trigger.run()
        following = asyncio.ensure_future(events.__anext__())
        try:
            while not stopped():
                done, _ = await asyncio.wait({following}, timeout=STOP_CHECK_SECONDS)
                if done:
                    return dict(following.result().payload)
            return None
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
            await events.aclose()
            await deletes_done()  # a delete the wait started outlives the wait, not this loop
            await notes_written()  # so do its notes
            await AsyncPathwaysHook.close_all()

    return asyncio.run(first())


DRY_RUN_RUN_ID = "dry-run"
"""The run id a dry run uses without a context, so a dry run never names a real run."""

Held = ObjectRef
"""An object a kill of the task must delete."""
_HOLDING = threading.RLock()
"""Guards what every task of the process holds: a kill (another thread, or a signal handler in the
task's own) takes it while the task adds to it. Reentrant: the handler may interrupt an update."""


class ClusterOperator(ClusterConnectionMixin, BaseOperator):
    """Base of the operators that create objects on the cluster and wait on them."""

    _held: tuple[Held, ...] = ()
    _stopped = False

    def task_identity(self, context: Context | None = None) -> TaskIdentity:
        """Which task instance the operator's objects belong to; placeholders for a dry run without a context."""
        if context is None:
            return TaskIdentity(self.dag_id if self.has_dag() else "dry-run", self.task_id, DRY_RUN_RUN_ID)
        ti = context["ti"]
        map_index = getattr(ti, "map_index", None)
        first_try = first_try_of(getattr(ti, "try_number", None), getattr(ti, "max_tries", None), self.retries)
        return TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else map_index, first_try)

    def deadline(self, context: Context) -> float | None:
        """When the task's ``execution_timeout`` runs out (wall clock, epoch seconds), if it has one."""
        if not self.execution_timeout:
            return None
        start = getattr(context["ti"], "start_date", None) or dt.datetime.now(dt.timezone.utc)
        return (start + self.execution_timeout).timestamp()

    # --- what a kill must delete ------------------------------------------------------------------

    def holding(self, resource: Resource, namespace: str, name: str) -> None:
        """The task now also waits on this object: killing the task deletes it (the newest first).

        Called once the object is created (and may be called before, too): a kill that landed
        while the create was in flight found nothing to delete, so the object is deleted here."""
        item = (resource, namespace, name)
        with _HOLDING:
            self._held = (*(h for h in self._held if h != item), item)
        self.raise_if_stopped()

    def released(self, resource: Resource | None = None, namespace: str = "", name: str = "") -> tuple[Held, ...]:
        """The object (with no arguments: every one) is finished with, deleted or left on purpose:
        a kill no longer touches it. What was released, the oldest first."""
        with _HOLDING:
            gone = self._held if resource is None else tuple(h for h in self._held if h == (resource, namespace, name))
            self._held = tuple(h for h in self._held if h not in gone)
        return gone

    def finished_with(self, resource: Resource, namespace: str, name: str, *, delete: bool) -> None:
        """Done waiting on the object; delete it when ``delete`` (the operator's ``delete_on_finish``)."""
        if delete:
            self.hook.delete(resource, namespace, name)
            self.log.info("deleted %s %s/%s (delete_on_finish)", resource.kind, namespace, name)
        self.released(resource, namespace, name)

    def delete_each(self, objects: Iterable[Held]) -> list[str]:
        """Delete the objects in order, each tried whatever became of the others, so one failure never
        leaves the rest behind (it is raised once all were tried); ``Kind/name`` of those deleted."""
        deleted: list[str] = []
        errors: list[str] = []
        for resource, namespace, name in objects:
            try:
                if self.hook.delete(resource, namespace, name):
                    deleted.append(f"{resource.kind}/{name}")
                    self.log.info("deleted %s %s/%s", resource.kind, namespace, name)
            except Exception as error:
                errors.append(f"{resource.kind} {namespace}/{name}: {error}")
                self.log.error("could not delete %s %s/%s: %s", resource.kind, namespace, name, error)
        if errors:
            raise KubernetesApiError("could not delete " + "; ".join(errors))
        return deleted

    def wait_here(self, trigger: "BaseTrigger") -> dict[str, Any]:
        """Wait in this worker with the trigger the task would defer to (:func:`first_event_here`),
        until its first event or the task's kill. Airflow's SIGTERM handler runs :meth:`on_kill` and
        returns (task-sdk ``task_runner``): without this the wait would go on judging the workload
        its kill deletes until the process is killed."""
        event = first_event_here(trigger, stopped=lambda: self._stopped)
        self.raise_if_stopped()
        assert event is not None  # only a stop ends the wait without one
        return event

    def raise_if_stopped(self) -> None:
        """Between the steps of a wait: a killed task goes no further. Its kill deleted what it held;
        what it came to hold since (an object whose create raced the kill) is deleted now."""
        if self._stopped:
            self._delete_what_it_holds()
            raise PathwaysError(f"{self.task_id} was stopped; what it created is being deleted")

    def on_kill(self) -> None:
        """The task was killed (or timed out): stop its waits, and delete what it holds, the newest first."""
        self._stopped = True
        self._delete_what_it_holds()

    def _delete_what_it_holds(self) -> None:
        """Release every object the task holds and delete them, the newest first."""
        held = self.released()
        if held:
            self.log.info("%s stopped: deleting %s", self.task_id, ", ".join(f"{r.kind} {ns}/{n}" for r, ns, n in held))
        self.delete_each(reversed(held))


__all__ = ["ClusterOperator", "Held", "first_event_here"]
