"""``PathwaysJobTrigger``: wait in the triggerer until a workload has finished.

Reads the workload from the shared watches of its namespace (PathwaysJobs or JobSets, their
pods and child Jobs, Kueue Workloads), asks the pure core for its state on every change, logs
each transition in the task log, and yields one event when the task must act: the workload
finished, the task ran out of time (the workload is then deleted here, so a timeout never leaks
TPUs), or the API could not be read for too long. A user killing the deferred task deletes the
workload (``on_kill``). It never raises out of ``run()``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import TriggerEvent

from pathways_airflow import well_known
from pathways_airflow.hooks.api import describe
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import EVENT, JOB, JOBSET, KUEUE_WORKLOAD, PATHWAYSJOB, POD, workload_resource
from pathways_airflow.state import creation
from pathways_airflow.state.disruption import Classification, classify, pod_disruption, worth_a_second_look
from pathways_airflow.run.messages import still_waiting_line, transition_line
from pathways_airflow.state.model import FailureCause, Observation, Phase, WorkloadState, kueue_workload_of
from pathways_airflow.run.outcome import bug_stopped_in_place, restarts_left, verdict_of
from pathways_airflow.run.progress import last_completed_step
from pathways_airflow.state.ran_on import SCHEDULED_REASON, scheduled_workers, went_down_under_it, where_workers_run
from pathways_airflow.run.records import JOBSET_RESTART, Disruption, PhaseSeen, WorkloadEvent
from pathways_airflow.run.annotations import restarts_annotation, restarts_written
from pathways_airflow.state.status import has_reached, workload_state
from pathways_airflow.state.workload_parts import (
    current_attempt,
    failed_container,
    head_exit_seen,
    head_pod,
    pods_of_current_attempt,
)
from pathways_airflow.run.timeline import phases_with
from pathways_airflow.run.annotations import disruption_seen, disruption_seen_annotation, ended_by_annotation
from pathways_airflow.triggers.deletion import delete_outliving_the_caller
from pathways_airflow.triggers.kill import KillableTrigger
from pathways_airflow.triggers.pruning import (
    pruned_job,
    pruned_jobset,
    pruned_kueue_workload,
    pruned_pathwaysjob,
    pruned_pod,
)
from pathways_airflow.triggers.watch import (
    API_OUTAGE_LIMIT_SECONDS,
    SharedWatch,
    api_lost,
    by_label,
    by_owner,
    recheck_in,
    shared_watch,
    wait_for_change,
)

RECHECK_SECONDS = 60.0
VERDICT_SETTLE_SECONDS = 2.0
"""How long the other watches get to catch up before a user-error or no-evidence verdict is final."""


def observe(
    backend: str, name: str, namespace: str, watches: dict[str, SharedWatch], submitted: bool = True
) -> Observation:
    """The workload's objects as the shared caches hold them now (read through their indexes)."""
    jobset = watches["jobsets"].get(name, namespace)
    uid = (jobset or {}).get("metadata", {}).get("uid")
    pods = _seen(watches["pods"], name, namespace)
    kueue = None
    if uid and "workloads" in watches:
        kueue = kueue_workload_of(uid, watches["workloads"].related(name))
    pathwaysjob = watches["pathwaysjobs"].get(name, namespace) if "pathwaysjobs" in watches else None
    jobs = _seen(watches["jobs"], name, namespace)
    return Observation(backend, name, namespace, pathwaysjob, jobset, pods, kueue, submitted, jobs)


def _seen(watch: SharedWatch, name: str, namespace: str) -> tuple[dict[str, Any], ...]:
    """The workload's objects in ``watch``, live and recently deleted (their last state)."""
    found = (*watch.related(name), *watch.related_deleted(name))
    return tuple(o for o in found if o["metadata"].get("namespace") == namespace)


def workload_watches(target: ClusterTarget, namespace: str, backend: str) -> dict[str, SharedWatch]:
    watches = {
        "jobsets": shared_watch(target, JOBSET, namespace, prune=pruned_jobset),
        "pods": shared_watch(
            target, POD, namespace, label_selector=well_known.JOBSET_NAME, index=by_label(well_known.JOBSET_NAME), prune=pruned_pod
        ),
        "jobs": shared_watch(
            target, JOB, namespace, label_selector=well_known.JOBSET_NAME, index=by_label(well_known.JOBSET_NAME), prune=pruned_job
        ),
        "workloads": shared_watch(
            target, KUEUE_WORKLOAD, namespace, index=by_owner("JobSet"), prune=pruned_kueue_workload
        ),
    }
    if backend == "pathwaysjob":
        watches["pathwaysjobs"] = shared_watch(target, PATHWAYSJOB, namespace, prune=pruned_pathwaysjob)
    return watches


