"""What the Pathways view draws (pathways_airflow.ui.view_model and .benchmark_view), from real-shaped results and histories.

The workload results below have the shape ``PathwaysJobOperator`` returns: one training task
whose first workload was ended by host maintenance at step 25 and resubmitted from the step-20
checkpoint, and the same result as a version before ``timeline`` and ``goodput`` existed.
"""

from __future__ import annotations

import json

import pytest

from pathways_airflow.benchmark_history import History, Run, compare, with_run
from pathways_airflow.ui.benchmark_view import MAX_TICKS, benchmark_view, rows_of
from pathways_airflow.ui.view_model import goodput_view, is_workload_result, to_json, workload_view

pytestmark = [pytest.mark.unit, pytest.mark.pure]

T0 = 1_795_000_000.0
EVIDENCE = [
    "node gke-tpu-v5e-pool-1-a3 has cloud.google.com/active-node-maintenance=ONGOING",
    "pod pw-train-worker-0-1 DisruptionTarget: TerminationByKubelet (node shutdown)",
]


def entry(at: float, workload: str, kind: str, label: str, evidence=(), slices=None) -> dict:
    """A timeline entry as run.timeline writes it; ``slices`` = (ready, total) on a phase that counts them."""
    found = {"at": T0 + at, "workload": workload, "kind": kind, "label": label, "evidence": list(evidence)}
    return found if slices is None else {**found, "slices_ready": slices[0], "slices_total": slices[1]}


FIRST, SECOND = "pw-train-deferred-manual-1", "pw-train-deferred-manual-1-a1"
RESULT = {
    "name": SECOND,
    "namespace": "default",
    "backend": "pathwaysjob",
    "state": "SUCCEEDED",
    "restarts": 0,
    "wall_time_seconds": 301.2,
    "disruptions": [
        {
            "time": T0 + 120.0,
            "kind": "MAINTENANCE",
            "evidence": EVIDENCE,
            "workload": FIRST,
            "reached_step": 25,
            "resumed_from_step": 20,
            "steps_recomputed": 5,
            "seconds_lost": 31.5,
        }
    ],
    "disruption_summary": "1 disruption (1 maintenance): 5 steps recomputed, 36 s lost",
    "checkpoint": {"uri": "gs://pathways-demo/e2e/run/checkpoints/59", "step": 59},
    "timeline": [
        entry(0, FIRST, "submitted", f"submitted {FIRST}"),
        entry(0.4, FIRST, "queued", "QUEUED"),
        entry(2.0, FIRST, "provisioning", "PROVISIONING 0/2 slices", slices=(0, 2)),
        entry(6.0, FIRST, "provisioning", "PROVISIONING 1/2 slices", slices=(1, 2)),
        entry(9.0, FIRST, "running", "RUNNING 2/2 slices", slices=(2, 2)),
        entry(120.0, FIRST, "failed", "FAILED"),
        entry(120.0, FIRST, "disruption", "maintenance: resubmitted (step 25 reached, resumed from step 20)", EVIDENCE),
        entry(124.0, FIRST, "deleted", f"deleted {FIRST}"),
        entry(125.0, SECOND, "submitted", f"submitted {SECOND}"),
        entry(126.0, SECOND, "provisioning", "PROVISIONING 0/2 slices", slices=(0, 2)),
        entry(133.0, SECOND, "running", "RUNNING 2/2 slices", slices=(2, 2)),
        entry(296.0, SECOND, "succeeded", "SUCCEEDED"),
        entry(300.0, SECOND, "deleted", f"deleted {SECOND}"),
    ],
    "goodput": {
        "chips": 16,
        "held_seconds": 298.6,
        "chip_hours": 1.327,
        "queued_seconds": 1.6,
        "provisioning_seconds": 7.0,
        "productive_seconds": 252.1,
        "lost_seconds": 35.5,
        "lost": {"detection_seconds": 0.5, "restart_seconds": 13.5, "recomputed_seconds": 21.5},
        "cleanup_seconds": 4.0,
        "goodput": 0.8443,
    },
}
OLDER = {key: RESULT[key] for key in RESULT if key not in ("timeline", "goodput")}


