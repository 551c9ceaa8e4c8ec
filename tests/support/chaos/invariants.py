"""The invariants every chaos scenario is held to: pure functions over recorded observations.

Each checker takes :class:`Observations` and returns the violations it found, as sentences a
human can act on (empty: it holds). They never look at the cluster themselves, so they are
unit-tested on hand-made observations (tests/chaos/test_invariants.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

COMMIT_SKEW = 0.05
"""Real seconds of clock difference allowed between the GCS emulator's object times and ours."""
VISIBLE_AFTER = 1.0
"""A commit older than this (real seconds) at a resubmission was certainly visible to it."""


@dataclass(frozen=True)
class Observations:
    """What the harness recorded while one scenario ran, and after."""

    expected: str
    """The plan's truth: success, UserCodeError, DisruptionBudgetExhausted, killed, AirflowTaskTimeout."""
    outcome: str
    """``success``, ``killed`` (the harness killed it), or the exception's class name."""
    final_step: int
    max_disruptions: int
    result: Mapping[str, Any] | None = None
    live_samples: Sequence[tuple[float, Mapping[str, Sequence[str]]]] = ()
    """(real time, {kind: names of that task's live objects of that kind}) as sampled."""
    running_samples: Sequence[tuple[float, Sequence[str]]] = ()
    """(real time, workload names that had a running pod) as sampled."""
    leftovers: Sequence[str] = ()
    """What still carried the task's label or workload names once the task had ended and settled."""
    disruptions: Sequence[Mapping[str, Any]] = ()
    """The operator's disruption records (result, exception, or its last XCom)."""
    commits: Mapping[int, float] = field(default_factory=dict)
    """Step → creation time (real) of its ``commit_success.txt``, from the final GCS listing."""
    attempts_seen: Mapping[str, int] = field(default_factory=dict)
    """Every workload of the task ever seen → its attempt number."""
    user_failures: Sequence[tuple[int, str]] = ()
    """(attempt, head pod) of each run whose program failed with the planted user error."""
    restored_steps: Sequence[tuple[int, float]] = ()
    """(step, real time) of each ``restoring from this run's directory step N`` a training run logged."""


