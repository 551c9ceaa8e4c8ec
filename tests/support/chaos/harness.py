"""Runs one chaos plan against the local cluster with the real operator, and records what happened.

The task runs in this (the main) thread as a worker would run it: ``execute()`` waiting inline
(``deferrable=False``), or ``execute()`` → ``TaskDeferred`` → the trigger, re-created from
``serialize()`` as the triggerer does, run on an event loop of its own → ``execute_complete()``
on a fresh operator. A watcher thread samples the cluster every few tens of milliseconds (live
workloads, running pods, the training's progress) and sets off the plan's events when the live
training reaches their step. Killing an inline task is a signal to this thread whose handler
calls ``on_kill()`` and raises, as Airflow's task runner does on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import queue
import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from airflow.providers.common.compat.sdk import AirflowTaskTimeout, TaskDeferred

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, PathwaysHook
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.spec import build_workload, render
from pathways_airflow.spec.render import JobSetFailurePolicy
from pathways_airflow.operators.workload import STATE_KEY
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow.run.submission import finished_as
from pathways_airflow.triggers.slices import MaintenancePassedTrigger
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from pathways_airflow_testing.nodes import ACTIVE_MAINTENANCE_LABEL, PERFORM_MAINTENANCE_LABEL, SCHEDULED_MAINTENANCE_LABEL

from tests.support.chaos.invariants import Observations, Pace, extra_time_lost, recomputed_seconds, resubmissions
from tests.support.chaos.plan import DISRUPTIONS, SPEED, TPU_POOLS, Event, Plan
from tests.support.task_instance import StateStore, TaskInstance


class KilledBySupervisor(BaseException):
    """Raised in the task's thread when it has not ended :data:`KILL_ESCALATION` after its kill, as
    Airflow's supervisor then sends SIGKILL (task-sdk ``supervisor.kill``)."""


KILL_ESCALATION = 5.0
"""Real seconds between a kill's SIGTERM and the supervisor's SIGKILL."""

BUCKET = "pathways-demo"
NAMESPACE = "default"
SCENARIO_LIMIT = 90.0
"""Real seconds after which a scenario is stopped and reported as stuck."""
SETTLE_LIMIT = 20.0
"""Real seconds the task's objects get to disappear after it ended."""
TICK = 0.03
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
NODEPOOL = "cloud.google.com/gke-nodepool"
STEP_LINE = re.compile(r"completed step: (\d+),")
RESTORED_LINE = re.compile(r"restoring from this run's directory step (\d+)")
USER_FAILURE_LINE = "failing as PATHWAYS_TESTING_FAIL_AT_STEP"
CLEAN_SLICES_LIMIT = 20.0
"""Real seconds the TPU slices get to be free of maintenance around a scenario that announces some."""
TRIGGERS = {
    "pathways_airflow.triggers.workload.PathwaysJobTrigger": PathwaysJobTrigger,
    "pathways_airflow.triggers.slices.MaintenancePassedTrigger": MaintenancePassedTrigger,
}
"""The triggers the task may defer to: the workload's wait, and the wait for announced maintenance to pass."""
KINDS = {
    "pathwaysjob": ("pathways-job.pathways.domain/v1", "PathwaysJob"),
    "jobset": ("jobset.x-k8s.io/v1alpha2", "JobSet"),
}


@dataclass
class Record:
    """Everything one scenario produced, for the checkers and the report."""

    observations: Observations
    wall_seconds: float
    losses: list[float]
    """Extra simulated seconds each disruption cost, the API's own waits left out: a sustained
    outage, and the slow answers and ``Retry-After`` the plan's faults impose (real seconds the
    provider waits, each a minute of cluster time at speed 60)."""
    losses_with_outages: list[float]
    recomputed: list[float]
    """Of each loss, the simulated seconds spent doing steps again (the checkpoint period's share)."""
    loss_kinds: list[str]
    operator_seconds_lost: list[float]
    fired: list[str]
    tries: int
    error: str | None = None


