"""Ask Airflow for the state of task instances: from inside a task, or from outside through the REST API.

Each answer is ``(found, state)`` (:data:`TaskAnswer`, as :mod:`pathways_airflow.state.janitor` reads it); a task
instance that could not be asked about is left out of the answers, and the janitor keeps its
workload.

* Inside Airflow (the janitor operator): the Task SDK's ``RuntimeTaskInstance.get_task_states``,
  which goes through the task's supervisor to the Execution API (airflow-core
  ``api_fastapi/execution_api/routes/task_instances.py``, ``get_task_instance_states``): no
  credentials, one request per DAG.
* Outside Airflow (``pathways-airflow janitor``): the public REST API, ``GET
  /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}`` and ``.../{map_index}`` for a
  mapped one (airflow-core ``api_fastapi/core_api/routes/public/task_instances.py``), with a bearer
  token (e.g. from ``POST /auth/token`` of the simple auth manager). Its 404 says the task instance,
  or its DAG run, no longer exists.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Iterable, Mapping
from urllib.parse import quote

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from pathways_airflow.exceptions import AirflowApiError
from pathways_airflow.spec.names import TaskIdentity

log = logging.getLogger(__name__)

TaskAnswer = tuple[bool, "str | None"]
"""``(found, state)`` of one task instance."""


# --- was a deferred task killed? (pure) ----------------------------------------------------------
# On Airflow 3.1 and 3.2 a trigger is cancelled the same way whether a user marked its task failed,
# succeeded or cleared it, or the triggerer stopped or handed it on. Only the first must delete the
# workload. The task instance tells them apart: it stays ``deferred`` until something ended the wait.

DEFERRED = "deferred"


def this_task_state(task_states: Mapping[str, Mapping[str, Any]], run_id: str, task_id: str, map_index: int | None) -> tuple[bool, str | None]:
    """``(found, state)`` for one task instance in the Execution API's ``task_states`` answer.

    The answer is ``{run_id: {key: state}}``; the key is the task id, or ``<task_id>_<map_index>``
    for a mapped task instance (Airflow's ``get_task_instance_states`` route).
    """
    key = task_id if map_index is None or map_index < 0 else f"{task_id}_{map_index}"
    run = task_states.get(run_id) or {}
    return (key in run, run.get(key))


def killed_while_deferred(found: bool, state: str | None) -> bool:
    """Whether a cancelled trigger's task was ended by someone (mark failed/success, clear).

    A task instance still ``deferred`` was not killed: the triggerer stopped or handed the
    trigger on. One that cannot be found says nothing either way, so nothing is deleted.
    """
    return found and state != DEFERRED


ROUTER_NOT_FOUND = "Not Found"
"""The detail FastAPI gives for a path no route serves (a wrong base URL), not for a missing task instance."""
TRANSIENT = frozenset({429, 500, 502, 503, 504})
MAX_ATTEMPTS = 5


def states_through_the_task_sdk(identities: Iterable[TaskIdentity]) -> dict[TaskIdentity, TaskAnswer]:
    """From inside a running task: one Execution API request per DAG, through the supervisor."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    by_dag: dict[str, list[TaskIdentity]] = defaultdict(list)
    for identity in identities:
        by_dag[identity.dag_id].append(identity)
    answers: dict[TaskIdentity, TaskAnswer] = {}
    for dag_id, wanted in by_dag.items():
        try:
            states = RuntimeTaskInstance.get_task_states(
                dag_id=dag_id,
                task_ids=sorted({i.task_id for i in wanted}),
                run_ids=sorted({i.run_id for i in wanted}),
            )
        except Exception as error:  # its workloads are kept: asking again next sweep is enough
            log.warning("could not ask Airflow for the task states of DAG %s: %s", dag_id, error)
            continue
        for identity in wanted:
            answers[identity] = this_task_state(states or {}, identity.run_id, identity.task_id, identity.map_index)
    return answers


class AirflowRestStates:
    """Task instance states from Airflow's public REST API (``/api/v2``), with a bearer token.

    The token is sent, never logged or shown in an error.
    """

    def __init__(self, base_url: str, token: str | None, *, timeout: float = 30.0) -> None:
        import httpx

        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def _get(self, path: str) -> Any:
        import httpx

        def transient(error: BaseException) -> bool:
            status = error.response.status_code if isinstance(error, httpx.HTTPStatusError) else None
            return status in TRANSIENT or isinstance(error, httpx.TransportError)

        try:
            for attempt in Retrying(
                retry=retry_if_exception(transient), wait=wait_exponential_jitter(initial=0.5, max=10),
                stop=stop_after_attempt(MAX_ATTEMPTS), reraise=True,
            ):
                with attempt:
                    response = self.client.get(path)
                    if response.status_code in TRANSIENT:
                        response.raise_for_status()
                    return response
        except httpx.HTTPError as error:
            raise AirflowApiError(f"GET {self.base_url}{path} failed {MAX_ATTEMPTS} times; the last time: {error}") from None
        raise AirflowApiError(f"GET {path}: no attempt was made")  # pragma: no cover

    def check_reachable(self) -> str:
        """Airflow's version, or an error saying the URL does not lead to Airflow's REST API."""
        response = self._get("/api/v2/version")
        version = _json(response).get("version") if response.status_code == 200 else None
        if not version:
            raise AirflowApiError(
                f"{self.base_url}/api/v2/version answered HTTP {response.status_code} without Airflow's version: "
                "--airflow-url must be the api-server's base URL (without /api/v2)"
            )
        return str(version)

    def state_of(self, identity: TaskIdentity) -> TaskAnswer | None:
        """``(found, state)``; ``None`` when Airflow refused to say (no permission on that DAG)."""
        path = "/api/v2/dags/{}/dagRuns/{}/taskInstances/{}".format(
            *(quote(part, safe="") for part in (identity.dag_id, identity.run_id, identity.task_id))
        )
        if identity.map_index >= 0:
            path += f"/{identity.map_index}"
        response = self._get(path)
        if response.status_code == 200:
            return (True, _json(response).get("state"))
        detail = str(_json(response).get("detail") or "")
        if response.status_code == 404 and detail and detail != ROUTER_NOT_FOUND:
            return (False, None)
        if response.status_code == 401:
            raise AirflowApiError(
                f"Airflow at {self.base_url} refused the token (HTTP 401): set a valid bearer token in the "
                "environment variable the command names (--token-env)"
            )
        log.warning("Airflow would not tell the state of %s (HTTP %s: %s)", identity, response.status_code, detail[:200])
        return None

    def states(self, identities: Iterable[TaskIdentity]) -> dict[TaskIdentity, TaskAnswer]:
        answers = {identity: self.state_of(identity) for identity in identities}
        return {identity: answer for identity, answer in answers.items() if answer is not None}


def _json(response: Any) -> Mapping[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