def test_a_resubmission_is_a_lane_of_its_own_with_its_phases_and_slices_ready():
    view = workload_view(RESULT)
    assert view.is_workload and view.state == "SUCCEEDED"
    assert [(lane.workload, lane.attempt) for lane in view.lanes] == [(FIRST, 0), (SECOND, 1)]
    first, second = view.lanes
    assert [s.kind for s in first.segments] == ["submitted", "queued", "provisioning", "provisioning", "running", "failed"]
    assert [(s.slices_ready, s.slices_total) for s in first.segments if s.kind == "provisioning"] == [(0, 2), (1, 2)]
    running = first.segments[4]
    assert (running.start, running.end, running.label) == (9.0, 120.0, "RUNNING 2/2 slices")
    assert first.segments[-1].end == 124.0 and first.deleted  # failed until deleted
    assert (second.start, second.end, second.resumed_from_step) == (125.0, 300.0, 20)
    assert second.segments[-1].kind == "succeeded" and second.segments[-1].end == 300.0
    assert view.span_seconds == 300.0 and view.resubmissions == 1


def test_each_disruption_keeps_its_evidence_its_lane_and_what_it_cost():
    (d,) = workload_view(RESULT).disruptions
    assert (d.kind, d.at, d.lane, d.workload, d.next_workload) == ("MAINTENANCE", 120.0, 0, FIRST, SECOND)
    assert d.evidence == tuple(EVIDENCE)
    assert d.headline == (
        f"MAINTENANCE on {FIRST} (step 25 reached): resubmitted as {SECOND}, resuming from step 20; "
        "5 steps recomputed"  # the time lost is goodput's, shown once
    )


def test_an_in_place_restart_says_the_jobset_handled_it_and_sits_on_the_lane_running_then():
    restart = {"time": T0 + 200.0, "kind": "PREEMPTION", "evidence": ["pod evicted"], "handled_by": "JobSet restart", "reached_step": 40}
    view = workload_view({**RESULT, "disruptions": [*RESULT["disruptions"], restart]})
    second = view.disruptions[1]
    assert (second.lane, second.workload, second.resubmitted, second.next_workload) == (1, SECOND, False, None)
    assert second.headline == "PREEMPTION: the JobSet restarted in place (step 40 reached)"
    assert view.resubmissions == 1


def test_a_slice_loss_the_program_rode_out_says_so_and_is_no_resubmission():
    ridden = {"time": T0 + 210.0, "kind": "MAINTENANCE", "evidence": ["pod w-1-0: DisruptionTarget (TerminationByKubelet)"],
              "handled_by": "the program (elastic slices)", "reached_step": 44, "seconds_lost": 95.0}
    view = workload_view({**RESULT, "disruptions": [*RESULT["disruptions"], ridden]})
    second = view.disruptions[1]
    assert (second.lane, second.resubmitted, second.next_workload) == (1, False, None)
    assert second.headline == "MAINTENANCE: the program rode it out (elastic slices) (step 44 reached)"
    assert view.resubmissions == 1


def test_the_goodput_split_is_shown_as_parts_of_the_held_time():
    g = workload_view(RESULT).goodput
    assert g is not None and g.goodput_text == "84.4%" and g.chips == 16 and g.chip_hours == 1.327
    assert [p.key for p in g.parts] == ["provisioning", "productive", "lost", "cleanup"]
    assert [p.key for p in g.lost_parts] == ["detection", "restart", "recomputed"]
    assert g.adds_up and sum(p.share for p in g.parts) == pytest.approx(1.0, abs=0.01)
    assert g.queued_text == "1.6 s"  # beside the held time, not in it
    assert g.parts[1].text == "productive: 4 min 12 s (84.4%)"


def test_parts_that_do_not_add_up_to_the_held_time_are_said_not_to():
    broken = {**RESULT["goodput"], "cleanup_seconds": 90.0}
    view = workload_view({**RESULT, "goodput": broken})
    assert view.goodput is not None and not view.goodput.adds_up
    assert any("add up to" in note for note in view.notes)


