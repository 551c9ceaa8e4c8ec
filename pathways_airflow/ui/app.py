"""The Pathways view's FastAPI app: the pages, and the JSON they draw. The imperative shell.

Mounted by Airflow's api-server under ``/pathways`` (see :mod:`pathways_airflow.ui.plugin`).
Each endpoint fetches what a view needs — a task's XCom and rendered fields from Airflow's
database, the benchmark history from GCS — and asks :mod:`pathways_airflow.ui.view_model` what
to draw. Nothing is decided here.

Auth is Airflow's own: every data endpoint depends on the api-server's ``requires_access_dag``
for reading the DAG's XComs (the data *is* XCom, or named by it), with the DAG id from the path,
so the configured auth manager decides, per DAG, exactly as for ``/api/v2/.../xcomEntries``. A
request without a valid token gets 401 (403 for a bad one), a user who may not read the DAG 403,
and neither reaches the database. The pages themselves hold no data: they are static files that
call the endpoints with the browser's Airflow session cookie.

The page is served from files in the wheel (``static/``); it loads nothing from elsewhere, so
the view works on an air-gapped deployment.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select

from pathways_airflow.benchmark_history import DEFAULT_MIN_RUNS, DEFAULT_WINDOW, History, history_from
from pathways_airflow.checkpoints import is_gcs
from pathways_airflow.ui.benchmark_view import benchmark_view
from pathways_airflow.ui.view_model import to_json, workload_view

STATIC = Path(__file__).with_name("static")
ASSETS = {
    "view.css": "text/css; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "workload.js": "text/javascript; charset=utf-8",
    "benchmark.js": "text/javascript; charset=utf-8",
}
"""The only files served: a request can never name a path of its own choosing."""
RESULT_KEY = "return_value"
SCANNED_RESULTS = 200
"""Newest XComs of a DAG looked at for the regression gate's result."""
HISTORY_READ_SECONDS = 20.0
"""How long one page load waits out a GCS outage before saying the history cannot be read."""
GCP_CONN_OPTION = ("pathways", "ui_gcp_conn_id")
"""``[pathways] ui_gcp_conn_id``: the Google connection the api-server reads histories with."""
NO_STORE = {"Cache-Control": "no-store"}


def _page(name: str, request: Request) -> HTMLResponse:
    """A page, with the URL root it is mounted under (a base_url's subpath included) filled in."""
    root = html.escape(request.scope.get("root_path", "").rstrip("/"), quote=True)
    text = (STATIC / name).read_text(encoding="utf-8").replace("{{ROOT}}", root)
    return HTMLResponse(text, headers=NO_STORE)


def _json(body: Any) -> Response:
    return Response(json.dumps(to_json(body), allow_nan=False), media_type="application/json", headers=NO_STORE)


def plain(value: Any) -> Any:
    """An XCom value as JSON types: decoded if stored as text, tuples and sets as the lists they were."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        if value.get("__classname__") in ("builtins.tuple", "builtins.set", "builtins.frozenset"):
            return [plain(v) for v in value.get("__data__") or ()]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


# --- fetching ------------------------------------------------------------------------------------


def task_result(session: Any, dag_id: str, run_id: str, task_id: str, map_index: int) -> Any | None:
    """The task instance's ``return_value`` XCom, or ``None`` when it pushed none."""
    from airflow.models.xcom import XComModel

    query = select(XComModel).where(
        XComModel.dag_id == dag_id,
        XComModel.run_id == run_id,
        XComModel.task_id == task_id,
        XComModel.map_index == map_index,
        XComModel.key == RESULT_KEY,
    )
    found = session.scalars(query.limit(1)).first()
    return None if found is None else plain(found.value)


def newest_gate_result(session: Any, dag_id: str, run_id: str | None) -> tuple[Any, dict[str, Any]] | None:
    """The newest regression gate's XCom in the DAG (in ``run_id`` if given): its row and value.

    A gate's result is told by its shape (``history_uri`` and ``rows``), so a gate under any
    task id, or several in one DAG, is found without reading the DAG's code.
    """
    from airflow.models.xcom import XComModel

    query = select(XComModel).where(XComModel.dag_id == dag_id, XComModel.key == RESULT_KEY)
    if run_id:
        query = query.where(XComModel.run_id == run_id)
    for row in session.scalars(query.order_by(XComModel.timestamp.desc()).limit(SCANNED_RESULTS)):
        value = plain(row.value)
        if isinstance(value, dict) and isinstance(value.get("history_uri"), str) and isinstance(value.get("rows"), list):
            return row, value
    return None


