"""The checkers and the plan generator themselves: each invariant can fail, and plans are pure."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from tests.support.chaos.invariants import (
    Observations,
    Pace,
    at_most_one_live_workload,
    at_most_one_running_workload,
    checkpoints_never_partial,
    disruption_budget_respected,
    end_state_matches_truth,
    extra_time_lost,
    recomputed_seconds,
    announced_maintenance_minded,
    execution_attempts_reported,
    nothing_left,
    slice_losses_ridden_out_stay_in_place,
    user_errors_never_resubmitted,
    violations,
)
from tests.support.chaos.plan import DISRUPTIONS, TRUTHS, plan
from tests.support.chaos.report import percentile, summary

pytestmark = pytest.mark.pure

T = 1_000.0
GOOD = Observations(
    expected="success",
    outcome="success",
    final_step=29,
    max_disruptions=1,
    result={"checkpoint": {"step": 29, "uri": "gs://b/c/29"}, "disruptions": []},
    live_samples=((T, {"PathwaysJob": ["w"], "JobSet": ["w"]}), (T + 5, {"PathwaysJob": ["w-1"], "JobSet": []})),
    running_samples=((T, ["w"]), (T + 5, ["w-1"])),
    disruptions=({"time": T + 4, "kind": "MAINTENANCE", "workload": "w", "resumed_from_step": 10},),
    commits={0: T + 1, 5: T + 2, 10: T + 2.5, 29: T + 9},
    attempts_seen={"w": 0, "w-1": 1},
    restored_steps=((10, T + 4.5),),
)


def test_a_clean_scenario_has_no_violations():
    assert violations(GOOD) == {}


def test_two_live_workloads_at_once_are_caught():
    obs = replace(GOOD, live_samples=((T, {"PathwaysJob": ["w", "w-1"]}),))
    assert at_most_one_live_workload(obs) and "2 live PathwaysJobs" in at_most_one_live_workload(obs)[0]
    assert at_most_one_running_workload(replace(GOOD, running_samples=((T, ["w", "w-1"]),)))


def test_anything_left_after_the_task_is_caught():
    assert nothing_left(replace(GOOD, leftovers=("Pod/w-1-worker-0",)))
    assert not nothing_left(GOOD)


def test_an_end_state_other_than_the_truth_is_caught():
    assert end_state_matches_truth(replace(GOOD, outcome="UserCodeError"))


def test_resuming_from_a_partial_or_stale_step_or_from_zero_is_caught():
    partial = replace(GOOD, disruptions=({"time": T + 4, "workload": "w", "resumed_from_step": 15},))
    assert any("no commit_success" in v for v in checkpoints_never_partial(partial))
    late = replace(GOOD, commits={**GOOD.commits, 10: T + 6})
    assert any("its commit_success.txt is from" in v for v in checkpoints_never_partial(late))
    stale = replace(GOOD, disruptions=({"time": T + 4, "workload": "w", "resumed_from_step": 5},))
    assert any("newer step 10" in v for v in checkpoints_never_partial(stale))
    from_zero = replace(GOOD, disruptions=({"time": T + 4, "workload": "w", "resumed_from_step": None},))
    assert any("from step 0" in v for v in checkpoints_never_partial(from_zero))
    restored_partial = replace(GOOD, restored_steps=((12, T + 5),))
    assert any("restored step 12" in v for v in checkpoints_never_partial(restored_partial))


def test_reporting_a_partial_or_not_final_checkpoint_is_caught():
    assert any("no commit_success" in v for v in checkpoints_never_partial(replace(GOOD, result={"checkpoint": {"step": 28}})))
    assert any("not the final step" in v for v in checkpoints_never_partial(replace(GOOD, result={"checkpoint": {"step": 10}})))
    assert checkpoints_never_partial(replace(GOOD, result={"checkpoint": None}))


def test_a_resubmitted_user_error_is_caught():
    obs = replace(GOOD, expected="UserCodeError", outcome="UserCodeError", user_failures=((0, "w-pathways-head-0-0-a"),))
    assert any("resubmitted as w-1" in v for v in user_errors_never_resubmitted(obs))
    twice = replace(obs, attempts_seen={"w": 0}, user_failures=((0, "w-pathways-head-0-0-a"), (0, "w-pathways-head-0-0-b")))
    assert any("ran 2 times" in v for v in user_errors_never_resubmitted(twice))
    assert not user_errors_never_resubmitted(replace(obs, attempts_seen={"w": 0}))


def test_failing_for_the_budget_within_it_is_caught():
    obs = replace(GOOD, expected="DisruptionBudgetExhausted", outcome="DisruptionBudgetExhausted")
    assert disruption_budget_respected(obs)  # one disruption, max_disruptions=1: within the budget
    over = replace(obs, disruptions=GOOD.disruptions * 2)
    assert not disruption_budget_respected(over)
    assert disruption_budget_respected(replace(GOOD, outcome="InfrastructureError"))


def test_extra_time_lost_follows_the_progress_curve():
    # Steps every 2 s, a save after step 5 (1 s); set off at t=13.5, step 6 still completes on time
    # (t=14); the resumed run recomputes 6 and completes 7 at t=40: 40 - 14 - 2 = 24 s lost.
    progress = [(1.0 + 2 * s + (1 if s > 5 else 0), s) for s in range(7)] + [(38.0, 6), (40.0, 7), (42.0, 8)]
    pace = Pace(step_seconds=2, save_seconds=1, checkpoint_period=5, final_step=8)
    assert extra_time_lost(progress, [13.5], pace) == [24.0]
    # Of those 24 s, step 6 done again took 3 s (the step, after the save of step 5): the checkpoint period's share.
    assert recomputed_seconds(progress, [13.5], pace) == [3.0]
    # A 10 s API outage inside the gap is nobody's doing: left out.
    assert extra_time_lost(progress, [13.5], pace, api_down=[(20.0, 30.0)]) == [14.0]
    # So is a slow answer or a Retry-After inside it; windows that overlap count once.
    assert extra_time_lost(progress, [13.5], pace, api_down=[(20.0, 30.0), (25.0, 32.0), (31.0, 33.0)]) == [11.0]
    undisturbed = [(1.0 + 2 * s, s) for s in range(9)]
    assert extra_time_lost(undisturbed, [4.0], Pace(step_seconds=2, save_seconds=0, checkpoint_period=100, final_step=100)) == [0.0]
    assert extra_time_lost(progress[:6], [13.5], pace) == [] and recomputed_seconds(progress[:6], [13.5], pace) == []


def test_a_disruption_is_over_once_the_training_is_past_where_the_disrupted_run_got():
    # Run "a" reaches step 6 (t=14) after the disruption at 13.5; run "b" resumes, redoes 6 at 38 and
    # is past a's newest step with 7 at 40: 24 s lost. A save that takes 9 s too long after step 10
    # of run b, long after, is not the disruption's doing.
    a = [(1.0 + 2 * s + (1 if s > 5 else 0), s, "a") for s in range(7)]
    b = [(38.0, 6, "b"), (40.0, 7, "b"), (42.0, 8, "b"), (44.0, 9, "b"), (46.0, 10, "b"), (58.0, 11, "b")]
    pace = Pace(step_seconds=2, save_seconds=1, checkpoint_period=5, final_step=11)
    assert extra_time_lost(a + b, [13.5], pace) == [24.0]
    assert extra_time_lost([(t, s) for t, s, _ in a + b], [13.5], pace) == [33.0], "one run: followed to the end"
    # A second disruption of run b at 50 is measured from b's newest step before it (10 at 46).
    assert extra_time_lost(a + b, [13.5, 50.0], pace) == [24.0, 9.0]


def test_plans_are_pure_printable_and_cover_every_truth():
    plans = [plan(seed) for seed in range(500)]
    assert [plan(seed) for seed in range(500)] == plans
    assert {p.expected for p in plans} == set(TRUTHS)
    for p in plans:
        assert f"seed {p.seed}:" in p.describe()
        disruptive = [e for e in p.events if e.kind in ("maintenance", "preempt_spot", "lose_slice", "evict")]
        if p.fail_at_step is not None:
            assert all(e.at_step < p.fail_at_step for e in disruptive)
        assert all(e.at_step < p.steps for e in disruptive)
        if p.backend == "jobset" and p.expected in ("success", "UserCodeError"):
            assert p.max_disruptions >= len([e for e in disruptive if e.kind != "evict"])


def test_the_summary_reports_p99_and_failing_seeds():
    results = [
        {"seed": 1, "expected": "success", "violations": {}, "losses": [10.0, 20.0], "loss_kinds": ["maintenance", "lose_slice"],
         "event_kinds": ["maintenance"], "operator_seconds_lost": [1.0], "wall_seconds": 2.0},
        {"seed": 2, "expected": "success", "violations": {"nothing_left": ["x"]}, "losses": [30.0], "loss_kinds": ["evict"],
         "event_kinds": ["evict"], "operator_seconds_lost": [], "wall_seconds": 3.0},
    ]
    data = summary(results)
    assert data["scenarios_run"] == 2 and data["failing_seeds"] == [2] and data["violations"] == 1
    assert data["extra_time_lost_per_disruption_simulated_seconds"]["p99"] == 20.0  # evictions are not disruptions
    assert data["extra_time_lost_by_kind_simulated_seconds"]["maintenance"] == {"n": 1, "p50": 10.0, "p99": 10.0, "max": 10.0}
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([], 99) is None


# --- elastic slices ------------------------------------------------------------------------------

RIDDEN = replace(
    GOOD,
    ridden_out=1,
    disruptions=(),
    attempts_seen={"w": 0},
    result={**GOOD.result, "disruptions": [{"kind": "MAINTENANCE", "handled_by": "the program (elastic slices)", "reached_step": 12}]},
)


def test_a_slice_loss_ridden_out_in_place_and_recorded_has_no_violations():
    assert violations(RIDDEN) == {}


def test_a_slice_loss_ridden_out_yet_resubmitted_is_caught():
    resubmitted = replace(RIDDEN, attempts_seen={"w": 0, "w-1": 1}, disruptions=({"time": T + 4, "workload": "w", "resumed_from_step": 10},))
    found = slice_losses_ridden_out_stay_in_place(resubmitted)
    assert any("new workloads were submitted: w-1" in v for v in found) and any("1 resubmission(s)" in v for v in found)


def test_a_slice_loss_ridden_out_but_not_recorded_is_caught():
    unrecorded = replace(RIDDEN, result={**RIDDEN.result, "disruptions": []})
    assert any("0 recorded as the program's" in v for v in slice_losses_ridden_out_stay_in_place(unrecorded))
    as_a_restart = replace(RIDDEN, result={**RIDDEN.result, "disruptions": [{"kind": "MAINTENANCE", "handled_by": "JobSet restart"}]})
    assert slice_losses_ridden_out_stay_in_place(as_a_restart)


def test_a_slice_loss_ridden_out_counts_against_no_budget():
    """The program's recoveries are no resubmissions: a budget of none is not spent by them."""
    recovered = [{"kind": "MAINTENANCE", "handled_by": "the program (elastic slices)"}] * 3
    obs = replace(RIDDEN, ridden_out=3, max_disruptions=0, disruptions=tuple(recovered), outcome="DisruptionBudgetExhausted")
    assert any("after 0 disruption(s)" in v for v in disruption_budget_respected(obs))


