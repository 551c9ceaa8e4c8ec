"""``PathwaysJobTrigger``: wait in the triggerer until a workload has finished.

Reads the workload from the shared watches of its namespace (PathwaysJobs or JobSets, their
pods and child Jobs, Kueue Workloads), asks the pure core for its state on every change, logs
each transition in the task log, and yields one event when the task must act: the workload
finished, the task ran out of time (the workload is then deleted here, so a timeout never leaks
TPUs), or the API could not be read for too long. A user killing the deferred task deletes the
workload (``on_kill``). It never raises out of ``run()``.

Between looks it keeps one record (:mod:`~pathways_airflow.run.wait_memory`): a look reads
what the memory asks for, folds it in, and leaves what it records on the workload with the loop's
note writer (:mod:`~pathways_airflow.triggers.notes`), which writes an ending's notes before the
task acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from dataclasses import replace
from functools import cached_property
from typing import Any, AsyncIterator, Awaitable, Callable

from airflow.triggers.base import TriggerEvent

from pathways_airflow import well_known
from pathways_airflow.hooks.api import API_OUTAGE_LIMIT_SECONDS, describe
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.hooks.reclaim import delete_left_behind
from pathways_airflow.hooks.storage import DEFAULT_GCP_CONN_ID, newest_save_began_at
from pathways_airflow.resources import EVENT, JOB, JOBSET, KUEUE_WORKLOAD, NODE, PATHWAYSJOB, POD, workload_resource
from pathways_airflow.run import annotations as written
from pathways_airflow.run import outcome, records, timeline, wait_memory
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS
from pathways_airflow.state import creation, disruption, model, ran_on, reclaim, status, workload_parts
from pathways_airflow.state.queue import QueuePlace, local_queue_of, queue_place
from pathways_airflow.triggers.deletion import delete_outliving_the_caller
from pathways_airflow.triggers.kill import KillableTrigger
from pathways_airflow.triggers.notes import Workload, note_writer
from pathways_airflow.triggers.pruning import (
    changes_nothing_a_wait_acts_on,
    pruned_job,
    pruned_jobset,
    pruned_kueue_workload,
    pruned_node,
    pruned_pathwaysjob,
    pruned_pod,
)
from pathways_airflow.triggers.watch import (
    SharedWatch, api_lost, by_label, by_owner, recheck_in, shared_watch, wait_for_change,
)

SERIALIZED = ("name", "namespace", "backend", "target", "deadline", "last_state", "poll_interval", "until_phase",
              "delete_on_timeout", "api_outage_seconds", "reads_resume", "checkpoint_dir", "gcp_conn_id")
"""The arguments the triggerer re-creates the trigger from (its database row)."""
PROGRESS_READ_SECONDS = 10.0
"""How long a verdict that only the nodes a program ran on vouch for waits to read its newest
checkpoint (a GCS outage then costs the verdict that long, never the task's whole time)."""
VERDICT_SETTLE_LIMIT_SECONDS = 3.0
"""How long the other watches get to catch up before a user-error or no-evidence verdict is final."""


def observe(backend: str, name: str, namespace: str, watches: dict[str, SharedWatch], submitted: bool = True) -> model.Observation:
    """The workload's objects as the shared caches hold them now (read through their indexes)."""
    jobset = watches["jobsets"].get(name, namespace)
    uid = (jobset or {}).get("metadata", {}).get("uid")
    pods = _seen(watches["pods"], name, namespace)
    kueue = None
    if uid and "workloads" in watches:
        kueue = model.kueue_workload_of(uid, watches["workloads"].related(name))
    pathwaysjob = watches["pathwaysjobs"].get(name, namespace) if "pathwaysjobs" in watches else None
    jobs = _seen(watches["jobs"], name, namespace)
    return model.Observation(backend, name, namespace, pathwaysjob, jobset, pods, kueue, submitted, jobs)


def _seen(watch: SharedWatch, name: str, namespace: str) -> tuple[dict[str, Any], ...]:
    """The workload's objects in ``watch``, live and recently deleted (their last state)."""
    found = (*watch.related(name), *watch.related_deleted(name))
    return tuple(o for o in found if o["metadata"].get("namespace") == namespace)


_SHARED_READS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], tuple[float, asyncio.Task[Any]]]] = weakref.WeakKeyDictionary()


