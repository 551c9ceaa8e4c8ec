"""``pathways-airflow demo``: the train → convert → infer pipeline on a local cluster, with real Airflow.

What it shows, with no cloud account: the ``pathways_train_convert_infer`` DAG run by
``airflow dags test`` (a temporary ``AIRFLOW_HOME`` with SQLite) against the local GKE cluster
with TPU slices and the GCS emulator (:mod:`pathways_airflow_testing`). GKE has announced host
maintenance on an idle TPU slice inside the training's expected duration: the training task
starts it now (``maintenance_window="start_now"``) and submits once it is over. Midway through training
it puts one of the training slices into host maintenance; the training task resubmits the
workload and resumes from the newest committed checkpoint instead of step 0. Then the final
checkpoint is converted, served with vLLM and benchmarked, and the benchmark is added to
its history with a report and a plot.

Progress is printed as it happens (the pipeline's own log lines, one per state change); the end
is a summary: stage timeline, disruptions, checkpoint steps, the serving checkpoint, benchmark
metrics, the report and plot, and what is left in the cluster (nothing).

The summary is built by pure functions (:func:`summary_lines` and friends) from what the run
left behind: task instances, XComs, the checkpoint listing and the cluster's objects.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pathways_airflow.checkpoints import committed_steps_in_listing, gcs_object_prefix, split_gcs_uri
from pathways_airflow_testing.lineage_events import chain, completed_tasks, file_transport, read_events

DAG_ID = "pathways_train_convert_infer"
STAGES = ("slices_ready", "train", "convert", "benchmark", "check_regression")
NIGHTLY_DAG_ID = "pathways_nightly_inference_benchmark"
LINEAGE_FILE = "lineage.jsonl"
"""The OpenLineage events of the runs (file transport), where the provider is installed."""
LINEAGE_ORDER = ("train", "convert", "benchmark", "check_regression")
NIGHTLY_STAGES = ("newest_serving_checkpoint", "benchmark", "check_regression")
BUCKET = "pathways-demo"
RUN_NAME = "llama-demo"
ANNOUNCED_POOL = "tpu-v5e-2x4-2"
"""The idle slice GKE announces maintenance on before the training (the demo cluster has three v5e 2x4 slices)."""
WATCHED_KINDS = (
    ("pathways-job.pathways.domain/v1", "PathwaysJob"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
)
SHOWN_METRICS = (
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
)
_LOG_LINE = re.compile(r"^\S+Z \[(?P<level>\w+)\s*\] (?P<message>.*?)\s+\[(?P<logger>[\w.]+)\](?P<fields>(?: .*)?)$")
_SKIP_REASON = re.compile(r'reason="(?P<reason>.*)"')
_DAG_TEST = re.compile(r"\[DAG TEST\] (?P<what>starting|end task) task_id=(?P<task>\S+)")
_STEP = re.compile(r"completed step: (\d+),")


# --- the pure part: what to show ----------------------------------------------------------------


def progress_line(raw: str) -> str | None:
    """The part of an ``airflow dags test`` output line worth showing live, or ``None``.

    Shown: the stage boundaries, every log line of this provider (state changes, disruptions,
    resubmissions, conversion and benchmark steps), and warnings or errors from anywhere.
    """
    started = _DAG_TEST.search(raw)
    if started:
        return f"[{started['task']}] {'started' if started['what'] == 'starting' else 'finished'}"
    parsed = _LOG_LINE.match(raw.rstrip())
    if not parsed:
        return None
    level, message, logger = parsed["level"], parsed["message"], parsed["logger"]
    if message.startswith("Skipping task"):
        reason = _SKIP_REASON.search(parsed["fields"])
        return f"  skipped: {reason['reason'] if reason else message}"
    if "pathways_airflow" in logger:
        return f"  {message}" if level in ("info", "debug") else f"  {level.upper()}: {message}"
    if level in ("error", "critical") and "dag_processing" not in logger:
        return f"  {level.upper()}: {message}"
    return None


@dataclass(frozen=True)
class StageTime:
    task_id: str
    state: str
    seconds: float | None


def stage_times(task_instances: Iterable[Mapping[str, Any]], stages: Sequence[str] = STAGES) -> list[StageTime]:
    """Each stage's state and duration, in pipeline order, from ``tasks states-for-dag-run -o json``."""
    by_task = {t["task_id"]: t for t in task_instances}
    times = []
    for task_id in stages:
        row = by_task.get(task_id, {})
        start, end = _parse_time(row.get("start_date")), _parse_time(row.get("end_date"))
        seconds = (end - start).total_seconds() if start and end else None
        times.append(StageTime(task_id, row.get("state") or "not run", seconds))
    return times


