"""A real Airflow deployment for the e2e tests: api-server, scheduler, dag-processor, triggerer.

Each component is its own process (its own session and process group, its log in a file), all
sharing one temporary ``AIRFLOW_HOME`` configured only through ``AIRFLOW__*`` environment
variables: LocalExecutor on SQLite (Airflow 3 accepts that pair: workers talk to the api-server's
execution API, not to the database) or on a given database URL (PostgreSQL, for more than one
triggerer), the Simple auth manager with every caller an admin, and short heartbeat and health
thresholds so that a killed component is noticed in seconds.

The harness can kill any component with SIGKILL (the whole process tree, as when a pod or a
machine dies) and start it again, find a running task's processes, and drive Airflow through its
public REST API (``/api/v2``): unpause, trigger, read task instances and their logs, mark a task
instance failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from tests.support.airflow_cli import AIRFLOW

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
JOB_TYPES = {"scheduler": "SchedulerJob", "triggerer": "TriggererJob", "dag-processor": "DagProcessorJob"}


def command_of(name: str) -> str:
    """The Airflow command a component runs: ``triggerer.2`` is a second ``airflow triggerer``."""
    return name.partition(".")[0]

T = TypeVar("T")


class DeploymentError(AssertionError):
    """The deployment did not do what a test waited for; the message says what was seen."""


def wait_until(what: str, check: Callable[[], T], timeout: float, interval: float = 0.25) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except (OSError, urllib.error.URLError, DeploymentError, json.JSONDecodeError) as error:
            last = error
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise DeploymentError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- processes -------------------------------------------------------------------------------------


def _parent_pids() -> dict[int, int]:
    """pid → parent pid for every process now (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants alive now."""
    parents = _parent_pids()
    tree, frontier = [root], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        tree.extend(children)
        frontier = children
    return tree


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def parent_of(pid: int) -> int | None:
    return _parent_pids().get(pid)


def is_running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_tree(pids: list[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class Component:
    """One running Airflow component: its process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    started: float = field(default_factory=time.time)

    @property
    def pid(self) -> int:
        return self.process.pid


class AirflowDeployment:
    """Airflow 3 as separate processes in a temporary ``AIRFLOW_HOME`` (see the module docstring)."""

    def __init__(
        self,
        home: Path,
        dag_files: list[Path],
        env: Mapping[str, str] | None = None,
        *,
        port: int | None = None,
        database_url: str | None = None,
        arguments: Mapping[str, list[str]] | None = None,
    ):
        self.home = Path(home)
        self.dags = self.home / "dags"
        self.logs = self.home / "component-logs"
        self.dags.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        for dag_file in dag_files:
            shutil.copy(dag_file, self.dags / Path(dag_file).name)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url or f"sqlite:///{self.home / 'airflow.db'}"
        self.env = {**os.environ, **self.settings(), **(env or {})}
        self.arguments = dict(arguments or {})
        """Command-line arguments per component name (``{"triggerer": ["--capacity", "12"]}``)."""
        self.components: dict[str, Component] = {}
        self._generations: dict[str, int] = {}

    def settings(self) -> dict[str, str]:
        """The whole configuration, as environment variables."""
        return {
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__FERNET_KEY": "",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url,
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "pathways-airflow-e2e-deployment-" + "0123456789abcdef" * 3,
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # The log servers of the scheduler's workers and of the triggerer, off the default ports.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            # Parse once, quickly; nothing changes under the DAG folder during a test.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            # Notice a dead component or a silent task in seconds, not minutes.
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "10",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
        }

    # --- lifecycle -----------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def migrate(self) -> None:
        result = self.airflow("db", "migrate", timeout=600)
        if result.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed:\n{(result.stdout + result.stderr)[-4000:]}")

    def start(self, name: str) -> Component:
        """Start one component in its own session (so that it and its children can be killed as one).

        ``name`` is a component (``triggerer``) or a further instance of one (``triggerer.2``)."""
        assert command_of(name) in COMPONENTS, name
        running = self.components.get(name)
        if running is not None and running.process.poll() is None:
            raise DeploymentError(f"{name} is already running (pid {running.pid})")
        generation = self._generations.get(name, 0) + 1
        self._generations[name] = generation
        log = self.logs / f"{name}-{generation}.log"
        env = self.env
        if name != command_of(name):
            # A further instance serves its own logs: two triggerers cannot share one port.
            env = {**env, "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [AIRFLOW, command_of(name), *self.arguments.get(name, [])], env=env, cwd=self.home, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        component = Component(name, process, log)
        self.components[name] = component
        return component

    @contextlib.contextmanager
    def serving(self, dag_id: str, timeout: float = 150) -> Iterator["AirflowDeployment"]:
        """Migrated, every component up, ``dag_id`` parsed and unpaused; every component's log
        tail printed if anything in the block fails; everything stopped afterwards."""
        try:
            self.migrate()
            self.start_all(timeout=timeout)
            self.wait_for_dag(dag_id)
            self.unpause(dag_id)
            yield self
        except BaseException:
            print(self.log_tails())
            raise
        finally:
            self.stop_all()

    def start_all(self, timeout: float = 120) -> None:
        """Every component, then wait until all are healthy."""
        for name in COMPONENTS:
            self.start(name)
        self.wait_healthy(timeout=timeout)

    def wait_healthy(self, timeout: float = 120) -> dict[str, Any]:
        """The api-server answers and every other component has a live job with a fresh heartbeat."""

        def healthy() -> dict[str, Any] | None:
            self._check_alive()
            health = self.get("/api/v2/monitor/health")
            ok = all((health.get(part) or {}).get("status") == "healthy" for part in ("metadatabase", "scheduler", "triggerer", "dag_processor"))
            return health if ok else None

        return wait_until("all components healthy (/api/v2/monitor/health)", healthy, timeout, interval=0.5)

    def kill(self, name: str) -> list[int]:
        """SIGKILL the component and every process under it, at once; returns the pids killed."""
        component = self.components[name]
        pids = process_tree(component.pid)
        kill_tree(pids)
        component.process.wait(timeout=30)
        wait_until(f"{name}'s processes gone", lambda: not any(is_running(p) for p in pids), 30)
        return pids

    def restart(self, name: str) -> Component:
        if self.components.get(name) and self.components[name].process.poll() is None:
            self.kill(name)
        return self.start(name)

    def stop_all(self, grace: float = 5) -> None:
        """SIGTERM every component (its whole tree), then SIGKILL what is left."""
        trees = {name: process_tree(c.pid) for name, c in self.components.items() if c.process.poll() is None}
        for pids in trees.values():
            kill_tree(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(is_running(p) for pids in trees.values() for p in pids):
            time.sleep(0.2)
        for pids in trees.values():
            kill_tree(pids, signal.SIGKILL)
        for component in self.components.values():
            try:
                component.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _check_alive(self) -> None:
        dead = {n: c.process.returncode for n, c in self.components.items() if c.process.poll() is not None}
        if dead:
            raise DeploymentError(f"component(s) exited: {dead}")

    def log_tails(self, lines: int = 40) -> str:
        """The end of every component's log, for a failing test's report."""
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()
            parts.append(f"----- {log.name} (last {min(lines, len(text))} of {len(text)} lines) -----")
            parts.extend(text[-lines:])
        return "\n".join(parts)

    # --- jobs ----------------------------------------------------------------------------------

    def live_jobs(self, name: str) -> list[dict[str, Any]]:
        """The component's jobs that are running with a fresh heartbeat, newest first."""
        query = {"job_type": JOB_TYPES[name], "job_state": "running", "is_alive": "true", "order_by": "-id"}
        return self.get("/api/v2/jobs", **query)["jobs"]

    def wait_for_new_job(self, name: str, after_id: int, timeout: float = 60) -> dict[str, Any]:
        """A live job of the component newer than ``after_id`` (a restarted component is up)."""
        return wait_until(
            f"a new live {JOB_TYPES[name]} (id > {after_id})",
            lambda: next((j for j in self.live_jobs(name) if j["id"] > after_id), None),
            timeout,
        )

    # --- REST API ------------------------------------------------------------------------------

    def token(self) -> str:
        """A bearer token from the Simple auth manager's all-admins login (``GET /auth/token``):
        Airflow 3.1 asks for one on every REST call even with all callers admins."""
        if not getattr(self, "_token", None):
            with urllib.request.urlopen(self.url + "/auth/token", timeout=30) as response:
                self._token = json.loads(response.read())["access_token"]
        return self._token

    def request(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        url = self.url + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {self.token()}"}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise DeploymentError(f"{method} {path} → {error.code}: {error.read().decode(errors='replace')[:2000]}") from None
        return json.loads(payload) if payload and payload[:1] in (b"{", b"[") else payload.decode(errors="replace")

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, **query)

    def wait_for_dag(self, dag_id: str, timeout: float = 90) -> dict[str, Any]:
        def parsed() -> dict[str, Any] | None:
            try:
                return self.get(f"/api/v2/dags/{dag_id}")
            except DeploymentError as error:
                if "→ 404" in str(error):
                    return None
                raise

        return wait_until(f"DAG {dag_id} parsed", parsed, timeout, interval=0.5)

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None) -> str:
        """A new DAG run. The deployment's SQLite lets one writer in at a time: a run created while
        the last scenario's task still writes its XComs may answer 500 ("Database error", the
        database locked past its busy timeout), and is asked for again; with its ``run_id`` a
        second ask cannot make a second run (409: the first one went through)."""
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if run_id:
            body["dag_run_id"] = run_id
        asked = 0
        while True:
            try:
                return str(self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)["dag_run_id"])
            except DeploymentError as error:
                if run_id and asked and "→ 409" in str(error):
                    return run_id
                locked = "→ 500" in str(error) and "Database error" in str(error)
                asked += 1
                if not (run_id and locked) or asked == 5:
                    raise
            time.sleep(1)

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}")

    def wait_for_task_state(self, dag_id: str, run_id: str, task_id: str, states: set[str], timeout: float) -> dict[str, Any]:
        return wait_until(
            f"{dag_id}.{task_id} in {sorted(states)}",
            lambda: (lambda ti: ti if ti.get("state") in states else None)(self.task_instance(dag_id, run_id, task_id)),
            timeout,
        )

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> Any:
        """What a user does with "Mark failed" / "Mark success" in the UI."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}"
        return self.request("PATCH", path, {"new_state": state})

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The task's log of one try, as plain text (the lines' events)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}"
        payload = self.get(path, full_content="true")
        content = payload.get("content") if isinstance(payload, dict) else payload
        if isinstance(content, list):
            return "\n".join(str(line.get("event", line)) if isinstance(line, dict) else str(line) for line in content)
        return str(content)

    # --- task processes --------------------------------------------------------------------------

    def task_processes(self, ti_id: str) -> tuple[int, int] | None:
        """(task process, its supervisor) of a running task instance, found by the process title.

        The LocalExecutor's worker process supervises the task; the task process it forks names
        itself ``airflow worker -- <task instance id>``.
        """
        title = f"airflow worker -- {ti_id}"
        for pid in process_tree(self.components["scheduler"].pid):
            if command_line(pid) == title and is_running(pid):
                parent = parent_of(pid)
                if parent is not None:
                    return pid, parent
        return None