# --- maintenance announced before the task ---------------------------------------------------------

POOLS = ("tpu-a", "tpu-b")
NODES = {"tpu-a": ("tpu-a-0", "tpu-a-1"), "tpu-b": ("tpu-b-0", "tpu-b-1")}
ANNOUNCED = {"tpu-a": "announced", "tpu-b": "announced"}
CLEAN = {"tpu-a": "clean", "tpu-b": "clean"}


def minded(policy: str, samples, /, **record) -> Observations:
    """A succeeded task under ``policy``, its pools sampled as given, its result's ``maintenance`` as done right."""
    done = {
        "policy": policy,
        "announced": {p: 864000.0 for p in POOLS},
        "since": T,
        "started_on": [n for p in POOLS for n in NODES[p]] if policy == "start_now" else [],
        "waited_for": [] if policy == "ignore" else list(POOLS),
    }
    return replace(
        GOOD, maintenance_window=policy, announced_pools=POOLS, announced_nodes=NODES, pool_samples=tuple(samples),
        result={**GOOD.result, "maintenance": {**done, **record}},
    )


STARTED_THEN_SUBMITTED = ((T, False, ANNOUNCED), (T + 1, False, {"tpu-a": "started", "tpu-b": "under"}), (T + 3, False, CLEAN), (T + 4, True, CLEAN))
WAITED_THEN_SUBMITTED = ((T, False, ANNOUNCED), (T + 1, False, {"tpu-a": "under", "tpu-b": "announced"}), (T + 3, False, CLEAN), (T + 4, True, CLEAN))
SUBMITTED_AT_ONCE = ((T, False, ANNOUNCED), (T + 0.2, True, ANNOUNCED), (T + 4, True, ANNOUNCED))