async def read_shared(key: tuple[Any, ...], period: float, read: Callable[[], Awaitable[Any]]) -> Any:
    """``read()``'s answer for ``key``, read once per ``period`` for every wait of the running loop
    that asks: a fleet's waits then cost one read per period, not one each (a failure too is
    shared, for as long)."""
    loop = asyncio.get_running_loop()
    reads = _SHARED_READS.setdefault(loop, {})
    now = time.monotonic()
    found = reads.get(key)
    if found is None or found[0] <= now:
        for stale in [k for k, (until, _) in reads.items() if until <= now]:
            del reads[stale]  # an answer no wait asks for again is not held
        found = (now + period, loop.create_task(read()))
        reads[key] = found
    return await asyncio.shield(found[1])


async def shared_queue_view(hook: AsyncPathwaysHook, target: ClusterTarget, namespace: str, queue: str) -> Any:
    """:meth:`~pathways_airflow.hooks.pathways.AsyncPathwaysHook.queue_view` of one LocalQueue, read
    once per check period for every wait of the running loop queued in it: a fleet's queued waits
    cost three requests per LocalQueue per period, not per wait."""
    return await read_shared(("queue", target.key, namespace, queue), wait_memory.CHECK_EVERY_SECONDS, lambda: hook.queue_view(namespace, queue))


SCHEDULED_READ_SECONDS = 5.0
"""How long one read of a namespace's ``Scheduled`` events serves every verdict of the loop: longer
than a verdict's settle, so a settle reads them once; short beside a run, whose bindings were made
long before it stopped."""


