"""Was a deferred task killed? Read from the states Airflow reports for a task instance.

Airflow 3.3 tells a trigger when a user kills its deferred task (``BaseTrigger.on_kill``). On
3.1 and 3.2 a trigger is only cancelled, and it is cancelled the same way whether a user marked
the task failed, succeeded or cleared it, or the triggerer is shutting down, or another
triggerer took the trigger over. Only the first kind must delete the workload; the others must
leave it running for the next triggerer. The task instance's state tells them apart: it stays
``deferred`` while the task still waits on its trigger, and leaves ``deferred`` only when
something ended the wait.
"""

from __future__ import annotations

from typing import Any, Mapping

DEFERRED = "deferred"


def this_task_state(task_states: Mapping[str, Mapping[str, Any]], run_id: str, task_id: str, map_index: int | None) -> tuple[bool, str | None]:
    """``(found, state)`` for one task instance in the Execution API's ``task_states`` answer.

    The answer is ``{run_id: {key: state}}``; the key is the task id, or ``<task_id>_<map_index>``
    for a mapped task instance (Airflow's ``get_task_instance_states`` route).
    """
    key = task_id if map_index is None or map_index < 0 else f"{task_id}_{map_index}"
    run = task_states.get(run_id) or {}
    return (key in run, run.get(key))


def killed_while_deferred(found: bool, state: str | None) -> bool:
    """Whether a cancelled trigger's task was ended by someone (mark failed/success, clear).

    A task instance still ``deferred`` was not killed: the triggerer stopped or handed the
    trigger on. One that cannot be found says nothing either way, so nothing is deleted.
    """
    return found and state != DEFERRED