def test_a_result_from_before_timelines_shows_its_disruptions_and_checkpoint():
    view = workload_view(OLDER)
    assert view.is_workload and view.lanes == () and view.goodput is None
    (d,) = view.disruptions
    assert d.at is None and d.evidence == tuple(EVIDENCE) and d.workload == FIRST
    assert "resubmitted, resuming from step 20" in d.headline
    assert view.checkpoint == {"uri": "gs://pathways-demo/e2e/run/checkpoints/59", "step": 59}
    assert len(view.notes) == 2 and "no timeline" in view.notes[0] and "no goodput" in view.notes[1]


def test_disruptions_come_from_the_timeline_when_the_result_lists_none():
    view = workload_view({**RESULT, "disruptions": []})
    (d,) = view.disruptions
    assert d.lane == 0 and d.evidence == tuple(EVIDENCE)


def test_anything_else_is_not_a_workload_and_says_so():
    for value in (None, "gs://x", {"regressed": False, "rows": []}, {"name": "x"}):
        view = workload_view(value)
        assert not view.is_workload and "not a Pathways workload" in view.message
    assert is_workload_result(OLDER)


def test_malformed_timeline_entries_are_left_out():
    view = workload_view({**RESULT, "timeline": [*RESULT["timeline"], {"at": "soon", "kind": "running"}, "junk"]})
    assert len(view.lanes) == 2


def test_the_view_is_plain_json():
    text = json.dumps(to_json(workload_view(RESULT)), allow_nan=False)
    assert EVIDENCE[0] in text
    assert to_json({"a": (1.0, float("nan"))}) == {"a": [1.0, None]}
    assert goodput_view(None) is None



# --- the benchmark history ------------------------------------------------------------------------

METRICS = {"request_throughput": 12.0, "output_throughput": 1450.0, "median_ttft_ms": 110.0, "p99_ttft_ms": 300.0, "median_tpot_ms": 21.0}


def nightly(history: History, day: int, engine: str = "vllm", hour: int = 0, **changes) -> tuple[History, dict]:
    """The history after the gate recorded a night, and the gate's XCom result for it."""
    run_id = f"scheduled__2026-11-{day:02d}T{hour:02d}:00:00+00:00"
    metrics = {**METRICS, **changes}
    comparison = compare(metrics, history, threshold_pct=20.0, window=7, run_id=run_id, engine=engine)
    run = Run(run_id, f"2026-11-{day:02d}T{hour:02d}:00:00+00:00", metrics, regressions=comparison.regressions, engine=engine)
    result = {"regressed": comparison.regressed, "regressions": list(comparison.regressions),
              "rows": [row.to_dict() for row in comparison.rows], "history_uri": "gs://pathways-demo/benchmarks/history.json",
              "report_uri": "gs://pathways-demo/benchmarks/reports/x/report.md", "plot_uri": None, "runs_in_history": 0}
    return with_run(history, run), {**result, "run_id": run_id}


def four_nights() -> tuple[History, dict]:
    history = History()
    for day, changes in ((20, {}), (21, {"median_ttft_ms": 112.0}), (22, {"median_ttft_ms": 108.0}), (23, {"median_ttft_ms": 440.0})):
        history, latest = nightly(history, day, **changes)
    return history, latest


def test_every_run_is_a_point_and_the_flagged_one_is_marked():
    history, latest = four_nights()
    view = benchmark_view(history, latest, latest_run_id=latest["run_id"], window=7, min_runs=1)
    assert view.has_history and view.engine == "vllm" and len(view.runs) == 4
    ttft = next(p for p in view.panels if p.metric == "median_ttft_ms")
    assert len(ttft.points) == 4
    assert [p.regressed for p in ttft.points] == [False, False, False, True]
    assert ttft.points[-1].current and ttft.current_status == "REGRESSED"
    assert view.regressed_runs == 1
    assert view.verdict.startswith("REGRESSION in median_ttft_ms")