def _parse_time(value: Any) -> dt.datetime | None:
    if not value or value == "None":
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def summary_lines(
    *,
    stages: Sequence[StageTime],
    results: Mapping[str, Any],
    committed_steps: Sequence[int],
    leftovers: Sequence[str],
    maintenance: str | None,
    nightly: Sequence[Mapping[str, Any]] = (),
    lineage: Sequence[str] = (),
    speed: float = 1.0,
) -> list[str]:
    """The closing summary, from what the runs left behind.

    ``results`` are the pipeline's task XComs; ``nightly`` the ``check_regression`` XComs of the
    nightly benchmark runs that followed it (``{}`` for a run that did not get that far);
    ``lineage`` the chain its OpenLineage events form (:func:`~pathways_airflow_testing.lineage_events.chain`).
    """
    lines = ["", "── summary " + "─" * 60, "stage timeline:"]
    for stage in stages:
        took = f"{stage.seconds:6.1f} s" if stage.seconds is not None else "      -"
        lines.append(f"  {stage.task_id:<18} {stage.state:<10} {took}")
    train = results.get("train") or {}
    lines.append("disruptions:")
    if maintenance:
        lines.append(f"  injected: {maintenance}")
    for record in train.get("disruptions") or []:
        lines.append(
            f"  {record.get('kind')}: workload {record.get('workload', '?')} stopped at step "
            f"{record.get('reached_step')}, resubmitted resuming from step {record.get('resumed_from_step')} "
            f"({record.get('steps_recomputed')} steps recomputed)"
        )
    lines.append(f"  {train.get('disruption_summary') or 'no record (the training task did not finish)'}")
    before = maintenance_before_line(train.get("maintenance"))
    if before:
        lines.append(before)
    if train.get("goodput_summary"):
        lines.append(f"training chip time: {train['goodput_summary']}")
        if speed != 1.0:
            lines.append(
                f"  (real seconds: the local cluster runs its programs {speed:g}× faster than the step times they log, "
                "so the chips are held a fraction of the simulated run; on GKE both are one clock)"
            )
    steps = sorted(committed_steps)
    lines.append(f"checkpoint steps committed: {_step_ranges(steps) or 'none'}")
    final = train.get("checkpoint") or {}
    if final:
        lines.append(f"final training checkpoint: step {final.get('step')} at {final.get('uri')}")
    converted = results.get("convert") or {}
    if converted:
        source = converted.get("source") or {}
        lines.append(f"serving checkpoint: {converted.get('items_uri')} (from step {source.get('step')})")
    metrics = results.get("benchmark") or {}
    if metrics:
        lines.append("benchmark metrics:")
        for key in SHOWN_METRICS:
            if key in metrics:
                lines.append(f"  {key:<20} {metrics[key]:10.2f}")
    checks = [("pipeline", results.get("check_regression") or {})]
    checks += [(f"nightly run {n}", check) for n, check in enumerate(nightly, 1)]
    for label, check in checks:  # each run's own report (a run never overwrites another's)
        report = f"\n    report: {check['report_uri']}" if check.get("report_uri") else ""
        lines.append(f"regression check ({label}): {_verdict(check)}{report}")
    last = next((check for _, check in reversed(checks) if check.get("report_uri")), {})
    if last:
        lines.append(f"benchmark history: {last.get('runs_in_history')} runs in {last.get('history_uri')}")
        lines.append(f"plot of the history: {last.get('plot_uri')}")
    if lineage:
        lines.append("lineage (OpenLineage events): " + " → ".join(lineage))
    lines.append("left in the cluster: " + (", ".join(leftovers) if leftovers else "nothing"))
    return lines


