"""A chaos scenario is a seed: ``plan(seed)`` turns it into a frozen, printable plan. Pure.

The plan says what runs (backend, steps, checkpoint period, how the task waits), what is thrown
at it and when (each event fires once the live training has completed a given step), and the
truth: how the task must end. Combinations whose truth would depend on a timing race (a user
failure while a disruption is still landing, a kill during a resubmission, a disruption budget
that a task retry could reset) are never generated, so every invariant can be strict.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
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
    return Plan(
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