def test_the_band_is_the_baseline_the_newest_run_was_judged_against_on_the_worse_side():
    history, latest = four_nights()
    view = benchmark_view(history, latest, latest_run_id=latest["run_id"])
    ttft = next(p for p in view.panels if p.metric == "median_ttft_ms")
    assert ttft.baseline == 110.0 and ttft.limit == pytest.approx(132.0)  # latency: band above
    assert ttft.band_note == "baseline 110.0, band +20% to 132.0"
    throughput = next(p for p in view.panels if p.metric == "request_throughput")
    assert throughput.limit == pytest.approx(9.6)  # throughput: band below
    assert ttft.y_min < 108.0 and ttft.y_max > 440.0
    assert [p.baseline_then for p in ttft.points] == [None, 110.0, 111.0, 110.0]  # what compare() said each night


def test_the_first_night_has_no_band_and_says_why():
    history, latest = nightly(History(), 20)
    view = benchmark_view(history, latest, latest_run_id=latest["run_id"])
    assert all(p.baseline is None and "no baseline yet" in p.band_note for p in view.panels)
    assert view.verdict == "no regression (no baseline yet: this run starts the history)"


def test_runs_of_another_engine_are_not_drawn_against_this_one():
    history, _ = four_nights()
    history, latest = nightly(history, 24, engine="jetstream")
    view = benchmark_view(history, latest, latest_run_id=latest["run_id"])
    assert view.engine == "jetstream" and len(view.runs) == 1
    assert [dict(e) for e in view.engines] == [{"engine": "vllm", "runs": 4}, {"engine": "jetstream", "runs": 1}]
    vllm = benchmark_view(history, latest, latest_run_id=latest["run_id"], engine="vllm")
    assert len(vllm.runs) == 4 and vllm.verdict is None  # the gate judged a JetStream run
    assert next(p for p in vllm.panels if p.metric == "median_ttft_ms").points[-1].current


def test_without_a_gate_result_the_default_metrics_are_shown():
    history, _ = four_nights()
    view = benchmark_view(history, None)
    assert [p.metric for p in view.panels] == ["request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms"]
    assert rows_of(None) == () and rows_of({"rows": [{"metric": "x"}]}) == ()


def test_an_empty_history_says_so():
    view = benchmark_view(History(), None)
    assert not view.has_history and "no runs" in view.message


def test_the_view_labels_and_ticks_its_axis_as_the_report_plot_does():
    runs = [Run(f"r{i}", "2026-11-23T0%d:00:00+00:00" % i, {"median_ttft_ms": 100.0}) for i in range(3)]
    view = benchmark_view(History(tuple(runs)), None)
    assert [r.label for r in view.runs] == ["11-23 00:00", "11-23 01:00", "11-23 02:00"]
    assert view.ticks == (0, 1, 2) and MAX_TICKS == 8


def test_a_dags_own_gated_run_with_newer_runs_after_it_is_not_called_the_newest():
    """The pipeline DAG's history tab: its gate judged the first night of a history the nightly DAG
    has added to since; the ringed run is that one, named for what it is."""
    history, _ = nightly(History(), 20)
    first_run = history.runs[0].run_id
    _, first = nightly(History(), 20)
    for day in (21, 22):
        history, _ = nightly(history, day)
    view = benchmark_view(history, first, latest_run_id=first_run)
    assert view.current_run_id == first_run and view.current_label == "this DAG's gated run (2 newer in the history)"
    history, latest = four_nights()
    assert benchmark_view(history, latest, latest_run_id=latest["run_id"]).current_label == "newest run"


def test_where_the_workload_stood_in_kueues_queue_is_said_when_it_waited_there():
    queued = {"local_queue": "team-a", "cluster_queue": "cluster-queue", "ahead_in_cluster_queue": 2, "ahead_in_local_queue": 1,
              "quota": [{"flavor": "tpu-v5-lite-podslice-2x4", "used": 16, "nominal": 16}]}
    view = workload_view({**RESULT, "queued": queued})
    assert view.queue_text == "2 ahead in ClusterQueue cluster-queue, 1 of them in LocalQueue team-a; tpu-v5-lite-podslice-2x4: 16/16 chips in use"
    assert to_json(view)["queue_text"] == view.queue_text
    assert workload_view({**RESULT, "queued": None}).queue_text is None and workload_view(RESULT).queue_text is None