def maintenance_before_line(record: Mapping[str, Any] | None) -> str | None:
    """What the training did about maintenance announced inside it (its result's ``maintenance``)."""
    if not record or not record.get("announced"):
        return None
    announced = ", ".join(f"{pool} in {seconds / 3600:.1f} h" for pool, seconds in record["announced"].items())
    if record.get("started_on"):
        done = f"started it on {len(record['started_on'])} idle nodes, waited {record.get('waited_seconds', 0):.0f} s, then submitted"
    elif record.get("waited_for"):
        done = f"waited {record.get('waited_seconds', 0):.0f} s for it, then submitted"
    else:
        done = "submitted anyway"
    return f"maintenance announced before training: {announced}; {done} (maintenance_window={record.get('policy')!r})"


def _verdict(check: Mapping[str, Any]) -> str:
    if not check:
        return "did not run"
    if check.get("regressed"):
        return "REGRESSION in " + ", ".join(check.get("regressions") or [])
    compared = [r for r in check.get("rows") or [] if r.get("baseline") is not None]
    if not compared:
        return "no regression (no baseline yet: this run starts the history)"
    worst = max(compared, key=lambda r: _worsening(r))
    return f"no regression (closest to its threshold: {worst['metric']} {worst['change_pct']:+.1f}%, threshold {worst['threshold_pct']:g}%)"


def _worsening(row: Mapping[str, Any]) -> float:
    change = row.get("change_pct") or 0.0
    return change if row.get("better") == "lower" else -change


def _step_ranges(steps: Sequence[int]) -> str:
    """``0, 10, 20 … 50`` reads better than a long list; a short one is shown whole."""
    if len(steps) <= 8:
        return ", ".join(map(str, steps))
    return f"{', '.join(map(str, steps[:3]))} … {', '.join(map(str, steps[-2:]))} ({len(steps)} steps)"


# --- the imperative shell -------------------------------------------------------------------------