def resubmissions(disruptions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The disruptions the operator answered with a new workload (not a JobSet's own restart)."""
    return [d for d in disruptions if d.get("handled_by") != "JobSet restart"]


def at_most_one_live_workload(obs: Observations) -> list[str]:
    """Never two live workloads (or JobSets) for one task at the same moment."""
    found = []
    for when, by_kind in obs.live_samples:
        for kind, names in by_kind.items():
            if len(set(names)) > 1:
                found.append(f"at {when:.2f}: {len(set(names))} live {kind}s at once: {', '.join(sorted(set(names)))}")
    return found[:3]


def at_most_one_running_workload(obs: Observations) -> list[str]:
    """Never pods of two of the task's workloads running at once (both would hold slices and write checkpoints)."""
    found = []
    for when, names in obs.running_samples:
        if len(set(names)) > 1:
            found.append(f"at {when:.2f}: pods of {len(set(names))} workloads running at once: {', '.join(sorted(set(names)))}")
    return found[:3]


def nothing_left(obs: Observations) -> list[str]:
    """Once the task has ended (success, failure, kill, timeout), none of its objects remain."""
    return [f"left in the cluster after the task ended: {', '.join(sorted(obs.leftovers))}"] if obs.leftovers else []


def end_state_matches_truth(obs: Observations) -> list[str]:
    if obs.outcome != obs.expected:
        return [f"the task ended {obs.outcome}, the scenario's truth is {obs.expected}"]
    return []


def checkpoints_never_partial(obs: Observations) -> list[str]:
    """Resumed from a step committed at the resubmission, the newest one then; reported a committed step."""
    found = []
    for d in resubmissions(obs.disruptions):
        step, when = d.get("resumed_from_step"), d.get("time")
        if when is None:
            continue
        certainly_visible = [s for s, t in obs.commits.items() if t <= when - VISIBLE_AFTER]
        if step is None:
            if certainly_visible:
                found.append(f"resubmitted {d.get('workload')} from step 0 though step {max(certainly_visible)} was committed")
            continue
        committed_at = obs.commits.get(step)
        if committed_at is None:
            found.append(f"resumed from step {step}, which has no commit_success.txt")
        elif committed_at > when + COMMIT_SKEW:
            found.append(f"resumed from step {step} at {when:.2f}, but its commit_success.txt is from {committed_at:.2f}")
        if certainly_visible and step < max(certainly_visible):
            found.append(f"resumed from step {step} though the newer step {max(certainly_visible)} was committed")
    for step, when in obs.restored_steps:
        committed_at = obs.commits.get(step)
        if committed_at is None or committed_at > when + COMMIT_SKEW:
            found.append(f"a run restored step {step}, which was not committed then")
    checkpoint = (obs.result or {}).get("checkpoint")
    if checkpoint is not None:
        if checkpoint.get("step") not in obs.commits:
            found.append(f"reported checkpoint step {checkpoint.get('step')}, which has no commit_success.txt")
        elif obs.outcome == "success" and checkpoint.get("step") != obs.final_step:
            found.append(f"reported checkpoint step {checkpoint.get('step')}, not the final step {obs.final_step}")
    elif obs.outcome == "success":
        found.append("succeeded without reporting a checkpoint")
    return found


def user_errors_never_resubmitted(obs: Observations) -> list[str]:
    """After the program failed with a user error, no further run of it: no new attempt, no restart."""
    if not obs.user_failures:
        return []
    first = min(attempt for attempt, _ in obs.user_failures)
    found = []
    later = sorted(name for name, attempt in obs.attempts_seen.items() if attempt > first)
    if later:
        found.append(f"the user error of attempt {first} was resubmitted as {', '.join(later)}")
    if len(obs.user_failures) > 1:
        found.append(f"the user error ran {len(obs.user_failures)} times: {', '.join(p for _, p in obs.user_failures)}")
    return found


def disruption_budget_respected(obs: Observations) -> list[str]:
    """Failed for the budget only beyond it; within it, disruptions never fail the task."""
    used = len(resubmissions(obs.disruptions))
    found = []
    if obs.outcome == "DisruptionBudgetExhausted" and used <= obs.max_disruptions:
        found.append(f"failed for the disruption budget after {used} disruption(s), max_disruptions={obs.max_disruptions}")
    if used > obs.max_disruptions + 1:
        found.append(f"{used} resubmissions, more than max_disruptions={obs.max_disruptions} + the one that ends it")
    if obs.outcome in ("InfrastructureError", "KubernetesApiError", "WorkloadDeletedError") and obs.expected == "success":
        found.append(f"a disruption within the budget ended the task with {obs.outcome}")
    return found


CHECKERS: tuple[Callable[[Observations], list[str]], ...] = (
    at_most_one_live_workload,
    at_most_one_running_workload,
    nothing_left,
    end_state_matches_truth,
    checkpoints_never_partial,
    user_errors_never_resubmitted,
    disruption_budget_respected,
)


def violations(obs: Observations) -> dict[str, list[str]]:
    """Every checker's findings, by checker name; only the ones that found something."""
    return {check.__name__: found for check in CHECKERS if (found := check(obs))}


@dataclass(frozen=True)
class Pace:
    """How fast an undisturbed training run goes: each step, and a save after each checkpoint step."""

    step_seconds: float
    save_seconds: float
    checkpoint_period: int
    final_step: int

    def interval(self, step: int) -> float:
        """The time from the line of ``step - 1`` to that of ``step``: the step, after the save of
        ``step - 1`` when that one was a checkpoint step (the line is logged before the save)."""
        saved = (step - 1) % self.checkpoint_period == 0 or step - 1 == self.final_step
        return self.step_seconds + (self.save_seconds if saved else 0.0)


def recomputed_seconds(
    progress: Sequence[tuple[float, int] | tuple[float, int, str]], disruptions: Sequence[float], pace: Pace
) -> list[float]:
    """Of each disruption's loss (:func:`extra_time_lost`), the simulated seconds spent doing steps
    again: every step logged after the disruption that the curve had already reached. How many
    there are is set by the checkpoint period, not by how fast the disruption was handled."""
    events = sorted((entry[0], entry[1]) for entry in progress)
    starts = sorted(disruptions)
    result = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else float("inf")
        best = max((step for when, step in events if when <= start), default=None)
        if best is None:
            continue
        redone, moved = 0.0, False
        for when, step in events:
            if when <= start or when > end:
                continue
            if step <= best:
                redone += pace.interval(step)
            else:
                best, moved = step, True
        if moved:  # as extra_time_lost: a disruption never come back from has no loss to split
            result.append(round(redone, 1))
    return result


def extra_time_lost(
    progress: Sequence[tuple[float, int] | tuple[float, int, str]],
    disruptions: Sequence[float],
    pace: Pace,
    *,
    until: float | None = None,
    api_down: Sequence[tuple[float, float]] = (),
) -> list[float]:
    """Simulated seconds of training progress each disruption cost, from the step log.

    ``progress`` is every ``(time, step, run)`` a training run logged as completed (all runs, any
    order; ``run`` names the program that logged it, its head pod); ``disruptions`` the times each
    disruption was set off. The progress curve (newest step completed so far) is followed from one
    disruption until the training is past the newest step the disrupted run reached (or the next
    disruption, or the end): whatever it took longer than the undisturbed ``pace`` is that
    disruption's loss: detection, rescheduling, start-up and recomputed steps together. Once past,
    the disruption is over: a slow step later is not its doing. Time in ``api_down``
    (``(start, end)`` windows of a sustained API outage) is left out: while the API answers 503 to
    everything, no one can delete or create a workload. Entries without a ``run`` are one run.
    """

    def outage_within(start: float, end: float) -> float:
        return sum(max(0.0, min(end, e) - max(start, s)) for s, e in api_down)

    events = sorted((entry[0], entry[1], entry[2] if len(entry) > 2 else "") for entry in progress)
    starts = sorted(disruptions)
    losses = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else (until if until is not None else float("inf"))
        best, best_time, best_run = -1, None, ""
        for when, step, run in events:
            if when <= start and step > best:
                best, best_time, best_run = step, when, run
        if best_time is None:
            continue
        reached = max(step for _, step, run in events if run == best_run)  # the disrupted run, landing steps included
        lost, moved = 0.0, False
        for when, step, _ in events:
            if when <= start or when > end or step <= best:
                continue
            expected = sum(pace.interval(s) for s in range(best + 1, step + 1))
            lost += max(0.0, (when - best_time) - expected - outage_within(best_time, when))
            best, best_time, moved = step, when, True
            if step > reached:
                break
        if moved:  # a disruption the training never came back from cost no "extra" time: it ended the task
            losses.append(round(lost, 1))
    return losses
