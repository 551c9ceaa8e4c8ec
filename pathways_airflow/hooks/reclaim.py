"""Doing the garbage collector's work when it is late: one look at a deleted workload's chain
(:func:`pathways_airflow.state.reclaim.left_behind` decides), and a wait made of such looks.

The async look runs in the delete a killed trigger leaves behind (:mod:`pathways_airflow.triggers.deletion`);
the sync one in the worker: before a disruption resubmission, the delete operator and the janitor.
"""

from __future__ import annotations

import logging
import time

from pathways_airflow import well_known
from pathways_airflow.hooks.api import describe, is_transient
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, PathwaysHook
from pathways_airflow.resources import JOB, JOBSET, POD, Resource
from pathways_airflow.state.reclaim import Leftovers, left_behind, reclaimed_line

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
FIRST_POLL_SECONDS = 0.1
"""The first looks come quickly (a healthy collector marks the pods within a second or two of the
delete, and a resubmission waits on it), then every :data:`POLL_SECONDS`."""
RECLAIM_WAIT_SECONDS = 600.0
"""The most a worker waits for a deleted workload's pods to be stopping before it goes on. The
collector's work is done here :data:`~pathways_airflow.state.reclaim.COLLECTOR_MARGIN_SECONDS`
after the delete, so this bounds only an API that keeps failing the looks and deletes."""


def _chain_order(leftovers: Leftovers) -> list[tuple[Resource, str, str | None]]:
    """Top down: nothing deleted here is re-created by a controller of something still above it.
    Each with the uid it was seen with: a JobSet's restart re-creates its Jobs under their names,
    and a DELETE by name alone after the look would take the next attempt's (:attr:`Leftovers.uids`)."""
    chain = [(JOBSET, n) for n in leftovers.jobsets] + [(JOB, n) for n in leftovers.jobs] + [(POD, n) for n in leftovers.pods]
    return [(resource, name, leftovers.uids.get(name)) for resource, name in chain]


def reclaim(hook: PathwaysHook, namespace: str, workload: str, waited: float, *, attempts: int | None = None) -> Leftovers:
    """Look at the chain of a workload deleted ``waited`` seconds ago; delete what the collector left."""
    jobset = hook.get(JOBSET, namespace, workload, attempts=attempts)
    selector = well_known.jobset_selector(workload)
    jobs = hook.list(JOB, namespace, label_selector=selector, attempts=attempts)
    pods = hook.list(POD, namespace, label_selector=selector, attempts=attempts)
    leftovers = left_behind([jobset] if jobset else [], jobs, pods, waited)
    for resource, name, uid in _chain_order(leftovers):
        hook.delete(resource, namespace, name, propagation="Background", attempts=attempts, uid=uid)
    if leftovers.to_delete:
        log.warning(reclaimed_line(namespace, workload, leftovers, waited))
    return leftovers


async def reclaim_async(hook: AsyncPathwaysHook, namespace: str, workload: str, waited: float) -> Leftovers:
    """:func:`reclaim`, on the triggerer's event loop."""
    jobset = await hook.get(JOBSET, namespace, workload)
    selector = well_known.jobset_selector(workload)
    jobs = await hook.list(JOB, namespace, label_selector=selector)
    pods = await hook.list(POD, namespace, label_selector=selector)
    leftovers = left_behind([jobset] if jobset else [], jobs, pods, waited)
    await delete_left_behind(hook, namespace, leftovers)
    if leftovers.to_delete:
        log.warning(reclaimed_line(namespace, workload, leftovers, waited))
    return leftovers


async def delete_left_behind(hook: AsyncPathwaysHook, namespace: str, leftovers: Leftovers, *, attempts: int | None = None) -> None:
    """Delete what the collector left, top down, in the background (a Job already waiting on its
    foreground deletion then goes at once: :func:`~pathways_airflow.state.reclaim.restart_held_up`)."""
    for resource, name, uid in _chain_order(leftovers):
        await hook.delete(resource, namespace, name, propagation="Background", attempts=attempts, uid=uid)


def wait_reclaimed(hook: PathwaysHook, namespace: str, workload: str, *, timeout: float, until_gone: bool = True) -> Leftovers:
    """Look until the workload's pods are gone (``until_gone``) or at least all stopping, doing the
    collector's work once it is late; at most ``timeout`` seconds. Returns the last look.

    Each look is one try of each call: the looks are the retries (0.1 s apart at first), so a
    burst of API errors costs the next look, not the hook's whole backoff per call. A refusal,
    or errors until ``timeout``, are raised."""
    start, pause = time.monotonic(), FIRST_POLL_SECONDS
    while True:
        waited = time.monotonic() - start
        try:
            leftovers = reclaim(hook, namespace, workload, waited, attempts=1)
        except Exception as error:
            if not is_transient(error) or waited >= timeout:
                raise
            log.info("%s/%s: could not look at its pods (%s); looking again", namespace, workload, describe(error))
        else:
            if leftovers.gone or (leftovers.handed_over and not until_gone) or waited >= timeout:
                return leftovers
        time.sleep(max(0.0, min(pause, timeout - waited)))
        pause = min(POLL_SECONDS, pause * 2)


def delete_making_room(hook: PathwaysHook, resource: Resource, namespace: str, workload: str) -> Leftovers:
    """Delete a workload whose slices the next attempt needs, and see its pods stopping (doing the
    collector's work if it is late) before that attempt is submitted."""
    hook.delete(resource, namespace, workload)
    return wait_reclaimed(hook, namespace, workload, timeout=RECLAIM_WAIT_SECONDS, until_gone=False)
