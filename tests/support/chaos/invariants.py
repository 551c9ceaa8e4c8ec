"""The invariants every chaos scenario is held to: pure functions over recorded observations.

Each checker takes :class:`Observations` and returns the violations it found, as sentences a
human can act on (empty: it holds). They never look at the cluster themselves, so they are
unit-tested on hand-made observations (tests/chaos/test_invariants.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from pathways_airflow.run.records import IN_PLACE, PROGRAM_RECOVERY

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
    ridden_out: int = 0
    """Slice losses set off on a workload with elastic slices whose program rides them out."""
    maintenance_window: str | None = None
    """The task's ``maintenance_window`` when maintenance was announced before it started, else ``None``."""
    announced_pools: Sequence[str] = ()
    """The slices (node pools) maintenance was announced on before the task started."""
    announced_nodes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Their nodes, by pool."""
    pool_samples: Sequence[tuple[float, bool, Mapping[str, str]]] = ()
    """(real time, whether any workload of the task existed, {announced pool: ``announced`` |
    ``started`` | ``under`` | ``clean``}) as sampled, the pools read after the workloads."""
    counts_executions: bool = False
    """The JobSet controller counted executions (its ``ExecutionAttemptsTracking`` gate was on)."""
    remembers_earlier_tries: bool = True
    """The task ran one try, or kept its state in a state store: what an earlier try did (e.g. wait
    for maintenance) can reach the result. Without a store, Airflow clears a try's XComs for the next."""