def _top(observation: Observation) -> dict[str, Any] | None:
    """The object the task submitted (PathwaysJob or JobSet): where the triggers record what they saw."""
    return observation.pathwaysjob if observation.backend == "pathwaysjob" else observation.jobset


class PathwaysJobTrigger(KillableTrigger):
    """Wait until a PathwaysJob or JobSet has finished (or the task's time is up)."""

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        backend: str,
        target: dict[str, Any],
        deadline: float | None = None,
        last_state: dict[str, Any] | None = None,
        recheck_seconds: float = RECHECK_SECONDS,
        until_phase: str | None = None,
        delete_on_timeout: bool = True,
        api_outage_seconds: float = API_OUTAGE_LIMIT_SECONDS,
    ):
        super().__init__()
        self.name = name
        self.namespace = namespace
        self.backend = backend
        self.target = target
        self.deadline = deadline
        self.last_state = last_state
        self.recheck_seconds = recheck_seconds
        self.until_phase = until_phase
        self.delete_on_timeout = delete_on_timeout
        self.api_outage_seconds = api_outage_seconds
        self._failure: dict[str, Any] | None = None
        self._last_step: int | None = None
        self._restarts: list[Disruption] = []
        self._running_since: float | None = None
        self._phases: tuple[PhaseSeen, ...] = ()
        """Each phase this wait saw the workload enter, and when: the task's timeline and goodput."""
        self._live_jobs: dict[str, dict[str, Any]] = {}
        """Each child Job's last state before its deletion began: a failing JobSet deletes its
        Jobs, and the counts they held then are the evidence of lost workers."""
        self._next_creation_check = 0.0
        """When to read the workload's events again while some of its child objects are missing (0: none missing)."""
        self._without_jobset_since: float | None = None
        """When this trigger first saw the PathwaysJob without its JobSet (its own clock)."""
        self._phase_since = self._said_at = time.time()
        """When the current phase began, and when the log last said anything of the workload."""
        self._heads_judged: set[tuple[str, str]] = set()
        """The (pod, container) head failures already judged while the workload ran."""
        self._disruptions_recorded: set[int] = set()
        """The JobSet restart attempts whose disruption is already written on the workload."""
        self._where_recorded: set[int] = set()
        """The JobSet restart attempts whose nodes are already written on the workload."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.workload.PathwaysJobTrigger",
            {
                "name": self.name,
                "namespace": self.namespace,
                "backend": self.backend,
                "target": self.target,
                "deadline": self.deadline,
                "last_state": self.last_state,
                "recheck_seconds": self.recheck_seconds,
                "until_phase": self.until_phase,
                "delete_on_timeout": self.delete_on_timeout,
                "api_outage_seconds": self.api_outage_seconds,
            },
        )

    @property
    def cluster(self) -> ClusterTarget:
        return ClusterTarget.from_dict(self.target)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async for event in self._wait():
                yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting on %s/%s failed", self.namespace, self.name)
            yield TriggerEvent(WorkloadEvent("error", self.name, message=f"{type(error).__name__}: {error}").to_payload())

    async def _wait(self) -> AsyncIterator[TriggerEvent]:
        watches = workload_watches(self.cluster, self.namespace, self.backend)
        changed = asyncio.Event()  # one event for all its watches: one thing to wait on
        subscriptions = {key: watch.subscribe([self.name], changed) for key, watch in watches.items()}
        previous = WorkloadState.from_dict(self.last_state) if self.last_state else None
        state = previous
        try:
            while True:
                refused = [w.forbidden for w in watches.values() if w.forbidden]
                if refused:
                    yield TriggerEvent(WorkloadEvent("error", self.name, message=refused[0], forbidden=True).to_payload())
                    return
                lost = api_lost(watches.values(), self.api_outage_seconds)
                if lost:
                    yield TriggerEvent(WorkloadEvent("error", self.name, message=lost).to_payload())
                    return
                remaining = None if self.deadline is None else self.deadline - time.time()
                if not all(w.synced.is_set() for w in watches.values()):
                    # The first listing has not answered (the API is down as the wait starts):
                    # keep the workload and wait for it, as long as the task has time.
                    if remaining is not None and remaining <= 0:
                        break
                    await wait_for_change(list(subscriptions.values()), recheck_in(self.recheck_seconds, remaining))
                    continue
                observation = observe(self.backend, self.name, self.namespace, watches)
                self._remember_live_jobs(observation)
                if not self._restarts:  # an earlier trigger's, when this one was re-created
                    self._restarts = restarts_written(_top(observation))
                state = workload_state(observation)
                refused = await self._creation_refused(observation, state)
                if refused:
                    state = WorkloadState(Phase.FAILED, message=refused, cause=FailureCause.BAD_SPEC)
                self._phases = phases_with(self._phases, state, time.time())
                await self._capture_failure(observation)
                await self._record_where_workers_run(observation)
                await self._record_disruption_seen(observation)
                await self._note_progress(observation, previous, state)
                line = transition_line(previous, state)
                if line is None and previous is not None:
                    line = still_waiting_line(state, self._phase_since, self._said_at, time.time())
                else:
                    self._phase_since = time.time()
                if line:
                    self.log.info("%s/%s: %s", self.namespace, self.name, line)
                    self._said_at = time.time()
                previous = state
                classification = None
                attempt = self._head_failed_while_running(observation, state)
                if attempt is not None:
                    classification = await self._settled_verdict(observation, subscriptions, watches, attempt)
                    stopped = bug_stopped_in_place(state, classification, restarts_left(observation.jobset))
                    if stopped is not None:
                        await self._record_verdict(classification)
                        await self._delete("its head program failed with the user's exit code")
                        self.log.info("%s/%s: %s", self.namespace, self.name, stopped.summary())
                        state = stopped
                if state.phase.finished or self._reached(state):
                    if state.phase.value == "FAILED" and classification is None:
                        classification = verdict_of(state, await self._settled_verdict(observation, subscriptions, watches))
                        await self._record_verdict(classification)
                    finished = WorkloadEvent(
                        "finished",
                        self.name,
                        state=state,
                        failure=self._failure,
                        classification=classification,
                        last_step=self._last_step,
                        restarts=tuple(self._restarts),
                        running_since=self._running_since,
                        phases=phases_with(self._phases, state, time.time()),
                    )
                    yield TriggerEvent(finished.to_payload())
                    return
                remaining = None if self.deadline is None else self.deadline - time.time()
                if remaining is not None and remaining <= 0:
                    break
                wait = recheck_in(self.recheck_seconds, remaining)
                if self._next_creation_check:  # child objects are missing: look at the events again soon
                    wait = min(wait, creation.CHECK_EVERY_SECONDS)
                await wait_for_change(list(subscriptions.values()), wait)
            deleted = self.delete_on_timeout and await self._delete("the task's execution_timeout passed")
            yield TriggerEvent(WorkloadEvent("timeout", self.name, state=state, deleted=deleted).to_payload())
        finally:
            for key, subscription in subscriptions.items():
                watches[key].unsubscribe(subscription)

    async def _capture_failure(self, observation: Observation) -> None:
        """Read a failed container's last log lines as soon as it fails: its pod may soon be deleted."""
        failed = failed_container(observation)
        if failed is None:
            return
        pod, container, exit_code = failed
        if self._failure and (self._failure["pod"], self._failure["container"]) == (pod, container):
            return
        lines = await AsyncPathwaysHook(self.cluster).read_log_tail(self.namespace, pod, container)
        self._failure = {"pod": pod, "container": container, "exit_code": exit_code, "log_tail": lines}

    async def _note_progress(self, observation: Observation, previous: WorkloadState | None, state: WorkloadState) -> None:
        """Remember when the workload first ran, the training step it had reached when a disruption
        hit (from the head's log, while the head still exists), and each JobSet restart's cause."""
        if state.phase.value == "RUNNING" and self._running_since is None:
            self._running_since = time.time()
        disrupted = (
            state.phase.value in ("RESTARTING", "FAILED")
            or state.restarts > len(self._restarts)
            or any(pod_disruption(p) for p in observation.pods)
        )
        if not disrupted:
            return
        if self._last_step is None or (previous is not None and previous.phase.value == "RUNNING"):
            head = head_pod(observation)
            if head is not None and not head["metadata"].get("deletionTimestamp"):
                container = head["spec"]["containers"][0]["name"]
                lines = await AsyncPathwaysHook(self.cluster).read_log_tail(self.namespace, head["metadata"]["name"], container, 200)
                step = last_completed_step(lines)
                if step is not None:
                    self._last_step = max(step, self._last_step or 0)
        # Every restart the JobSet counted, also one it made between two looks (its new pods may
        # already run): the cause is in the attempt that ended.
        unrecorded = range(len(self._restarts), state.restarts)
        for ended in unrecorded:
            classification = await self._classify(observation, ended)
            self._restarts.append(
                Disruption(time.time(), classification.verdict.value, classification.evidence, self._last_step, JOBSET_RESTART)
            )
            self.log.info(
                "%s/%s: the JobSet restarts (%s): %s", self.namespace, self.name, classification.verdict.value,
                "; ".join(classification.evidence[:3]),
            )
        if unrecorded and self.until_phase is None:
            await self._annotate(restarts_annotation(self._restarts), "the JobSet restarts")

    async def _creation_refused(self, observation: Observation, state: WorkloadState) -> str | None:
        """Why the API refuses the workload's child objects (:mod:`~pathways_airflow.state.creation`),
        read from its events every few seconds while some are missing; the task then deletes it."""
        top = _top(observation)
        if top is not None and observation.jobset is None:
            self._without_jobset_since = self._without_jobset_since or time.monotonic()
        else:
            self._without_jobset_since = None
        missing = state.phase in (Phase.QUEUED, Phase.PROVISIONING) and creation.children_missing(top, observation.jobset, observation.jobs)
        if not missing or top is None:
            self._next_creation_check = 0.0
            return None
        if time.monotonic() < self._next_creation_check:
            return None
        self._next_creation_check = time.monotonic() + creation.CHECK_EVERY_SECONDS
        kind = "JobSet" if observation.jobset is not None else top["kind"]
        try:
            events = await AsyncPathwaysHook(self.cluster).list(EVENT, self.namespace, field_selector=creation.events_selector(kind, self.name))
        except Exception as error:  # the events only explain a hang: without them the wait goes on
            self.log.warning("%s/%s: could not read its events (%s); still waiting for its child objects", self.namespace, self.name, describe(error))
            return None
        known_jobs = [*self._live_jobs.values(), *observation.jobs]
        waited = 0.0 if self._without_jobset_since is None else time.monotonic() - self._without_jobset_since
        refused = creation.creation_failure(top, observation.jobset, known_jobs, events, waited)
        if refused and self.until_phase is None:
            await self._delete(refused)
        return refused

    def _remember_live_jobs(self, observation: Observation) -> None:
        for job in observation.jobs:
            if not job["metadata"].get("deletionTimestamp"):
                self._live_jobs[job["metadata"]["name"]] = job

    async def _settled_verdict(
        self, observation: Observation, subscriptions: dict[str, Any], watches: dict[str, SharedWatch], attempt: int | None = None
    ) -> Classification:
        """Why it stopped, looked at twice when the first verdict could still change.

        The workload's watch can run ahead of the pods' and Jobs' watches: a program that died
        because its slice went away looks like a user's bug until the workers' DisruptionTarget
        arrives, and a user's bug looks like nothing at all until the head's exit code does. Both
        verdicts decide whether a slice is spent again, so the other watches get to catch up.
        """
        classified = await self._classify(observation, attempt)
        if not worth_a_second_look(classified):
            return classified
        await wait_for_change(list(subscriptions.values()), VERDICT_SETTLE_SECONDS, consume=False)
        await asyncio.sleep(VERDICT_SETTLE_SECONDS / 2)
        observation = observe(self.backend, self.name, self.namespace, watches)
        self._remember_live_jobs(observation)
        return await self._classify(observation, attempt)

    def _head_failed_while_running(self, observation: Observation, state: WorkloadState) -> int | None:
        """The restart attempt of a head program exit not yet judged, in a PathwaysJob this task owns."""
        if self.backend != "pathwaysjob" or self.until_phase is not None or state.phase.finished:
            return None
        failed = head_exit_seen(observation)
        if failed is None or failed[:2] in self._heads_judged:
            return None
        self._heads_judged.add(failed[:2])
        return failed[3]

    async def _classify(self, observation: Observation, attempt: int | None = None) -> Classification:
        """Why restart attempt ``attempt`` (default: the current one) stopped: the pods and Jobs as
        last seen (deleted ones too), the nodes now, and a disruption an earlier trigger saw during
        that attempt and wrote on the workload."""
        nodes = await AsyncPathwaysHook(self.cluster).list_nodes()
        seen = {j["metadata"]["name"]: j for j in observation.jobs}
        jobs = list({**seen, **self._live_jobs}.values())
        attempt = current_attempt(observation) if attempt is None else attempt
        jobset = observation.jobset
        if jobset is not None and attempt != current_attempt(observation):
            jobset = {**jobset, "status": {**(jobset.get("status") or {}), "restarts": attempt}}
        top = _top(observation)
        recorded = disruption_seen(top, attempt) or went_down_under_it(top, attempt, nodes)
        if recorded is None and self.backend == "pathwaysjob":  # no failure policy: the head-first rule needs the counter-evidence
            recorded = went_down_under_it(None, attempt, nodes, await self._where_workers_were_scheduled())
        return classify(
            pods=observation.pods, nodes=nodes, jobs=jobs, jobset=jobset, kueue_workload=observation.kueue_workload, recorded=recorded
        )

    async def _where_workers_were_scheduled(self) -> list[tuple[str, str]]:
        """From the scheduler's events, when and where this workload's workers were bound (for an
        attempt no trigger saw run: :func:`~pathways_airflow.state.ran_on.scheduled_workers`)."""
        try:
            events = await AsyncPathwaysHook(self.cluster).list(EVENT, self.namespace, field_selector=f"reason={SCHEDULED_REASON}")
        except Exception as error:  # evidence for a disruption only: without it the other rules still judge
            self.log.info("%s/%s: could not read the scheduler's events (%s)", self.namespace, self.name, describe(error))
            return []
        return scheduled_workers(events, self.name)

    async def _record_where_workers_run(self, observation: Observation) -> None:
        """Write once per attempt the nodes its workers run on: if the slice fails and heals while
        no trigger can look, they are what tells it from the user's bug (:mod:`pathways_airflow.state.ran_on`)."""
        attempt = current_attempt(observation)
        if attempt in self._where_recorded or self.until_phase is not None:
            return
        where = where_workers_run(pods_of_current_attempt(observation), attempt)
        if where is not None:
            self._where_recorded.add(attempt)
            await self._annotate(where, "the nodes it runs on")

    async def _record_disruption_seen(self, observation: Observation) -> None:
        """Write a disruption onto the workload the moment its pods show one.

        The pods that show it are soon gone, and this trigger may be cancelled (a triggerer
        restart, a hand-over, an API outage) before the workload fails: the next trigger, or the
        task's retry, then reads here that the failure was no bug (:mod:`pathways_airflow.run.annotations`).
        """
        attempt = current_attempt(observation)
        if attempt in self._disruptions_recorded or self.until_phase is not None:
            return
        if not any(pod_disruption(p) for p in pods_of_current_attempt(observation)):
            return
        self._disruptions_recorded.add(attempt)
        classification = await self._classify(observation)
        if not classification.verdict.is_disruption:
            return
        await self._annotate(disruption_seen_annotation(attempt, classification), "the disruption seen")

    async def _record_verdict(self, classification: Classification) -> None:
        """Write why it stopped onto the workload before reporting it.

        If the worker dies before acting on this trigger's event, the task's retry finds the
        verdict there and does not resubmit a user's deterministic bug (``plan_submission``).
        Best effort: the event still carries the verdict when the write fails.
        """
        if self.until_phase is not None:
            return
        await self._annotate(ended_by_annotation(classification.verdict.value, classification.evidence), "the verdict")

    async def _annotate(self, annotations: dict[str, str], what: str) -> None:
        """Best effort: what the annotation records also travels in this trigger's event."""
        try:
            await AsyncPathwaysHook(self.cluster).annotate(workload_resource(self.backend), self.namespace, self.name, annotations)
        except Exception as error:
            self.log.warning("could not record %s on %s/%s: %s", what, self.namespace, self.name, error)

    def _reached(self, state: WorkloadState) -> bool:
        """A sensor's target (:func:`~pathways_airflow.state.status.has_reached`): ``RUNNING`` means every slice ready."""
        return self.until_phase is not None and has_reached(state, self.until_phase)

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
