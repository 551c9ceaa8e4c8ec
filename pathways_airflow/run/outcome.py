"""After the wait: succeed, resubmit, or fail with which exception. Pure; one rule for every wait.

Every task of this provider ends the same way: a workload or a Job has stopped, and the task
must decide whether the result stands, whether the slices were taken from the program (a fresh
workload resumes from the newest committed checkpoint), or which failure to raise — and with it
whether Airflow retries. The rule is xpk's: a disrupted pod, or exit code 42 or 127–255 (killed,
out of memory, lost), or no exit code at all (the pod was gone before it could record one:
preempted, its node lost), is the system's, and a retry may succeed; any other non-zero code
is the program's (a wrong ``model_name``, a mismatched config, a bad flag), and retrying it runs
the same bug again.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import replace

from airflow.providers.common.compat.sdk import AirflowTaskTimeout

from pathways_airflow.exceptions import (
    BadSpecError,
    InfrastructureError,
    KubernetesApiError,
    PermissionMissingError,
    RetryableUserCodeError,
    UserCodeError,
    WorkloadDeletedError,
    WorkloadEndedError,
)
from pathways_airflow.spec.arguments import TASK_LIMIT
from pathways_airflow.spec.names import MAX_ATTEMPT
from pathways_airflow.spec.render import XPK_SYSTEM_EXIT_CODES
from pathways_airflow.state.disruption import Classification, Verdict
from pathways_airflow.state.jobs import COMPLETE, ERROR, FAILED, GONE, TIMEOUT, JobEvent
from pathways_airflow.state.model import FailureCause, Phase, WorkloadState
from pathways_airflow.run.progress import FROM_SCRATCH, seconds_recomputed, steps_recomputed
from pathways_airflow.run.records import PROGRAM_LOG, Disruption, Submission, WorkloadEvent


class NextStep(str, enum.Enum):
    SUCCEED = "succeed"
    RESUBMIT = "resubmit"
    """The infrastructure ended it: delete it and submit the next attempt, resuming."""
    FAIL = "fail"


def next_step(state: WorkloadState, classification: Classification | None) -> NextStep:
    """What a task does once its workload has finished (``state.phase`` is final)."""
    if state.phase is Phase.SUCCEEDED:
        return NextStep.SUCCEED
    if state.phase is Phase.FAILED and classification is not None and is_disruption(state, classification):
        return NextStep.RESUBMIT
    return NextStep.FAIL


def restarts_in_place(backend: str, max_restarts: int) -> int:
    """How many times the workload may restart by itself (its JobSet's ``maxRestarts``).

    ``max_restarts`` on the ``jobset`` backend, whose failure policy fails a bug at once and
    restarts only what is no bug. None on the ``pathwaysjob`` backend: a PathwaysJob's only failure
    policy is ``maxRestarts``, so its JobSet would run a bug again at every restart, holding the
    slices for it, and stopping it from outside is a race its controller wins in well under a
    second. There the task makes those restarts itself, after judging each failure
    (:func:`resubmissions_allowed`): a bug runs once on every backend.
    """
    return max_restarts if backend == "jobset" else 0


def resubmissions_allowed(backend: str, max_disruptions: int, max_restarts: int) -> int:
    """How many fresh workloads a task may submit after infrastructure failures: ``max_disruptions``,
    and the restarts ``max_restarts`` allows that the workload cannot make in place itself; at most
    as many as attempt names there are (:data:`~pathways_airflow.spec.names.MAX_ATTEMPT`)."""
    return min(MAX_ATTEMPT, max_disruptions + max_restarts - restarts_in_place(backend, max_restarts))


def is_disruption(state: WorkloadState, classification: Classification) -> bool:
    """Only when infrastructure ended the workload, never for a bug or a refused spec.

    A user-code verdict from the state core stands unless the classifier found real disruption
    evidence (maintenance, preemption, a lost slice): a program that exits 1 after losing its
    slice is not a bug, but an exit 1 with no such evidence is.
    """
    if state.cause in (FailureCause.BAD_SPEC, FailureCause.QUOTA, FailureCause.DELETED, FailureCause.TIMEOUT):
        return False
    if state.cause is FailureCause.USER_CODE and classification.verdict is Verdict.UNKNOWN_INFRA:
        return False
    return classification.verdict.is_disruption


def verdict_of(state: WorkloadState, classification: Classification) -> Classification:
    """Why a failed workload stopped, as the task acts on it (:func:`is_disruption`), for the
    record a retry reads back: a user's-code failure (the ``jobset`` backend's failure policy, a
    user exit code) that no disruption evidence explains is the user's error, even when its pod is
    gone and the classifier alone found nothing."""
    if state.cause is not FailureCause.USER_CODE or classification.verdict is Verdict.USER_ERROR or is_disruption(state, classification):
        return classification
    return Classification(Verdict.USER_ERROR, (state.message,), state.exit_code, state.container, state.pod)


def over_budget(submission: Submission, max_disruptions: int) -> bool:
    """More resubmissions than ``max_disruptions`` allows (JobSet restarts in place are free)."""
    return submission.resubmissions > max_disruptions


def disruption_of(
    classification: Classification,
    *,
    workload: str,
    reached_step: int | None,
    resumed_from_step: int | None,
    now: float,
    running_since: float,
    earlier: Sequence[Disruption] = (),
) -> Disruption:
    """The record of a disruption that cost a resubmission: what ended it and what it cost.

    ``seconds_lost``: the time the steps done again took, at the pace this run went since it
    started (from the step the last resubmission in ``earlier`` resumed from); a run that never
    reported a step lost no training time to recomputation.
    """
    started_at = next((d.resumed_from_step for d in reversed(earlier) if d.resubmitted), None)
    return Disruption(
        time=now,
        kind=classification.verdict.value,
        evidence=classification.evidence,
        workload=workload,
        reached_step=reached_step,
        resumed_from_step=resumed_from_step,
        steps_recomputed=steps_recomputed(reached_step, resumed_from_step),
        seconds_lost=round(seconds_recomputed(now - running_since, reached_step, resumed_from_step, started_at), 1),
    )


def with_disruption_resubmitted(submission: Submission, disruption: Disruption, next_name: str, max_disruptions: int) -> Submission:
    """The record with ``disruption`` and the workload ``next_name`` to be submitted in its stead,
    unless it spends the budget (then none is): only that workload's program can later say where
    the resubmission resumed (:func:`with_resume_logged`)."""
    if not over_budget(submission.with_disruptions(disruption), max_disruptions):
        disruption = replace(disruption, resubmitted_as=next_name)
    return submission.with_disruptions(disruption)


def with_resume_logged(submission: Submission, step: int | None) -> Submission:
    """The record once the program of the run after the last resubmission said where it resumed
    (:func:`~pathways_airflow.run.progress.step_resumed_from`; ``None``: it has not said).

    The resubmission recorded the newest committed checkpoint on GCS; the program may have
    restored a newer one (multi-tier checkpointing keeps local and peer copies) or an older one,
    and what it recomputed is what it logged. The time lost scales with the steps at the pace
    the record was costed at; a record that had no step to cost keeps its time.

    Only the workload submitted in the record's stead speaks for it: after that one failed and a
    later try submitted the next attempt, what the newest program restored is not that record's.
    """
    last = next((i for i in range(len(submission.disruptions) - 1, -1, -1) if submission.disruptions[i].resubmitted), None)
    if step is None or last is None or submission.disruptions[last].resume_source == PROGRAM_LOG:
        return submission
    old = submission.disruptions[last]
    if old.resubmitted_as is not None and old.resubmitted_as != submission.name:
        return submission
    resumed = None if step == FROM_SCRATCH else step
    # The run got at least as far as the step it saved: its head's log was read as the disruption
    # began, and it may have gone on through its grace period.
    reached = old.reached_step if resumed is None or old.reached_step is None else max(old.reached_step, resumed)
    steps = steps_recomputed(reached, resumed)
    seconds = round(old.seconds_lost * steps / old.steps_recomputed, 1) if old.steps_recomputed else old.seconds_lost
    fixed = replace(old, reached_step=reached, resumed_from_step=resumed, steps_recomputed=steps, seconds_lost=seconds,
                    resume_source=PROGRAM_LOG)
    return replace(submission, disruptions=(*submission.disruptions[:last], fixed, *submission.disruptions[last + 1:]))


def workload_failure(
    state: WorkloadState,
    message: str,
    classification: Classification | None = None,
    *,
    retry_user_errors: bool = False,
    owned: bool = True,
) -> BaseException:
    """The exception for a workload that failed: a deterministic failure fails at once, an infrastructure one may be retried.

    ``owned``: the task submitted the workload. A sensor watching someone else's workload
    (``owned=False``) cannot change how it ended by retrying, so anything but the program's
    own failure or a refused spec is a :class:`WorkloadEndedError`, which Airflow does not retry.
    """
    user_error = state.cause is FailureCause.USER_CODE or (classification is not None and classification.verdict is Verdict.USER_ERROR)
    if user_error:
        exit_code = state.exit_code if state.exit_code is not None else (classification.exit_code if classification else None)
        if retry_user_errors:
            return RetryableUserCodeError(message, exit_code=exit_code)
        return UserCodeError(message, exit_code=exit_code)
    if state.cause in (FailureCause.BAD_SPEC, FailureCause.QUOTA):
        return BadSpecError(message)
    if not owned:
        return WorkloadEndedError(message)
    if state.cause is FailureCause.DELETED:
        return WorkloadDeletedError(message)
    if state.cause is FailureCause.TIMEOUT:  # Kueue enforced execution_timeout: Airflow's own timeout, retried as one
        return AirflowTaskTimeout(message)
    return InfrastructureError(message)


def lost_track(name: str, event: WorkloadEvent, hint: str) -> Exception:
    """The wait ended without an answer (``error``): the API kept failing, or refused a verb.

    A refused verb (RBAC) refuses every retry too, so it fails for good and the owner deletes
    the workload first; an API that kept failing may answer a retry, which re-attaches.
    """
    if event.forbidden:
        return PermissionMissingError(
            f"stopped waiting on {name}: {event.message}. No try can watch it without this permission, so it "
            "was deleted; grant it (docker/rbac.yaml lists what the provider needs) and clear the task."
        )
    return KubernetesApiError(
        f"lost track of {name}: {event.message}. The workload was left running; a retry of this task re-attaches to it. {hint}"
    )


def failed_job_exception(
    message: str, *, exit_code: int | None, disruption: str | None, system_exit_codes: Collection[int] = XPK_SYSTEM_EXIT_CODES
) -> Exception:
    """A failed batch Job (a conversion, a benchmark): ``UserCodeError`` (not retried) for the program's own failure, else ``InfrastructureError``."""
    if disruption is None and exit_code not in (None, 0) and exit_code not in system_exit_codes:
        return UserCodeError(message, exit_code=exit_code)
    return InfrastructureError(message)