def test_maintenance_minded_as_each_policy_says_has_no_violations():
    assert violations(minded("start_now", STARTED_THEN_SUBMITTED)) == {}
    assert violations(minded("wait", WAITED_THEN_SUBMITTED)) == {}
    assert violations(minded("ignore", SUBMITTED_AT_ONCE)) == {}
    assert announced_maintenance_minded(GOOD) == []  # nothing announced: nothing to mind


def test_a_workload_before_the_maintenance_passed_is_caught():
    for policy in ("start_now", "wait"):
        early = ((T, False, ANNOUNCED), (T + 1, True, {"tpu-a": "clean", "tpu-b": "under"}), (T + 4, True, CLEAN))
        assert any("before the maintenance had passed (tpu-b: under)" in v for v in announced_maintenance_minded(minded(policy, early)))
    # Once the first workload came after it, a maintenance of the plan's own on an announced slice is no matter.
    struck_later = (*WAITED_THEN_SUBMITTED, (T + 6, True, {"tpu-a": "under", "tpu-b": "clean"}))
    assert announced_maintenance_minded(minded("wait", struck_later)) == []


def test_ignore_that_waited_or_started_the_maintenance_is_caught():
    waited = ((T, False, ANNOUNCED), (T + 1, False, {"tpu-a": "under", "tpu-b": "under"}), (T + 4, True, CLEAN))
    assert any("only once the maintenance was" in v for v in announced_maintenance_minded(minded("ignore", waited)))
    started = ((T, False, ANNOUNCED), (T + 0.2, True, ANNOUNCED), (T + 1, True, {"tpu-a": "started", "tpu-b": "announced"}))
    assert any("was started by hand" in v for v in announced_maintenance_minded(minded("ignore", started)))
    assert any("'ignore' waited for" in v for v in announced_maintenance_minded(minded("ignore", SUBMITTED_AT_ONCE, waited_for=["tpu-a"])))


