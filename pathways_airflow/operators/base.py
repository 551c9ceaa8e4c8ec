"""``ClusterOperator``: what every operator that creates something on the cluster shares.

Three things, each written once: the wall-clock deadline a wait gives up at (the task's
``execution_timeout``), what the task has created and not yet handed back (so that killing the
task deletes exactly that: no leaked slice, no second copy), and how a failure quotes a
container's last log lines.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow.sdk import BaseOperator

from pathways_airflow.connection import ClusterConnectionMixin

if TYPE_CHECKING:
    from airflow.sdk import Context

    from pathways_airflow.resources import Resource


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


def quoted_log(lines: Sequence[str]) -> str:
    """A container's last log lines as a failure message quotes them."""
    return f"Its last {len(lines)} log lines:\n" + "\n".join(f"  | {line}" for line in lines)


__all__ = ["ClusterOperator", "quoted_log"]