class Scenario:
    def __init__(self, cluster, plan: Plan):
        self.cluster = cluster
        self.plan = plan
        self.identity = TaskIdentity("chaos", f"chaos-{plan.seed}", "run-1")
        self.names = {self.identity.workload_name(a): a for a in range(0, 12)}
        self.api, self.kind = KINDS[plan.backend]
        self.run_name = f"chaos-{plan.seed}-{int(time.time() * 1000) % 10_000_000}"
        self.checkpoint_dir = f"gs://{BUCKET}/chaos/{self.run_name}/checkpoints"
        self.store = StateStore() if plan.state_store else None
        self.control: queue.Queue[str] = queue.Queue()
        self.pending: list[Event] = [e for e in plan.events if e.at_step >= 0]
        self.fired: list[str] = []
        self.disruption_times: list[tuple[float, str]] = []  # (virtual time, kind)
        self.api_down: list[tuple[float, float]] = []  # (virtual start, end) of each sustained outage
        self.live_samples: list[tuple[float, dict[str, list[str]]]] = []
        self.running_samples: list[tuple[float, list[str]]] = []
        self.pool_samples: list[tuple[float, bool, dict[str, str]]] = []
        self.announced_nodes: dict[str, tuple[str, ...]] = {}
        self.attempts_seen: dict[str, int] = {}
        self.kill_requested = False
        self.killed = False
        self.killed_at: float | None = None
        self.stuck = False
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._node_pools: dict[str, str] = {}
        self.tries = 0
        self.ti: TaskInstance | None = None

    # --- the task ---------------------------------------------------------------------------

    def operator(self) -> PathwaysJobOperator:
        plan = self.plan
        env = {
            "PATHWAYS_TESTING_STEP_SECONDS": f"{plan.step_seconds:g}",
            "PATHWAYS_TESTING_SAVE_SECONDS": f"{plan.save_seconds:g}",
        }
        if plan.fail_at_step is not None:
            env |= {"PATHWAYS_TESTING_FAIL_AT_STEP": str(plan.fail_at_step), "PATHWAYS_TESTING_EXIT_CODE": str(plan.exit_code)}
        workload = dict(
            tpu="v5e",
            topology="2x4",
            num_slices=plan.num_slices,
            pathways_dir=f"gs://{BUCKET}/tmp",
            image="maxtext",
            command=[
                "python3", "-m", "MaxText.train", f"base_output_directory=gs://{BUCKET}/chaos", f"run_name={self.run_name}",
                f"steps={plan.steps}", f"checkpoint_period={plan.checkpoint_period}",
                *(["elastic_enabled=true"] if plan.elastic_slices else []),
            ],
            env=env,
            max_restarts=plan.max_restarts,
            **elastic_parameters(plan),
            termination_grace_period_seconds=plan.grace_seconds,
            queue_name="multislice-queue" if plan.queued else None,
        )
        task = dict(
            task_id=self.identity.task_id,
            checkpoint_dir=self.checkpoint_dir,
            deferrable=plan.mode == "deferred",
            max_disruptions=plan.max_disruptions,
            execution_timeout=dt.timedelta(seconds=plan.timeout_seconds) if plan.timeout_seconds else None,
        )
        if plan.announced is not None:
            task |= dict(expected_duration=dt.timedelta(seconds=plan.announced.expected_duration), maintenance_window=plan.announced.policy)
        if plan.manifest:
            return PathwaysJobOperator(**task, manifest=users_manifest(self.identity.task_id, plan.backend, workload))
        return PathwaysJobOperator(**task, **workload, backend=plan.backend)

    def new_try(self) -> dict[str, Any]:
        self.tries += 1
        self.ti = TaskInstance("chaos", self.identity.task_id, "run-1", try_number=self.tries, start_date=dt.datetime.now(dt.timezone.utc))
        context: dict[str, Any] = {"ti": self.ti}
        if self.store is not None:
            context["task_state_store"] = self.store
        return context

    def run(self) -> Record:
        started = time.time()
        stalls_before = len(self.cluster.faults.stalls)
        if self.plan.announced is not None:
            self._announce_maintenance()
        if self.plan.collector_delay:
            self.cluster.slow_garbage_collector(self.plan.collector_delay)
        self.cluster.set_jobset_feature_gates(self.plan.jobset_gates)
        for event in self.plan.events:
            if event.at_step < 0:
                self._fire(event, None)
        watcher = threading.Thread(target=self._watch, name=f"chaos-watch-{self.plan.seed}", daemon=True)
        watcher.start()
        outcome, result, error, disruptions = "unknown", None, None, []
        try:
            if self.plan.mode == "inline":
                outcome, result, error = self._drive_inline()
            else:
                outcome, result, error = self._drive_deferred()
        finally:
            self._stop.set()
            for timer in self._timers:
                timer.cancel()
            watcher.join(5)
            self.cluster.clear_faults()
        if isinstance(result, dict):
            disruptions = result.get("disruptions") or []
        elif error is not None and getattr(error, "disruptions", None):
            disruptions = error.disruptions
        elif self.store is not None and (self.store.get(STATE_KEY) or {}).get("disruptions"):
            disruptions = self.store.get(STATE_KEY)["disruptions"]
        elif self.ti is not None:
            disruptions = (self.ti.xcoms.get(STATE_KEY) or {}).get("disruptions") or []
        wall = time.time() - started
        try:
            leftovers = self._settle()  # under the late collector too: the task's own deletes must not need it
        finally:
            self.cluster.slow_garbage_collector(0)
            self.cluster.set_jobset_feature_gates(())
            if self.plan.announced is not None:
                self._end_announced_maintenance()
        progress, restored, user_failures = self._read_logs()
        commits = self._commits()
        pace = Pace(self.plan.step_seconds, self.plan.save_seconds, self.plan.checkpoint_period, self.plan.steps - 1)
        started_at = [v for v, _ in self.disruption_times]
        losses = extra_time_lost(progress, started_at, pace, api_down=[*self.api_down, *self.cluster.faults.stalls[stalls_before:]])
        with_outages = extra_time_lost(progress, started_at, pace)
        redone = recomputed_seconds(progress, started_at, pace)
        kinds = [k for _, k in sorted(self.disruption_times)]
        observations = Observations(
            expected=self.plan.expected,
            outcome="stuck" if self.stuck else outcome,
            final_step=self.plan.steps - 1,
            max_disruptions=self.plan.max_disruptions + (self.plan.max_restarts if self.plan.backend == "pathwaysjob" else 0),
            result=result if isinstance(result, dict) else None,
            live_samples=tuple(self.live_samples),
            running_samples=tuple(self.running_samples),
            leftovers=tuple(leftovers),
            disruptions=tuple(disruptions),
            commits=commits,
            attempts_seen=dict(self.attempts_seen),
            user_failures=tuple(user_failures),
            restored_steps=tuple(restored),
            ridden_out=sum(1 for _, kind in self.disruption_times if kind.endswith(RIDDEN_OUT)),
            maintenance_window=self.plan.announced.policy if self.plan.announced else None,
            counts_executions=bool(self.plan.jobset_gates),
            announced_pools=self.plan.announced.pools if self.plan.announced else (),
            announced_nodes=self.announced_nodes,
            pool_samples=tuple(self.pool_samples),
            remembers_earlier_tries=self.plan.state_store or self.tries == 1,
        )
        return Record(
            observations=observations,
            wall_seconds=round(wall, 2),
            losses=losses,
            losses_with_outages=with_outages,
            recomputed=redone,
            loss_kinds=kinds[: len(losses)] if len(losses) == len(kinds) else ["disruption"] * len(losses),
            operator_seconds_lost=[float(d.get("seconds_lost") or 0.0) for d in resubmissions(disruptions)],
            fired=list(self.fired),
            tries=self.tries,
            error=f"{type(error).__name__}: {str(error)[:500]}" if error is not None else None,
        )

    def _drive_inline(self):
        op = self.operator()

        def on_signal(signum, frame):
            # As Airflow 3's SIGTERM handler does (task-sdk task_runner ``_on_term``): run on_kill and
            # return; the task must then end by itself (the supervisor's SIGKILL follows in 5 s).
            if self.killed_at is not None and time.monotonic() - self.killed_at >= KILL_ESCALATION:
                self.killed_at = time.monotonic()
                raise KilledBySupervisor()
            if self.kill_requested:
                self.kill_requested = False
                self.killed = True
                op.on_kill()
                self.killed_at = time.monotonic()

        previous = signal.signal(signal.SIGUSR1, on_signal)
        try:
            result = op.execute(self.new_try())
        except KilledBySupervisor:
            return ("stuck" if self.stuck else "killed"), None, None
        except (Exception, AirflowTaskTimeout) as error:  # the task's failure is the outcome
            if self.killed:
                return ("stuck" if self.stuck else "killed"), None, None
            return type(error).__name__, None, error
        finally:
            self.killed_at = None
            # A signal the watcher sent as the task ended must not meet SIGUSR1's default (exit).
            signal.signal(signal.SIGUSR1, previous if callable(previous) else (lambda signum, frame: None))
        return ("stuck" if self.stuck else "killed") if self.killed else "success", result, None

    def _drive_deferred(self):
        context = self.new_try()
        deferral = None
        crashed_after_submit = False
        crashed_before_complete = False
        call = lambda op: op.execute(context)  # noqa: E731
        while True:
            op = self.operator()
            try:
                return "success", call(op), None
            except TaskDeferred as deferred:
                deferral = deferred
            except (Exception, AirflowTaskTimeout) as error:
                return type(error).__name__, None, error
            if self.plan.crash_after_submit and not crashed_after_submit and isinstance(deferral.trigger, PathwaysJobTrigger):
                # The worker dies after submitting, before the deferral is recorded: a new try.
                crashed_after_submit = True
                self.fired.append("crash_after_submit")
                context = self.new_try()
                call = lambda op: op.execute(context)  # noqa: E731
                continue
            verdict, payload = self._await_trigger(deferral.trigger)
            if verdict == "kill":
                return "killed", None, None
            if verdict == "stuck":
                return "stuck", None, None
            if verdict == "retry":
                self.fired.append("retry (new try)")
                context = self.new_try()
                call = lambda op: op.execute(context)  # noqa: E731
                continue
            if self.plan.crash_before_complete and not crashed_before_complete and payload.get("status") == "finished":
                # The triggerer fired; the worker resuming the task died: a new try from execute().
                crashed_before_complete = True
                self.fired.append(f"crash_before_complete ({payload['state']['phase']})")
                context = self.new_try()
                call = lambda op: op.execute(context)  # noqa: E731
                continue
            method, kwargs = deferral.method_name, dict(deferral.kwargs or {})
            call = lambda op, m=method, k=kwargs, p=payload: getattr(op, m)(context, event=p, **k)  # noqa: E731

    def _await_trigger(self, trigger) -> tuple[str, dict | None]:
        classpath, kwargs = trigger.serialize()
        assert classpath in TRIGGERS, classpath
        kwargs = json.loads(json.dumps(kwargs))  # what the triggerer reads back from the database
        while True:
            verdict, payload = asyncio.run(self._trigger_session(TRIGGERS[classpath](**kwargs)))
            if verdict == "restart":
                continue
            return verdict, payload

    async def _trigger_session(self, trigger: PathwaysJobTrigger | MaintenancePassedTrigger):
        events = trigger.run()
        task = asyncio.ensure_future(events.__anext__())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.02)
                if task in done:
                    return "event", dict(task.result().payload)
                if self.stuck:
                    command = "stuck"
                else:
                    try:
                        command = self.control.get_nowait()
                    except queue.Empty:
                        continue
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await task
                if command == "kill":
                    await trigger.on_kill()
                return command, None
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()
            await AsyncPathwaysHook.close_all()

    # --- watching and setting off events ----------------------------------------------------

    def _watch(self) -> None:
        began = time.monotonic()
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception:  # the cluster call may time out under injected latency; sample again
                pass
            if self.killed_at is not None and time.monotonic() - self.killed_at >= KILL_ESCALATION:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)  # the handler escalates
            if time.monotonic() - began > SCENARIO_LIMIT and not self.stuck:
                self.stuck = True
                if self.plan.mode == "inline":
                    self.kill_requested = True
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            self._stop.wait(TICK)

    def _sample(self) -> None:
        now = time.time()
        by_kind: dict[str, list[str]] = {}
        top = self.cluster.list(self.api, self.kind, NAMESPACE, labels={TASK_KEY_LABEL: self.identity.key})
        jobsets = [j for j in self.cluster.list(*KINDS["jobset"], NAMESPACE) if j["metadata"]["name"] in self.names]
        for kind, items in ((self.kind, top), ("JobSet", jobsets)):
            for obj in items:
                name = obj["metadata"]["name"]
                self.attempts_seen.setdefault(name, self.names.get(name, -1))
            by_kind[kind] = [o["metadata"]["name"] for o in items if not o["metadata"].get("deletionTimestamp") and finished_as(o) is None]
        self.live_samples.append((now, by_kind))
        if self.plan.announced is not None:
            # Read after the workloads: a workload seen beside a pool not yet clean existed while that maintenance had not passed.
            exists = bool(top or jobsets)
            self.pool_samples.append((now, exists, self._maintenance_states(self.plan.announced.pools)))
        pods = [p for p in self.cluster.list("v1", "Pod", NAMESPACE) if (p["metadata"].get("labels") or {}).get(JOBSET_NAME) in self.names]
        running = sorted({p["metadata"]["labels"][JOBSET_NAME] for p in pods if (p.get("status") or {}).get("phase") == "Running"})
        self.running_samples.append((now, running))
        if not self.pending:
            return
        best: tuple[int, str] | None = None
        for pod in pods:
            labels = pod["metadata"]["labels"]
            if labels.get(REPLICATED_JOB) != "pathways-head" or (pod.get("status") or {}).get("phase") != "Running":
                continue
            if pod["metadata"].get("deletionTimestamp") or any(
                c.get("type") == "DisruptionTarget" for c in (pod.get("status") or {}).get("conditions") or ()
            ):
                continue
            step = self._progress(pod["metadata"]["name"])
            if step is not None and (best is None or step > best[0]):
                best = (step, labels[JOBSET_NAME])
        while best is not None and self.pending and self.pending[0].at_step <= best[0]:
            event = self.pending.pop(0)
            if event.delay:
                timer = threading.Timer(event.delay, self._fire, args=(event, best[1]))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            else:
                self._fire(event, best[1])

    def _progress(self, pod: str) -> int | None:
        def read():
            found = self.cluster.logs.find(NAMESPACE, pod, "main")
            return [line for _, line in found.lines[-20:]] if found else []

        for line in reversed(self.cluster.call(read)):
            match = STEP_LINE.search(line)
            if match:
                return int(match.group(1))
        return None

    def _slice_of(self, workload: str, index: int) -> str:
        if not self._node_pools:
            self._node_pools = {n["metadata"]["name"]: n["metadata"]["labels"].get(NODEPOOL, "") for n in self.cluster.list("v1", "Node", None)}
        workers = self.cluster.list("v1", "Pod", NAMESPACE, labels={JOBSET_NAME: workload, REPLICATED_JOB: "worker"})
        # Where its slices run now: a lost slice's pods linger failed on the pool it lost.
        live = [p for p in workers if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")]
        pools = sorted({self._node_pools.get(p["spec"]["nodeName"], "") for p in live} - {""})
        if not pools:
            raise RuntimeError(f"{workload} has no worker on a node")
        return pools[index % len(pools)]

    def _fire(self, event: Event, workload: str | None) -> None:
        if self._stop.is_set():
            return
        args = event.kwargs
        cluster = self.cluster
        try:
            if event.kind in DISRUPTIONS:
                pool = self._slice_of(workload, args.pop("slice", 0))
                self.disruption_times.append((cluster.clock.now(), event.kind + (RIDDEN_OUT if self.plan.elastic_slices else "")))
                getattr(cluster, event.kind)(pool, wait=False, **args)
                self.fired.append(f"{event.describe()} on {pool} ({workload})")
                return
            if event.kind == "evict":
                kueue_name = cluster.workload_for(NAMESPACE, workload)
                self.disruption_times.append((cluster.clock.now(), "evict"))
                cluster.evict_workload(NAMESPACE, kueue_name, requeue_after=args["requeue_after"])
            elif event.kind == "fault":
                args["methods"] = tuple(args.get("methods", ()))
                cluster.inject_fault(**args)
            elif event.kind == "outage":
                cluster.inject_fault(".*", status=503, count=1_000_000)
                self.api_down.append((cluster.clock.now(), cluster.clock.now() + args["seconds"]))
                back = threading.Timer(args["seconds"] / SPEED, cluster.clear_faults)
                self._timers.append(back)
                back.start()
            elif event.kind == "drop_watches":
                cluster.drop_watches()
            elif event.kind == "compact":
                cluster.compact()
                cluster.drop_watches()
            elif event.kind in ("trigger_restart", "retry"):
                self.control.put("restart" if event.kind == "trigger_restart" else "retry")
            elif event.kind == "kill":
                if self.plan.mode == "deferred":
                    self.control.put("kill")
                else:
                    self.kill_requested = True
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            self.fired.append(f"{event.describe()} ({workload})")
        except Exception as error:
            self.fired.append(f"{event.describe()} FAILED to fire: {type(error).__name__}: {error}")

    # --- announced maintenance ----------------------------------------------------------------

    def _nodes_by_pool(self) -> dict[str, list[dict[str, Any]]]:
        pools: dict[str, list[dict[str, Any]]] = {}
        for node in self.cluster.list("v1", "Node", None):
            pools.setdefault((node["metadata"].get("labels") or {}).get(NODEPOOL, ""), []).append(node)
        return pools

    def _maintenance_states(self, pools: tuple[str, ...]) -> dict[str, str]:
        """Each pool's maintenance as its nodes' labels say: ``under`` way, ``started`` (a manual
        start asked, not begun), ``announced``, or ``clean``."""
        nodes = self._nodes_by_pool()
        return {pool: maintenance_state(nodes.get(pool, [])) for pool in pools}

    def _wait_for_clean_slices(self, pools: tuple[str, ...]) -> None:
        """No maintenance announced or under way on ``pools``: what an earlier scenario's maintenance
        left must not be mistaken for this one's announcement, nor this one's strike a later scenario."""
        deadline = time.monotonic() + CLEAN_SLICES_LIMIT
        while set(self._maintenance_states(pools).values()) != {"clean"}:
            if time.monotonic() > deadline:
                raise RuntimeError(f"maintenance still on the TPU slices after {CLEAN_SLICES_LIMIT:g} s: {self._maintenance_states(pools)}")
            time.sleep(0.1)

    def _announce_maintenance(self) -> None:
        """GKE announces the plan's maintenance on its slices; the task starts once every node says so."""
        announced = self.plan.announced
        assert announced is not None
        self._wait_for_clean_slices(TPU_POOLS)
        for pool in announced.pools:
            self.cluster.maintenance(pool, notice=announced.notice, duration=announced.duration, wait=False)
        deadline = time.monotonic() + CLEAN_SLICES_LIMIT
        while set(self._maintenance_states(announced.pools).values()) != {"announced"}:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the announcement did not reach the nodes: {self._maintenance_states(announced.pools)}")
            time.sleep(0.05)
        nodes = self._nodes_by_pool()
        self.announced_nodes = {p: tuple(sorted(n["metadata"]["name"] for n in nodes[p])) for p in announced.pools}
        self.fired.append(f"announced maintenance on {', '.join(announced.pools)} ({announced.policy})")

    def _end_announced_maintenance(self) -> None:
        """Maintenance still only announced (``ignore``, or a task ended before starting it) is
        started by hand, as an operator would, and waited out: it must not strike a later scenario."""
        for pool, state in self._maintenance_states(self.plan.announced.pools).items():
            if state == "announced":
                for node in self._nodes_by_pool()[pool]:
                    PathwaysHook().start_node_maintenance(node["metadata"]["name"])
        self._wait_for_clean_slices(self.plan.announced.pools)

    # --- after the task ---------------------------------------------------------------------

    def _leftovers(self) -> list[str]:
        found = []
        for api, kind in {KINDS["pathwaysjob"], KINDS["jobset"]}:
            for obj in self.cluster.list(api, kind, NAMESPACE):
                name = obj["metadata"]["name"]
                if name in self.names or (obj["metadata"].get("labels") or {}).get(TASK_KEY_LABEL) == self.identity.key:
                    found.append(f"{kind}/{name}")
        for kind in ("Job", "Pod"):
            for obj in self.cluster.list("batch/v1" if kind == "Job" else "v1", kind, NAMESPACE):
                if (obj["metadata"].get("labels") or {}).get(JOBSET_NAME) in self.names:
                    found.append(f"{kind}/{obj['metadata']['name']}")
        return found

    def _settle(self) -> list[str]:
        deadline = time.monotonic() + SETTLE_LIMIT
        while True:
            left = self._leftovers()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def _read_logs(self):
        """From every head pod's log: (virtual time, completed step, pod), restores, user failures."""
        names = sorted(self.names, key=len, reverse=True)

        def read():
            found = {}
            for (namespace, pod, container), log in list(self.cluster.logs._logs.items()):
                if namespace == NAMESPACE and container == "main" and "-pathways-head-" in pod:
                    workload = next((n for n in names if pod.startswith(f"{n}-pathways-head-")), None)
                    if workload is not None:
                        found[(workload, pod)] = list(log.lines)
            return found

        logs = self.cluster.call(read)
        offset = time.time() - self.cluster.clock.now() / self.cluster.clock.speed
        progress, restored, user_failures = [], [], []
        for (workload, pod), lines in logs.items():
            for when, line in lines:
                if match := STEP_LINE.search(line):
                    progress.append((when, int(match.group(1)), pod))
                elif match := RESTORED_LINE.search(line):
                    restored.append((int(match.group(1)), offset + when / self.cluster.clock.speed))
                elif USER_FAILURE_LINE in line:
                    user_failures.append((self.names[workload], pod))
        return progress, restored, user_failures

    def _commits(self) -> dict[int, float]:
        """When each step's checkpoint was committed; the scenario's checkpoints are deleted as they
        are read, or every later scenario's saves and restores would list a bucket that grows."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="test", credentials=AnonymousCredentials())
        prefix = self.checkpoint_dir.removeprefix(f"gs://{BUCKET}/") + "/"
        commits = {}
        for blob in list(client.list_blobs(BUCKET, prefix=prefix)):
            parts = blob.name[len(prefix):].split("/")
            if len(parts) == 2 and parts[0].isdigit() and parts[1] == "commit_success.txt":
                commits[int(parts[0])] = blob.time_created.timestamp()
            blob.delete()  # read once: the session's bucket holds only the running scenario's checkpoints
        return commits


RIDDEN_OUT = " (ridden out)"
"""Appended to a disruption's kind when the plan's program rides slice losses out (elastic slices)."""


def elastic_parameters(plan: Plan) -> dict[str, Any]:
    """The workload parameters of elastic slices, when the plan has them (none otherwise, so every
    other plan's workload is the one it always was)."""
    if not plan.elastic_slices:
        return {}
    return {"elastic_slices": plan.elastic_slices, "max_slice_restarts": plan.max_slice_restarts}


def maintenance_state(nodes: list[dict[str, Any]]) -> str:
    """A slice's maintenance from its nodes' labels: ``under`` way, ``started`` (asked to start now,
    not begun), ``announced``, or ``clean`` (none, or passed: the cluster clears all three labels)."""
    labels = [n["metadata"].get("labels") or {} for n in nodes]
    if any(ACTIVE_MAINTENANCE_LABEL in x for x in labels):
        return "under"
    if any(x.get(PERFORM_MAINTENANCE_LABEL) == "true" for x in labels):
        return "started"
    if any(SCHEDULED_MAINTENANCE_LABEL in x for x in labels):
        return "announced"
    return "clean"


def users_manifest(name: str, backend: str, workload: dict[str, Any]) -> dict[str, Any]:
    """The workload as a user hands it over: a PathwaysJob, or a JobSet in the Pathways layout with
    no failure rules of the provider's (a bare ``maxRestarts``, as xpk writes it)."""
    bare = JobSetFailurePolicy(ignore_disruptions=False, system_exit_codes=None)
    return render(build_workload(**workload), backend=backend, name=name, namespace="default", failure_policy=bare)
