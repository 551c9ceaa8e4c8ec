"""``on_kill`` for deferred tasks on every Airflow line.

Airflow 3.3 calls ``BaseTrigger.on_kill()`` when a user kills a deferred task (mark failed,
mark success, clear) and never on a triggerer restart. Airflow 3.1 and 3.2 have no such call:
the trigger is cancelled, then ``cleanup()`` runs, exactly as when the triggerer shuts down or
hands the trigger to another triggerer. There, ``cleanup()`` of a cancelled trigger asks Airflow
for its task instance's state (the Execution API, as the standard provider's external-task
triggers do) and calls ``on_kill()`` only when the task is no longer deferred
(:func:`pathways_airflow.hooks.airflow_states.killed_while_deferred`).

What remains on 3.1/3.2: a triggerer that is itself killed (SIGKILL, a lost node) cannot ask,
and neither can one whose supervisor is gone; a task killed then keeps its workload until the
trigger's own deadline, a later retry's re-attach, or the janitor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.triggers.base import BaseTrigger

from pathways_airflow.hooks.airflow_states import killed_while_deferred, this_task_state

NATIVE_ON_KILL = "on_kill" in vars(BaseTrigger)
"""Whether this Airflow calls ``BaseTrigger.on_kill`` itself (3.3+)."""

STATE_LOOKUP_TIMEOUT = 10.0


class KillableTrigger(BaseTrigger):
    """A trigger whose ``on_kill`` runs when a user kills its deferred task, on 3.1 to 3.3."""

    async def on_kill(self) -> None:  # pragma: no cover - every subclass defines it
        """Stop what the deferred task was running."""

    async def cleanup(self) -> None:
        await super().cleanup()
        if NATIVE_ON_KILL or not _being_cancelled():
            return
        found, state = await _task_instance_state(getattr(self, "task_instance", None))
        if killed_while_deferred(found, state):
            self.log.info("the deferred task is now %s: stopping what it ran", state or "cleared")
            await self.on_kill()


def _being_cancelled() -> bool:
    """Whether the running task is unwinding from a cancellation (Python 3.11+ can tell)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return task is not None and (cancelling is None or cancelling() > 0)


async def _task_instance_state(ti: Any) -> tuple[bool, str | None]:
    """The task instance's state from Airflow, or ``(False, None)`` when it cannot be asked
    (no task instance: an AssetWatcher or ``dag.test``; no supervisor: the triggerer is going)."""
    if ti is None:
        return (False, None)
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
        from asgiref.sync import sync_to_async

        states = await asyncio.wait_for(
            sync_to_async(RuntimeTaskInstance.get_task_states)(
                dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=ti.map_index
            ),
            timeout=STATE_LOOKUP_TIMEOUT,
        )
    except Exception:
        return (False, None)
    return this_task_state(states or {}, ti.run_id, ti.task_id, ti.map_index)
