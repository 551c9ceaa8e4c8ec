"""What one wait on a workload remembers between looks, and what each look writes on it. Pure.

A workload's trigger (:mod:`~pathways_airflow.triggers.workload`) keeps one :class:`WaitMemory`.
The functions here say what a look must read besides its watches (``*_to_read``, ...); then
:func:`remembered` folds the look and those :class:`Readings` into the next memory, and gives the
annotations to write (:mod:`~pathways_airflow.run.annotations`): as the JobSet controller's
reconciler gathers its status changes and updates once, the trigger writes them in one
merge-patch before it acts on the look. Time is the caller's: nothing here reads a clock or the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow.run.annotations import (
    RECOVERED_ANNOTATION, disruption_seen, disruption_seen_annotation, disruption_seen_at, ended_by_annotation, phases_annotation,
    phases_written, restarts_annotation, restarts_written, resumed_from_annotation, resumed_from_written,
)
from pathways_airflow.run.messages import STUCK_LOG_EVERY_SECONDS, WAITING_PHASES, still_waiting_line, transition_line
from pathways_airflow.run.progress import FROM_SCRATCH, last_completed_step, step_resumed_from
from pathways_airflow.run.records import JOBSET_RESTART, PROGRAM_RECOVERY, Disruption, PhaseSeen
from pathways_airflow.run.timeline import phases_with
from pathways_airflow.state import creation, reclaim
from pathways_airflow.state.disruption import Classification, Verdict, failures_key, pod_disruption, slice_losses_counted, worker_jobs_now
from pathways_airflow.state.model import Observation, Phase, WorkloadState
from pathways_airflow.state.queue import CHECK_EVERY_SECONDS, QueuePlace, local_queue_of
from pathways_airflow.state.ran_on import where_workers_run, with_where_they_ran_before
from pathways_airflow.state.status import admitted_at
from pathways_airflow.state.workload_parts import (
    as_int, current_attempt, elastic_slices, failed_container, head_pod, host_of, is_running_and_ready,
    main_container_status, newest_pod_per_host, pods_of_current_attempt, status_of, worker_job_name,
)

Jobs = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class WaitMemory:
    """What a wait keeps of its workload between looks (``writes``: not a sensor's, which watches
    a workload someone else owns). ``live_jobs``: each child Job before its deletion began (a
    failing JobSet deletes its Jobs; the counts they held then are the evidence of lost workers);
    ``disruptions_recorded``: the attempts whose disruption is written (each once); ``where_recorded``:
    the (attempt, slice losses ridden out in it, Kueue's admission) whose nodes are written: again
    after each such loss or re-admission, as the workers run on other nodes since;
    ``next_creation_check``: when to read the events again while child objects are missing (0: none);
    ``queued``, ``next_queue_check``: the workload's place in Kueue's queue when last read, and when
    to read it again while it is queued.
    """

    writes: bool = True
    state: WorkloadState | None = None
    phases: tuple[PhaseSeen, ...] = ()
    restarts: tuple[Disruption, ...] = ()
    failure: Mapping[str, Any] | None = None
    last_step: int | None = None
    running_since: float | None = None
    live_jobs: Jobs = field(default_factory=dict)
    phase_since: float = 0.0
    said_at: float = 0.0
    disruptions_recorded: frozenset[int] = frozenset()
    where_recorded: frozenset[tuple[int, int, str]] = frozenset()
    next_creation_check: float = 0.0
    without_jobset_since: float | None = None
    queued: QueuePlace | None = None
    next_queue_check: float = 0.0
    lost_pods_seen: frozenset[str] = frozenset()
    """With elastic slices: the current attempt's pods already seen disrupted."""
    recovering: Disruption | None = None
    """With elastic slices: a slice lost while the workload runs on, not back yet."""
    recovered: tuple[Disruption, ...] = ()
    """With elastic slices: the slice losses the program rode out (``handled_by`` :data:`PROGRAM_RECOVERY`)."""
    reads_resume: bool = False
    """The run follows a resubmission: read where its program says it resumed (:func:`resume_log_to_read`)."""
    resumed_from: int | None = None
    """The step the program said it restored (:func:`~pathways_airflow.run.progress.step_resumed_from`)."""
    next_resume_read: float = 0.0
    failures_ridden_out: Mapping[str, int] = field(default_factory=dict)
    """With elastic slices: the failures each worker Job (by uid: a restart's Jobs keep the names)
    of the running attempt counted while every slice ran again (:func:`failures_ridden_out`)."""
    collector_late_since: float | None = None
    """When a look first saw the JobSet's restart held up by the last attempt's pods the garbage
    collector had not reached (:func:`restart_held_up`)."""

    @classmethod
    def starting(cls, last_state: dict[str, Any] | None, now: float, writes: bool = True, reads_resume: bool = False) -> WaitMemory:
        """A wait's first memory, from its serialized trigger: the state the task last saw."""
        state = WorkloadState.from_dict(last_state) if last_state else None
        return cls(writes, state, phase_since=now, said_at=now, reads_resume=reads_resume)


@dataclass(frozen=True)
class Readings:
    """What the trigger read for a look, as asked below (``failure``: a failed container's pod, name,
    exit code and last log lines); ``verdict``: why the workload stopped."""

    failure: tuple[str, str, int, Sequence[str]] | None = None
    head_log: Sequence[str] | None = None
    restart_causes: tuple[Classification, ...] = ()
    disruption: Classification | None = None
    verdict: Classification | None = None
    jobs_seen_again: tuple[Mapping[str, Any], ...] = ()
    queue_read: bool = False
    queued: QueuePlace | None = None
    """With ``queue_read``: the place in Kueue's queue (``None``: nothing to say, e.g. admitted meanwhile)."""
    resume_log: Sequence[str] | None = None
    """The start of the head's log, when :func:`resume_log_to_read` asked for it."""


def top_of(observation: Observation) -> dict[str, Any] | None:
    """The object the task submitted (PathwaysJob or JobSet): where the triggers record what they saw."""
    return observation.pathwaysjob if observation.backend == "pathwaysjob" else observation.jobset


def live_jobs_with(live: Jobs, jobs: Iterable[Mapping[str, Any]]) -> Jobs:
    """``live`` and, by name, each of ``jobs`` whose deletion has not begun."""
    fresh = {j["metadata"]["name"]: j for j in jobs if not j["metadata"].get("deletionTimestamp")}
    return live if all(live.get(name) is job for name, job in fresh.items()) else {**live, **fresh}


def restarts_known(memory: WaitMemory, observation: Observation) -> tuple[Disruption, ...]:
    """The restarts this wait saw; before it saw one, those an earlier trigger wrote on the workload."""
    return memory.restarts or tuple(restarts_written(top_of(observation)))


def in_place(memory: WaitMemory) -> tuple[Disruption, ...]:
    """Every disruption the workload got through without a resubmission, oldest first: the JobSet's
    restarts and the slice losses the program rode out."""
    return tuple(sorted((*memory.restarts, *memory.recovered), key=lambda d: d.time))


RESUME_READ_EVERY_SECONDS = 10.0
"""How often the start of the head's log is read again while its program has not said where it resumed."""


def resume_log_to_read(memory: WaitMemory, observation: Observation, now: float) -> tuple[str, str] | None:
    """The head's (pod, container) whose log start says where the program resumed: a run after a
    resubmission, once its head has started, until the program said it (every
    :data:`RESUME_READ_EVERY_SECONDS`). The provider's record of the resubmission names the newest
    committed checkpoint on GCS; the program may have restored another (multi-tier checkpointing,
    ``resume="program"``), and only its log tells.

    Only the first run's head says it: after the JobSet restarted in place, its program restores
    the newest step again, and so does the head of a re-admission an earlier wait already read
    before it (its reading is on the workload: :func:`resume_known`)."""
    if not memory.reads_resume or memory.resumed_from is not None or now < memory.next_resume_read:
        return None
    if current_attempt(observation) != 0 or resumed_from_written(top_of(observation)) is not None:
        return None
    head = head_pod(observation)
    main = main_container_status(head)
    if head is None or main is None or not {"running", "terminated"} & set(main.get("state") or {}):
        return None
    return head["metadata"]["name"], str(main["name"])


def resume_known(memory: WaitMemory, read: Readings, written: int | None) -> int | None:
    """The step the program said it restored: as this wait read it, else as an earlier wait wrote it."""
    said = memory.resumed_from if read.resume_log is None else step_resumed_from(read.resume_log)
    return written if said is None else said


def failure_to_read(memory: WaitMemory, observation: Observation) -> tuple[str, str, int] | None:
    """A failed container whose log is not read yet: (pod, container, exit code)."""
    failed, read = failed_container(observation), memory.failure
    return None if failed is None or (read is not None and (read["pod"], read["container"]) == failed[:2]) else failed


def head_log_to_read(memory: WaitMemory, observation: Observation, state: WorkloadState) -> tuple[str, str] | None:
    """The head's (pod, container) when a disruption hits, the first time, after it ran again, and
    at each new phase on the way to the verdict: its log says the step reached, while the head
    exists, and the head goes on training through its workers' grace period after the first read."""
    disrupted = state.phase in (Phase.RESTARTING, Phase.FAILED) or state.restarts > len(restarts_known(memory, observation))
    if not (disrupted or any(pod_disruption(p) for p in observation.pods)):
        return None
    moved = memory.state is None or memory.state.phase is Phase.RUNNING or memory.state.phase is not state.phase
    head = head_pod(observation) if memory.last_step is None or moved else None
    if head is None or head["metadata"].get("deletionTimestamp"):
        return None
    return head["metadata"]["name"], head["spec"]["containers"][0]["name"]


def disruption_to_classify(memory: WaitMemory, observation: Observation) -> bool:
    """Whether the current attempt's pods show a disruption not judged yet. They are soon gone, and
    the trigger may be cancelled before the workload fails: the next one, or the task's retry, then
    reads on the workload that the failure was no bug. With elastic slices, each new loss is judged:
    the workload may ride out several."""
    pods = _disrupted_now(observation) if current_attempt(observation) not in memory.disruptions_recorded else frozenset()
    return memory.writes and (bool(pods) or bool(elastic_slices(observation) and newly_disrupted(memory, observation)))


def _disrupted_now(observation: Observation) -> frozenset[str]:
    """The current attempt's pods that show a disruption; with elastic slices, less those a running
    replacement took over from: the program rode that loss out (a wait re-created after it saw it
    ride out nothing; an earlier wait's record of it is followed instead: :func:`_lost_before_this_wait`).
    Without elastic slices a replacement says nothing: the lost pods still end the attempt."""
    pods = pods_of_current_attempt(observation)
    now = {host_of(p): p for p in newest_pod_per_host(pods)} if elastic_slices(observation) else {}

    def replaced(pod: Mapping[str, Any]) -> bool:
        newest = now.get(host_of(pod), pod)
        return newest is not pod and is_running_and_ready(newest)

    return frozenset(p["metadata"]["name"] for p in pods if pod_disruption(p) and not replaced(p))


def newly_disrupted(memory: WaitMemory, observation: Observation) -> frozenset[str]:
    """The current attempt's pods that show a disruption this wait has not seen yet (:func:`_disrupted_now`)."""
    return _disrupted_now(observation) - memory.lost_pods_seen


def recovered_known(memory: WaitMemory, observation: Observation) -> tuple[Disruption, ...]:
    """The slice losses the program rode out that this wait saw; before it saw one, those written on the workload."""
    return memory.recovered or tuple(restarts_written(top_of(observation), RECOVERED_ANNOTATION))


def _slices_back(observation: Observation, state: WorkloadState) -> bool:
    """Every slice runs again, on pods that were not disrupted (a disrupted pod may run on through
    its grace period; one a replacement took over from is history)."""
    disrupted_running = any(pod_disruption(p) and is_running_and_ready(p) for p in newest_pod_per_host(pods_of_current_attempt(observation)))
    return state.slices_total > 0 and state.slices_ready >= state.slices_total and not disrupted_running


def recovery(
    memory: WaitMemory, observation: Observation, state: WorkloadState, now: float, read: Readings, last_step: int | None,
    recovered: tuple[Disruption, ...],
) -> tuple[Disruption | None, tuple[Disruption, ...]]:
    """Pathways' own recovery (elastic slices): a slice lost while the workload keeps running is
    recorded once every slice runs again — the program rode it out, nothing was resubmitted. A
    success says so of every loss it had, the one being recovered from and those no look saw (a
    look may first come after the end); a restart or a failure says what happened instead
    (``recovering`` is dropped). ``recovered``: those known so far (:func:`recovered_known`)."""
    if not elastic_slices(observation) or read.restart_causes:
        return None, recovered
    if state.phase is Phase.SUCCEEDED:  # whatever it lost on the way, it rode out
        if memory.recovering is not None:
            return None, (*recovered, _over(memory.recovering, now))
        return None, (*recovered, *_losses_unseen(memory, observation, recovered, now, last_step, ended=True))
    if state.phase is not Phase.RUNNING:
        return None, recovered
    if memory.recovering is None:
        judged = read.disruption
        newly = newly_disrupted(memory, observation)
        if newly and judged is not None and judged.verdict.is_disruption:
            lost = Disruption(now, judged.verdict.value, judged.evidence, last_step, PROGRAM_RECOVERY)
            # Replacements may already run (capacity at hand): back before the next look, which an outage may delay past the end.
            return (None, (*recovered, replace(lost, seconds_lost=0.0))) if _slices_back(observation, state) else (lost, recovered)
        earlier = _lost_before_this_wait(observation, recovered, last_step)
        if earlier is not None:
            return (None, (*recovered, earlier)) if _slices_back(observation, state) else (earlier, recovered)
        if newly or not _slices_back(observation, state):
            return None, recovered
        return None, (*recovered, *_losses_unseen(memory, observation, recovered, now, last_step))
    if _slices_back(observation, state):
        return None, (*recovered, _over(memory.recovering, now))
    return memory.recovering, recovered


def _over(recovering: Disruption, now: float) -> Disruption:
    """A loss being recovered from, over at ``now``: its cost is the time since it struck."""
    return replace(recovering, seconds_lost=round(now - recovering.time, 1))


def _losses_unseen(
    memory: WaitMemory, observation: Observation, recovered: tuple[Disruption, ...], now: float, last_step: int | None, *, ended: bool = False,
) -> tuple[Disruption, ...]:
    """Slice losses of the running attempt the worker Jobs count beyond those recorded, once every
    slice runs again: the program rode them out while no look could see them (an API outage whose
    relist found the lost pods gone, a triggerer restart before the loss was written). Each is
    recorded now, of an unknown kind and cost; a count that lags the pods only delays it. Once the
    workload has succeeded, its Jobs' last counts tell too (they are deleted as it finishes)."""
    restarted = [r.time for r in restarts_known(memory, observation)]
    since = max(restarted, default=float("-inf"))
    counted = slice_losses_counted(observation.jobs, observation.jobset, with_deleted=ended)
    unseen = counted - sum(1 for r in recovered if r.time >= since)
    evidence = (f"the worker Jobs count {unseen} slice loss(es) more than any look saw: ridden out while the workload "
                "could not be watched (an API outage, a triggerer restart)",)
    return tuple(Disruption(now, Verdict.UNKNOWN_INFRA.value, evidence, last_step, PROGRAM_RECOVERY) for _ in range(unseen))


def failures_ridden_out(memory: WaitMemory, observation: Observation, state: WorkloadState) -> Mapping[str, int]:
    """With elastic slices, what each worker Job of the running attempt counts as failed while every
    slice runs again: pods of slice losses the program rode out, whoever saw them (a wait
    re-created after the loss sees neither the lost pods nor a record of it, only the count)."""
    if not elastic_slices(observation) or state.phase is not Phase.RUNNING or not _slices_back(observation, state):
        return memory.failures_ridden_out
    counted = {failures_key(job): as_int(status_of(job).get("failed")) for job in worker_jobs_now(observation.jobs, observation.jobset)}
    return {**memory.failures_ridden_out, **{k: max(v, memory.failures_ridden_out.get(k, 0)) for k, v in counted.items() if v}}


def _lost_before_this_wait(observation: Observation, recovered: tuple[Disruption, ...], last_step: int | None) -> Disruption | None:
    """A slice loss of the running attempt an earlier wait recorded on the workload and never saw
    ridden out (it was replaced meanwhile: a triggerer restart): this wait follows it as its own,
    so a later exit of the program is not read as that loss (its lost pods may be gone by now)."""
    top = top_of(observation)
    seen, at = disruption_seen(top, current_attempt(observation)), disruption_seen_at(top)
    if seen is None or at is None or any(r.time >= at for r in recovered):
        return None
    return Disruption(at, seen.verdict.value, seen.evidence, last_step, PROGRAM_RECOVERY)


def restart_held_up(memory: WaitMemory, observation: Observation, now: float) -> tuple[WaitMemory, reclaim.Leftovers]:
    """What of the last attempt holds up the JobSet's restart in place, timed from the look that
    first saw it (:func:`~pathways_airflow.state.reclaim.restart_held_up`). A wait that only
    watches (a sensor's) never deletes: it is told nothing is to be done."""
    seen = reclaim.restart_held_up(observation.jobs, observation.pods, 0.0)
    if not memory.writes or not seen.unmarked:
        return (memory if memory.collector_late_since is None else replace(memory, collector_late_since=None)), seen
    since = now if memory.collector_late_since is None else memory.collector_late_since
    return replace(memory, collector_late_since=since), reclaim.restart_held_up(observation.jobs, observation.pods, now - since)


def _children_missing(observation: Observation, state: WorkloadState) -> bool:
    top = top_of(observation)
    return state.phase in (Phase.QUEUED, Phase.PROVISIONING) and creation.children_missing(top, observation.jobset, observation.jobs)


def creation_check_due(memory: WaitMemory, observation: Observation, state: WorkloadState, now: float) -> bool:
    """Whether to read the workload's events (:mod:`~pathways_airflow.state.creation`): some of its
    child objects are missing, and they were not read in the last ``CHECK_EVERY_SECONDS``."""
    return _children_missing(observation, state) and now >= memory.next_creation_check


def queue_check_due(memory: WaitMemory, observation: Observation, state: WorkloadState, now: float) -> bool:
    """Whether to read the workload's place in Kueue's queue (:mod:`~pathways_airflow.state.queue`):
    it is queued in a LocalQueue, and the place was not read in the last ``CHECK_EVERY_SECONDS``."""
    return state.phase is Phase.QUEUED and local_queue_of(observation.kueue_workload) is not None and now >= memory.next_queue_check


def queue_line_to_log(memory: WaitMemory, read: Readings) -> str | None:
    """What the task log says of a place in the queue read this look: only a new one."""
    if not read.queue_read or read.queued is None or read.queued == memory.queued:
        return None
    return f"queued: {read.queued.line()}"


def resume_line_to_log(before: WaitMemory, after: WaitMemory) -> str | None:
    """What the task log says when the program first says where it resumed (the disruption's
    record takes that step: :func:`~pathways_airflow.run.outcome.with_resume_logged`)."""
    if before.resumed_from is not None or after.resumed_from is None:
        return None
    return f"its program restored {'no checkpoint' if after.resumed_from == FROM_SCRATCH else f'step {after.resumed_from}'} (its log says)"


HELD_RESTART_RETRY_SECONDS = 1.0
"""After a failed delete of what holds a JobSet's restart up, the next look comes this soon (the
usual ``Retry-After`` of a throttled API)."""


def look_again_within(memory: WaitMemory, state: WorkloadState, now: float, recheck: float) -> float:
    """How long a wait may go without a look if no watch wakes it: ``recheck`` (the safety net
    under the watches), or sooner when a look is due by the clock alone: the events to read again
    while child objects are missing, the end of the garbage collector's margin on a held-up restart
    (or a retry soon after a delete that failed), the place in Kueue's queue, and the next
    ``still ... after N min`` line while the workload waits (:func:`line_to_log`)."""
    wait = recheck
    if memory.next_creation_check:
        wait = min(wait, creation.CHECK_EVERY_SECONDS)
    if memory.collector_late_since is not None:
        held_until = memory.collector_late_since + reclaim.COLLECTOR_MARGIN_SECONDS
        wait = min(wait, held_until - now if held_until > now else HELD_RESTART_RETRY_SECONDS)
    if state.phase is Phase.QUEUED and memory.next_queue_check:
        wait = min(wait, memory.next_queue_check - now)
    if state.phase in WAITING_PHASES:
        wait = min(wait, memory.said_at + STUCK_LOG_EVERY_SECONDS - now)
    return max(0.0, wait)


def line_to_log(memory: WaitMemory, state: WorkloadState, now: float) -> str | None:
    """What the task log says of this look: a transition, or what still holds the workload."""
    return transition_line(memory.state, state) or still_waiting_line(state, memory.phase_since, memory.said_at, now)


def remembered(
    memory: WaitMemory, observation: Observation, state: WorkloadState, now: float, read: Readings = Readings()
) -> tuple[WaitMemory, dict[str, str]]:
    """The memory after a look at the workload, and the annotations to write for it: none that the
    workload carries already, none on a workload someone else owns (``writes``)."""
    top, attempt = top_of(observation), current_attempt(observation)
    restarts = restarts_known(memory, observation)
    reached = last_completed_step(read.head_log or ())
    last_step = memory.last_step if reached is None else max(reached, memory.last_step or 0)
    new = tuple(Disruption(now, c.verdict.value, c.evidence, last_step, JOBSET_RESTART) for c in read.restart_causes)
    known_recovered = recovered_known(memory, observation)
    recovering, recovered = recovery(memory, observation, state, now, read, last_step, known_recovered)
    # Where the workers run, and again after each slice loss the program rode out or each
    # re-admission by Kueue (the restart attempt stays): they run on other nodes since, and the
    # old ones' comings and goings explain no later failure.
    admitted, elastic = admitted_at(observation.kueue_workload), elastic_slices(observation)
    placement = (attempt, len(recovered), admitted)
    lost_pods = memory.lost_pods_seen | newly_disrupted(memory, observation) if elastic else memory.lost_pods_seen
    where = where_workers_run(pods_of_current_attempt(observation), attempt, worker_job_name(observation.jobset)) if placement not in memory.where_recorded else None
    if not elastic:  # a loss it cannot ride out: the lost nodes still vouch for the failure to come
        where = with_where_they_ran_before(where, top, attempt, admitted)
    known = memory.phases or phases_written(top)  # a re-created wait goes on from what earlier ones saw
    written_resume = resumed_from_written(top)
    resumed_from = resume_known(memory, read, written_resume)
    phases = phases_with(known, state, now)
    annotations = {
        **(where or {}),
        **(phases_annotation(phases) if [p.phase for p in phases] != [p.phase for p in known] else {}),  # at a new phase only
        **(disruption_seen_annotation(attempt, read.disruption, now) if read.disruption and read.disruption.verdict.is_disruption else {}),
        **(restarts_annotation((*restarts, *new)) if new else {}),
        **(restarts_annotation(recovered, RECOVERED_ANNOTATION) if len(recovered) > len(known_recovered) else {}),
        **(ended_by_annotation(read.verdict.verdict.value, read.verdict.evidence) if read.verdict else {}),
        **(resumed_from_annotation(resumed_from) if resumed_from is not None and written_resume is None else {}),
    }
    carried = ((top or {}).get("metadata") or {}).get("annotations") or {}
    missing, due = _children_missing(observation, state), creation_check_due(memory, observation, state, now)
    remembers = replace(
        memory,
        state=state,
        phases=phases,
        restarts=(*restarts, *new),
        failure=dict(zip(("pod", "container", "exit_code", "log_tail"), read.failure)) if read.failure else memory.failure,
        last_step=last_step,
        running_since=now if memory.running_since is None and state.phase is Phase.RUNNING else memory.running_since,
        live_jobs=live_jobs_with(memory.live_jobs, (*observation.jobs, *read.jobs_seen_again)),
        phase_since=now if transition_line(memory.state, state) else memory.phase_since,
        said_at=now if line_to_log(memory, state, now) else memory.said_at,
        disruptions_recorded=memory.disruptions_recorded | {attempt} if read.disruption else memory.disruptions_recorded,
        where_recorded=memory.where_recorded | {placement} if where else memory.where_recorded,
        next_creation_check=(now + creation.CHECK_EVERY_SECONDS if due else memory.next_creation_check) if missing else 0.0,
        without_jobset_since=(memory.without_jobset_since or now) if top is not None and observation.jobset is None else None,
        queued=(read.queued or memory.queued) if read.queue_read else memory.queued,
        next_queue_check=now + CHECK_EVERY_SECONDS if read.queue_read else memory.next_queue_check,
        lost_pods_seen=lost_pods,
        recovering=recovering,
        recovered=recovered,
        failures_ridden_out=failures_ridden_out(memory, observation, state),
        resumed_from=resumed_from,
        next_resume_read=now + RESUME_READ_EVERY_SECONDS if read.resume_log is not None else memory.next_resume_read,
    )
    return remembers, {k: v for k, v in annotations.items() if carried.get(k) != v} if memory.writes else {}