def job_end_exception(
    event: JobEvent, where: str, *, limit: str, failure: Exception | None = None, lost_hint: str = ""
) -> Exception | None:
    """What the end of a wait on a batch Job means for its task: ``None`` when the Job completed
    (its result is read next), else the exception to raise.

    ``failure``: a failed Job's exception, worded from its pods by :func:`failed_job_exception`.
    ``limit``: the deadline the wait had; running out of the task's ``execution_timeout`` is
    Airflow's own timeout, of the Job's own deadline the system's (a retry may finish).
    ``lost_hint``: what a wait that lost track leaves behind, and where to look.
    """
    if event.status == COMPLETE:
        return None
    if event.status == FAILED:
        return failure or failed_job_exception(f"{where} {event.outcome.summary()}", exit_code=None, disruption=None)
    if event.status == TIMEOUT:
        error = AirflowTaskTimeout if limit.startswith(TASK_LIMIT) else InfrastructureError
        left = "deleted" if event.deleted else "already gone"
        return error(f"{where} did not finish within {limit or 'its deadline'}; it was {left}. Last seen: {event.message}")
    if event.status == ERROR:
        return KubernetesApiError(f"lost track of {where}: {event.message}" + (f". {lost_hint}" if lost_hint else ""))
    if event.status == GONE:
        return WorkloadDeletedError(
            f"{where} was deleted before it finished ({event.message}); what it wrote may be partial and is not reported"
        )
    return KubernetesApiError(f"{where}: unexpected event {event.to_payload()!r}")
