"""A clear starts the task over; a retry carries on. Pure.

Airflow counts tries across clears, so the try number alone cannot tell a retry (which must
re-attach to the live workload, or return the result of one that succeeded before the worker
died) from a clear (after which the user expects the task to run again: a fixed program, new
data, a successful run they want repeated). What does tell them apart is ``max_tries``:
``clear_task_instances`` sets it to the try number at the clear plus the task's ``retries``
(airflow-core ``airflow/models/taskinstance.py``), and retries leave it alone. Airflow's own
first try of the current round is ``max_tries - retries + 1`` (task-sdk
``airflow/sdk/execution_time/task_runner.py``, ``get_first_reschedule_date``).

The task writes that first try on what it submits (annotation ``pathways-airflow/first-try``) and
in its task state store record; a later try of another round treats both as history, never as
its own work. Workloads and records without it (written before the annotation existed, or where
Airflow does not say) count as the current round's, which is how they were treated before.
"""

from __future__ import annotations

from typing import Any, Mapping

from pathways_airflow.spec.names import FIRST_TRY_ANNOTATION


def first_try_of(try_number: Any, max_tries: Any, retries: Any) -> int | None:
    """The first try of the current round, or ``None`` when Airflow's numbers do not say.

    ``None`` also when the DAG's ``retries`` changed since the round began (the formula would
    point before the first try or past this one): the task then behaves as if never cleared.
    """
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (try_number, max_tries, retries)):
        return None
    first = max_tries - retries + 1
    return first if 1 <= first <= try_number else None


def _another_round(written: Any, first_try: int | None) -> bool:
    """Whether the first try written on something names a round other than ``first_try``; what
    carries none, or a round nobody knows, counts as the current one."""
    if isinstance(written, str) and written.isdigit():
        written = int(written)
    return first_try is not None and isinstance(written, int) and written != first_try


def from_an_earlier_round(obj: Mapping[str, Any], first_try: int | None) -> bool:
    """Whether a workload was submitted before the clear that began the round ``first_try``."""
    return _another_round(((obj.get("metadata") or {}).get("annotations") or {}).get(FIRST_TRY_ANNOTATION), first_try)


def record_of_this_round(record: Mapping[str, Any] | None, first_try: int | None) -> Mapping[str, Any] | None:
    """The task's stored record when it belongs to the round ``first_try``, else ``None`` (the
    task was cleared since: its result, attempt and disruptions are history)."""
    return None if record is None or _another_round(record.get("first_try"), first_try) else record


def carries_on(attempt: int, try_number: Any, first_try: int | None) -> bool:
    """Whether a new workload carries on from the round's newest committed checkpoint: every
    disruption attempt after the first, and the first workload of any later try of the round.

    A later try submits attempt 0 when its workload is gone: a worker died between deleting a
    disrupted workload and submitting the next, where no task state store (Airflow < 3.3) kept the
    attempt number. Its checkpoints are the round's work, so it resumes from them too.
    """
    retrying = isinstance(try_number, int) and first_try is not None and try_number > first_try
    return attempt > 0 or retrying
