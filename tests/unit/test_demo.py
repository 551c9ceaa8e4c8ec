"""The demo's pure part: which Airflow output lines to show, and the closing summary."""

from __future__ import annotations

from pathways_airflow_testing.demo import StageTime, progress_line, stage_times, summary_lines
from pathways_airflow_testing.lineage_events import chain, completed_tasks

OPERATOR_LINE = (
    "2026-11-22T09:29:44.933042Z [warning  ] default/train-abc ended by MAINTENANCE (pod train-abc-worker-0-0-kmnw6: "
    "DisruptionTarget (TerminationByKubelet)); 1 of 3 disruptions used "
    "[airflow.task.operators.pathways_airflow.operators.workload.PathwaysJobOperator] loc=workload.py:495"
)
TRIGGER_LINE = (
    "2026-11-22T09:27:41.363215Z [info     ] default/train-abc: RUNNING 2/2 slices "
    "[pathways_airflow.triggers.workload.PathwaysJobTrigger] loc=workload.py:155"
)
AIRFLOW_LINE = (
    "2026-11-22T09:29:43.855614Z [info     ] setting next dagrun info       [airflow.models.dag] loc=dag.py:848 "
    "next_dagrun=None next_dagrun_create_after=None"
)
SKIP_LINE = (
    '2026-11-22T09:33:34.044074Z [info     ] Skipping task.                 [task] loc=task_runner.py:1622 '
    'reason="no serving checkpoint has been published yet: nothing to benchmark"'
)
STAGE_LINE = "2026-11-22T09:29:44.858737Z [info     ] [DAG TEST] starting task_id=slices_ready map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501"


def test_progress_shows_this_providers_lines_stage_boundaries_and_skips_only():
    assert progress_line(OPERATOR_LINE).startswith("  WARNING: default/train-abc ended by MAINTENANCE")
    assert progress_line(TRIGGER_LINE) == "  default/train-abc: RUNNING 2/2 slices"
    assert progress_line(STAGE_LINE) == "[slices_ready] started"
    assert progress_line(SKIP_LINE) == "  skipped: no serving checkpoint has been published yet: nothing to benchmark"
    assert progress_line(AIRFLOW_LINE) is None
    assert progress_line("Traceback (most recent call last):") is None


def test_stage_times_follow_the_pipeline_order_and_mark_stages_that_never_ran():
    rows = [
        {"task_id": "train", "state": "success", "start_date": "2026-11-22T09:30:00+00:00", "end_date": "2026-11-22T09:31:30.5+00:00"},
        {"task_id": "slices_ready", "state": "success", "start_date": "2026-11-22T09:29:50+00:00", "end_date": "2026-11-22T09:30:00+00:00"},
        {"task_id": "convert", "state": "failed", "start_date": "2026-11-22T09:31:31+00:00", "end_date": None},
    ]
    assert stage_times(rows) == [
        StageTime("slices_ready", "success", 10.0),
        StageTime("train", "success", 90.5),
        StageTime("convert", "failed", None),
        StageTime("benchmark", "not run", None),
        StageTime("check_regression", "not run", None),
    ]


def test_the_summary_reports_disruptions_steps_outputs_metrics_and_leftovers():
    results = {
        "train": {
            "checkpoint": {"step": 59, "uri": "gs://b/runs/r/checkpoints/59"},
            "disruptions": [
                {"kind": "MAINTENANCE", "workload": "train-abc", "reached_step": 25, "resumed_from_step": 25, "steps_recomputed": 0, "seconds_lost": 5.1}
            ],
            "disruption_summary": "1 disruption (1 maintenance): 0 steps recomputed, 0.1 s lost",
            "goodput_summary": "goodput 64% of 0.0133 chip-hours (8 chips held 6.0 s): productive 3.8 s, ...",
        },
        "convert": {"items_uri": "gs://b/serving/r-step-59/checkpoints/0/items", "source": {"step": 59}},
        "benchmark": {"request_throughput": 45.5, "median_ttft_ms": 113.7, "result_uri": "gs://b/x.json"},
        "check_regression": {"regressed": False, "rows": [{"metric": "median_ttft_ms", "baseline": None}], "runs_in_history": 1},
    }
    nightly = [
        {
            "regressed": False,
            "rows": [
                {"metric": "median_ttft_ms", "baseline": 113.7, "change_pct": 4.0, "threshold_pct": 20.0, "better": "lower"},
                {"metric": "request_throughput", "baseline": 45.5, "change_pct": -1.0, "threshold_pct": 20.0, "better": "higher"},
            ],
            "runs_in_history": 2,
            "history_uri": "gs://b/h.json",
            "report_uri": "/tmp/r/report.md",
            "plot_uri": "/tmp/r/history.png",
        },
        {"regressed": True, "regressions": ["p99_ttft_ms"]},
        {},
    ]
    text = "\n".join(
        summary_lines(
            stages=[StageTime("train", "success", 11.5)],
            results=results,
            committed_steps=[59, 0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55],
            leftovers=[],
            maintenance="host maintenance on node pool tpu-v5e-2x4-0 at step 25",
            nightly=nightly,
            lineage=["train", "gs://b/runs/r/checkpoints/59", "convert", "gs://b/serving/r-step-59/checkpoints/0"],
            speed=60,
        )
    )
    assert "  train              success      11.5 s" in text
    assert "injected: host maintenance on node pool tpu-v5e-2x4-0 at step 25" in text
    assert "MAINTENANCE: workload train-abc stopped at step 25, resubmitted resuming from step 25" in text
    assert "checkpoint steps committed: 0, 5, 10 … 55, 59 (13 steps)" in text
    assert "final training checkpoint: step 59 at gs://b/runs/r/checkpoints/59" in text
    assert "serving checkpoint: gs://b/serving/r-step-59/checkpoints/0/items (from step 59)" in text
    assert "median_ttft_ms           113.70" in text and "result_uri" not in text
    assert "regression check (pipeline): no regression (no baseline yet" in text
    assert "regression check (nightly run 1): no regression (closest to its threshold: median_ttft_ms +4.0%, threshold 20%)" in text
    assert "regression check (nightly run 2): REGRESSION in p99_ttft_ms" in text
    assert "regression check (nightly run 3): did not run" in text
    assert "plot of the history: /tmp/r/history.png" in text
    assert "regression check (nightly run 1): no regression (closest to its threshold: median_ttft_ms +4.0%, threshold 20%)\n    report: /tmp/r/report.md" in text
    assert "training chip time: goodput 64% of 0.0133 chip-hours" in text
    assert "(real seconds: the local cluster runs its programs 60× faster than the step times they log" in text
    assert "lineage (OpenLineage events): train → gs://b/runs/r/checkpoints/59 → convert → gs://b/serving/r-step-59/checkpoints/0" in text
    assert text.endswith("left in the cluster: nothing")


