"""Notes on a workload (its annotations: where its workers ran, the phases a wait saw, the
restarts it explained), written at a rate the API server and the triggerer's loop can bear.

A note is evidence for a later reader — a trigger re-created after a triggerer restart, the task's
next try, the janitor — not for the wait that writes it, which keeps the same facts in memory and
in its event. Written at once, each start of a workload costs a PATCH and the watch event the
PATCH brings back; at 10,000 waits thousands of workloads start within a minute and those writes
alone saturated the loop (``benchmarks/README.md``). So a wait leaves its notes with its loop's
writer for the cluster: notes for one workload merge while they wait (a newer value of a key
replaces an older one), and they go out one at a time, at most :data:`WRITES_PER_SECOND`, oldest
workload first. A wait that ends writes its own at once (:meth:`NoteWriter.now`), merged with
whatever of it still waits, before the task acts on its event.

The writer lives as long as the loop: a note outlives the wait that made it. A worker's own loop
(a task that does not defer) waits for it to finish (:func:`notes_written`); a triggerer that
stops drops what it had not written yet, as it would a write in flight: every note is evidence
the next reader can do without (it reads the scheduler's events, the pods) or that the task's
event carries too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Mapping

from pathways_airflow.hooks.api import describe
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import Resource

log = logging.getLogger(__name__)

WRITES_PER_SECOND = 20.0
"""At most this many background note writes a second per cluster and loop: at 1,000 waits whose
workloads change once a minute on average, 14.5 a second are due (``benchmarks/README.md``), so a
triggerer of that size never queues; a larger one spreads its notes out instead of stalling."""

Workload = tuple[Resource, str, str]
"""``(resource, namespace, name)`` of the workload a note is written on."""


class NoteWriter:
    """The loop's note writer for one cluster: see the module's docstring."""

    def __init__(self, target: ClusterTarget) -> None:
        self.hook = AsyncPathwaysHook(target)
        self.pending: dict[Workload, dict[str, str]] = {}
        self.in_flight: dict[Workload, asyncio.Task[None]] = {}
        self.draining: asyncio.Task[None] | None = None

    def later(self, workload: Workload, notes: Mapping[str, str]) -> None:
        """Write ``notes`` on ``workload`` in the background, merged with those still waiting."""
        self.pending.setdefault(workload, {}).update(notes)
        if self.draining is None or self.draining.done():
            self.draining = asyncio.get_running_loop().create_task(self._drain())

    async def now(self, workload: Workload, notes: Mapping[str, str]) -> None:
        """Write ``notes`` and whatever of ``workload`` still waits, now, without waiting for a
        write of it in flight (an API holding that one up must not hold up a verdict); such a
        write may land after this one, so the same notes follow it once more."""
        merged = {**self.pending.pop(workload, {}), **notes}
        if not merged:
            return
        await self._write(workload, merged)
        if workload in self.in_flight:  # the drain writes one at a time: this goes after it
            self.later(workload, merged)

    async def written(self) -> None:
        """Until nothing waits or is in flight."""
        while self.draining is not None and not self.draining.done():
            await asyncio.wait([self.draining])

    async def _drain(self) -> None:
        spacing = 1.0 / WRITES_PER_SECOND
        while self.pending:
            workload = next(iter(self.pending))
            notes = self.pending.pop(workload)
            started = time.monotonic()
            task = asyncio.get_running_loop().create_task(self._write(workload, notes))
            self.in_flight[workload] = task
            try:
                await asyncio.wait([task])
            finally:
                if self.in_flight.get(workload) is task:
                    del self.in_flight[workload]
            await asyncio.sleep(max(0.0, spacing - (time.monotonic() - started)))

    async def _write(self, workload: Workload, notes: Mapping[str, str]) -> None:
        """Best effort: what a note records also travels in the task's event."""
        resource, namespace, name = workload
        try:
            await self.hook.annotate(resource, namespace, name, notes)
        except Exception as error:
            log.warning("could not record %s on %s/%s: %s", ", ".join(notes), namespace, name, describe(error))


_WRITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, NoteWriter]] = weakref.WeakKeyDictionary()


def note_writer(target: ClusterTarget) -> NoteWriter:
    """The running loop's note writer for ``target``, made on first use."""
    writers = _WRITERS.setdefault(asyncio.get_running_loop(), {})
    if target.key not in writers:
        writers[target.key] = NoteWriter(target)
    return writers[target.key]


async def notes_written() -> None:
    """Until every note left with this loop's writers is written: a worker's own loop must not end
    under them."""
    for writer in list(_WRITERS.get(asyncio.get_running_loop(), {}).values()):
        await writer.written()