async def shared_bindings(hook: AsyncPathwaysHook, target: ClusterTarget, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Where the scheduler bound the worker pods of the namespace's JobSets
    (:func:`~pathways_airflow.state.ran_on.bindings_by_jobset`), read once per
    :data:`SCHEDULED_READ_SECONDS` for every verdict of the running loop: a fleet's namespace holds
    its largest list in these events, and thousands of workloads stopping at once (a maintenance
    window) each listed all of them."""

    async def read() -> dict[str, list[tuple[str, str]]]:
        page = await hook.list_page(EVENT, namespace, field_selector=f"reason={ran_on.SCHEDULED_REASON}", shape=ran_on.ScheduledEventFields)
        return ran_on.bindings_by_jobset(page.get("items") or [])

    return await read_shared(("scheduled", target.key, namespace), SCHEDULED_READ_SECONDS, read)


def workload_watches(target: ClusterTarget, namespace: str, backend: str) -> dict[str, SharedWatch]:
    watches = {
        "jobsets": shared_watch(target, JOBSET, namespace, prune=pruned_jobset, quiet=changes_nothing_a_wait_acts_on),
        "pods": shared_watch(
            target, POD, namespace, label_selector=well_known.JOBSET_NAME, index=by_label(well_known.JOBSET_NAME), prune=pruned_pod
        ),
        "jobs": shared_watch(
            target, JOB, namespace, label_selector=well_known.JOBSET_NAME, index=by_label(well_known.JOBSET_NAME), prune=pruned_job
        ),
        "workloads": shared_watch(target, KUEUE_WORKLOAD, namespace, index=by_owner("JobSet"), prune=pruned_kueue_workload),
    }
    if backend == "pathwaysjob":
        watches["pathwaysjobs"] = shared_watch(target, PATHWAYSJOB, namespace, prune=pruned_pathwaysjob, quiet=changes_nothing_a_wait_acts_on)
    return watches


def nodes_watch(target: ClusterTarget) -> SharedWatch:
    """Every node of the cluster, as a verdict reads it: one watch per cluster in a triggerer.

    A verdict on why a workload stopped reads the nodes its pods ran on and those of its slice
    shape. Listing every node per verdict cost a fleet's triggerer most of its CPU when many
    waits ended at once (each list the whole fleet's nodes); the waits instead keep this watch
    alive while they run, never woken by it, and a verdict reads its cache.
    """
    return shared_watch(target, NODE, None, prune=pruned_node, index=by_disruption)


DISRUPTED = "disrupted"
"""The node watch's one index key: the nodes that show a disruption now (:func:`by_disruption`)."""


def by_disruption(node: dict[str, Any]) -> tuple[str, ...]:
    """Whether ``node`` shows a disruption now (:func:`~pathways_airflow.state.disruption.node_disruption`),
    as the node watch indexes it: a verdict then reads the disrupted few, not every node."""
    return (DISRUPTED,) if disruption.node_disruption(node) is not None else ()


NODES_SYNC_SECONDS = 60.0
"""How long a verdict only nodes can vouch for waits for the node watch's first listing before it
lists the nodes itself (with the hook's retries)."""


class PathwaysJobTrigger(KillableTrigger):
    """Wait until a PathwaysJob or JobSet has finished (or the task's time is up).

    ``recheck_seconds`` is ``poll_interval`` as a trigger serialized before its renaming calls it:
    Airflow re-creates a deferred task's trigger from its serialized kwargs after an upgrade.
    """

    def __init__(
        self, *, name: str, namespace: str, backend: str, target: dict[str, Any], deadline: float | None = None,
        last_state: dict[str, Any] | None = None, poll_interval: float = POLL_INTERVAL_SECONDS["workload"],
        until_phase: str | None = None, delete_on_timeout: bool = True, api_outage_seconds: float = API_OUTAGE_LIMIT_SECONDS,
        recheck_seconds: float | None = None, reads_resume: bool = False, checkpoint_dir: str | None = None,
        gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
    ):
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.backend = backend
        self.target = target
        self.deadline = deadline
        self.last_state = last_state
        self.poll_interval = float(poll_interval if recheck_seconds is None else recheck_seconds)
        self.until_phase = until_phase
        self.delete_on_timeout = delete_on_timeout
        self.api_outage_seconds = api_outage_seconds
        self.reads_resume = reads_resume
        self.checkpoint_dir = checkpoint_dir
        self.gcp_conn_id = gcp_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("pathways_airflow.triggers.workload.PathwaysJobTrigger", {key: getattr(self, key) for key in SERIALIZED})

    @property
    def cluster(self) -> ClusterTarget:
        return ClusterTarget.from_dict(self.target)

    @cached_property
    def hook(self) -> AsyncPathwaysHook:
        """The one hook of this wait (its client is the loop's, shared with every other wait); its
        calls ride out a failing API as long as the wait does."""
        return AsyncPathwaysHook(self.cluster, outage_seconds=self.api_outage_seconds)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with contextlib.aclosing(self._wait()) as events:  # its finally runs when the reader stops, not at loop shutdown
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting on %s/%s failed", self.namespace, self.name)
            yield TriggerEvent(records.WorkloadEvent("error", self.name, message=f"{type(error).__name__}: {error}").to_payload())

    async def _wait(self) -> AsyncIterator[TriggerEvent]:
        watches = workload_watches(self.cluster, self.namespace, self.backend)
        changed = asyncio.Event()  # one event for all its watches: one thing to wait on
        subscriptions = {key: watch.subscribe([self.name], changed) for key, watch in watches.items()}
        nodes = nodes_watch(self.cluster)
        held_nodes = nodes.subscribe(())  # keeps the verdicts' node cache current; never wakes this wait
        memory = wait_memory.WaitMemory.starting(self.last_state, time.time(), writes=self.until_phase is None, reads_resume=self.reads_resume)
        try:
            while True:
                refused = [w.forbidden for w in watches.values() if w.forbidden]
                if refused:
                    yield TriggerEvent(records.WorkloadEvent("error", self.name, message=refused[0], forbidden=True).to_payload())
                    return
                lost = api_lost(watches.values(), self.api_outage_seconds)
                if lost:
                    yield TriggerEvent(records.WorkloadEvent("error", self.name, message=lost).to_payload())
                    return
                remaining = None if self.deadline is None else self.deadline - time.time()
                if not all(w.synced.is_set() for w in watches.values()):
                    # The first listing has not answered (the API is down as the wait starts):
                    # keep the workload and wait for it, as long as the task has time.
                    if remaining is not None and remaining <= 0:
                        break
                    await wait_for_change(list(subscriptions.values()), recheck_in(self.poll_interval, remaining))
                    continue
                memory, state, finished = await self._look(memory, watches, subscriptions)
                if finished is not None:
                    yield TriggerEvent(finished.to_payload())
                    return
                remaining = None if self.deadline is None else self.deadline - time.time()
                if remaining is not None and remaining <= 0:
                    break
                wait = wait_memory.look_again_within(memory, state, time.time(), recheck_in(self.poll_interval, remaining))
                await wait_for_change(list(subscriptions.values()), wait)
            deleted = self.delete_on_timeout and await self._delete("the task's execution_timeout passed")
            yield TriggerEvent(records.WorkloadEvent("timeout", self.name, state=memory.state, deleted=deleted).to_payload())
        finally:
            for key, subscription in subscriptions.items():
                watches[key].unsubscribe(subscription)
            nodes.unsubscribe(held_nodes)

    async def _look(
        self, memory: wait_memory.WaitMemory, watches: dict[str, SharedWatch], subscriptions: dict[str, Any]
    ) -> tuple[wait_memory.WaitMemory, model.WorkloadState, records.WorkloadEvent | None]:
        """One look at the workload: its objects read from the caches, judged, logged and noted; its
        state, and its ending's event or ``None`` while it goes on. What the look read dies with it:
        between looks a wait holds its memory alone, and the caches hold the objects, packed (a
        wait that kept its last look's objects held a copy of every one of them)."""
        observation, now = observe(self.backend, self.name, self.namespace, watches), time.time()
        memory = await self._restart_unblocked(memory, observation, now)
        live = wait_memory.live_jobs_with(memory.live_jobs, observation.jobs)
        state = status.workload_state(observation)
        refused_spec = await self._creation_refused(memory, observation, state, live, now)
        if refused_spec:
            state = model.WorkloadState(model.Phase.FAILED, message=refused_spec, cause=model.FailureCause.BAD_SPEC)
        read = await self._readings(memory, observation, state, live, now)
        verdict, seen_again = None, ()
        if state.phase is model.Phase.FAILED:
            settled, seen_again = await self._settled_verdict(observation, live, subscriptions, watches, memory)
            verdict = outcome.verdict_of(state, settled)
        line, queue_line = wait_memory.line_to_log(memory, state, now), wait_memory.queue_line_to_log(memory, read)
        read = replace(read, verdict=verdict, jobs_seen_again=seen_again)
        before, (memory, notes) = memory, wait_memory.remembered(memory, observation, state, now, read)
        resume_line = wait_memory.resume_line_to_log(before, memory)
        for said in (line, queue_line, resume_line):
            if said:
                self.log.info("%s/%s: %s", self.namespace, self.name, said)
        ending = state.phase.finished or (self.until_phase is not None and status.has_reached(state, self.until_phase))
        if ending and written.written_before_the_event(notes, succeeded=state.phase is model.Phase.SUCCEEDED):
            await note_writer(self.cluster).now(self._workload, notes)  # before the deletion and the event: a retry reads the verdict here
        elif notes:  # evidence for later: neither an API retrying its writes nor thousands of starts hold up the watch
            note_writer(self.cluster).later(self._workload, notes, within=written.write_within(notes))
        if ending:
            return memory, state, records.WorkloadEvent(
                "finished", self.name, state=state, failure=memory.failure, classification=verdict, last_step=memory.last_step,
                restarts=wait_memory.in_place(memory), running_since=memory.running_since,
                phases=timeline.phases_with(memory.phases, state, time.time()),
                queued=memory.queued.to_dict() if memory.queued else None, resumed_from=memory.resumed_from,
            )
        return memory, state, None

    async def _readings(
        self, memory: wait_memory.WaitMemory, observation: model.Observation, state: model.WorkloadState, live: wait_memory.Jobs, now: float
    ) -> wait_memory.Readings:
        """What the memory asks to read for a look: a failed container's log (its pod may soon be
        deleted), why the current attempt's pods show a disruption, the step the head reached when
        one hit (from its log, while it exists), why each restart of the JobSet happened, where a
        queued workload stands in Kueue's queue, and, after a resubmission, the step its program
        says it resumed from (the start of the head's log)."""
        hook = self.hook
        failed = wait_memory.failure_to_read(memory, observation)
        failure = None if failed is None else (*failed, await hook.read_log_tail(self.namespace, *failed[:2]))
        seen = await self._classify(observation, live, memory=memory) if wait_memory.disruption_to_classify(memory, observation) else None
        head = wait_memory.head_log_to_read(memory, observation, state)
        head_log = None if head is None else await hook.read_log_tail(self.namespace, *head, 200)
        causes = []
        for ended in range(len(wait_memory.restarts_known(memory, observation)), state.restarts):  # also one between two looks
            causes.append(await self._classify(observation, live, ended, memory=memory))
            said = (causes[-1].verdict.value, "; ".join(causes[-1].evidence[:3]))
            self.log.info("%s/%s: the JobSet restarts (%s): %s", self.namespace, self.name, *said)
        queue_read = wait_memory.queue_check_due(memory, observation, state, now)
        queued = await self._queue_place(observation) if queue_read else None
        resumed = wait_memory.resume_log_to_read(memory, observation, now)
        resume_log = None if resumed is None else await hook.read_log_start(self.namespace, *resumed)
        return wait_memory.Readings(failure, head_log, tuple(causes), seen, queue_read=queue_read, queued=queued, resume_log=resume_log)

    async def _queue_place(self, observation: model.Observation) -> QueuePlace | None:
        """Its place in Kueue's queue, or ``None``: reading it is worth a line, never the wait."""
        workload = observation.kueue_workload or {}
        queue = local_queue_of(workload)
        if queue is None:
            return None
        try:
            view = await shared_queue_view(self.hook, self.cluster, self.namespace, queue)
        except Exception as error:
            self.log.info("%s/%s: could not read its place in Kueue's queue (%s)", self.namespace, self.name, describe(error))
            return None
        if view is None:
            return None
        local, pending, cluster_queue = view
        return queue_place(str((workload.get("metadata") or {}).get("name", "")), pending, local, cluster_queue)

    async def _creation_refused(
        self, memory: wait_memory.WaitMemory, observation: model.Observation, state: model.WorkloadState, live: wait_memory.Jobs, now: float
    ) -> str | None:
        """Why the API refuses the workload's child objects (:mod:`~pathways_airflow.state.creation`),
        read from its events every few seconds while some are missing; the task then deletes it."""
        top = wait_memory.top_of(observation)
        if top is None or not wait_memory.creation_check_due(memory, observation, state, now):
            return None
        kind = "JobSet" if observation.jobset is not None else top["kind"]
        try:
            events = await self.hook.list(EVENT, self.namespace, field_selector=creation.events_selector(kind, self.name))
        except Exception as error:  # the events only explain a hang: without them the wait goes on
            self.log.warning("%s/%s: could not read its events (%s); still waiting for its child objects", self.namespace, self.name, describe(error))
            return None
        waited = 0.0 if memory.without_jobset_since is None else now - memory.without_jobset_since
        refused = creation.creation_failure(top, observation.jobset, [*live.values(), *observation.jobs], events, waited)
        if refused and self.until_phase is None:
            await self._delete(refused)
        return refused

    async def _restart_unblocked(self, memory: wait_memory.WaitMemory, observation: model.Observation, now: float) -> wait_memory.WaitMemory:
        """Do the garbage collector's work a JobSet's restart in place waits on, once it is late
        (:func:`~pathways_airflow.state.reclaim.restart_held_up`). A failed delete is tried again
        at the next look; the restart meanwhile waits on the collector, as it would without us."""
        memory, held = wait_memory.restart_held_up(memory, observation, now)
        if held.to_delete:
            waited = now - (memory.collector_late_since or now)
            try:
                await delete_left_behind(self.hook, self.namespace, held, attempts=1)  # the next look is the retry
            except Exception as error:
                self.log.warning("%s/%s: could not delete what holds its restart up (%s); trying again at the next look",
                                 self.namespace, self.name, describe(error))
            else:
                self.log.warning(reclaim.reclaimed_line(self.namespace, self.name, held, waited, restart=True))
        return memory

    async def _settled_verdict(
        self, observation: model.Observation, live: wait_memory.Jobs, subscriptions: dict[str, Any], watches: dict[str, SharedWatch],
        memory: wait_memory.WaitMemory | None = None,
    ) -> tuple[disruption.Classification, tuple[dict[str, Any], ...]]:
        """Why it stopped, looked at again while the verdict could still change (and the child Jobs
        the last look saw).

        The workload's watch can run ahead of the pods' and Jobs' watches: a program that died
        because its slice went away looks like a user's bug until the workers' DisruptionTarget
        arrives, and a user's bug looks like nothing at all until the head's exit code does. Both
        verdicts decide whether a slice is spent again, so the other watches get
        :data:`VERDICT_SETTLE_LIMIT_SECONDS` to catch up: each change they bring is looked at, and
        a verdict they can no longer change (the disruption arrived) is final at once. The look
        that ends the settle reads the nodes too, whose changes wake no wait. The wait ends with
        this verdict, so the changes are consumed here.
        """
        classified = await self._classify(observation, live, memory=memory)
        if not disruption.worth_a_second_look(classified):
            return classified, ()
        settled_by = time.monotonic() + VERDICT_SETTLE_LIMIT_SECONDS
        while True:
            left = settled_by - time.monotonic()
            woken = left > 0 and await wait_for_change(list(subscriptions.values()), left)
            again = observe(self.backend, self.name, self.namespace, watches)
            live = wait_memory.live_jobs_with(live, again.jobs)
            classified = await self._classify(again, live, memory=memory)
            if not woken or not disruption.worth_a_second_look(classified):
                return classified, again.jobs

    async def _classify(
        self, observation: model.Observation, live: wait_memory.Jobs, attempt: int | None = None, memory: wait_memory.WaitMemory | None = None,
    ) -> disruption.Classification:
        """Why run ``attempt`` (numbered by in-place restarts: :func:`~pathways_airflow.state.workload_parts.current_attempt`;
        default: the current one) stopped: the pods and Jobs as last seen (deleted ones too, a Job
        as it was before its deletion began: ``live``), the nodes now, and a disruption an earlier
        trigger saw during that run and wrote on the workload. What the wait's ``memory`` knows the
        program rode out (slice losses, the worker Jobs' failures they counted) explains nothing
        now, though the lost pods may be gone."""
        jobs = list({**{j["metadata"]["name"]: j for j in observation.jobs}, **live}.values())
        ridden_out = [r.time for r in memory.recovered] if memory else []
        if memory and memory.failures_ridden_out:
            jobs = disruption.failures_since(jobs, memory.failures_ridden_out)
        attempt = workload_parts.current_attempt(observation) if attempt is None else attempt
        rode_out = disruption.rode_out_slice_losses(observation)
        if rode_out:  # the losses it got through (lost pods, the worker Jobs' count of them, where it ran before) explain nothing now
            observation = replace(observation, pods=disruption.without_replaced_pods(observation.pods))
            jobs = [j for j in jobs if not disruption.is_of_the_slices(j, observation.jobset)]
        jobset, outlived = observation.jobset, frozenset[str]()
        if jobset is not None and attempt != workload_parts.current_attempt(observation):
            jobset = workload_parts.as_of_restart(jobset, attempt)
        proven = disruption.shown_without_nodes(observation.pods, jobs, jobset)
        nodes = await self._nodes(proven)
        top = wait_memory.top_of(observation)
        if rode_out:
            recorded, where = None, disruption.nodes_workers_run_on(observation)
        else:
            placed = status.admitted_at(observation.kueue_workload)  # a record of where it ran before a re-admission is stale
            seen = written.disruption_seen(top, attempt, ridden_out)
            recorded = seen or (None if nodes is None else ran_on.went_down_under_it(top, attempt, nodes, not_before=placed))
            if recorded is not None and seen is None and not proven and workload_parts.elastic_slices(observation):
                assert nodes is not None  # only the nodes it ran on say so: did it get past their loss?
                outlived = await self._outlived(top, attempt, nodes, placed)
                if outlived:
                    recorded = ran_on.went_down_under_it(top, attempt, nodes, not_before=placed, outlived=outlived)
                    self.log.info("%s/%s: it began saving a checkpoint after %s went down: it rode their loss out",
                                  self.namespace, self.name, ", ".join(sorted(outlived)))
            where = ran_on.nodes_it_ran_on(top, attempt, not_before=placed)
        if recorded is None and not where and not proven and self.backend == "pathwaysjob":
            # No failure policy: the head-first rule needs the counter-evidence, and with no
            # record of where the workers ran, the scheduler's bindings are the one left.
            scheduled = await self._where_workers_were_scheduled()
            recorded = ran_on.went_down_under_it(None, attempt, nodes or [], scheduled)
            where = where or ran_on.nodes_it_ran_on(None, attempt, scheduled)
        return disruption.classify(
            pods=observation.pods, nodes=nodes, jobs=jobs, jobset=jobset, kueue_workload=observation.kueue_workload, recorded=recorded,
            ran_on=where, outlived=outlived,
        )

    async def _outlived(self, top: dict[str, Any] | None, attempt: int, nodes: workload_parts.Nodes, placed: str) -> frozenset[str]:
        """The nodes it ran on whose going down the program outlived (:func:`~pathways_airflow.state.ran_on.outlived_by_the_program`):
        read only for a verdict that rests on those nodes alone, from its newest checkpoint and the
        node controller's ``NodeNotReady`` events (when a node that came back went down)."""
        saving_since = await self._newest_save_began_at()
        if saving_since is None:
            return frozenset()
        try:
            events = await self.hook.list(EVENT, ran_on.NODE_EVENTS_NAMESPACE, field_selector=ran_on.NODE_NOT_READY_SELECTOR, attempts=1)
        except Exception as error:  # then a node that came back counts as down until it did
            self.log.info("%s/%s: could not read the nodes' NodeNotReady events (%s)", self.namespace, self.name, describe(error))
            events = []
        return ran_on.outlived_by_the_program(top, attempt, nodes, saving_since, not_before=placed, events=events)

    async def _newest_save_began_at(self) -> float | None:
        """When the program began saving its newest committed checkpoint (:func:`~pathways_airflow.hooks.storage.newest_save_began_at`),
        read within :data:`PROGRESS_READ_SECONDS`; ``None`` when not known: then no loss counts as outlived."""
        if not self.checkpoint_dir:
            return None
        try:
            return await asyncio.to_thread(
                newest_save_began_at, self.checkpoint_dir, gcp_conn_id=self.gcp_conn_id, deadline=time.time() + PROGRESS_READ_SECONDS
            )
        except Exception as error:  # evidence against a disruption only: without it the verdict stands
            self.log.info("%s/%s: could not read its newest checkpoint (%s)", self.namespace, self.name, describe(error))
            return None

    async def _nodes(self, only_to_name_the_kind: bool) -> workload_parts.Nodes | None:
        """The nodes now: the shared node watch's cache (:func:`nodes_watch`) while it is current,
        else a listing. When the pods already prove a disruption the nodes only name its kind: one
        try, within :data:`~pathways_airflow.state.disruption.NODES_REFINE_WITHIN_SECONDS`, not the
        hook's retry backoff (a slow or failing API then costs the verdict a request, not minutes)."""
        watch = nodes_watch(self.cluster)
        budget = disruption.NODES_REFINE_WITHIN_SECONDS if only_to_name_the_kind else NODES_SYNC_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.synced.wait(), budget)
        if watch.synced.is_set() and watch.failing_since is None and not watch.forbidden:
            return workload_parts.NodesByName(watch.by_name(), lambda: watch.related(DISRUPTED))
        if not only_to_name_the_kind:
            return await self.hook.list_nodes()
        try:
            return await asyncio.wait_for(self.hook.list_nodes(attempts=1), disruption.NODES_REFINE_WITHIN_SECONDS)
        except Exception as error:  # the pods' evidence stands; the kind stays as they tell it
            self.log.info("%s/%s: nodes not read within %.0fs (%s); judged from the pods", self.namespace, self.name,
                          disruption.NODES_REFINE_WITHIN_SECONDS, describe(error))
            return None  # not known: not "every node is gone"

    async def _where_workers_were_scheduled(self) -> list[tuple[str, str]]:
        """From the scheduler's events, when and where this workload's workers were bound (for an
        attempt no trigger saw run: :func:`shared_bindings`)."""
        try:
            return (await shared_bindings(self.hook, self.cluster, self.namespace)).get(self.name, [])
        except Exception as error:  # evidence for a disruption only: without it the other rules still judge
            self.log.info("%s/%s: could not read the scheduler's events (%s)", self.namespace, self.name, describe(error))
            return []

    @property
    def _workload(self) -> Workload:
        return (workload_resource(self.backend), self.namespace, self.name)

    async def _delete(self, why: str) -> bool:
        """Delete the workload; a delete the API holds up goes on after this trigger (:mod:`~pathways_airflow.triggers.deletion`)."""
        resource = workload_resource(self.backend)
        self.log.info("deleting %s %s/%s: %s", resource.kind, self.namespace, self.name, why)
        return await delete_outliving_the_caller(self.cluster, resource, self.namespace, self.name, why)

    async def on_kill(self) -> None:
        """The user killed the deferred task (mark failed, clear): delete what it was running.

        A sensor only watches a workload someone else owns, so it deletes nothing.
        """
        if self.until_phase is None:
            await self._delete("the task was killed while deferred")
