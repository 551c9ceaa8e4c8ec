"""The Pathways view's plugin and app as Airflow loads them: fields Airflow's UI accepts, files in the
package, and no data for a request without Airflow credentials.

The view against a real api-server, its auth manager and a browser is tests/e2e/test_pathways_view.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import pathways_airflow
from pathways_airflow.ui import plugin as ui_plugin

pytestmark = pytest.mark.unit


def test_the_provider_info_and_the_entry_point_name_the_same_plugin_class():
    (listed,) = pathways_airflow.get_provider_info()["plugins"]
    assert listed == {"name": "pathways", "plugin-class": "pathways_airflow.ui.plugin.PathwaysViewPlugin"}
    points = [e for e in entry_points(group="airflow.plugins") if e.name == "pathways"]
    assert [e.value for e in points] == ["pathways_airflow.ui.plugin:PathwaysViewPlugin"]
    assert points[0].load() is ui_plugin.PathwaysViewPlugin


def test_airflow_loads_it_with_its_default_settings(tmp_path):
    """``airflow plugins`` lists it (lazy provider discovery, the default, reads only entry points)."""
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), "plugins", "-o", "json"],
        env={**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    listed = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("[")))
    (ours,) = [p for p in listed if p["name"] == "pathways"]
    assert [v["url_route"] for v in ours["external_views"]] == ["pathways-workload", "pathways-benchmark"]
    assert [a["url_prefix"] for a in ours["fastapi_apps"]] == ["/pathways"]


def test_its_views_are_ones_the_airflow_ui_can_show():
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse, FastAPIAppResponse

    views = [ExternalViewResponse.model_validate(v) for v in ui_plugin.PathwaysViewPlugin.external_views]
    assert [(v.destination, v.url_route) for v in views] == [("task_instance", "pathways-workload"), ("dag", "pathways-benchmark")]
    (app,) = ui_plugin.PathwaysViewPlugin.fastapi_apps
    FastAPIAppResponse.model_validate({**app, "app": type(app["app"]).__name__})
    assert app["url_prefix"] == "/pathways"


def test_the_ids_travel_in_the_path_where_an_unencoded_plus_survives():
    href = ui_plugin.WORKLOAD_VIEW["href"]
    assert href.split("?")[0] == "/pathways/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}"
    assert href.endswith("?map_index={MAP_INDEX}")


def test_every_file_the_pages_load_is_in_the_package():
    from pathways_airflow.ui.app import ASSETS, STATIC

    for page in ("workload.html", "benchmark.html"):
        text = (STATIC / page).read_text()
        loaded = [part.split('"')[0] for part in text.split("{{ROOT}}/static/")[1:]]
        assert loaded and set(loaded) <= set(ASSETS), page
        assert "http://" not in text and "https://" not in text  # nothing from elsewhere
    for name in ASSETS:
        body = (STATIC / name).read_text()
        assert "https://" not in body.replace("http://www.w3.org/2000/svg", ""), name


@pytest.fixture(scope="module")
def client():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from pathways_airflow.ui.app import create_app

    parent = FastAPI()
    parent.mount("/pathways", create_app())
    with TestClient(parent) as test_client:
        yield test_client


def test_the_pages_hold_no_data_and_know_where_they_are_mounted(client):
    page = client.get("/pathways/dags/pw_submit_deferred/runs/manual__2026-11-26T12:00:00+00:00/tasks/train?map_index=-1")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="/pathways/static/view.css"' in page.text and 'data-root="/pathways"' in page.text
    assert client.get("/pathways/dags/nightly/benchmark").status_code == 200
    css = client.get("/pathways/static/view.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert client.get("/pathways/static/app.py").status_code == 404
    assert client.get("/pathways/static/..%2Fapp.py").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/pathways/api/dags/pw_submit_deferred/runs/manual__1/tasks/train/workload",
        "/pathways/api/dags/pathways_nightly_inference_benchmark/benchmark",
    ],
)
def test_a_request_without_airflow_credentials_gets_401_and_no_data(client, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response.json() == {"detail": "Not authenticated"}


def test_the_app_is_built_on_its_first_request_not_when_plugins_load():
    deferred = ui_plugin.DeferredApp(lambda: pytest.fail("built too early"))
    assert deferred._app is None
    assert Path(ui_plugin.__file__).read_text().count("pathways_airflow.ui.app") == 1


def test_xcom_values_are_read_as_the_json_the_operator_returned():
    from pathways_airflow.ui.app import plain

    stored = {"name": "pw", "evidence": {"__classname__": "builtins.tuple", "__version__": 1, "__data__": ["a", "b"]}}
    assert plain(stored) == {"name": "pw", "evidence": ["a", "b"]}
    assert plain('{"state": "SUCCEEDED", "restarts": 0}') == {"state": "SUCCEEDED", "restarts": 0}
    assert plain("gs://bucket/xcom/ref") == "gs://bucket/xcom/ref"  # an object-storage backend's reference stays one
