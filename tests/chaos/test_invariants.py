"""The checkers and the plan generator themselves: each invariant can fail, and plans are pure."""

from __future__ import annotations

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
    nothing_left,
    user_errors_never_resubmitted,
    violations,
)
from tests.support.chaos.plan import TRUTHS, plan
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
