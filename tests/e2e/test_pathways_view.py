"""The Pathways view in the real Airflow UI, in a real browser, over runs of the example DAGs.

The database holds what a deployment would: a run of ``pathways_training`` whose training lost a
slice to host maintenance midway and resumed from its checkpoint, and a run of
``pathways_nightly_inference_benchmark`` whose time to first token regressed against the nights
in its history. ``airflow api-server`` serves the UI and the provider's plugin; headless Chromium
logs in as a viewer, opens the task instance's and the DAG's Pathways tabs, and reads what a
person would see there. A screenshot of each tab is kept with the test's files. A user the auth
manager keeps out of these DAGs, and a request with no credentials, get no data.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.api_server import api_server
from tests.support.browser import Chromium, chromium_executable
from tests.support.gcs import BUCKET, gcs_bucket
from tests.support.serving import committed_serving_checkpoint
from tests.support.view_runs import newest_run_id, seed_history, train_with_one_maintenance

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
TRAINING, NIGHTLY = "pathways_training", "pathways_nightly_inference_benchmark"
USERS = {"viewer": ("viewer", "viewer-pw"), "outsider": ("viewer", "outsider-pw")}
STEADY = {"request_throughput": 20.0, "output_throughput": 160.0, "median_ttft_ms": 500.0, "p99_ttft_ms": 520.0, "median_tpot_ms": 20.0}
SEEDED_NIGHTS = 3


@pytest.fixture(scope="module")
def runs(airflow_env, pathways_cluster, tmp_path_factory) -> dict:
    """One training run with a maintenance, and one regressed nightly benchmark over a seeded history."""
    airflow = airflow_env.with_dags(REPO / "dags")
    base = f"e2e-view-{uuid.uuid4().hex[:6]}"
    training_run, output = train_with_one_maintenance(
        airflow, pathways_cluster, TRAINING,
        {"steps": 60, "step_seconds": "10", "run_name": base, "max_disruptions": 2}, at_step=25,
    )
    assert "ended by MAINTENANCE" in output and "resuming from step" in output, output[-4000:]
    with gcs_bucket(pathways_cluster, BUCKET) as bucket:
        serving = committed_serving_checkpoint(bucket, f"{base}/serving/checkpoints/0")
        seed_history(bucket, f"{base}/benchmarks/history.json", STEADY, SEEDED_NIGHTS)
        conf = {
            "serving_checkpoint": serving["uri"], "benchmark_dir": f"gs://{BUCKET}/{base}/benchmarks",
            "report_dir": str(tmp_path_factory.mktemp("nightly-report")), "num_prompts": 8, "max_output_length": 8,
            "local_ttft_ms": "2000",
        }
        nightly = airflow.dags_test(NIGHTLY, conf, timeout=300)
        assert nightly.states.get("check_regression") == "failed", nightly.output[-4000:]
        history = json.loads(bucket.blob(f"{base}/benchmarks/history.json").download_as_bytes())
    return {"training_run": training_run, "nightly_run": newest_run_id(airflow, NIGHTLY), "history": history}


@pytest.fixture(scope="module")
def server(airflow_env, runs, tmp_path_factory):
    with api_server(airflow_env.env, USERS, denied_dags=[TRAINING, NIGHTLY], workdir=tmp_path_factory.mktemp("api-server")) as running:
        yield running


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    """A browser tab logged in to the Airflow UI as ``viewer``, through the auth manager's login form."""
    executable = chromium_executable()
    if executable is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; scripts/setup-env does it as root): "
                    "the Pathways view's browser tests need a browser")
    with Chromium(executable, tmp_path_factory.mktemp("chromium-profile"), width=1440, height=1180) as browser:
        tab = browser.page()
        tab.navigate(f"{server.url}/")
        tab.wait_for("!!document.querySelector('input[type=password]')", "the login form")
        tab.type_into("input:not([type=password])", "viewer")
        tab.type_into("input[type=password]", USERS["viewer"][1])
        tab.click("button[type=submit]")
        tab.wait_for("document.cookie.includes('_token=') && !location.pathname.startsWith('/auth')", "the login to finish")
        yield tab