def test_wait_that_started_the_maintenance_is_caught():
    started = ((T, False, ANNOUNCED), (T + 1, False, {"tpu-a": "started", "tpu-b": "announced"}), (T + 3, False, CLEAN), (T + 4, True, CLEAN))
    assert any("tpu-a was started by hand" in v for v in announced_maintenance_minded(minded("wait", started)))
    assert any("'wait' started the maintenance of" in v for v in announced_maintenance_minded(minded("wait", WAITED_THEN_SUBMITTED, started_on=["tpu-a-0"])))


def test_start_now_that_left_a_node_alone_or_waited_for_too_little_is_caught():
    assert any("started the maintenance of" in v for v in announced_maintenance_minded(minded("start_now", STARTED_THEN_SUBMITTED, started_on=list(NODES["tpu-a"]))))
    assert any("not for every announced slice" in v for v in announced_maintenance_minded(minded("start_now", STARTED_THEN_SUBMITTED, waited_for=["tpu-a"])))


def test_a_maintenance_that_passed_before_the_task_first_looked_needs_no_minding():
    """Chaos 1040129: maintenance in 60 s for 60 s (2 s real) on tpu-b had come and gone when the
    task first looked; nothing was announced to it, and there was nothing to wait for or start."""
    passed = ((T - 2, False, {"tpu-a": "announced", "tpu-b": "clean"}), (T + 1, False, {"tpu-a": "under", "tpu-b": "clean"}),
              (T + 3, False, CLEAN), (T + 4, True, CLEAN))
    for policy in ("wait", "start_now"):
        looked = minded(policy, passed, announced={"tpu-a": 60.0}, waited_for=["tpu-a"],
                        started_on=list(NODES["tpu-a"]) if policy == "start_now" else [])
        assert announced_maintenance_minded(looked) == [], policy
    # Passed only after the task looked: it had to be minded.
    late = minded("wait", ((T, False, ANNOUNCED), (T + 1, False, {"tpu-a": "under", "tpu-b": "clean"}), (T + 3, False, CLEAN), (T + 4, True, CLEAN)),
                  waited_for=["tpu-a"])
    assert any("not for every announced slice ['tpu-a', 'tpu-b']" in v for v in announced_maintenance_minded(late))
    started_too_few = minded("start_now", passed, announced={"tpu-a": 60.0}, waited_for=["tpu-a"], started_on=[])
    assert any("started the maintenance of no node" in v for v in announced_maintenance_minded(started_too_few))


