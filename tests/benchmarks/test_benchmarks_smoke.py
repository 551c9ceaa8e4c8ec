"""The benchmark scripts' quick modes run and write the JSON the README's tables come from.

A smoke test, not a timed assertion: it checks each script runs from the checkout, writes its
report, and that the figures in it are sane (present, positive where they must be, every wait
answered) — never that a target was met, which depends on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_quick(script: str, tmp_path: Path, timeout: float = 120) -> dict:
    out = tmp_path / f"{script}.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / f"{script}.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert result.stdout.strip(), "the script prints a table"
    return json.loads(out.read_text())


def load_benchmark(script: str, monkeypatch: pytest.MonkeyPatch):
    """A benchmark script as a module (registered, since a dataclass looks its module up)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(script, REPO / "benchmarks" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_triggerer_scale_quick(tmp_path):
    report = run_quick("triggerer_scale", tmp_path)
    assert report["machine"]["cores"] >= 1
    # One CA for every contender: a context loads one certificate, not the system bundle.
    assert report["ca"]["setup"] == "one CA" and report["ca"]["ca_certificates_one_ca"] == 1
    assert report["ca"]["ca_certificates_system_bundle"] > 1
    runs = {run["contender"]: run for run in report["runs"]}
    assert set(runs) == {"ours", "anchor-2s"}
    for run in runs.values():
        assert run["waits"] == 20 and run["ca"] == "one CA"
        # Every wait accounted for.
        assert run["unreported"] == 0 and run["unreported_names"] == [], run["unreported_raised"]
        assert run["events"] == run["reported"] == 20 and run["all_events_received"] and run["unexpected_events"] == 0
        assert sum(ending["waits"] for ending in run["reaction_by_ending"].values()) == 20
        assert run["cpu_s_per_min"] > 0 and run["peak_rss_mb"] > 0
        assert 0 <= run["reaction_p50_s"] <= run["reaction_p99_s"]
        assert run["max_stall_ms"] >= 0
        # The finish window's CPU and requests, beside the steady window's.
        assert run["finish_cpu_s_per_min"] > 0 and run["finish_window_s"] > 0
        assert run["finish_requests"] > 0 and run["finish_requests_per_s"] > 0
        assert run["finish_peak_rss_mb"] >= run["steady_rss_mb"] - 1  # sampled from the end of the steady window on
        # Side objects at fleet scale: one Node per TPU host (2 for a v5e 2x4 slice) besides the
        # cluster's own; per pod (3 a workload) the scheduler's Scheduled, and per container
        # (1 at least) the kubelet's Pulled, Created and Started.
        assert run["side_objects"]["nodes"] >= 2 * 20
        assert run["side_objects"]["events_in_namespace"] >= 20 * 3 * (1 + 3)
    anchor_ssl = runs["anchor-2s"]["ssl_contexts"]["steady"]
    assert anchor_ssl["built"] > 0 and anchor_ssl["ca_certificates"] == 1  # a client per poll, each trusting the one CA
    assert runs["anchor-2s"]["requests_in_window"] > 0  # the anchor polls; ours holds watches
    assert runs["ours"]["finish_requests_by_verb"].get("GET", 0) > 0  # its verdicts read the nodes and events
    assert runs["ours"]["watch_events_in_window"] > 0 and runs["ours"]["cpu_us_per_watch_event"] > 0
    assert runs["anchor-2s"]["watch_events_in_window"] == 0  # it watches nothing
    assert all(run["max_full_gc_ms_in_windows"] >= 0 for run in runs.values())
    assert {"fewer_requests_x", "cpu_fraction", "finish_cpu_fraction", "steady_rss_per_wait_fraction"} <= set(report["ratios"][0])
    targets = report["targets"]["20"]
    assert set(targets) == {
        "no_stall_over_100ms_startup_included", "p99_reaction_le_1s_except_user_error", "steady_rss_le_50kb_per_wait",
        "finish_peak_rss_le_50kb_per_wait", "steady_rss_per_wait_le_anchor", "cpu_le_100us_per_watch_event",
        "steady_cpu_le_1_20_of_anchor",
    }
    for name, entry in targets.items():
        assert {"measured", "limit", "met", "margin"} <= set(entry), name
        if entry["met"] is not None:
            assert entry["margin"] == pytest.approx(entry["limit"] - entry["measured"], abs=1e-3), name
    # Compared with the anchor at its default 10 s poll only: the quick run has none.
    assert targets["steady_cpu_le_1_20_of_anchor"]["met"] is None and targets["steady_cpu_le_1_20_of_anchor"]["not_measured"]


def test_triggerer_scale_unreported_wait_fails_the_targets(monkeypatch):
    """A wait that never reports is a failure of the run: every target for that N is missed."""
    module = load_benchmark("triggerer_scale", monkeypatch)
    ours = {
        "contender": "ours", "waits": 3, "unreported": 1, "unreported_names": ["w00002"],
        "max_stall_ms": 5.0, "startup_max_stall_ms": 7.0, "steady_rss_kb_per_wait": 10.0, "finish_peak_rss_kb_per_wait": 12.0,
        "cpu_us_per_watch_event": 50.0, "cpu_s_per_min": 1.0,
        "reaction_by_ending": {e: {"p99_s": 0.01} for e in ("succeeding", "failing", "disrupted")},
    }
    anchor = dict(ours, contender="anchor-10s", unreported=0, unreported_names=[], steady_rss_kb_per_wait=20.0, cpu_s_per_min=40.0)
    failed = module.run_failure([ours, anchor])
    assert failed and "w00002" in failed
    result = module.targets(ours, anchor, failed)
    assert all(entry["met"] is False and entry["missed_because"] == failed for entry in result.values())
    clean = module.targets(dict(ours, unreported=0, unreported_names=[]), anchor, None)
    assert all(entry["met"] is True for entry in clean.values())
    assert clean["steady_cpu_le_1_20_of_anchor"]["margin"] == pytest.approx(0.05 - 1.0 / 40.0)


def test_checkpoint_poll_quick(tmp_path):
    report = run_quick("checkpoint_poll", tmp_path)
    (run,) = report["runs"]
    assert run["files_per_step"] == 10 and run["objects"] > 500
    assert run["ours"]["result"]["step"] == 50 * 100  # the newest committed step, not the save in progress
    assert all(n >= 1 for n in run["ours"]["requests_per_poke"])
    assert run["anchor"]["result"] == run["objects"]  # the prefix sensor saw every object
    assert run["ours_after_new_steps"]["result"]["step"] == 52 * 100
    assert run["faster_x"] > 0 and run["fewer_requests_x"] > 0 and run["fewer_requests_x_paged"] > 0
    assert run["anchor_paged"]["result"] == run["objects"]  # paged as GCS pages, the same objects
    assert run["ours_paged"]["result"]["step"] == 50 * 100
    assert run["ingest"]["objects"] == run["objects"] and run["ingest"]["progress"][-1][0] == run["objects"]
    assert run["model"]["files_per_step"] == 10 and run["model"]["objects"] == run["objects"]
    assert [entry["files_per_step"] for entry in report["model"]] == [10, 100, 1000, 10_000]
    assert all(entry["prefix_sensor_requests"] >= 1 and entry["ours_requests"] >= 1 for entry in report["model"])
    assert report["machine"]["cores"] >= 1 and report["date"] and report["command"]
    assert {"requests_per_poke_le_3", "requests_independent_of_F", "new_steps_le_3_plus_new", "paged_requests_match_model"} <= set(
        report["targets"]
    )


def test_checkpoint_request_model_and_ladder(monkeypatch):
    """The GCS request model pages at 1,000 entries, and a budgeted run's F ladder fills in below a miss."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("checkpoint_poll", REPO / "benchmarks" / "checkpoint_poll.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    assert [module.list_pages(n) for n in (0, 1, 1000, 1001)] == [1, 1, 1, 2]
    at_1000 = module.gcs_request_model(1000, 50)
    assert at_1000["objects"] == 50_999 and at_1000["prefix_sensor_requests"] == 52 and at_1000["ours_requests"] == 3
    assert module.next_files(200, lambda files: True) == 400
    assert module.next_files(400, lambda files: files <= 600) == 600
    assert module.next_files(400, lambda files: False) is None
    a, b = module.fit_upload_seconds([(n, 0.01 * n + 1e-5 * n * n) for n in (100, 200, 400, 800)])
    assert abs(a - 0.01) < 1e-6 and abs(b - 1e-5) < 1e-9


def test_import_cost_quick(tmp_path):
    report = run_quick("import_cost", tmp_path)
    ours = report["modules"]["pathways_airflow.operators + .sensors"]
    assert ours["error"] is None
    assert ours["airflow_sdk_s_median"] > 0 and ours["extra_s_median"] >= 0
    assert len(report["dags"]) == 1
    assert report["ours_top_imports"], "-X importtime was read"
    assert {"ours_le_0.1s", "each_dag_le_0.3s"} <= set(report["targets"])
    assert set(report["bytecode"]) == {"with_pyc", "without_pyc"}
    assert all(part["modules"]["pathways_airflow.operators + .sensors"]["error"] is None for part in report["bytecode"].values())


def test_dag_processor_cost_quick(tmp_path):
    report = run_quick("dag_processor_cost", tmp_path, timeout=300)
    assert report["machine"]["cores"] >= 1 and report["machine"]["airflow"]
    assert set(report["variants"]) == {"without_pre_import_line", "as_shipped"}
    for variant in report["variants"].values():
        assert variant["trivial_parse_s_median"] > 0  # the real dag-processor recorded the baseline's parse
        files = variant["files"]
        assert "dag_processor_cost_trivial.py" in files and len(files) == 2, files
        for row in files.values():
            assert len(row["parse_s"]) == report["runs"] == 1 and row["beyond_trivial_s_median"] is not None
    assert len(report["targets"]) == 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
