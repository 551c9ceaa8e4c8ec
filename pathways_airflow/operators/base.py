"""``ClusterOperator``: what every operator that creates something on the cluster shares.

Three things, each written once: the wall-clock deadline a wait gives up at (the task's
``execution_timeout``), what the task has created and not yet handed back (so that killing the
task deletes exactly that: no leaked slice, no second copy), and how a task that does not defer
waits in its worker (:func:`first_event_here`: the trigger it would have deferred to).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.connection import ClusterConnectionMixin

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow.triggers.base import BaseTrigger

    from pathways_airflow.resources import Resource


def first_event_here(trigger: "BaseTrigger") -> dict[str, Any]:
    """Run ``trigger`` in this worker, on a loop of its own, until its first event; its payload.

    A task that does not defer waits with the same trigger it would have deferred to: the same
    watches, the same state core, the same events, so both paths decide alike.
    """
    from pathways_airflow.hooks.pathways import AsyncPathwaysHook

    async def first() -> dict[str, Any]:
        events = trigger.run()
        try:
            return dict((await events.__anext__()).payload)
        finally:
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    return asyncio.run(first())


class ClusterOperator(ClusterConnectionMixin, BaseOperator):
    """Base of the operators that create objects on the cluster and wait on them."""

    _held: tuple[Resource, str, str] | None = None

    def deadline(self, context: Context) -> float | None:
        """When the task's ``execution_timeout`` runs out (wall clock, epoch seconds), if it has one."""
        if not self.execution_timeout:
            return None
        start = getattr(context["ti"], "start_date", None) or dt.datetime.now(dt.timezone.utc)
        return (start + self.execution_timeout).timestamp()

    # --- what a kill must delete ------------------------------------------------------------------

    def holding(self, resource: Resource, namespace: str, name: str) -> None:
        """The task now waits on this object: killing the task deletes it."""
        self._held = (resource, namespace, name)

    def released(self) -> None:
        """The object is finished with (deleted, or left on purpose): a kill no longer touches it."""
        self._held = None

    def finished_with(self, resource: Resource, namespace: str, name: str, *, delete: bool) -> None:
        """Done waiting on the object; delete it when ``delete`` (the operator's ``delete_on_finish``)."""
        if delete:
            self.hook.delete(resource, namespace, name)
            self.log.info("deleted %s %s/%s (delete_on_finish)", resource.kind, namespace, name)
        self.released()

    def on_kill(self) -> None:
        """The task was killed (or timed out) while waiting here: delete what it was waiting on."""
        if self._held is None:
            return
        resource, namespace, name = self._held
        self.log.info("deleting %s %s/%s: the task was stopped", resource.kind, namespace, name)
        self.hook.delete(resource, namespace, name)
        self.released()


__all__ = ["ClusterOperator", "first_event_here"]