def test_a_result_that_misstates_the_maintenance_is_caught():
    assert any("policy is 'ignore'" in v for v in announced_maintenance_minded(minded("wait", WAITED_THEN_SUBMITTED, policy="ignore")))
    assert any("announced ['tpu-c']" in v for v in announced_maintenance_minded(minded("start_now", STARTED_THEN_SUBMITTED, announced={"tpu-c": 1.0})))
    missing = replace(minded("wait", WAITED_THEN_SUBMITTED), result={**GOOD.result})
    assert any("no maintenance record" in v for v in announced_maintenance_minded(missing))
    assert not announced_maintenance_minded(replace(missing, remembers_earlier_tries=False))  # a later try without a store cannot know
    never_seen = replace(minded("wait", WAITED_THEN_SUBMITTED), pool_samples=((T, False, CLEAN),))
    assert any("no workload of it was ever seen" in v for v in announced_maintenance_minded(never_seen))


# --- the plans of earlier seeds ------------------------------------------------------------------

def without_later_features(description: str, *, elastic: bool) -> str:
    """A plan's description less what later features add: their own lines, and an elastic plan's
    truth line (its slice losses are ridden out, so its truth is recomputed)."""
    lines = [line for line in description.splitlines() if not line.startswith(("  announced maintenance:", "  elastic:", "  JobSet feature gates:"))]
    return "\n".join(line for line in lines if not (elastic and line.startswith("  truth:")))


