"""The Airflow plugin that puts the Pathways view in the Airflow UI (Airflow 3.1+).

The provider lists it under ``plugins`` in its provider info, so installing ``pathways-airflow``
is all it takes: the api-server mounts the view's FastAPI app under ``/pathways`` and the UI adds
two tabs that show it in a frame:

* **Pathways** on every task instance (destination ``task_instance``): the workload timeline
  and goodput of a ``PathwaysJobOperator`` task; other tasks say they are not one.
* **Benchmark history** on every DAG (destination ``dag``): the nightly benchmark's metric
  history, for DAGs with a ``BenchmarkRegressionOperator``.

Airflow 3.1 and 3.3 fill ``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and ``{MAP_INDEX}`` in an
external view's ``href`` from the page it is shown on; 3.1 does not URL-encode them, so the ids
travel in the path (where a run id's ``+`` stays a ``+``), and the map index, absent on an
unmapped task's page, in the query.

Importing this module is cheap: every Airflow process that loads plugins imports it, and only
the api-server serves the app, which is built on its first request (:class:`DeferredApp`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.providers.common.compat.sdk import AirflowPlugin

URL_PREFIX = "/pathways"
PLUGIN_NAME = "pathways"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class DeferredApp:
    """An ASGI app that builds the view's FastAPI app when the first request reaches it.

    The FastAPI app depends on the api-server's security and database modules; a scheduler or a
    worker that loads plugins never serves it and should not pay for importing them.
    """

    def __init__(self, build: Callable[[], Callable[[Scope, Receive, Send], Awaitable[None]]]) -> None:
        self._build = build
        self._app: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = self._build()
        await self._app(scope, receive, send)


def _build_app() -> Any:
    from pathways_airflow.ui.app import create_app

    return create_app()


WORKLOAD_VIEW = {
    "name": "Pathways",
    "href": f"{URL_PREFIX}/dags/{{DAG_ID}}/runs/{{RUN_ID}}/tasks/{{TASK_ID}}?map_index={{MAP_INDEX}}",
    "destination": "task_instance",
    "url_route": "pathways-workload",
}
BENCHMARK_VIEW = {
    "name": "Benchmark history",
    "href": f"{URL_PREFIX}/dags/{{DAG_ID}}/benchmark",
    "destination": "dag",
    "url_route": "pathways-benchmark",
}


class PathwaysViewPlugin(AirflowPlugin):
    """The Pathways view: its FastAPI app and the two tabs that frame it."""

    name = PLUGIN_NAME
    fastapi_apps = [{"app": DeferredApp(_build_app), "url_prefix": URL_PREFIX, "name": "Pathways view"}]
    external_views = [WORKLOAD_VIEW, BENCHMARK_VIEW]


__all__ = ["BENCHMARK_VIEW", "PLUGIN_NAME", "URL_PREFIX", "WORKLOAD_VIEW", "DeferredApp", "PathwaysViewPlugin"]
