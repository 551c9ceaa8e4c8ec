"""What a failed task says: the cause, the exit code, the failing container's last lines, where to look. Pure.

A failure message is the first thing an on-call engineer reads, usually from a phone, so every
task words it the same way: one sentence for what happened, then the evidence, then a command
to look further.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from pathways_airflow import well_known
from pathways_airflow.exceptions import InfrastructureError, UserCodeError
from pathways_airflow.run.outcome import failed_job_exception
from pathways_airflow.run.timeline import duration
from pathways_airflow.state.jobs import JobOutcome
from pathways_airflow.state.serving import ContainerExit
from pathways_airflow.state.model import Observation, Phase, WorkloadState
from pathways_airflow.run.records import Submission
from pathways_airflow.spec.arguments import RESUME_BY_PROGRAM
from pathways_airflow.state.workload_parts import failed_container


def quoted_log(lines: Sequence[str]) -> str:
    """A container's last log lines as a failure message quotes them."""
    return f"Its last {len(lines)} log lines:\n" + "\n".join(f"  | {line}" for line in lines)


def failing_container(
    observation: Observation, state: WorkloadState, failure: Mapping[str, Any] | None
) -> tuple[str, str, int] | None:
    """``(pod, container, exit code)`` to report: what the trigger captured, else what the cluster still shows.

    The trigger reads a failed container as soon as it fails, since a failed Job's pods are
    deleted soon after; a wait in the worker finds it in the observation, or in the state.
    """
    if failure:
        return failure["pod"], failure["container"], failure["exit_code"]
    found = failed_container(observation)
    if found is None and state.pod and state.container and state.exit_code is not None:
        found = (state.pod, state.container, state.exit_code)
    return found


def workload_failure_message(
    where: str,
    state: WorkloadState,
    failing: tuple[str, str, int] | None,
    log_lines: Sequence[str],
    *,
    cloud_logging: bool,
    hint: str,
) -> str:
    """``where`` failed: the state, the failing container and its last lines (or why they are gone), and ``hint``."""
    parts = [f"{where} failed: {state.summary()}."]
    if failing:
        pod, container, exit_code = failing
        parts.append(f"Container {container} of pod {pod} exited with code {exit_code}.")
        if log_lines:
            parts.append(quoted_log(log_lines))
        else:
            parts.append(
                "Its log could not be read: the pod was deleted with its failed Job"
                + (" (see the Cloud Logging link of this task)." if cloud_logging else ".")
            )
    parts.append(hint)
    return "\n".join(parts)


def budget_exhausted_message(submission: Submission, max_disruptions: int) -> str:
    """Why a task stops resubmitting: every disruption it rode out, when and on what evidence."""
    disruptions = [d.to_dict() for d in submission.disruptions]
    lines = "\n".join(
        f"  - {d.kind} at {dt.datetime.fromtimestamp(d.time, dt.timezone.utc):%Y-%m-%d %H:%M:%S}Z: {'; '.join(d.evidence[:2])}"
        for d in submission.disruptions
    )
    return f"{submission.name}: more disruptions than max_disruptions={max_disruptions} ({summarize(disruptions)}):\n{lines}"


def _brief(state: WorkloadState) -> str:
    """Phase and slices, as :meth:`WorkloadState.summary` starts, for the "from" side of a transition."""
    text = state.phase.value
    if state.slices_total and state.phase in (Phase.PROVISIONING, Phase.RUNNING, Phase.RESTARTING):
        text += f" {state.slices_ready}/{state.slices_total} slices"
    return text


def transition_line(previous: WorkloadState | None, current: WorkloadState) -> str | None:
    """The log line for a change a human cares about (phase, ready slices, restarts, cause), else ``None``.

    Messages alone do not count: a scheduler's wording or a Kueue message may change on every
    poll, and a line per poll buries the transitions that matter.
    """
    if previous is None:
        return current.summary()
    unchanged = (
        previous.phase == current.phase
        and previous.slices_ready == current.slices_ready
        and previous.restarts == current.restarts
        and previous.cause == current.cause
    )
    if unchanged:
        return None
    return f"{_brief(previous)} → {current.summary()}"


STUCK_LOG_EVERY_SECONDS = 300.0
"""How often a workload that is not running yet says again what holds it."""
WAITING_PHASES = (Phase.QUEUED, Phase.PROVISIONING, Phase.RESTARTING)
"""The phases in which the workload waits for something, and the task log says what every
:data:`STUCK_LOG_EVERY_SECONDS`."""


def still_waiting_line(state: WorkloadState, waiting_since: float, last_said: float, now: float) -> str | None:
    """``still QUEUED after 14 min: waiting for Kueue: ...`` every :data:`STUCK_LOG_EVERY_SECONDS`
    while the workload waits (queued, provisioning, restarting), else ``None``.

    A transition is logged once; a wait of an hour would otherwise leave the log silent after
    its first line, and the message says what to act on (Kueue's reason with the queue's usage,
    the scheduler's reason for a pending pod, a container that cannot start).
    """
    if state.phase not in WAITING_PHASES or now - last_said < STUCK_LOG_EVERY_SECONDS:
        return None
    return f"still {_brief(state)} after {(now - waiting_since) / 60:.0f} min: {state.message or 'no reason given'}"