PLANS_BEFORE_LATER_FEATURES = {
    0: "seed 0: jobset, deferred, 2 slice(s), 6 steps × 3s (checkpoint every 4, save 2s, grace 10s), max_disruptions=2, max_restarts=0, queued=False, state_store=False, manifest=True, collector late by 0s\n  user failure: none; crash after submit: True; crash before complete: False; execution_timeout: None\n  events: fault@step 2(count=1, latency=0.93, path_pattern='.*', status=None); drop_watches@step 3; trigger_restart@step 3\n  truth: success (counted disruptions 0)",
    1: "seed 1: pathwaysjob, inline, 1 slice(s), 34 steps × 3s (checkpoint every 4, save 2s, grace 20s), max_disruptions=1, max_restarts=1, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step -1(count=2, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=500); maintenance@step 5(duration=120, notice=20, slice=0)\n  truth: success (counted disruptions 1)",
    2: "seed 2: pathwaysjob, inline, 2 slice(s), 57 steps × 2s (checkpoint every 4, save 2s, grace 20s), max_disruptions=2, max_restarts=1, queued=True, state_store=True, manifest=False, collector late by 0s\n  user failure: step 52 exit 17; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: lose_slice@step 5(downtime=240, slice=1); drop_watches@step 9; fault@step 16(count=1, latency=0.53, path_pattern='/namespaces/default/', status=None); maintenance@step 22(duration=120, notice=0, slice=1)\n  truth: UserCodeError (counted disruptions 2)",
    3: "seed 3: pathwaysjob, inline, 1 slice(s), 48 steps × 3s (checkpoint every 5, save 1s, grace 5s), max_disruptions=2, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: preempt_spot@step 3(downtime=240, slice=0); lose_slice@step 22(downtime=60, slice=0); compact@step 31; lose_slice@step 34(downtime=120, slice=0); fault@step 38(count=3, path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', status=500)\n  truth: DisruptionBudgetExhausted (counted disruptions 3)",
    4: "seed 4: pathwaysjob, deferred, 2 slice(s), 413 steps × 3s (checkpoint every 3, save 2s, grace 5s), max_disruptions=3, max_restarts=0, queued=True, state_store=True, manifest=True, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: 2.67\n  events: fault@step -1(count=2, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=429); drop_watches@step 1; lose_slice@step 2(downtime=120, slice=0); trigger_restart@step 2 +0.15s; fault@step 5(count=2, latency=0.49, path_pattern='/namespaces/default/', status=None); drop_watches@step 12\n  truth: AirflowTaskTimeout (counted disruptions 1)",
    5: "seed 5: jobset, deferred, 1 slice(s), 53 steps × 2s (checkpoint every 3, save 2s, grace 20s), max_disruptions=3, max_restarts=0, queued=True, state_store=True, manifest=False, collector late by 0s\n  user failure: none; crash after submit: True; crash before complete: False; execution_timeout: None\n  events: fault@step -1(count=1, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=500); preempt_spot@step 3(downtime=60, slice=0); trigger_restart@step 3 +1.16s; compact@step 9; fault@step 9(count=1, latency=0.41, path_pattern='/namespaces/default/', status=None); lose_slice@step 29(downtime=60, slice=0)\n  truth: success (counted disruptions 0)",
    6: 'seed 6: pathwaysjob, deferred, 1 slice(s), 57 steps × 2s (checkpoint every 3, save 1s, grace 20s), max_disruptions=3, max_restarts=0, queued=False, state_store=False, manifest=False, collector late by 0s\n  user failure: step 48 exit 1; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: preempt_spot@step 4(downtime=120, slice=0); drop_watches@step 6; lose_slice@step 30(downtime=240, slice=0)\n  truth: UserCodeError (counted disruptions 2)',
    16: "seed 16: jobset, deferred, 1 slice(s), 7 steps × 3s (checkpoint every 4, save 1s, grace 5s), max_disruptions=1, max_restarts=0, queued=False, state_store=True, manifest=True, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: True; execution_timeout: None\n  events: drop_watches@step 1; fault@step 1(count=1, latency=1.09, path_pattern='.*', status=None); compact@step 1; outage@step 1(seconds=120); trigger_restart@step 2\n  truth: success (counted disruptions 0)",
    22: "seed 22: pathwaysjob, inline, 2 slice(s), 28 steps × 3s (checkpoint every 5, save 1s, grace 5s), max_disruptions=1, max_restarts=1, queued=False, state_store=False, manifest=False, collector late by 30s\n  user failure: step 21 exit 1; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: maintenance@step 2(duration=240, notice=10, slice=0); fault@step 7(count=3, latency=0.73, path_pattern='/namespaces/default/', status=None)\n  truth: UserCodeError (counted disruptions 1)",
    30: "seed 30: jobset, inline, 1 slice(s), 6 steps × 2s (checkpoint every 3, save 2s, grace 10s), max_disruptions=2, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: compact@step 1; fault@step 1(count=2, latency=0.77, path_pattern='.*', status=None); drop_watches@step 2\n  truth: success (counted disruptions 0)",
    35: "seed 35: jobset, inline, 1 slice(s), 30 steps × 2s (checkpoint every 4, save 2s, grace 10s), max_disruptions=2, max_restarts=0, queued=False, state_store=False, manifest=False, collector late by 0s\n  user failure: step 22 exit 1; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step -1(count=2, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=500); lose_slice@step 2(downtime=60, slice=0); fault@step 2(count=1, path_pattern='/api/v1/nodes', status=500); drop_watches@step 6\n  truth: UserCodeError (counted disruptions 0)",
    42: 'seed 42: pathwaysjob, inline, 1 slice(s), 36 steps × 2s (checkpoint every 3, save 1s, grace 20s), max_disruptions=1, max_restarts=1, queued=True, state_store=False, manifest=False, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: preempt_spot@step 5(downtime=240, slice=0); compact@step 8; compact@step 18\n  truth: success (counted disruptions 1)',
    46: 'seed 46: pathwaysjob, deferred, 2 slice(s), 53 steps × 2s (checkpoint every 5, save 1s, grace 20s), max_disruptions=3, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: none; crash after submit: True; crash before complete: False; execution_timeout: None\n  events: maintenance@step 4(duration=60, notice=0, slice=1); outage@step 13(seconds=60); lose_slice@step 31(downtime=60, slice=1)\n  truth: success (counted disruptions 2)',
    47: "seed 47: jobset, inline, 1 slice(s), 13 steps × 3s (checkpoint every 4, save 2s, grace 20s), max_disruptions=1, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: step 5 exit 1; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step 1(count=2, latency=1.16, path_pattern='.*', status=None); drop_watches@step 1\n  truth: UserCodeError (counted disruptions 0)",
    55: "seed 55: pathwaysjob, inline, 2 slice(s), 33 steps × 3s (checkpoint every 5, save 1s, grace 5s), max_disruptions=1, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: step 26 exit 1; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step -1(count=2, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=500); preempt_spot@step 5(downtime=240, slice=1); outage@step 13(seconds=60)\n  truth: UserCodeError (counted disruptions 1)",
    89: "seed 89: pathwaysjob, deferred, 2 slice(s), 37 steps × 2s (checkpoint every 4, save 1s, grace 10s), max_disruptions=3, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: step 34 exit 17; crash after submit: False; crash before complete: True; execution_timeout: None\n  events: retry@step 1; maintenance@step 2(duration=240, notice=20, slice=0); fault@step 6(count=1, path_pattern='/namespaces/default/jobs', status=503); trigger_restart@step 6; drop_watches@step 26\n  truth: UserCodeError (counted disruptions 1)\n  note: budget ample: a task retry may replace a disrupted workload without counting it",
    103: "seed 103: jobset, inline, 1 slice(s), 4 steps × 2s (checkpoint every 4, save 2s, grace 10s), max_disruptions=2, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 30s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step 1(count=3, latency=0.78, path_pattern='.*', status=None); fault@step 1(count=1, latency=0.57, path_pattern='/namespaces/default/', status=None)\n  truth: success (counted disruptions 0)",
    8000: "seed 8000: jobset, inline, 1 slice(s), 61 steps × 3s (checkpoint every 4, save 1s, grace 20s), max_disruptions=5, max_restarts=1, queued=False, state_store=True, manifest=True, collector late by 0s\n  user failure: none; crash after submit: False; crash before complete: False; execution_timeout: None\n  events: fault@step -1(count=1, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=429); maintenance@step 2(duration=60, notice=0, slice=0); lose_slice@step 23(downtime=240, out_of_service=True, slice=0); maintenance@step 34(duration=120, notice=10, slice=0); outage@step 55(seconds=60)\n  truth: success (counted disruptions 0)",
    91003: "seed 91003: pathwaysjob, deferred, 1 slice(s), 37 steps × 2s (checkpoint every 3, save 1s, grace 5s), max_disruptions=2, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 0s\n  user failure: step 30 exit 17; crash after submit: False; crash before complete: True; execution_timeout: None\n  events: fault@step 1(count=3, path_pattern='/api/v1/nodes', status=500); maintenance@step 2(duration=60, notice=10, slice=0); trigger_restart@step 11; fault@step 16(count=1, latency=0.35, path_pattern='.*', status=None); fault@step 19(count=1, latency=1.04, path_pattern='/namespaces/default/', status=None); trigger_restart@step 21\n  truth: UserCodeError (counted disruptions 1)\n  note: budget ample: a task retry may replace a disrupted workload without counting it",
    320090: "seed 320090: pathwaysjob, deferred, 1 slice(s), 63 steps × 2s (checkpoint every 5, save 2s, grace 10s), max_disruptions=4, max_restarts=0, queued=False, state_store=True, manifest=False, collector late by 30s\n  user failure: none; crash after submit: False; crash before complete: True; execution_timeout: None\n  events: fault@step -1(count=2, methods=('POST',), path_pattern='/namespaces/default/(pathwaysjobs|jobsets)', retry_after=1, status=500); maintenance@step 4(duration=60, notice=20, slice=0); drop_watches@step 6; drop_watches@step 18; trigger_restart@step 22; maintenance@step 35(duration=240, notice=0, slice=0); trigger_restart@step 35 +0.97s\n  truth: success (counted disruptions 2)\n  note: budget ample: a task retry may replace a disrupted workload without counting it",
}
"""describe() of these seeds before announced maintenance and elastic slices were drawn (plain ones,
and ones that now draw each feature): every draw they had must stay."""
DIGEST_OF_SEEDS_0_TO_999 = "9142b49b29dbb87bd45aaf89c268676fa01b8fa5420e9742b0fadf06ed5ceee0"
"""sha256 of :func:`without_later_features` of seeds 0–999's descriptions, one per line, from then."""


