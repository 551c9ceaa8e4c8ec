"""Notes on a workload (its annotations: where its workers ran, the phases a wait saw, the
restarts it explained), written at a rate the API server and the triggerer's loop can bear.

A note is evidence for a later reader — a trigger re-created after a triggerer restart, the task's
next try, the janitor — not for the wait that writes it, which keeps the same facts in memory and
in its event. Written at once, each change of a workload costs a PATCH and the watch event the
PATCH brings back: at 10,000 waits, 13,909 PATCHes in a minute (``benchmarks/README.md``). So a
wait leaves its notes with its loop's writer for the cluster: notes for one workload merge while
they wait (a newer value of a key replaces an older one), and they go out one at a time, at most
:data:`WRITES_PER_SECOND`, in the order they came, except that notes a later reader can do
without and a workload rewrites at every change (its phases alone) wait minutes, after all the
others. A wait that ends writes its own at once (:meth:`NoteWriter.now`), merged with whatever of
it still waits, before the task acts on its event.

The writer lives as long as the loop: a note outlives the wait that made it. A worker's own loop
(a task that does not defer) waits for it to finish (:func:`notes_written`); a triggerer that
stops drops what it had not written yet, as it would a write in flight: every note is evidence
the next reader can do without (it reads the scheduler's events, the pods) or that the task's
event carries too.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
import weakref
from collections.abc import Mapping

from pathways_airflow.hooks.api import describe
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import ObjectRef

log = logging.getLogger(__name__)

WRITES_PER_SECOND = 20.0
"""At most this many background note writes a second per cluster and loop: at 1,000 waits whose
workloads change once a minute on average, 14.5 a second are due (``benchmarks/README.md``), so a
triggerer of that size never queues; a larger one spreads its notes out instead of stalling."""

Workload = ObjectRef
"""The workload a note is written on."""


class NoteWriter:
    """The loop's note writer for one cluster: see the module's docstring."""

    def __init__(self, target: ClusterTarget) -> None:
        self.hook = AsyncPathwaysHook(target)
        self.pending: dict[Workload, dict[str, str]] = {}
        self.due: list[tuple[bool, float, int, Workload]] = []
        """When each workload's waiting notes may go out, those that may wait after all the others
        (a heap; a workload may have several entries: the first writes them all, the others find
        nothing left)."""
        self.in_flight: set[Workload] = set()
        self.draining: asyncio.Task[None] | None = None
        self.flushing = False
        self._order = itertools.count()

    def later(self, workload: Workload, notes: Mapping[str, str], *, within: float = 0.0) -> None:
        """Write ``notes`` on ``workload`` in the background, merged with those still waiting.

        ``within`` > 0 (notes a later reader can do without, written often:
        :func:`~pathways_airflow.run.annotations.write_within`): not before that many seconds
        from now, and after every note that may not wait. Notes of the workload made meanwhile
        go with them, so a workload noting them at every change writes them once per ``within``."""
        self.pending.setdefault(workload, {}).update(notes)
        heapq.heappush(self.due, (within > 0, time.monotonic() + within, next(self._order), workload))
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
        """Until nothing waits or is in flight, whenever it was due."""
        self.flushing = True
        try:
            while self.draining is not None and not self.draining.done():
                await asyncio.wait([self.draining])
        finally:
            self.flushing = False

    async def _drain(self) -> None:
        spacing = 1.0 / WRITES_PER_SECOND
        while self.due:
            _, due, _, workload = self.due[0]
            if workload not in self.pending:  # written since (an ending, an earlier entry)
                heapq.heappop(self.due)
                continue
            if due > time.monotonic() and not self.flushing:
                await asyncio.sleep(min(due - time.monotonic(), spacing))  # a sooner one may arrive meanwhile
                continue
            heapq.heappop(self.due)
            notes = self.pending.pop(workload)
            started = time.monotonic()
            self.in_flight.add(workload)
            try:
                await self._write(workload, notes)  # logs its own failures
            finally:
                self.in_flight.discard(workload)
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