def test_the_summary_names_what_was_left_behind():
    text = "\n".join(
        summary_lines(stages=[], results={}, committed_steps=[], leftovers=["PathwaysJob/train-abc"], maintenance=None)
    )
    assert "left in the cluster: PathwaysJob/train-abc" in text
    assert "no record (the training task did not finish)" in text
    assert "checkpoint steps committed: none" in text


def test_the_lineage_chain_follows_each_tasks_output_into_the_next_tasks_input():
    def event(task, inputs, outputs, kind="COMPLETE"):
        as_datasets = [{"namespace": "gs://b", "name": uri.removeprefix("gs://b/")} for uri in inputs], [
            {"namespace": "gs://b", "name": uri.removeprefix("gs://b/")} for uri in outputs
        ]
        return {"eventType": kind, "job": {"namespace": "demo", "name": f"dag.{task}"}, "inputs": as_datasets[0], "outputs": as_datasets[1]}

    events = [
        event("train", [], ["gs://b/ckpt/39"], kind="START"),
        event("train", [], ["gs://b/ckpt/39"]),
        event("convert", ["gs://b/ckpt/39"], ["gs://b/serving/0"]),
        event("benchmark", ["gs://b/serving/0"], ["gs://b/bench/result.json"]),
        event("check_regression", ["gs://b/bench/result.json", "gs://b/h.json"], ["gs://b/h.json"]),
        event("train", [], ["gs://x/other"]) | {"job": {"name": "other_dag.train"}},
    ]
    tasks = completed_tasks(events, "dag")
    assert chain(tasks, ["train", "convert", "benchmark", "check_regression"]) == [
        "train", "gs://b/ckpt/39", "convert", "gs://b/serving/0", "benchmark", "gs://b/bench/result.json", "check_regression", "gs://b/h.json",
    ]
    broken = {**tasks, "convert": completed_tasks([event("convert", ["gs://b/ckpt/38"], ["gs://b/serving/0"])], "dag")["convert"]}
    assert chain(broken, ["train", "convert"]) == ["train", "✗"]
    assert chain({}, ["train"]) == ["✗ no lineage from train"]


def test_the_summary_says_what_the_training_did_about_maintenance_announced_before_it():
    from pathways_airflow_testing.demo import maintenance_before_line

    started = {"policy": "start_now", "announced": {"tpu-v5e-2x4-2": 10800.0}, "started_on": ["n-0", "n-1"], "waited_for": ["tpu-v5e-2x4-2"], "waited_seconds": 6.2}
    text = "\n".join(summary_lines(stages=[], results={"train": {"maintenance": started}}, committed_steps=[], leftovers=[], maintenance=None))
    assert ("maintenance announced before training: tpu-v5e-2x4-2 in 3.0 h; started it on 2 idle nodes, waited 6 s, then "
            "submitted (maintenance_window='start_now')") in text
    waited = {**started, "policy": "wait", "started_on": []}
    assert maintenance_before_line(waited).endswith("; waited 6 s for it, then submitted (maintenance_window='wait')")
    ignored = {**started, "policy": "ignore", "started_on": [], "waited_for": []}
    assert maintenance_before_line(ignored).endswith("; submitted anyway (maintenance_window='ignore')")
    assert maintenance_before_line({"policy": "wait", "announced": {}}) is None and maintenance_before_line(None) is None