def test_earlier_seeds_keep_every_draw_they_had():
    for seed, before in PLANS_BEFORE_LATER_FEATURES.items():
        now = plan(seed)
        if now.announced is None and not now.elastic_slices and not now.jobset_gates:
            assert now.describe() == before, seed
        else:
            assert without_later_features(now.describe(), elastic=bool(now.elastic_slices)) == without_later_features(
                before, elastic=bool(now.elastic_slices)
            ), seed
    digest = hashlib.sha256()
    for seed in range(1000):
        now = plan(seed)
        digest.update(without_later_features(now.describe(), elastic=bool(now.elastic_slices)).encode() + b"\n")
    assert digest.hexdigest() == DIGEST_OF_SEEDS_0_TO_999


def test_later_features_are_drawn_where_their_truth_is_certain():
    plans = [plan(seed) for seed in range(2000)]
    announced = [p for p in plans if p.announced is not None]
    elastic = [p for p in plans if p.elastic_slices]
    assert {p.announced.policy for p in announced} == {"start_now", "wait", "ignore"} and 250 < len(announced) < 550
    assert 40 < len(elastic) < 200
    for p in announced:
        if p.announced.policy != "ignore":
            assert p.timeout_seconds is None, p.seed  # a timeout would fall in the wait
        else:
            assert not any(e.kind in ("maintenance", "preempt_spot") for e in p.events), p.seed  # they would clear the announcement
        if p.announced.policy == "start_now":
            assert p.announced.notice >= 86_400, p.seed  # never raced by the maintenance's own start
    for p in elastic:
        assert p.backend == "pathwaysjob" and p.num_slices == 2 and p.elastic_slices == 1
        assert not any(e.kind == "evict" for e in p.events)
        assert p.counted_disruptions == 0 and p.expected != "DisruptionBudgetExhausted"
        assert p.ridden_out == sum(1 for e in p.events if e.kind in DISRUPTIONS) >= 1
        assert p.max_slice_restarts == p.ridden_out + 1
    assert any(p.max_disruptions < p.ridden_out and p.expected == "success" for p in elastic), "a budget short of the losses, ridden out"


def test_the_execution_count_is_reported_exactly_when_the_jobset_keeps_one():
    counted = replace(GOOD, counts_executions=True, result={**GOOD.result, "execution_attempts": 1})
    assert execution_attempts_reported(counted) == [] and execution_attempts_reported(GOOD) == []
    assert execution_attempts_reported(replace(counted, result=GOOD.result))  # counted, not reported
    assert execution_attempts_reported(replace(counted, result={**GOOD.result, "execution_attempts": "1"}))
    assert execution_attempts_reported(replace(GOOD, result={**GOOD.result, "execution_attempts": 0}))  # never counted
    assert execution_attempts_reported(replace(counted, result=None)) == []  # nothing to read on a failure


def test_a_third_of_the_plans_run_with_jobset_s_execution_attempts_counted():
    drawn = [plan(seed).jobset_gates for seed in range(300)]
    assert 70 <= sum(1 for g in drawn if g) <= 130 and {g for g in drawn if g} == {("ExecutionAttemptsTracking",)}