def summarize(disruptions: Sequence[Mapping[str, Any]], lost: float | None = None) -> str:
    """``3 disruptions (2 maintenance, 1 preemption): 140 steps recomputed, 18 min 20 s lost``.

    ``lost``: the time lost to them, as goodput counts it (:attr:`~pathways_airflow.run.goodput.Goodput.lost`,
    the one definition: detection, restart and recomputed steps); left out where it is not known yet."""
    if not disruptions:
        return "no disruptions"
    counts: dict[str, int] = {}
    for item in disruptions:
        kind = str(item.get("kind", "unknown")).lower().replace("_", " ")
        counts[kind] = counts.get(kind, 0) + 1
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    steps = sum(int(item.get("steps_recomputed") or 0) for item in disruptions)
    noun = "disruption" if len(disruptions) == 1 else "disruptions"
    return f"{len(disruptions)} {noun} ({kinds}): {steps} steps recomputed" + ("" if lost is None else f", {duration(lost)} lost")


# --- a serving engine's start-up or benchmark that failed ------------------------------------------


def quoted_container_log(lines: Sequence[str], pod: str, container: str, *, on_gke: bool = False) -> str:
    """A container's last log lines, indented for an exception message."""
    if not lines:
        where = " (see the Cloud Logging link of this cluster)" if on_gke else ""
        return f"The log of {pod}/{container} could not be read{where}."
    return f"Last {len(lines)} log lines of {pod}/{container}:\n" + "\n".join(f"  | {line}" for line in lines)


def server_hint(namespace: str, lws: str) -> str:
    return (
        f"Look further with: kubectl -n {namespace} describe leaderworkerset {lws}; "
        f"kubectl -n {namespace} get pods -l {well_known.LWS_NAME}={lws}"
    )


def server_crashed(namespace: str, lws: str, crash: ContainerExit, quoted: str) -> UserCodeError:
    """A server that exits while starting exits again in every group LWS recreates:
    the program's failure (a bad setting, an unreadable checkpoint), not retried."""
    return UserCodeError(
        f"the server of {namespace}/{lws} exited with code {crash.exit_code}"
        f"{f' ({crash.reason})' if crash.reason else ''} while starting; it would only crash again.\n"
        f"{quoted}\n{server_hint(namespace, lws)}",
        exit_code=crash.exit_code,
    )


def server_timed_out(
    namespace: str, lws: str, startup_seconds: int, summary: str | None, leaders: int, quoted: str
) -> InfrastructureError:
    """A server still not serving at ``startup_timeout``: scheduling or a slow restore, so a retry may succeed."""
    recreated = f" The group was recreated {leaders - 1} time(s)." if leaders > 1 else ""
    return InfrastructureError(
        f"the server {namespace}/{lws} did not serve within startup_timeout="
        f"{startup_seconds}s: {summary or 'nothing observed'}.{recreated}\n{quoted}\n{server_hint(namespace, lws)}"
    )


def benchmark_failed(
    namespace: str, job: str, outcome: JobOutcome, crash: ContainerExit | None, disruption: str | None, quoted: str
) -> Exception:
    """The one failed-Job rule (:func:`pathways_airflow.run.outcome.failed_job_exception`): a
    benchmark lost to preemption is retried, a benchmark that crashed on its own is not."""
    hint = f"Look further with: kubectl -n {namespace} describe job {job}"
    lost = f" ({disruption})" if disruption else ""
    if crash is None:
        message = f"benchmark Job {namespace}/{job} {outcome.summary()}; no container exit code was recorded{lost}.\n{hint}"
        return failed_job_exception(message, exit_code=None, disruption=disruption)
    message = (
        f"benchmark Job {namespace}/{job} {outcome.summary()}: container {crash.container} of pod {crash.pod} "
        f"exited with code {crash.exit_code}{lost}.\n{quoted}\n{hint}"
    )
    return failed_job_exception(message, exit_code=crash.exit_code, disruption=disruption)


def resume_line(resume: str, checkpoint: Any) -> str:
    """How a resubmission says where it resumes: the checkpoint it hands over, or that the program
    picks (``resume="program"``), naming the newest committed one on GCS as what it will find there."""
    newest = f"step {checkpoint.step} ({checkpoint.uri})" if checkpoint else None
    if resume == RESUME_BY_PROGRAM:
        on_gcs = f"the newest committed on GCS is {newest}" if newest else "none is committed on GCS"
        return f"the program picks its checkpoint (resume='program'; {on_gcs})"
    return f"resuming from {newest}" if newest else "no committed checkpoint to resume from"