def resubmissions(disruptions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The disruptions the operator answered with a new workload: not a JobSet's own restart, nor a
    slice loss the program rode out (elastic slices)."""
    return [d for d in disruptions if d.get("handled_by") not in IN_PLACE]


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


def slice_losses_ridden_out_stay_in_place(obs: Observations) -> list[str]:
    """With elastic slices, every slice loss is the program's to ride out: no new workload (one
    workload name throughout), none resubmitted, and a succeeded task records each one as ridden
    out by the program. (Counting none against ``max_disruptions`` is the truth's: the plan's budget
    may be short of the losses, and the task must still succeed.)"""
    if not obs.ridden_out:
        return []
    found = []
    later = sorted(name for name, attempt in obs.attempts_seen.items() if attempt > 0)
    if later:
        found.append(f"{obs.ridden_out} slice loss(es) the program rides out, yet new workloads were submitted: {', '.join(later)}")
    if resubmissions(obs.disruptions):
        found.append(f"{len(resubmissions(obs.disruptions))} resubmission(s) recorded for slice losses the program rides out")
    if obs.result is not None:
        recorded = [d for d in obs.result.get("disruptions") or () if d.get("handled_by") == PROGRAM_RECOVERY]
        if len(recorded) != obs.ridden_out:
            found.append(f"{obs.ridden_out} slice loss(es) ridden out, {len(recorded)} recorded as the program's in the result")
    return found


def execution_attempts_reported(obs: Observations) -> list[str]:
    """A succeeded task says how many times its JobSet ran anew (``execution_attempts``) exactly
    when the JobSet counts them, as a whole number: never a count the cluster did not keep."""
    if obs.result is None:
        return []
    count = obs.result.get("execution_attempts")
    if not obs.counts_executions:
        return [f"the result says execution_attempts={count!r}, yet the JobSet kept no count"] if "execution_attempts" in obs.result else []
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return [f"the JobSet counted its executions, yet the result says execution_attempts={count!r}"]
    return []


def announced_maintenance_minded(obs: Observations) -> list[str]:
    """Maintenance announced before the task started is handled as its ``maintenance_window`` says:
    ``start_now`` and ``wait`` submit nothing before it has passed on every announced slice (only
    ``start_now`` starts it, on every node of them), ``ignore`` submits while it is still only
    announced and never starts it; a succeeded task's ``maintenance`` says the policy and what it did
    (unless a later try without a state store completed it: it cannot know)."""
    policy = obs.maintenance_window
    if policy is None:
        return []
    found: list[str] = []
    first = next(((when, pools) for when, exists, pools in obs.pool_samples if exists), None)
    if first is None and obs.outcome == "success":
        found.append("the task succeeded, yet no workload of it was ever seen")
    if policy in ("start_now", "wait") and first is not None and set(first[1].values()) != {"clean"}:
        # Only the first workload is judged: the plan's own disruptions may later strike an announced slice again.
        pending = ", ".join(f"{p}: {s}" for p, s in sorted(first[1].items()) if s != "clean")
        found.append(f"maintenance_window={policy!r}: a workload existed at {first[0]:.2f} before the maintenance had passed ({pending})")
    if policy != "start_now":
        started = next(((when, p) for when, _, pools in obs.pool_samples for p, s in pools.items() if s == "started"), None)
        if started is not None:
            found.append(f"maintenance_window={policy!r}: the maintenance of {started[1]} was started by hand at {started[0]:.2f}")
    if policy == "ignore" and first is not None and set(first[1].values()) != {"announced"}:
        found.append(f"maintenance_window='ignore': the first workload came at {first[0]:.2f}, only once the maintenance was {first[1]}")
    if obs.result is not None and obs.remembers_earlier_tries:
        found += _maintenance_record_problems(obs, policy, obs.result.get("maintenance"))
    return found


def _maintenance_record_problems(obs: Observations, policy: str, record: Mapping[str, Any] | None) -> list[str]:
    """What the result's ``maintenance`` must say: the policy, the announced slices, the nodes started, the slices waited for."""
    if not record:
        return [f"maintenance_window={policy!r} with maintenance announced, yet the result has no maintenance record"]
    found = []
    if record.get("policy") != policy:
        found.append(f"the result's maintenance policy is {record.get('policy')!r}, the task's {policy!r}")
    # A near maintenance may have passed by itself before the task first looked (``since``): then
    # there was nothing to start or wait for on that slice.
    pending = [p for p in obs.announced_pools if not _clean_by(obs, p, record.get("since"))]
    announced = set(record.get("announced") or ())
    # With ``wait`` a near maintenance may have begun by itself before the task first looked: then it
    # is one under way, waited for but not listed as announced.
    if not announced <= set(obs.announced_pools) or (policy != "wait" and announced != set(pending)):
        found.append(f"the result's maintenance announced {sorted(announced)}, it was on {sorted(obs.announced_pools)}")
    started = sorted(record.get("started_on") or ())
    if started != (sorted(n for p in pending for n in obs.announced_nodes.get(p, ())) if policy == "start_now" else []):
        found.append(f"maintenance_window={policy!r} started the maintenance of {started or 'no node'}")
    waited = set(record.get("waited_for") or ())
    if policy == "ignore" and waited:
        found.append(f"maintenance_window='ignore' waited for {sorted(waited)}")
    if policy != "ignore" and not set(pending) <= waited:
        found.append(f"maintenance_window={policy!r} waited for {sorted(waited)}, not for every announced slice {sorted(pending)}")
    return found


def _clean_by(obs: Observations, pool: str, since: Any) -> bool:
    """``pool``'s maintenance had passed when the task first looked at ``since`` (the sampler starts
    after the announcement, so a clean sample means it came and went)."""
    return isinstance(since, (int, float)) and any(when <= since and pools.get(pool) == "clean" for when, _, pools in obs.pool_samples)


CHECKERS: tuple[Callable[[Observations], list[str]], ...] = (
    at_most_one_live_workload,
    at_most_one_running_workload,
    nothing_left,
    end_state_matches_truth,
    checkpoints_never_partial,
    user_errors_never_resubmitted,
    disruption_budget_respected,
    slice_losses_ridden_out_stay_in_place,
    announced_maintenance_minded,
    execution_attempts_reported,
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
    (``(start, end)`` windows of a sustained API outage, of a slow answer, of a ``Retry-After`` the
    API asked for; overlapping windows count once) is left out: while the API answers 503 to
    everything or holds a call, no one can delete or create a workload. Entries without a ``run`` are one run.
    """

    merged: list[list[float]] = []
    for s, e in sorted(api_down):  # overlapping windows (an outage's 503s, a slow answer in it) count once
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])

    def outage_within(start: float, end: float) -> float:
        return sum(max(0.0, min(end, e) - max(start, s)) for s, e in merged)

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