def in_view(expression: str) -> str:
    """``expression`` evaluated with ``doc`` bound to the Pathways tab's frame document, once the view has drawn
    (or ``{error}`` with what the frame says, when it could not)."""
    return (
        "(() => { const frame = document.querySelector('iframe'); const doc = frame && frame.contentDocument; "
        "const ready = doc && doc.body && doc.body.getAttribute('data-ready'); "
        "if (ready === 'error') return {error: doc.body.innerText}; "
        f"if (ready !== 'true') return null; return {expression}; }})()"
    )


def artifact(tmp_path: Path, page, name: str) -> Path:
    shot = page.screenshot(tmp_path / name)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {shot}")
    return shot


def test_the_task_instance_view_shows_the_maintenance_its_evidence_and_the_goodput(page, server, runs, tmp_path):
    result = server.request(
        f"/api/v2/dags/{TRAINING}/dagRuns/{runs['training_run']}/taskInstances/train/xcomEntries/return_value",
        token=server.token("viewer"),
    ).body["value"]
    result = result if isinstance(result, dict) else json.loads(result)
    (disruption,) = result["disruptions"]

    page.navigate(f"{server.url}/dags/{TRAINING}/runs/{runs['training_run']}/tasks/train/plugin/pathways-workload")
    seen = page.wait_for(in_view("""({
        items: [...doc.querySelectorAll('li.disruption')].map(li => li.innerText),
        evidence: [...doc.querySelectorAll('li.disruption ul.evidence li')].map(li => li.textContent),
        markers: doc.querySelectorAll('.disruption-marker').length,
        lanes: [...doc.querySelectorAll('.lane-name')].map(t => t.textContent),
        goodput: doc.querySelector('#goodput-figure') && doc.querySelector('#goodput-figure').textContent,
        notes: doc.querySelector('.notes') ? doc.querySelector('.notes').innerText : '',
        title: doc.querySelector('h1').innerText,
        ticks: (() => { const chart = doc.querySelector('svg.timeline'); const box = chart.getBoundingClientRect();
                        return [...chart.querySelectorAll('text.tick')].map(t => { const r = t.getBoundingClientRect();
                                return [r.left - box.left, r.right - box.left, box.width]; }); })(),
        frame: [frame.getBoundingClientRect().height, doc.documentElement.scrollHeight],
        reachable: (() => { for (let a = frame.parentElement; a; a = a.parentElement) {
                              const o = getComputedStyle(a).overflowY;
                              if ((o === 'auto' || o === 'scroll') && a.scrollHeight > a.clientHeight) return true; }
                            return document.scrollingElement.scrollHeight > innerHeight; })(),
        // The axis of a 5-minute run, whose last tick sits at the plot's right edge (its label was cut off there).
        edge: (() => { const V = frame.contentWindow.PathwaysView;
                       return V.tickLabels(V.niceTicks(0, 300, 5), t => 112 + t / 300 * 864, t => t === 0 ? '0' : '+' + V.duration(t), 2, 998, 7); })(),
    })"""), "the workload view to draw", timeout=60)
    artifact(tmp_path, page, "pathways-workload-view.png")

    assert "error" not in seen, seen
    assert len(seen["items"]) == 1 and seen["items"][0].startswith("MAINTENANCE")
    assert "resuming from step" in seen["items"][0]
    assert seen["evidence"] == disruption["evidence"] and seen["evidence"]
    assert result["name"] in seen["title"]
    # The time axis: every label inside the chart (the last was cut off), none running into the next.
    assert len(seen["ticks"]) >= 2 and all(0 <= left and right <= width + 0.5 for left, right, width in seen["ticks"]), seen["ticks"]
    assert all(a[1] <= b[0] for a, b in zip(seen["ticks"], seen["ticks"][1:])), seen["ticks"]
    frame_height, content_height = seen["frame"]
    assert frame_height >= content_height, seen["frame"]  # the tab's frame holds the whole view: no nested scroll
    assert seen["reachable"]  # and the page around it scrolls to all of it
    edge = seen["edge"]
    assert edge[-1]["tick"] == 300 and edge[-1]["anchor"] == "end" and edge[-1]["end"] <= 998, edge
    assert all(2 <= label["start"] and label["end"] <= 998 for label in edge) and all(a["end"] < b["start"] for a, b in zip(edge, edge[1:])), edge
    if "timeline" in result:
        assert seen["markers"] == 1 and len(seen["lanes"]) == 2  # the workload maintenance ended, and its resubmission
    if "goodput" in result:
        assert seen["goodput"] == f"{result['goodput']['goodput'] * 100:.1f}%"
    else:
        assert seen["goodput"] is None and "no goodput split" in seen["notes"]