def _count(value: Any, default: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        return default
    return number if number >= 1 else default


def gate_counts(session: Any, row: Any) -> tuple[int, int]:
    """The ``window`` and ``min_runs`` the gate ran with, from its rendered fields; the defaults otherwise."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered

    query = select(Rendered.rendered_fields).where(
        Rendered.dag_id == row.dag_id,
        Rendered.run_id == row.run_id,
        Rendered.task_id == row.task_id,
        Rendered.map_index == row.map_index,
    )
    fields = plain(session.scalars(query.limit(1)).first()) or {}
    if not isinstance(fields, dict):
        fields = {}
    return _count(fields.get("window"), DEFAULT_WINDOW), _count(fields.get("min_runs"), DEFAULT_MIN_RUNS)


def read_history(uri: str) -> History:
    """The benchmark history at ``uri`` (empty when it does not exist yet), or an HTTP error saying why not."""
    from airflow.configuration import conf

    from pathways_airflow.hooks.storage import opened_storage, read_object

    if not is_gcs(uri):
        raise HTTPException(422, f"history_uri {uri!r} is not a gs:// URI; the view reads histories from GCS only")
    conn_id = conf.get(*GCP_CONN_OPTION, fallback="google_cloud_default")
    try:
        with opened_storage(conn_id) as client:
            data = read_object(client, uri, deadline=time.time() + HISTORY_READ_SECONDS)
    except Exception as error:
        raise HTTPException(502, f"cannot read {uri} with the connection {conn_id!r}: {error}") from None
    try:
        return history_from(None if data is None else json.loads(data))
    except ValueError as error:
        raise HTTPException(502, f"{uri} is not a benchmark history this view can read: {error}") from None


# --- the app -------------------------------------------------------------------------------------


def create_app() -> FastAPI:
    """The view's app: two pages, their assets, and two JSON endpoints behind Airflow's auth."""
    app = FastAPI(title="Pathways view", docs_url=None, redoc_url=None, openapi_url=None)
    may_read_xcom = [Depends(requires_access_dag("GET", DagAccessEntity.XCOM))]

    @app.get("/static/{name}")
    def asset(name: str) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, "no such file")
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers={"Cache-Control": "max-age=300"})

    @app.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}", response_class=HTMLResponse)
    def workload_page(request: Request, dag_id: str, run_id: str, task_id: str) -> HTMLResponse:
        return _page("workload.html", request)

    @app.get("/dags/{dag_id}/benchmark", response_class=HTMLResponse)
    def benchmark_page(request: Request, dag_id: str) -> HTMLResponse:
        return _page("benchmark.html", request)

    @app.get("/api/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/workload", dependencies=may_read_xcom)
    def workload_data(dag_id: str, run_id: str, task_id: str, session: SessionDep, map_index: str = "-1") -> Response:
        index = int(map_index) if map_index.lstrip("-").isdigit() else -1
        result = task_result(session, dag_id, run_id, task_id, index)
        if result is None:
            raise HTTPException(404, f"{task_id} in {run_id} has recorded no result (it has not succeeded yet, or returns none)")
        return _json({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": index, "view": workload_view(result)})

    @app.get("/api/dags/{dag_id}/benchmark", dependencies=may_read_xcom)
    def benchmark_data(dag_id: str, session: SessionDep, engine: str | None = None, run_id: str | None = None) -> Response:
        found = newest_gate_result(session, dag_id, run_id)
        if found is None:
            where = f"run {run_id} of {dag_id}" if run_id else dag_id
            raise HTTPException(404, f"no BenchmarkRegressionOperator result in {where} yet: nothing names a history to show")
        row, result = found
        window, min_runs = gate_counts(session, row)
        history = read_history(result["history_uri"])
        view = benchmark_view(history, result, latest_run_id=row.run_id, engine=engine, window=window, min_runs=min_runs)
        return _json({"dag_id": dag_id, "run_id": row.run_id, "task_id": row.task_id, "view": view})

    return app


__all__ = ["create_app", "gate_counts", "newest_gate_result", "plain", "read_history", "task_result"]