def demo_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the train → convert → infer pipeline with Airflow on a local cluster",
        description=(
            "Start the local GKE cluster with TPU slices and its GCS emulator, run the "
            f"{DAG_ID} DAG with `airflow dags test`, put a training slice into host maintenance "
            "midway, and print a summary."
        ),
    )
    parser.add_argument("--dags", default="dags", help="the DAGs folder (default: ./dags)")
    parser.add_argument("--out", default="demo-output", help="where the report, plot and logs go")
    parser.add_argument("--crds", action="append", metavar="PATH", help="CRD YAML file or directory (schema checks)")
    parser.add_argument("--steps", type=int, default=60, help="training steps")
    parser.add_argument("--maintenance-at", type=int, default=25, help="step at which a slice goes into maintenance (0: none)")
    parser.add_argument("--speed", type=float, default=60.0, help="simulated seconds per real second")
    parser.add_argument(
        "--nightly-runs", type=int, default=1,
        help=f"then run {NIGHTLY_DAG_ID} this many times on the published serving checkpoint",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="give up on a DAG run after this many seconds")
    parser.add_argument(
        "--serve-ui", type=int, nargs="?", const=8080, default=None, metavar="PORT",
        help="then keep the cluster, the GCS emulator and the runs, and serve the Airflow UI with the Pathways view "
        "on PORT (default 8080) until Ctrl-C; it prints the login",
    )
    parser.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from pathways_airflow_testing import LocalCluster

    dags = Path(args.dags).resolve()
    if not (dags / f"{DAG_ID}.py").exists():
        print(f"pathways-airflow demo: {dags} has no {DAG_ID}.py; pass --dags <the repo's dags/ folder>", file=sys.stderr)
        return 2
    if args.maintenance_at >= args.steps:
        print(f"pathways-airflow demo: --maintenance-at ({args.maintenance_at}) must be below --steps ({args.steps})", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    (out / "report").mkdir(parents=True)
    crds = args.crds or _default_crds()
    began = time.monotonic()
    say = _Printer(began)
    say(f"starting the local cluster (TPU node pools, Pathways, JobSet, Kueue, LWS controllers; GCS emulator){' with CRD schema checks' if crds else ''}")
    with LocalCluster(crds=crds, speed=args.speed) as cluster, tempfile.TemporaryDirectory(prefix="pathways-demo-airflow-") as home:
        env = _airflow_env(cluster, home, dags, out / LINEAGE_FILE)
        say("creating the Airflow metadata database (SQLite, temporary AIRFLOW_HOME)")
        migrated = _airflow(env, "db", "migrate", timeout=600)
        if migrated.returncode != 0:
            print(migrated.stdout[-2000:] + migrated.stderr[-3000:], file=sys.stderr)
            return 1
        conf = {
            "bucket": BUCKET,
            "run_name": RUN_NAME,
            "steps": args.steps,
            "checkpoint_period": 5,
            "local_step_seconds": "10",
            "report_dir": str(out / "report" / "pipeline"),
            "maintenance_window": "start_now",
        }
        say(f">>> GKE announces host maintenance on idle TPU node pool {ANNOUNCED_POOL}, due inside the training's expected 12 h")
        cluster.maintenance(ANNOUNCED_POOL, notice=3 * 3600, duration=300, wait=False)
        injector = _MaintenanceInjector(cluster, args.maintenance_at, say) if args.maintenance_at else None
        returncode = _run_dag(env, DAG_ID, conf, out / "airflow.log", say, injector, timeout=args.timeout)
        results, task_instances = _dag_run_results(env, DAG_ID)
        stages = stage_times(task_instances)
        succeeded = returncode == 0 and all(stage.state == "success" for stage in stages)
        nightly: list[dict[str, Any]] = []
        for night in range(1, args.nightly_runs + 1 if succeeded else 1):
            say(f"night {night}: the nightly benchmark of the newest serving checkpoint (from the asset event)")
            code = _run_dag(env, NIGHTLY_DAG_ID, {"report_dir": str(out / "report" / f"nightly-{night}")}, out / f"airflow-nightly-{night}.log", say, None, timeout=args.timeout)
            night_results, night_tasks = _dag_run_results(env, NIGHTLY_DAG_ID)
            nightly.append(night_results.get("check_regression") or {})
            succeeded = succeeded and code == 0 and all(s.state == "success" for s in stage_times(night_tasks, NIGHTLY_STAGES))
        lines = summary_lines(
            stages=stages,
            results=results,
            committed_steps=_committed_steps(cluster, f"gs://{BUCKET}/runs/{RUN_NAME}/checkpoints"),
            leftovers=_leftovers(cluster),
            maintenance=injector.injected if injector else None,
            nightly=nightly,
            lineage=chain(completed_tasks(read_events(out / LINEAGE_FILE), DAG_ID), LINEAGE_ORDER),
            speed=args.speed,
        )
        print("\n".join(lines), flush=True)
        print(f"\nAirflow logs: {out}/airflow*.log; took {time.monotonic() - began:.0f} s", flush=True)
        if not succeeded:
            print(f"pathways-airflow demo: a DAG run did not succeed; see the logs in {out}", file=sys.stderr)
        if args.serve_ui is not None:
            with serving_ui(env, args.serve_ui, Path(home)) as ui:
                print(ui.welcome(), flush=True)
                ui.wait()
        return 0 if succeeded else 1


@dataclass
class ServedUi:
    """``airflow api-server`` over the demo's AIRFLOW_HOME: its address, login and process."""

    url: str
    user: str
    password: str
    process: subprocess.Popen

    def welcome(self) -> str:
        return "\n".join((
            f"\nThe Airflow UI is up at {self.url} (log in as {self.user}, password {self.password}).",
            f"The Pathways view: {self.url}/dags/{DAG_ID} → a run → the train task → the Pathways tab;",
            f"the benchmark history: {self.url}/dags/{NIGHTLY_DAG_ID} → the Benchmark history tab.",
            "The local cluster and the GCS emulator stay up with it. Ctrl-C stops everything.",
        ))

    def wait(self) -> None:
        try:
            self.process.wait()
        except KeyboardInterrupt:
            pass


@contextlib.contextmanager
def serving_ui(env: Mapping[str, str], port: int, home: Path) -> Iterator[ServedUi]:
    """The UI for the demo's runs: one admin user whose password is made here."""
    user, password = "admin", secrets.token_urlsafe(12)
    with airflow_api_server(env, port, home, {user: ("admin", password)}) as (url, process):
        yield ServedUi(url, user, password, process)


@contextlib.contextmanager
def airflow_api_server(
    env: Mapping[str, str], port: int, workdir: Path, users: Mapping[str, tuple[str, str]],
    settings: Mapping[str, str] | None = None, timeout: float = 180.0,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """``airflow api-server`` (the UI and the provider's plugin) on 127.0.0.1:``port`` over ``env``'s
    AIRFLOW_HOME, in a process group of its own, its log in ``workdir/api-server.log``; yields its URL
    and process once it answers, and stops it after. ``users`` (name → (role, password)) are the
    simple auth manager's (``[core] simple_auth_manager_users`` and ``simple_auth_manager_passwords_file``,
    airflow-core's simple auth manager); ``settings`` add to or override the environment."""
    workdir.mkdir(parents=True, exist_ok=True)
    passwords = workdir / "simple_auth_manager_passwords.json"
    passwords.write_text(json.dumps({name: password for name, (_, password) in users.items()}))
    url = f"http://127.0.0.1:{port}"
    environment = {
        **env,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{name}:{role}" for name, (role, _) in users.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        **(settings or {}),
    }
    log = workdir / "api-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen([_airflow_executable(), "api-server"], env=environment, cwd=workdir, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not _answers(f"{url}/api/v2/monitor/health"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"airflow api-server did not come up on {url} (exit code {process.poll()}):\n{tail}")
            time.sleep(0.5)
        yield url, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def _default_crds() -> list[str]:
    found = os.environ.get("PATHWAYS_AIRFLOW_CRDS")
    if found:
        return [found]
    beside = Path.cwd().parent / "shared" / "crds"
    return [str(beside)] if beside.is_dir() else []


class _Printer:
    """Timestamped progress lines, safe from several threads."""

    def __init__(self, began: float) -> None:
        self.began = began
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self.lock:
            print(f"{time.monotonic() - self.began:6.1f}s  {line}", flush=True)


def _airflow_env(cluster: Any, home: str, dags: Path, lineage_file: Path) -> dict[str, str]:
    """Airflow's environment; with the OpenLineage provider installed, its events go to ``lineage_file``."""
    lineage = {}
    if importlib.util.find_spec("airflow.providers.openlineage") is not None:
        lineage = {"AIRFLOW__OPENLINEAGE__TRANSPORT": file_transport(lineage_file), "AIRFLOW__OPENLINEAGE__NAMESPACE": "pathways-demo"}
    return {
        **os.environ,
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        **lineage,
        **cluster.client_environment(),
    }


def _airflow_executable() -> str:
    beside = Path(sys.executable).with_name("airflow")
    return str(beside) if beside.exists() else "airflow"


def _airflow(env: Mapping[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_airflow_executable(), *args], env=dict(env), capture_output=True, text=True, timeout=timeout)


def _run_dag(
    env: Mapping[str, str],
    dag_id: str,
    conf: Mapping[str, Any],
    log_path: Path,
    say: _Printer,
    injector: "_MaintenanceInjector | None",
    *,
    timeout: float,
) -> int:
    say(f"airflow dags test {dag_id} -c '{json.dumps(conf)}'")
    process = subprocess.Popen(
        [_airflow_executable(), "dags", "test", dag_id, "-c", json.dumps(conf)],
        env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )
    if injector:
        injector.start()
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        with log_path.open("w") as log:
            _follow(process.stdout, log, say)
        return process.wait()
    finally:
        timer.cancel()
        if injector:
            injector.stop()


def _follow(stream: TextIO | None, log: TextIO, say: _Printer) -> None:
    for raw in stream or ():
        log.write(raw)
        shown = progress_line(raw)
        if shown:
            say(shown)


class _MaintenanceInjector(threading.Thread):
    """Puts the node pool of a running training worker into host maintenance at a given step."""

    def __init__(self, cluster: Any, at_step: int, say: _Printer) -> None:
        super().__init__(daemon=True, name="maintenance-injector")
        self.cluster, self.at_step, self.say = cluster, at_step, say
        self.injected: str | None = None
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def run(self) -> None:
        while not self._stop_event.wait(0.1) and self.injected is None:
            try:
                self._inject_when_due()
            except Exception as error:  # the demo goes on without the disruption
                self.say(f"could not inject maintenance: {error}")
                return

    def _inject_when_due(self) -> None:
        labels = {"pathways-airflow/dag-id": DAG_ID}
        for job in self.cluster.list("pathways-job.pathways.domain/v1", "PathwaysJob", "default", labels=labels):
            name = job["metadata"]["name"]
            step = self._training_step(name)
            if step is None or step < self.at_step:
                continue
            pool = self._worker_pool(name)
            if pool is None:
                continue
            self.say(f">>> host maintenance on TPU node pool {pool} (training at step {step})")
            self.cluster.maintenance(pool, duration=600)
            self.injected = f"host maintenance on node pool {pool} at step {step}"
            return

    def _training_step(self, jobset: str) -> int | None:
        heads = self.cluster.list(
            "v1", "Pod", "default",
            labels={"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"},
        )
        steps = [int(m.group(1)) for pod in heads for line in self.cluster.read_log("default", pod["metadata"]["name"], "main") if (m := _STEP.search(line))]
        return max(steps) if steps else None

    def _worker_pool(self, jobset: str) -> str | None:
        workers = self.cluster.list(
            "v1", "Pod", "default",
            labels={"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "worker"},
        )
        node = next((p["spec"]["nodeName"] for p in workers if p["spec"].get("nodeName")), None)
        if node is None:
            return None
        return self.cluster.get("v1", "Node", node, namespace=None)["metadata"]["labels"]["cloud.google.com/gke-nodepool"]


_READ_RUN = """
import json, sys
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
dag_id = sys.argv[1]
with create_session() as session:
    runs = session.query(DagRun).filter(DagRun.dag_id == dag_id).all()
    newest = max(runs, key=lambda r: (r.start_date is not None, r.start_date or r.logical_date or 0), default=None)
    found = {"results": {}, "task_instances": []}
    if newest is not None:
        keys = (TaskInstance.dag_id == dag_id, TaskInstance.run_id == newest.run_id)
        found["task_instances"] = [
            {"task_id": ti.task_id, "state": ti.state, "start_date": ti.start_date and ti.start_date.isoformat(),
             "end_date": ti.end_date and ti.end_date.isoformat()}
            for ti in session.query(TaskInstance).filter(*keys)
        ]
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == newest.run_id, XComModel.key == "return_value")
        found["results"] = {row.task_id: XComModel.deserialize_value(row) for row in rows}
    print(json.dumps(found, default=str))
"""


def _dag_run_results(env: Mapping[str, str], dag_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The newest run's return values and task instances, read from the Airflow database in one process
    (one interpreter start instead of an Airflow CLI start for each of three questions)."""
    read = subprocess.run([sys.executable, "-c", _READ_RUN, dag_id], env=dict(env), capture_output=True, text=True, timeout=120)
    lines = [line for line in read.stdout.splitlines() if line.startswith("{")]
    found = json.loads(lines[-1]) if lines else {}
    return found.get("results") or {}, found.get("task_instances") or []


def _committed_steps(cluster: Any, checkpoint_dir: str) -> list[int]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket, _ = split_gcs_uri(checkpoint_dir)
    client = storage.Client(project="demo", credentials=AnonymousCredentials(), client_options={"api_endpoint": cluster.gcs_endpoint})
    try:
        names = [blob.name for blob in client.list_blobs(bucket, prefix=gcs_object_prefix(checkpoint_dir))]
    finally:
        client.close()
    return committed_steps_in_listing(checkpoint_dir, names)


def _leftovers(cluster: Any) -> list[str]:
    labels = {"pathways-airflow/dag-id": DAG_ID}
    found = []
    for api_version, kind in WATCHED_KINDS:
        for obj in cluster.list(api_version, kind, "default", labels=None if kind == "Pod" else labels):
            found.append(f"{kind}/{obj['metadata']['name']}")
    return found