def test_the_dag_view_draws_every_run_of_the_history_and_marks_the_regression(page, server, runs, tmp_path):
    page.navigate(f"{server.url}/dags/{NIGHTLY}/plugin/pathways-benchmark")
    seen = page.wait_for(in_view("""({
        engine: doc.querySelector('#engine').textContent,
        verdict: doc.querySelector('.verdict') ? doc.querySelector('.verdict').textContent : '',
        points: [...doc.querySelectorAll('figure.panel[data-metric="median_ttft_ms"] circle.point')].map(c => c.getAttribute('data-run-id')),
        regressed: [...doc.querySelectorAll('figure.panel[data-metric="median_ttft_ms"] circle.point.regressed')].map(c => c.getAttribute('data-run-id')),
        bands: doc.querySelectorAll('figure.panel rect.band').length,
        panels: doc.querySelectorAll('figure.panel').length,
    })"""), "the benchmark view to draw", timeout=60)
    artifact(tmp_path, page, "pathways-benchmark-view.png")

    assert "error" not in seen, seen
    history = runs["history"]["runs"]
    assert len(history) == SEEDED_NIGHTS + 1
    assert seen["engine"] == "vllm" and seen["panels"] == 5
    assert seen["points"] == [run["run_id"] for run in history]  # one point per run, in order
    assert seen["regressed"] == [runs["nightly_run"]]
    assert seen["bands"] == 5  # every metric had a baseline tonight
    assert "REGRESSION in" in seen["verdict"] and "median_ttft_ms" in seen["verdict"]
    assert seen["verdict"].startswith(f"Newest run ({runs['nightly_run']}): ")  # tonight's run is the history's newest


def test_a_user_who_cannot_read_the_dag_and_an_anonymous_request_get_no_data(server, runs):
    workload = f"/pathways/api/dags/{TRAINING}/runs/{runs['training_run']}/tasks/train/workload"
    benchmark = f"/pathways/api/dags/{NIGHTLY}/benchmark"
    viewer, outsider = server.token("viewer"), server.token("outsider")

    for path in (workload, benchmark):
        allowed = server.request(path, token=viewer)
        assert allowed.status == 200 and "view" in allowed.body, allowed
        assert server.request(path, cookie=viewer).status == 200  # the browser's session cookie
        for refused in (server.request(path), server.request(path, token=outsider), server.request(path, cookie=outsider)):
            assert refused.status in (401, 403) and set(refused.body) == {"detail"}, refused
    assert server.request(workload).status == 401
    assert server.request(workload, token=outsider).status == 403
    assert server.request(workload, token="not-a-token").status in (401, 403)


def test_the_demo_serves_the_view_over_its_runs_with_the_login_it_prints(airflow_env, runs, tmp_path):
    """``pathways-airflow demo --serve-ui``: Airflow's own api-server and simple auth manager over the
    runs, one admin whose password the demo made and prints; the Pathways tab's data answers."""
    from pathways_airflow_testing.demo import serving_ui
    from tests.support.api_server import ApiServer
    from tests.support.deployment import free_port

    with serving_ui(airflow_env.env, free_port(), tmp_path) as ui:
        welcome = ui.welcome()
        assert f"{ui.url}/dags/pathways_train_convert_infer" in welcome and f"password {ui.password}" in welcome
        served = ApiServer(ui.url, tmp_path / "api-server.log", {ui.user: ui.password})
        answer = served.request(f"/pathways/api/dags/{TRAINING}/runs/{runs['training_run']}/tasks/train/workload", token=served.token(ui.user))
        assert answer.status == 200 and "view" in answer.body, answer
        assert served.request(f"/pathways/api/dags/{TRAINING}/benchmark").status == 401, "no login, no data"
    assert ui.process.poll() is not None, "stopped with the demo"
