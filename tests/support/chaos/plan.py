"""A chaos scenario is a seed: ``plan(seed)`` turns it into a frozen, printable plan. Pure.

The plan says what runs (backend, steps, checkpoint period, how the task waits), what is thrown
at it and when (each event fires once the live training has completed a given step), and the
truth: how the task must end. Combinations whose truth would depend on a timing race (a user
failure while a disruption is still landing, a kill during a resubmission, a disruption budget
that a task retry could reset) are never generated, so every invariant can be strict.

Features added after seeds were in use are drawn from random streams of their own
(``f"{seed}/<feature>"``), after everything else: each earlier seed keeps every draw it had and at
most gains the feature (tests/chaos/test_invariants.py holds old seeds' plans to that).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any

SPEED = 60.0
"""Simulated seconds per real second of the chaos cluster."""
SLICE_LOSS_DETECTION = 10.0
"""Simulated seconds before the user's program on the head notices a lost slice (chaos cluster)."""
TPU_POOLS = tuple(f"tpu-v5e-2x4-{i}" for i in range(6))
LANDING_SLACK = 14.0
"""Simulated seconds between "step k completed" and the harness's action reaching the pods."""

DISRUPTIONS = ("maintenance", "preempt_spot", "lose_slice")
"""Events that end the workload's slices: each is one disruption the operator must ride out."""
NOISE = ("fault", "slow", "drop_watches", "compact")
"""API trouble the task must not notice beyond delay."""
SUSTAINED = ("outage",)
"""The Kubernetes API answering 503 to everything for minutes (``seconds``, simulated), not a
burst of a few faults: the wait rides it out; a kill during it still leaves nothing behind."""
OUTAGE_SECONDS = (60, 120, 300)
DEFERRED_ONLY = ("trigger_restart", "retry")
TRUTHS = ("success", "UserCodeError", "DisruptionBudgetExhausted", "killed", "AirflowTaskTimeout")
USER_EXIT_CODES = (1, 2, 3, 17)
"""Exit codes outside xpk's system set (42, 127–255): a deterministic bug on both backends."""
MAINTENANCE_WINDOWS = ("start_now", "wait", "ignore")
DAY = 86_400
EXPECTED_DURATION = 30 * DAY
"""The ``expected_duration`` (seconds) of a run facing announced maintenance. The operator reads the
announced time (the cluster's clock, 60× the wall clock since the session began) against the wall
clock, so "inside the run" must hold however far the cluster's clock has run ahead: 30 days cover
a session of twelve hours."""
FAR_NOTICE = 10 * DAY
"""Notice of maintenance that will not begin by itself while the scenario runs (hours of real
time away), yet is inside the run: only a manual start (``start_now``) brings it on."""


@dataclass(frozen=True)
class Event:
    """One thing thrown at the task, once the live training has completed ``at_step``.

    ``delay`` (real seconds) postpones it after that moment; ``args`` are the scenario method's
    keyword arguments (or, for faults, ``inject_fault``'s), as sorted pairs so the plan stays frozen.
    """

    kind: str
    at_step: int
    args: tuple[tuple[str, Any], ...] = ()
    delay: float = 0.0

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def describe(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self.args)
        when = f"step {self.at_step}" + (f" +{self.delay:.2f}s" if self.delay else "")
        return f"{self.kind}@{when}" + (f"({extra})" if extra else "")


@dataclass(frozen=True)
class Announcement:
    """Maintenance GKE announces on some slices before the task starts, and what the task is told
    to do about it (``expected_duration=``, ``maintenance_window=``)."""

    policy: str
    pools: tuple[str, ...]
    notice: int
    """Simulated seconds from the announcement to the maintenance's own start."""
    duration: int
    """Simulated seconds the maintenance keeps a slice down once it has begun."""
    expected_duration: int = EXPECTED_DURATION

    def describe(self) -> str:
        notice = f"{self.notice // DAY} days" if self.notice >= DAY else f"{self.notice}s"
        return (
            f"  announced maintenance: {', '.join(self.pools)} in {notice} for {self.duration}s; "
            f"expected_duration={self.expected_duration // DAY} days, maintenance_window={self.policy!r}"
        )


