"""Deleting a killed task's workload until it is done, not for as long as a trigger may live.

Airflow gives a trigger's ``on_kill`` a fixed time (the triggerer's ``on_kill_timeout``, 30 s by
default) and then moves on. During API trouble — a 503 storm, a 429 asking to come back in 40 s,
a short outage — a DELETE can take longer than that, and a delete cancelled with ``on_kill``
leaves the TPU workload running with nothing left to stop it. So the delete runs as a task of
its own on the triggerer's event loop, which outlives the trigger: ``on_kill`` waits for it as
long as it may, and if the time runs out the delete carries on, retrying until the workload is
gone or :data:`GIVE_UP_AFTER_SECONDS` have passed. A worker's own loop waits for it before it
ends (:func:`deletes_done`). A triggerer that is itself stopped stops it too, and the log says
so: the janitor, JobSet's ``ttlSecondsAfterFinished`` and Kueue's maximum execution time are the
backstops for that.

An accepted DELETE is not the end either: a busy garbage collector can leave the pods on their
TPUs for many minutes. For a workload, the same task goes on looking at its pods until every one
is stopping, and deletes what the collector has not reached once it is late
(:mod:`pathways_airflow.state.reclaim`).
"""

from __future__ import annotations

import asyncio
import logging
import time

from pathways_airflow.hooks.api import describe, is_transient
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.hooks.reclaim import POLL_SECONDS, reclaim_async
from pathways_airflow.resources import WORKLOAD_KINDS, Resource

log = logging.getLogger(__name__)

GIVE_UP_AFTER_SECONDS = 30 * 60.0
RETRY_EVERY_SECONDS = 5.0
WAIT_IN_ON_KILL_SECONDS = 25.0
"""How long ``on_kill`` waits for the delete before leaving it to run on: under the triggerer's
default ``on_kill_timeout`` (30 s), so the triggerer never has to cancel it."""

_running: dict[tuple[str, str, str, str], asyncio.Task[bool]] = {}
"""Deletes in progress, by cluster, kind, namespace and name: held here so that they are neither
collected nor started twice, and so that they outlive the trigger that asked for them."""


async def delete_until_gone(
    target: ClusterTarget, resource: Resource, namespace: str, name: str, why: str, *, give_up_after: float = GIVE_UP_AFTER_SECONDS
) -> bool:
    """DELETE the object (as :attr:`~pathways_airflow.resources.Resource.propagation` says),
    retrying API failures until it is accepted or found gone; then, for a workload, see its pods
    stop (:func:`until_pods_stop`). ``True`` once deleted or gone; ``False`` if it gave up (a
    refusal, or :data:`GIVE_UP_AFTER_SECONDS` of failures)."""
    hook = AsyncPathwaysHook(target)
    deadline = time.monotonic() + give_up_after
    failures = 0
    accepted_at: float | None = None
    while True:
        try:
            found = await hook.delete(resource, namespace, name)
            accepted_at = accepted_at or time.monotonic()
            if resource in WORKLOAD_KINDS:
                await until_pods_stop(hook, namespace, name, accepted_at, deadline)
        except asyncio.CancelledError:  # the loop is ending under it (a triggerer shutting down): say so
            log.error(
                "the delete of %s %s/%s (%s) was stopped before it was done: it may still hold its TPUs. The janitor "
                "deletes it once its task is over, or delete it by hand (kubectl -n %s delete %s %s)",
                resource.kind, namespace, name, why, namespace, resource.plural, name,
            )
            raise
        except Exception as error:
            failures += 1
            if not is_transient(error) or time.monotonic() >= deadline:
                log.error(
                    "could not delete %s %s/%s (%s) after %d tries: %s. It may still hold its TPUs: delete it by hand "
                    "(kubectl -n %s delete %s %s) or let the janitor do it",
                    resource.kind, namespace, name, why, failures, describe(error), namespace, resource.plural, name,
                )
                return False
            log.warning("deleting %s %s/%s failed (%s); trying again in %.0f s", resource.kind, namespace, name, describe(error), RETRY_EVERY_SECONDS)
            await asyncio.sleep(RETRY_EVERY_SECONDS)
            continue
        log.info("deleted %s %s/%s: %s%s", resource.kind, namespace, name, why, "" if found else " (it was already gone)")
        return True


async def until_pods_stop(hook: AsyncPathwaysHook, namespace: str, workload: str, accepted_at: float, deadline: float) -> None:
    """Look at the workload's pods (deleted at ``accepted_at``) until each is gone or stopping,
    doing the garbage collector's work once it is late
    (:func:`~pathways_airflow.hooks.reclaim.reclaim_async`). An API failure here is the caller's
    to retry: it repeats the DELETE, which is harmless, and comes back here."""
    while not (await reclaim_async(hook, namespace, workload, time.monotonic() - accepted_at)).handed_over and time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)


def delete_in_background(target: ClusterTarget, resource: Resource, namespace: str, name: str, why: str) -> asyncio.Task[bool]:
    """The running delete of this workload, started now if none is running."""
    key = (target.key, resource.kind, namespace, name)
    task = _running.get(key)
    if task is None or task.done():
        task = asyncio.get_running_loop().create_task(delete_until_gone(target, resource, namespace, name, why))
        _running[key] = task
        task.add_done_callback(lambda finished: _running.pop(key, None) if _running.get(key) is finished else None)
    return task


async def delete_outliving_the_caller(
    target: ClusterTarget, resource: Resource, namespace: str, name: str, why: str, *, wait: float = WAIT_IN_ON_KILL_SECONDS
) -> bool:
    """Delete, waiting at most ``wait`` seconds; a cancelled or timed-out wait leaves the delete running.

    ``True`` when the workload is known deleted now; ``False`` when the delete goes on in the background.
    """
    task = delete_in_background(target, resource, namespace, name, why)
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout=wait)
    except asyncio.TimeoutError:
        log.warning(
            "%s %s/%s is not gone yet (the API is slow or failing, or its pods are still stopping): the delete goes on in the background for up to %.0f min",
            resource.kind, namespace, name, GIVE_UP_AFTER_SECONDS / 60,
        )
        return False


async def deletes_done() -> None:
    """Until every delete running on this loop has finished: a loop of a worker's own (a task
    that does not defer, ``dag.test``, ``airflow tasks test``) must not end under one."""
    loop = asyncio.get_running_loop()
    running = [task for task in _running.values() if not task.done() and task.get_loop() is loop]
    if running:
        log.info("waiting for %d delete(s) to finish before this wait's event loop ends", len(running))
        await asyncio.gather(*running, return_exceptions=True)


def deletes_in_progress() -> int:
    """How many deletes are still running (for tests and the triggerer's log)."""
    return sum(1 for task in _running.values() if not task.done())