@dataclass(frozen=True)
class Plan:
    seed: int
    backend: str
    mode: str
    """``inline`` (deferrable=False: the trigger runs in the worker) or ``deferred`` (the harness
    plays the triggerer: the trigger is re-created from ``serialize()``)."""
    num_slices: int
    steps: int
    checkpoint_period: int
    step_seconds: float
    save_seconds: float
    grace_seconds: int
    max_disruptions: int
    queued: bool
    state_store: bool
    fail_at_step: int | None
    exit_code: int
    events: tuple[Event, ...]
    crash_after_submit: bool
    crash_before_complete: bool
    timeout_seconds: float | None
    expected: str
    counted_disruptions: int
    """How many disruptions the operator will count against ``max_disruptions`` before the end."""
    max_restarts: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    collector_delay: float = 0.0
    """Simulated seconds the garbage collector takes to reach a deleted workload's dependents (0: at
    once), as a busy GKE collector is late: drawn from a stream of its own (:func:`_late_collector`)."""
    manifest: bool = False
    """The task is given its workload as a manifest (``manifest=``), as a user with a gcluster or xpk
    file would, instead of the spec parameters: a quarter of the seeds, chosen without the draw's
    random stream so every other seed's plan stays as it was."""
    announced: Announcement | None = None
    """Maintenance announced before the task starts (:func:`_announced_maintenance`)."""
    elastic_slices: int = 0
    """Slices the workload may run without (``elastic_slices=``), its program run with
    ``elastic_enabled=true``: every slice loss is ridden out in place (:func:`_elastic`)."""
    max_slice_restarts: int | None = None
    """With elastic slices: enough worker restarts for every slice loss of the plan to land on one slice."""

    jobset_gates: tuple[str, ...] = ()
    """The JobSet controller's feature gates turned on for the scenario (:func:`_jobset_gates`)."""

    @property
    def ridden_out(self) -> int:
        """Slice losses the program rides out: every one of an elastic plan, none otherwise."""
        return sum(1 for e in self.events if e.kind in DISRUPTIONS) if self.elastic_slices else 0

    def describe(self) -> str:
        lines = [
            f"seed {self.seed}: {self.backend}, {self.mode}, {self.num_slices} slice(s), {self.steps} steps × {self.step_seconds:g}s "
            f"(checkpoint every {self.checkpoint_period}, save {self.save_seconds:g}s, grace {self.grace_seconds}s), "
            f"max_disruptions={self.max_disruptions}, max_restarts={self.max_restarts}, queued={self.queued}, "
            f"state_store={self.state_store}, manifest={self.manifest}, collector late by {self.collector_delay:g}s",
            f"  user failure: {'step %d exit %d' % (self.fail_at_step, self.exit_code) if self.fail_at_step is not None else 'none'}; "
            f"crash after submit: {self.crash_after_submit}; crash before complete: {self.crash_before_complete}; "
            f"execution_timeout: {self.timeout_seconds}",
            "  events: " + ("; ".join(e.describe() for e in self.events) or "none"),
            f"  truth: {self.expected} (counted disruptions {self.counted_disruptions})",
        ]
        if self.announced is not None:
            lines.append(self.announced.describe())
        if self.jobset_gates:
            lines.append(f"  JobSet feature gates: {', '.join(self.jobset_gates)}")
        if self.elastic_slices:
            lines.append(
                f"  elastic: elastic_slices={self.elastic_slices}, max_slice_restarts={self.max_slice_restarts}, "
                f"elastic_enabled=true; slice losses ridden out: {self.ridden_out}"
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def landing_steps(kind: str, args: dict[str, Any], *, step_seconds: float, grace: int, backend: str) -> int:
    """Steps the training may still complete between an event's trigger and its full effect."""
    seconds = LANDING_SLACK
    if kind == "maintenance":
        seconds += args.get("notice", 0) + grace + SLICE_LOSS_DETECTION
    elif kind == "preempt_spot":
        seconds += 15 + SLICE_LOSS_DETECTION
    elif kind == "lose_slice":
        seconds += SLICE_LOSS_DETECTION
    elif kind == "evict":
        seconds += 5
    elif kind == "kill":
        seconds += grace
    return math.ceil(seconds / step_seconds) + 2


def _noise(rng: random.Random, at_step: int) -> Event:
    kind = rng.choice(NOISE)
    if kind == "fault":
        status = rng.choice((429, 500, 500, 503))
        target = rng.choice(
            (
                r"/namespaces/default/(pathwaysjobs|jobsets)",
                r"/namespaces/default/pods",
                r"/api/v1/nodes",
                r"/namespaces/default/jobs",
                r".*",
            )
        )
        count = rng.randint(1, 2 if status == 429 else 4)
        args = {"path_pattern": target, "status": status, "count": count}
        if status == 429:
            args["retry_after"] = 1
        return Event("fault", at_step, tuple(sorted(args.items())))
    if kind == "slow":
        args = {"path_pattern": rng.choice((r"/namespaces/default/", r".*")), "status": None, "count": rng.randint(1, 3), "latency": round(rng.uniform(0.2, 1.2), 2)}
        return Event("fault", at_step, tuple(sorted(args.items())))
    return Event(kind, at_step)


def plan(seed: int) -> Plan:
    """The scenario of ``seed``: the same plan on every machine and every run."""
    rng = random.Random(seed)
    backend = rng.choice(("pathwaysjob", "jobset"))
    mode = rng.choice(("inline", "deferred"))
    num_slices = 2 if rng.random() < 0.2 else 1
    step_seconds = float(rng.choice((2, 3)))
    save_seconds = float(rng.choice((1, 2)))
    checkpoint_period = rng.choice((3, 4, 5))
    grace = rng.choice((5, 10, 20))
    queued = rng.random() < 0.3
    state_store = rng.random() < 0.7
    # The pathwaysjob backend's restarts are the task's to make (it submits maxRestarts: 0): drawn
    # from a stream of their own, so every earlier seed keeps its plan.
    max_restarts = rng.choice((0, 0, 1)) if backend == "jobset" else random.Random(f"{seed}/restarts").choice((0, 0, 1))
    notes: list[str] = []

    def landing(kind: str, args: dict[str, Any]) -> int:
        return landing_steps(kind, args, step_seconds=step_seconds, grace=grace, backend=backend)

    ending = rng.choices(("run", "user", "kill", "timeout"), weights=(6, 2, 1, 1))[0]
    disruptive: list[Event] = []
    step = rng.randint(2, 5)
    n_disruptions = 0 if ending == "timeout" else rng.choices((0, 1, 2, 3), weights=(2, 4, 3, 1))[0]
    kinds = list(DISRUPTIONS) + (["evict"] if queued else [])
    for _ in range(n_disruptions + (1 if queued and rng.random() < 0.5 else 0)):
        kind = rng.choice(kinds)
        if kind == "maintenance":
            args = {"notice": rng.choice((0, 0, 10, 20)), "duration": rng.choice((60, 120, 240)), "slice": rng.randrange(num_slices)}
        elif kind == "evict":
            args = {"requeue_after": rng.choice((10, 30, 60))}
        else:
            args = {"downtime": rng.choice((60, 120, 240)), "slice": rng.randrange(num_slices)}
            if kind == "lose_slice" and random.Random(f"{seed}/out-of-service/{step}").random() < 0.3:
                args["out_of_service"] = True  # a shutdown without notice (its own draw: every other draw of the seed stays)
        event = Event(kind, step, tuple(sorted(args.items())))
        disruptive.append(event)
        step += landing(kind, args) + rng.randint(1, 4)

    fail_at_step = None
    exit_code = 1
    timeout_seconds = None
    if ending == "user":
        fail_at_step = step + rng.randint(0, 3)
        exit_code = rng.choice(USER_EXIT_CODES)
        steps = fail_at_step + rng.randint(3, 10)
    elif ending == "kill":
        disruptive.append(Event("kill", step))
        steps = step + 400
    elif ending == "timeout":
        steps = step + 400
        # The timeout falls while the training runs: start-up takes about a second of real time.
        timeout_seconds = round(1.5 + step * step_seconds / SPEED + rng.uniform(0.0, 2.0), 2)
    else:
        steps = step + rng.randint(2, 8)

    n_slice_events = sum(1 for e in disruptive if e.kind in DISRUPTIONS)
    # The pathwaysjob backend fails on every disruption (it restarts nothing in place) and the operator resubmits;
    # the jobset backend's failure policy restarts the JobSet itself, which is not counted.
    counted = n_slice_events if backend == "pathwaysjob" else 0

    events = list(disruptive)
    # API trouble at random moments: never changes the truth.
    for _ in range(rng.choices((0, 1, 2, 3), weights=(2, 3, 3, 2))[0]):
        events.append(_noise(rng, rng.randint(1, max(1, min(steps, step) - 1))))
    start_faults = rng.random() < 0.25
    if start_faults:
        events.append(Event("fault", -1, tuple(sorted({"path_pattern": r"/namespaces/default/(pathwaysjobs|jobsets)", "status": rng.choice((500, 429)), "count": rng.randint(1, 2), "retry_after": 1, "methods": ("POST",)}.items()))))

    crash_after_submit = crash_before_complete = False
    retries = False
    if mode == "deferred":
        crash_after_submit = rng.random() < 0.3
        crash_before_complete = ending in ("run", "user") and rng.random() < 0.3
        for _ in range(rng.choice((0, 1, 1, 2))):
            # A triggerer restart, at a random step or just after a disruption started to land.
            if disruptive and rng.random() < 0.5:
                anchor = rng.choice(disruptive)
                events.append(Event("trigger_restart", anchor.at_step, delay=round(rng.uniform(0.05, 1.2), 2)))
            else:
                events.append(Event("trigger_restart", rng.randint(1, max(1, step - 1))))
        if ending in ("run", "user") and rng.random() < 0.35:
            first = min((e.at_step for e in disruptive if e.kind in DISRUPTIONS), default=step)
            last = step if state_store else first
            events.append(Event("retry", rng.randint(1, max(1, last - 1))))
            retries = True

    if backend == "pathwaysjob" and not (retries or crash_before_complete) and ending in ("run", "user"):
        # Sometimes fewer disruptions are allowed than will come: the task must fail with the list.
        budget = rng.choice((counted, counted, counted + 1, max(0, counted - 1)))
    elif backend == "jobset":
        # Whether the JobSet rides a disruption out itself or fails and is resubmitted, the budget
        # covers every disruption, so the truth does not depend on which.
        budget = n_slice_events + rng.choice((0, 1, 2))
    else:
        # A task retry may re-submit a disrupted workload without counting it (as Airflow's own
        # retry would), so budgets are not put to the test together with retries.
        budget = counted + rng.choice((0, 1, 2))
        if retries or crash_before_complete:
            notes.append("budget ample: a task retry may replace a disrupted workload without counting it")
    allowed = budget + (max_restarts if backend == "pathwaysjob" else 0)  # run.outcome.resubmissions_allowed
    if ending == "user":
        expected = "DisruptionBudgetExhausted" if counted > allowed else "UserCodeError"
    elif ending == "kill":
        expected = "DisruptionBudgetExhausted" if counted > allowed else "killed"
    elif ending == "timeout":
        expected = "AirflowTaskTimeout"
    else:
        expected = "DisruptionBudgetExhausted" if counted > allowed else "success"

    events += _sustained_outages(seed, events, step)
    events.sort(key=lambda e: (e.at_step, e.delay))
    drawn = Plan(
        seed=seed,
        manifest=seed % 4 == 0,
        backend=backend,
        mode=mode,
        num_slices=num_slices,
        steps=steps,
        checkpoint_period=checkpoint_period,
        step_seconds=step_seconds,
        save_seconds=save_seconds,
        grace_seconds=grace,
        max_disruptions=budget,
        queued=queued,
        state_store=state_store,
        fail_at_step=fail_at_step,
        exit_code=exit_code,
        events=tuple(events),
        crash_after_submit=crash_after_submit,
        crash_before_complete=crash_before_complete,
        timeout_seconds=timeout_seconds,
        expected=expected,
        counted_disruptions=counted,
        max_restarts=max_restarts,
        collector_delay=_late_collector(seed),
        notes=tuple(notes),
    )
    return _elastic(seed, replace(drawn, announced=_announced_maintenance(seed, drawn), jobset_gates=_jobset_gates(seed)))


COLLECTOR_DELAYS = (10.0, 30.0, 120.0)


def _late_collector(seed: int) -> float:
    """A late garbage collector in a fifth of the scenarios, from a stream of its own so every
    earlier seed keeps its plan: the deleted attempt's pods then stop only when it comes (or when
    the task deletes them itself), and a Kueue Workload waits for it too."""
    rng = random.Random(f"{seed}/collector")
    return rng.choice(COLLECTOR_DELAYS) if rng.random() < 0.2 else 0.0


def _sustained_outages(seed: int, events: list[Event], step: int) -> list[Event]:
    """API outages of minutes, drawn from a stream of their own so that every earlier seed keeps
    its plan (and its replay) and gains at most an outage: sometimes one at a random moment, and
    half the time one that has begun when a kill arrives."""
    rng = random.Random(f"{seed}/outages")
    outages = []
    if rng.random() < 0.15:
        outages.append(Event("outage", rng.randint(1, max(1, step - 1)), (("seconds", rng.choice(OUTAGE_SECONDS)),)))
    kill = next((e for e in events if e.kind == "kill"), None)
    if kill is not None and rng.random() < 0.5:
        outages.append(Event("outage", max(1, kill.at_step - 1), (("seconds", max(OUTAGE_SECONDS)),)))
    return outages


def _announced_maintenance(seed: int, plan: Plan) -> Announcement | None:
    """Maintenance announced on one to three slices before the task starts, in a fifth of the
    scenarios, from a stream of its own. Its truth is certain: ``start_now`` and ``wait`` submit
    nothing before it has passed, ``ignore`` submits at once. Never drawn where it could be:
    ``wait`` and ``start_now`` are not given a timeout (it would fall during the wait, where the
    harness plays no triggerer's timeout), and ``ignore`` leaves maintenance announced for days, so
    it is drawn only where no maintenance or preemption of the plan's own would clear that
    announcement from the nodes (the harness starts it by hand after the task, to leave clean slices)."""
    rng = random.Random(f"{seed}/announced")
    if rng.random() >= 0.2:
        return None
    policy = rng.choice(MAINTENANCE_WINDOWS)
    pools = tuple(sorted(rng.sample(TPU_POOLS, rng.choice((1, 2, 3)))))
    duration = rng.choice((60, 90, 120))
    near = rng.choice((30, 60, 90))
    may_ignore = not any(e.kind in ("maintenance", "preempt_spot") for e in plan.events)
    if policy == "ignore" and not may_ignore:
        policy = "wait" if near < 90 else "start_now"
    if plan.timeout_seconds is not None and policy != "ignore":
        return None
    # Only ``wait`` is given maintenance that begins by itself: a manual start raced by GKE's own
    # would leave what ``start_now`` started to chance.
    notice = near if policy == "wait" else FAR_NOTICE
    return Announcement(policy=policy, pools=pools, notice=notice, duration=duration)


def _elastic(seed: int, plan: Plan) -> Plan:
    """Elastic slices in two thirds of the pathwaysjob scenarios with two slices, a slice loss to
    ride out and no Kueue eviction (an eviction ends the whole workload, not a slice), from a
    stream of their own.

    ``elastic_slices=1`` and MaxText's ``elastic_enabled``: each slice loss is ridden out by the
    program in place, so none is resubmitted or counted against ``max_disruptions`` — the truth is
    recomputed with no counted disruption, on the budget drawn before (a budget short of the slice
    losses must now succeed). ``max_slice_restarts`` covers every loss landing on one worker Job
    (its backoff limit is VMs × ``max_slice_restarts``), so the worker Job never fails for them."""
    losses = sum(1 for e in plan.events if e.kind in DISRUPTIONS)
    eligible = plan.backend == "pathwaysjob" and plan.num_slices == 2 and losses and not any(e.kind == "evict" for e in plan.events)
    if not eligible or random.Random(f"{seed}/elastic").random() >= 2 / 3:
        return plan
    expected = plan.expected
    if expected == "DisruptionBudgetExhausted":
        expected = {"user": "UserCodeError", "kill": "killed"}.get(_ending(plan), "success")
    return replace(plan, elastic_slices=1, max_slice_restarts=losses + 1, counted_disruptions=0, expected=expected)


def _ending(plan: Plan) -> str:
    """How the task was drawn to end, apart from the disruption budget: ``user``, ``kill``, ``timeout`` or ``run``."""
    if plan.fail_at_step is not None:
        return "user"
    if any(e.kind == "kill" for e in plan.events):
        return "kill"
    return "timeout" if plan.timeout_seconds else "run"


EXECUTION_ATTEMPTS_TRACKING = "ExecutionAttemptsTracking"


def _jobset_gates(seed: int) -> tuple[str, ...]:
    """JobSet 0.13's execution attempts (KEP-1282) in a third of the scenarios, from a stream of
    its own: a JobSet Kueue evicted and admitted again, or restarted whole, counts a new execution
    and marks its pods with it, and the task reads the count (its result's ``execution_attempts``)."""
    return (EXECUTION_ATTEMPTS_TRACKING,) if random.Random(f"{seed}/jobset-gates").random() < 1 / 3 else ()
