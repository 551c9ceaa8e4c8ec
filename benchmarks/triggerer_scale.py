"""N deferred TPU waits in one triggerer loop: ours against the cncf.kubernetes provider's Job trigger.

One run, one local cluster, the same process layout for every contender:

* this process runs the :class:`~pathways_airflow_testing.LocalCluster` (the API server) and the
  driver that changes the workloads' state at random times;
* each contender gets its own *triggerer* process (this script with ``--triggerer``), which
  rebuilds N triggers from their serialized form, as Airflow's triggerer does, and runs their
  ``run()`` generators as tasks of one asyncio loop. CPU, RSS and loop stalls are that process's
  own, never the API server's.

Contenders: ``PathwaysJobTrigger`` waiting on N PathwaysJobs (JobSet + head + worker pods each),
and apache-airflow-providers-cncf-kubernetes' ``KubernetesJobTrigger`` waiting on N batch Jobs at
its default ``poll_interval`` (10 s) and at 2 s.

The workload objects are copies of one PathwaysJob the emulator's controllers really ran, with
Kueue on (its PathwaysJob, JobSet, pods, the JobSet's child Jobs and Kueue's Workload, as the
controllers wrote them); then the controllers are paused and the driver writes every state
change itself, so each change has a known time. The fleet is mixed (``SHARES``): some workloads
wait in Kueue's queue, some end in a user error, some end disrupted, the rest succeed; both
contenders wait on the same fleet (ours on the PathwaysJobs, the anchor on their head Jobs):

1. warm-up: every wait starts (PROVISIONING: pods pending; Jobs without status);
2. steady window (``--window`` s): workloads change state at random (Poisson, one change per
   workload every ``--change-every`` s on average: pods become ready, a worker's readiness
   flaps); API requests (counted by the API server), CPU and stalls are measured here;
3. finish window (``--finish`` s): every workload finishes at a uniformly random time; reaction
   latency is the time from the write of the finished status to the trigger's ``TriggerEvent``,
   reported by ending (a user error's verdict waits on purpose for the other watches to catch up).

The triggerer process also counts the watch events it parses (CPU per event) and times every
garbage collection (a stall's cause); triggers start one per turn of its loop, as Airflow's do.

    python benchmarks/triggerer_scale.py --waits 1000 --json benchmarks/results/triggerer_scale_1000.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TEMPLATE = "tmplwl"
LOCAL_QUEUE = "multislice-queue"
"""The local cluster's LocalQueue (pathways_airflow_testing.kueue_setup): the template is admitted by Kueue."""
SHARES = {"queued": 0.10, "failing": 0.10, "disrupted": 0.05}
"""Of the fleet: waiting in Kueue's queue until the finish window; ending in a user error (exit 1);
ending with a worker disrupted (DisruptionTarget). The rest succeed."""
CONN_ENV = "AIRFLOW_CONN_KUBERNETES_DEFAULT"
STALL_LIMIT = 0.100
TICK = 0.010


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --- the triggerer process ------------------------------------------------------------------


class Phases:
    """What the triggerer process measures between the driver's marks.

    Besides CPU, RSS and loop stalls: the watch events the process parsed (every line of every
    watch stream, counted where the hook splits them), so CPU per event can be read, and every
    garbage collection's pause, by generation, so a stall can be matched to its cause.
    """

    def __init__(self) -> None:
        self.name = "start"
        self.marks: dict[str, dict[str, float]] = {}
        self.stalls: dict[str, list[float]] = {}
        self.watch_events = 0
        self.collections: dict[str, dict[int, list[float]]] = {}
        self._collecting_since = 0.0

    def mark(self, name: str) -> None:
        self.marks[name] = {"time": time.time(), "cpu": time.process_time(), "rss_kb": rss_kb(), "watch_events": self.watch_events}
        self.name = name
        if name == "finish" and os.environ.get("TRIGGERER_SCALE_TRACEMALLOC"):
            import tracemalloc

            # What the waits hold at the end of the steady window, by the line that allocated it.
            stats = tracemalloc.take_snapshot().statistics("lineno")
            with open(os.environ["TRIGGERER_SCALE_TRACEMALLOC"], "w") as out:
                out.write(f"traced: {sum(s.size for s in stats) / 2**20:.1f} MiB\n")
                out.writelines(f"{s}\n" for s in stats[:25])

    def stall(self, late: float) -> None:
        self.stalls.setdefault(self.name, []).append(late)

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A ``gc.callbacks`` hook: the pause of each collection, by generation and window."""
        if phase == "start":
            self._collecting_since = time.perf_counter()
        else:
            pause = time.perf_counter() - self._collecting_since
            self.collections.setdefault(self.name, {}).setdefault(info["generation"], []).append(pause)

    def count_watch_events(self) -> None:
        """Count the events every watch stream yields (ours only: the anchor opens no watch, and
        its process never imports our modules, so its baseline stays its own)."""
        api = sys.modules.get("pathways_airflow.hooks.api")
        if api is None:
            return
        split = api.JsonLines.feed

        def feed(lines: Any, chunk: bytes) -> list[Any]:
            events = split(lines, chunk)
            self.watch_events += len(events)
            return events

        api.JsonLines.feed = feed  # type: ignore[method-assign]


async def ticker(phases: Phases) -> None:
    """Sleep 10 ms at a time; how late each wake-up is, is how long the loop was blocked."""
    loop = asyncio.get_running_loop()
    while True:
        began = loop.time()
        await asyncio.sleep(TICK)
        phases.stall(max(0.0, loop.time() - began - TICK))


async def triggerer(spec_path: str, out_path: str) -> None:
    from airflow.sdk.module_loading import import_string

    spec = json.loads(Path(spec_path).read_text())
    began = time.perf_counter()
    for module in spec["modules"]:
        __import__(module)
    import_seconds = time.perf_counter() - began
    if os.environ.get("TRIGGERER_SCALE_TRACEMALLOC"):
        import tracemalloc

        tracemalloc.start()
    gc.collect()
    baseline_rss = rss_kb()
    loop = asyncio.get_running_loop()
    phases = Phases()
    phases.count_watch_events()
    gc.callbacks.append(phases.on_gc)
    phases.mark("start")
    stopped = asyncio.Event()
    events: dict[str, dict[str, Any]] = {}
    expected = len(spec["triggers"])
    all_done = asyncio.Event()

    def on_line(line: str) -> None:
        word, _, arg = line.strip().partition(" ")
        if word == "mark":
            phases.mark(arg)
        elif word == "stop":
            stopped.set()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(on_line, line)
        loop.call_soon_threadsafe(stopped.set)

    threading.Thread(target=read_stdin, daemon=True).start()

    async def wait(classpath: str, kwargs: dict[str, Any]) -> None:
        # As the triggerer does: the class from its path, built from its stored kwargs.
        trigger = import_string(classpath)(**kwargs)
        generator = trigger.run()
        try:
            async for event in generator:
                payload = event.payload
                events[str(payload.get("name"))] = {
                    "time": time.time(),
                    "status": payload.get("status"),
                    "phase": (payload.get("state") or {}).get("phase"),
                }
                break
        finally:
            await generator.aclose()
        if len(events) >= expected:
            all_done.set()

    tick = loop.create_task(ticker(phases))
    tasks = []
    for path, kwargs in spec["triggers"]:
        tasks.append(loop.create_task(wait(path, kwargs)))
        # As Airflow's triggerer starts them: one at a time, a turn of the loop between
        # (airflow/jobs/triggerer_job_runner.py, TriggerRunner.create_triggers).
        await asyncio.sleep(0)
    print("started", flush=True)

    async def announce_done() -> None:
        await all_done.wait()
        print("done", flush=True)

    announcer = loop.create_task(announce_done())
    await stopped.wait()
    phases.mark("stop")
    for task in (*tasks, tick, announcer):
        task.cancel()
    await asyncio.gather(*tasks, tick, announcer, return_exceptions=True)
    try:
        from pathways_airflow.hooks.pathways import AsyncPathwaysHook

        await AsyncPathwaysHook.close_all()
    except Exception:  # noqa: BLE001 - the anchor's process never opened one
        pass
    Path(out_path).write_text(
        json.dumps(
            {
                "baseline_rss_kb": baseline_rss,
                "import_seconds": import_seconds,
                "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "marks": phases.marks,
                "stalls": {name: {"max": max(v), "p99": percentile(v, 0.99), "over_100ms": sum(1 for s in v if s > STALL_LIMIT), "ticks": len(v)} for name, v in phases.stalls.items() if v},
                "collections": {
                    name: {str(gen): {"count": len(p), "max": max(p), "total": sum(p)} for gen, p in by_gen.items()}
                    for name, by_gen in phases.collections.items()
                },
                "events": events,
            }
        )
    )


# --- the workloads --------------------------------------------------------------------------


def capture_templates(cluster: Any) -> dict[str, Any]:
    """Run one PathwaysJob (one v5e 2x4 slice) through the emulator's controllers; copy what they wrote."""
    from pathways_airflow.spec import build_workload, render

    workload = build_workload(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir="gs://pathways-demo/tmp", image="python:3.11",
        command=["python3", "train.py"], env={"PATHWAYS_TESTING_PROGRAM": "idle"}, queue_name=LOCAL_QUEUE,
    )
    cluster.apply(render(workload, backend="pathwaysjob", name=TEMPLATE, namespace="default"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE})
        if len(pods) >= 3 and all(p["status"].get("phase") == "Running" for p in pods):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("the template workload did not start on the local cluster")
    time.sleep(0.5)
    jobs = cluster.list("batch/v1", "Job", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE})
    jobset = cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", TEMPLATE)
    kueue = [
        w for w in cluster.list("kueue.x-k8s.io/v1beta2", "Workload", "default")
        if any(r.get("uid") == jobset["metadata"]["uid"] for r in w["metadata"].get("ownerReferences") or ())
    ]
    if not kueue:
        raise RuntimeError("Kueue made no Workload for the template workload")
    return {
        "pathwaysjob": cluster.get("pathways-job.pathways.domain/v1", "PathwaysJob", TEMPLATE),
        "jobset": jobset,
        "pods": cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE}),
        "jobs": jobs,
        "job": next(j for j in jobs if "pathways-head" in j["metadata"]["name"]),
        "kueue_workload": kueue[0],
    }


def pause_controllers(cluster: Any) -> None:
    """From here on the driver alone writes the workloads' state (each change then has a known time)."""

    async def stop() -> None:
        for controller in cluster._controllers:
            await controller.stop()

    cluster.call(stop())


def renamed(obj: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    text = json.dumps(obj).replace(TEMPLATE, name).replace('"namespace": "default"', f'"namespace": "{namespace}"')
    copy = json.loads(text)
    meta = copy["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(field, None)
    return copy


def pending_pod_status(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod["status"]
    return {
        "phase": "Pending",
        "qosClass": status.get("qosClass", "BestEffort"),
        "conditions": [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"],
    }


def not_ready(status: dict[str, Any]) -> dict[str, Any]:
    status = json.loads(json.dumps(status))
    for item in status.get("conditions", []):
        if item["type"] in ("Ready", "ContainersReady"):
            item["status"] = "False"
    for container in status.get("containerStatuses", []):
        container["ready"] = False
    return status


def terminated_status(status: dict[str, Any], exit_code: int, reason: str, now: str) -> dict[str, Any]:
    """A pod whose containers have stopped (``exit_code`` for the first, 0 for the others)."""
    status = json.loads(json.dumps(status))
    status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    for index, container in enumerate(status.get("containerStatuses", [])):
        code = exit_code if index == 0 else 0
        container.update(ready=False, started=False, state={"terminated": {"exitCode": code, "reason": reason if code else "Completed", "finishedAt": now}})
    for item in status.get("conditions", []):
        if item["type"] in ("Ready", "ContainersReady"):
            item["status"] = "False"
    return status


class Fleet:
    """N workloads in one namespace as the emulator's controllers made the template, and the
    state changes the driver makes to them.

    Every workload has what a real one has: its PathwaysJob, JobSet, pods, the JobSet's child
    Jobs and Kueue's Workload. ``SHARES`` of them wait in Kueue's queue through the steady window,
    end in a user error or end disrupted; the rest succeed. Both contenders wait on the same
    fleet: ours on the PathwaysJobs, the anchor on their head Jobs.
    """

    def __init__(self, cluster: Any, templates: dict[str, Any], namespace: str, count: int, kind: str, rng: random.Random):
        self.cluster = cluster
        self.templates = templates
        self.namespace = namespace
        self.kind = kind
        self.names = [f"w{i:05d}" for i in range(count)]
        self.ending = {name: self._ending(rng) for name in self.names}
        self.queued = {name for name in self.names if rng.random() < SHARES["queued"]}
        self.state = {name: "pending" for name in self.names}
        kinds = cluster.kinds
        self.k_pathwaysjob = kinds.lookup("pathways-job.pathways.domain", "v1", "pathwaysjobs")
        self.k_jobset = kinds.lookup("jobset.x-k8s.io", "v1alpha2", "jobsets")
        self.k_pod = kinds.lookup("", "v1", "pods")
        self.k_job = kinds.lookup("batch", "v1", "jobs")
        self.k_kueue = kinds.lookup("kueue.x-k8s.io", "v1beta2", "workloads")
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.kueue_names: dict[str, str] = {}
        self.finished_at: dict[str, float] = {}
        from pathways_airflow_testing.controllers import kueue  # Kueue's own status shapes, as its controller writes them
        from pathways_airflow_testing.controllers.base import set_condition  # as every local controller sets one

        self.kueue = kueue
        self.set_condition = set_condition

    def with_condition(self, status: dict[str, Any], type_: str, reason: str, message: str, now: str) -> dict[str, Any]:
        """``status`` with condition ``type_`` True."""
        return {**status, "conditions": self.set_condition(status.get("conditions") or [], type_, "True", reason, message, now)}

    @staticmethod
    def _ending(rng: random.Random) -> str:
        roll = rng.random()
        if roll < SHARES["failing"]:
            return "failing"
        return "disrupted" if roll < SHARES["failing"] + SHARES["disrupted"] else "succeeding"

    def head_job(self, name: str) -> str:
        return next(j["metadata"]["name"] for j in self.templates["jobs"] if "pathways-head" in j["metadata"]["name"]).replace(TEMPLATE, name)

    def pod(self, name: str, part: str) -> dict[str, Any]:
        """The first pod of ``name`` whose name has ``part`` in it (``pathways-head``, ``worker``)."""
        return next(p for p in self.pods[name] if part in p["name"])

    def expected(self, name: str) -> set[str]:
        """What the event of ``name``'s wait may say: ours, the phase; the anchor, the Job's status."""
        if self.kind == "job":
            return {"success"} if self.ending[name] == "succeeding" else {"failed", "error"}
        return {"SUCCEEDED"} if self.ending[name] == "succeeding" else {"FAILED"}

    # created on the cluster's loop, in batches
    def create(self) -> None:
        batch = 200
        for start in range(0, len(self.names), batch):
            self.cluster.call(lambda s=start: [self._create_one(n) for n in self.names[s : s + batch]], timeout=300)

    def _create_one(self, name: str) -> None:
        store, ns, now = self.cluster.store, self.namespace, self.cluster.clock.timestamp()
        store.create(self.k_pathwaysjob, renamed(self.templates["pathwaysjob"], name, ns), namespace=ns)
        jobset = renamed(self.templates["jobset"], name, ns)
        created = store.create(self.k_jobset, jobset, namespace=ns)
        running_status = jobset["status"]
        created["status"] = {"restarts": 0, "conditions": [c for c in running_status.get("conditions", []) if c["type"].startswith("StartupPolicyInProgress")]}
        store.write_status(self.k_jobset, created)
        uid = created["metadata"]["uid"]
        for template in self.templates["jobs"]:
            job = renamed(template, name, ns)
            for ref in job["metadata"].get("ownerReferences") or ():
                ref["uid"] = uid
            stored = store.create(self.k_job, job, namespace=ns)
            store.write_status(self.k_job, dict(stored, status={"active": 1, "ready": 0, "startTime": now}))
        kueue = renamed(self.templates["kueue_workload"], name, ns)
        for ref in kueue["metadata"].get("ownerReferences") or ():
            ref["uid"] = uid
        kueue["metadata"].setdefault("labels", {})["kueue.x-k8s.io/job-uid"] = uid
        stored = store.create(self.k_kueue, kueue, namespace=ns)
        self.kueue_names[name] = stored["metadata"]["name"]
        admitted = self.templates["kueue_workload"]["status"]
        if name in self.queued:
            admitted = self.kueue.pending_status(admitted, "Pending", "couldn't assign flavors to pod set worker: insufficient unused quota", now)
        store.write_status(self.k_kueue, dict(stored, status=admitted))
        pods = []
        for template in self.templates["pods"]:
            pod = renamed(template, name, ns)
            pod["metadata"]["name"] = pod["metadata"]["name"].rsplit("-", 1)[0] + f"-{random.randrange(36**5):05x}"
            stored = store.create(self.k_pod, pod, namespace=ns)
            stored = dict(stored, status=pending_pod_status(template))
            store.write_status(self.k_pod, stored)
            pods.append({"name": stored["metadata"]["name"], "running": renamed(template, name, ns)["status"]})
        self.pods[name] = pods

    # state changes, each on the cluster's loop
    def change(self, name: str) -> None:
        """One non-final change: pending → running, then a worker's readiness flaps (a queued
        workload's Kueue Workload is written again: its pending message is refreshed)."""
        state = self.state[name]
        store, now = self.cluster.store, self.cluster.clock.timestamp()
        if name in self.queued:
            kueue = self._kueue_workload(name)
            store.write_status(self.k_kueue, dict(kueue, status=self.kueue.pending_status(kueue["status"], "Pending", f"insufficient unused quota (as of {now})", now)))
            return
        pods = self.pods[name]
        if state == "pending":
            for pod in pods:
                current = store.get(self.k_pod, self.namespace, pod["name"])
                store.write_status(self.k_pod, dict(current, status=pod["running"]))
            jobset = store.get(self.k_jobset, self.namespace, name)
            store.write_status(self.k_jobset, dict(jobset, status=self.templates["jobset"]["status"]))
            head = store.get(self.k_job, self.namespace, self.head_job(name))
            store.write_status(self.k_job, dict(head, status={**head.get("status", {}), "ready": 1}))
        else:
            worker = self.pod(name, "worker")
            current = store.get(self.k_pod, self.namespace, worker["name"])
            status = not_ready(worker["running"]) if state == "running" else worker["running"]
            store.write_status(self.k_pod, dict(current, status=status))
        self.state[name] = "flapping" if state == "running" else "running"

    def _kueue_workload(self, name: str) -> dict[str, Any]:
        return self.cluster.store.get(self.k_kueue, self.namespace, self.kueue_names[name])

    def finish(self, name: str) -> None:
        """The workload ends as ``self.ending`` says: pods, child Jobs, JobSet and Kueue Workload."""
        store, ns, now = self.cluster.store, self.namespace, self.cluster.clock.timestamp()
        ending = self.ending[name]
        pods = self.pods[name]
        head_pod, worker_pod = self.pod(name, "pathways-head"), self.pod(name, "worker")
        for pod in pods:
            current = store.get(self.k_pod, ns, pod["name"])
            code = 1 if ending == "failing" and pod is head_pod else (143 if ending == "disrupted" and pod is worker_pod else 0)
            status = terminated_status(pod["running"], code, "Error", now)
            if ending == "disrupted" and pod is worker_pod:
                status = self.with_condition(status, "DisruptionTarget", "TerminationByKubelet", "Pod was terminated in response to imminent node shutdown.", now)
            store.write_status(self.k_pod, dict(current, status=status))
        succeeded = ending == "succeeding"
        for template in self.templates["jobs"]:
            job = store.get(self.k_job, ns, template["metadata"]["name"].replace(TEMPLATE, name))
            status = {"active": 0, "ready": 0, "startTime": (job.get("status") or {}).get("startTime", now), "completionTime": now}
            if succeeded or "pathways-head" not in job["metadata"]["name"]:
                status.update(succeeded=1, conditions=[
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                ])
            else:
                status.update(failed=1, conditions=[
                    {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
                ])
                status.pop("completionTime")
            store.write_status(self.k_job, dict(job, status=status))
        jobset = store.get(self.k_jobset, ns, name)
        status = dict(jobset.get("status") or {})
        if succeeded:
            ended, reason, message = "Completed", "AllJobsCompleted", "jobset completed successfully"
        else:
            ended, reason, message = "Failed", "FailedJobs", f"jobset failed due to reaching max number of restarts (first failed job: {self.head_job(name)})"
        status = {**self.with_condition(status, ended, reason, message, now), "terminalState": ended}
        store.write_status(self.k_jobset, dict(jobset, status=status))
        kueue = self._kueue_workload(name)
        store.write_status(self.k_kueue, dict(kueue, status=self.kueue.finished_status(kueue["status"], succeeded, message, now)))
        self.finished_at[name] = time.time()

    def triggers(self, poll_interval: float) -> list[tuple[str, dict[str, Any]]]:
        if self.kind == "job":
            from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger

            made = [
                KubernetesJobTrigger(
                    job_name=self.head_job(name), job_namespace=self.namespace, pod_names=[self.pod(name, "pathways-head")["name"]],
                    pod_namespace=self.namespace, base_container_name="jax-tpu", kubernetes_conn_id="kubernetes_default",
                    poll_interval=poll_interval, get_logs=False, do_xcom_push=False,
                )
                for name in self.names
            ]
        else:
            from pathways_airflow.hooks.pathways import ClusterTarget
            from pathways_airflow.triggers.workload import PathwaysJobTrigger

            made = [
                PathwaysJobTrigger(name=name, namespace=self.namespace, backend="pathwaysjob", target=ClusterTarget().to_dict())
                for name in self.names
            ]
        # Stored and read back as JSON, as the triggerer's database row holds them.
        return [(path, json.loads(json.dumps(kwargs))) for path, kwargs in (t.serialize() for t in made)]


# --- one contender --------------------------------------------------------------------------


def run_contender(cluster: Any, templates: dict[str, Any], label: str, kind: str, poll: float, args: argparse.Namespace, count: int) -> dict[str, Any]:
    namespace = f"bench-{label}-{count}"
    namespaces = cluster.kinds.lookup("", "v1", "namespaces")
    cluster.call(lambda: cluster.store.create(namespaces, {"metadata": {"name": namespace}}))
    fleet = Fleet(cluster, templates, namespace, count, kind, random.Random(f"fleet-{count}"))  # the same fleet for every contender
    began = time.monotonic()
    fleet.create()
    setup_seconds = time.monotonic() - began
    workdir = Path(tempfile.mkdtemp(prefix="triggerer-scale-"))
    spec = {
        # Everything a wait will import is imported before the baseline RSS is read, so the
        # per-wait figure is the waits' own memory. (Ours imports its client library on first
        # use: in a triggerer that import would block the loop once, for import_seconds.)
        "modules": ["airflow.providers.cncf.kubernetes.triggers.job"] if kind == "job" else [
            "pathways_airflow.triggers.workload", "kubernetes_asyncio.client", "airflow.providers.cncf.kubernetes.hooks.kubernetes",
        ],
        "triggers": fleet.triggers(poll),
    }
    (workdir / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ)
    env[CONN_ENV] = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": cluster.kubeconfig}})
    env["KUBECONFIG"] = cluster.kubeconfig
    env.setdefault("AIRFLOW_HOME", str(workdir / "airflow-home"))
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    command = [sys.executable, __file__, "--triggerer", str(workdir / "spec.json"), str(workdir / "out.json")]
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        command += ["--profile", str(Path(args.profile, f"{label}-{count}"))]
    if args.gc_freeze:
        env["AIRFLOW__PATHWAYS__FREEZE_GC_AFTER_SYNC"] = "True"
    if args.tracemalloc:
        Path(args.tracemalloc).mkdir(parents=True, exist_ok=True)
        env["TRIGGERER_SCALE_TRACEMALLOC"] = str(Path(args.tracemalloc, f"{label}-{count}-memory.txt"))
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()

    def send(line: str) -> None:
        child.stdin.write(line + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]

    def wait_line(word: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.strip() == word for line in lines):
                return True
            if child.poll() is not None:
                raise RuntimeError(f"the {label} triggerer exited with {child.returncode}")
            time.sleep(0.02)
        return False

    rng = random.Random(f"{label}-{count}")
    try:
        counts_start = cluster.request_counts
        if not wait_line("started", 120):
            raise RuntimeError(f"the {label} triggerer did not start")
        # Warm-up: every wait has reached the API once (ours: its shared watches are open; the
        # anchor: one status read per Job), then --warmup seconds more.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            counts = cluster.request_counts
            if kind == "job" and counts.get("GET", 0) - counts_start.get("GET", 0) >= count:
                break
            if kind != "job" and counts.get("watch", 0) - counts_start.get("watch", 0) >= 4:
                break
            time.sleep(0.05)
        time.sleep(args.warmup)

        # steady window: random non-final changes
        counts_before = cluster.request_counts
        send("mark steady")
        started = time.monotonic()
        rate = count / args.change_every
        due: list[float] = []
        moment = rng.expovariate(rate)
        while moment < args.window:
            due.append(moment)
            moment += rng.expovariate(rate)
        changes = 0
        while True:
            now = time.monotonic() - started
            ready = [t for t in due[changes:] if t <= now]
            if ready:
                picks = [rng.choice(fleet.names) for _ in ready]
                cluster.call(lambda p=picks: [fleet.change(n) for n in p])
                changes += len(ready)
            if now >= args.window:
                break
            time.sleep(0.01)
        steady_seconds = time.monotonic() - started
        counts_after = cluster.request_counts
        send("mark finish")

        # finish window: every workload finishes at a random time
        finish_times = sorted((rng.uniform(0, args.finish), name) for name in fleet.names)
        started = time.monotonic()
        index = 0
        while index < len(finish_times):
            now = time.monotonic() - started
            batch = []
            while index < len(finish_times) and finish_times[index][0] <= now:
                batch.append(finish_times[index][1])
                index += 1
            if batch:
                cluster.call(lambda b=batch: [fleet.finish(n) for n in b])
            time.sleep(0.005)
        all_events = wait_line("done", poll + args.drain)
        send("stop")
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    out = json.loads((workdir / "out.json").read_text())
    window_requests = {k: counts_after.get(k, 0) - counts_before.get(k, 0) for k in set(counts_after) | set(counts_before)}
    requests = sum(window_requests.values())
    marks = out["marks"]
    cpu = marks["finish"]["cpu"] - marks["steady"]["cpu"]
    wall = marks["finish"]["time"] - marks["steady"]["time"]
    events = {n: out["events"][fleet.head_job(n) if kind == "job" else n] for n in fleet.names if (fleet.head_job(n) if kind == "job" else n) in out["events"]}
    latencies = [events[n]["time"] - t for n, t in fleet.finished_at.items() if n in events]
    watch_events = marks["finish"]["watch_events"] - marks["steady"]["watch_events"]
    full_collections = {p: c.get("2", {}) for p, c in out["collections"].items()}
    steady_stalls = [out["stalls"][p] for p in ("steady", "finish") if p in out["stalls"]]
    start_stall = out["stalls"].get("start", {}).get("max", 0.0)
    peak = out["peak_rss_kb"]
    return {
        "contender": label,
        "waits": count,
        "poll_interval_s": poll if kind == "job" else None,
        "setup_seconds": round(setup_seconds, 1),
        "steady_window_s": round(steady_seconds, 1),
        "state_changes_in_window": changes,
        "requests_in_window": requests,
        "requests_by_verb": dict(sorted(window_requests.items())),
        "requests_per_s": round(requests / steady_seconds, 2),
        "cpu_s_per_min": round(cpu / wall * 60, 2),
        "import_seconds": round(out["import_seconds"], 2),
        "baseline_rss_mb": round(out["baseline_rss_kb"] / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "rss_kb_per_wait": round((peak - out["baseline_rss_kb"]) / count, 1),
        "steady_rss_mb": round(marks["finish"]["rss_kb"] / 1024, 1),
        "events": len(out["events"]),
        "all_events_received": all_events,
        "unexpected_events": sum(1 for n, e in events.items() if (e["status"] if kind == "job" else e["phase"]) not in fleet.expected(n)),
        "endings": {ending: sum(1 for e in fleet.ending.values() if e == ending) for ending in ("succeeding", "failing", "disrupted")},
        "queued_in_window": len(fleet.queued),
        "reaction_by_ending": {
            ending: {"p50_s": round(percentile(v, 0.5), 3), "max_s": round(max(v), 3)}
            for ending in ("succeeding", "failing", "disrupted")
            if (v := [events[n]["time"] - t for n, t in fleet.finished_at.items() if n in events and fleet.ending[n] == ending])
        },
        "reaction_p50_s": round(percentile(latencies, 0.5), 3),
        "reaction_p99_s": round(percentile(latencies, 0.99), 3),
        "reaction_max_s": round(max(latencies), 3) if latencies else None,
        "max_stall_ms": round(max((s["max"] for s in steady_stalls), default=0.0) * 1000, 1),
        "stalls_over_100ms": sum(s["over_100ms"] for s in steady_stalls),
        "startup_max_stall_ms": round(start_stall * 1000, 1),
        "watch_events_in_window": watch_events,
        "cpu_us_per_watch_event": round(cpu / watch_events * 1e6, 1) if watch_events else None,
        "full_gc": {p: {"count": c.get("count", 0), "max_ms": round(c.get("max", 0.0) * 1000, 1)} for p, c in full_collections.items()},
        "max_full_gc_ms_in_windows": round(max((full_collections.get(p, {}).get("max", 0.0) for p in ("steady", "finish")), default=0.0) * 1000, 1),
    }


def ratios(ours: dict[str, Any], anchor: dict[str, Any], window: float) -> dict[str, Any]:
    floor = 1 / window  # zero requests in the window: count one, so the ratio stays finite (a lower bound)
    return {
        "anchor": anchor["contender"],
        "fewer_requests_x": round(anchor["requests_per_s"] / max(ours["requests_per_s"], floor), 1),
        "requests_ratio_is_lower_bound": ours["requests_in_window"] == 0,
        "cpu_fraction": round(ours["cpu_s_per_min"] / anchor["cpu_s_per_min"], 3) if anchor["cpu_s_per_min"] else None,
        "rss_per_wait_fraction": round(ours["rss_kb_per_wait"] / anchor["rss_kb_per_wait"], 3) if anchor["rss_kb_per_wait"] > 0 else None,
        "reaction_p99_fraction": round(ours["reaction_p99_s"] / anchor["reaction_p99_s"], 3) if anchor["reaction_p99_s"] else None,
    }


def targets(ours: dict[str, Any], anchor10: dict[str, Any] | None, window: float) -> dict[str, Any]:
    result = {
        "p99_reaction_le_1s": ours["reaction_p99_s"] <= 1.0,
        "rss_le_50kb_per_wait": ours["rss_kb_per_wait"] <= 50,
        "no_stall_over_100ms": ours["max_stall_ms"] <= 100,
    }
    if anchor10:
        r = ratios(ours, anchor10, window)
        result["requests_20x_fewer_than_anchor_10s"] = r["fewer_requests_x"] >= 20
        result["cpu_le_fifth_of_anchor_10s"] = r["cpu_fraction"] is not None and r["cpu_fraction"] <= 0.2
    return result


COLUMNS = [
    ("contender", "contender"),
    ("waits", "N"),
    ("requests_per_s", "req/s"),
    ("cpu_s_per_min", "CPU s/min"),
    ("peak_rss_mb", "peak RSS MB"),
    ("rss_kb_per_wait", "KB/wait"),
    ("reaction_p50_s", "react p50 s"),
    ("reaction_p99_s", "react p99 s"),
    ("max_stall_ms", "max stall ms"),
    ("max_full_gc_ms_in_windows", "max full GC ms"),
    ("startup_max_stall_ms", "start-up stall ms"),
    ("cpu_us_per_watch_event", "CPU µs/event"),
    ("events", "events"),
]


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [[str(row[key]) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(title), *(len(c[i]) for c in cells)) for i, (_, title) in enumerate(COLUMNS)]
    print("  ".join(title.ljust(w) for (_, title), w in zip(COLUMNS, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, nargs="+", default=[1000], help="how many deferred waits (one run per value)")
    parser.add_argument("--anchor-polls", type=float, nargs="*", default=[10.0, 2.0], help="KubernetesJobTrigger poll_interval values")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds between starting the triggers and the steady window")
    parser.add_argument("--window", type=float, default=30.0, help="steady window, seconds")
    parser.add_argument("--finish", type=float, default=20.0, help="finish window, seconds")
    parser.add_argument("--drain", type=float, default=20.0, help="seconds (beyond the poll interval) to wait for the last events")
    parser.add_argument("--change-every", type=float, default=60.0, help="mean seconds between state changes of one workload")
    parser.add_argument("--skip-ours", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 waits, short windows, the anchor at 2 s only")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--profile", metavar="DIR", help="run each triggerer process under cProfile; stats go to DIR/<contender>-<N>.{prof,txt}")
    parser.add_argument("--tracemalloc", metavar="DIR", help="trace allocations in each triggerer process; the top lines at the end of the steady window go to DIR")
    parser.add_argument("--gc-freeze", action="store_true", help="run the triggerer processes with [pathways] freeze_gc_after_sync = True")
    parser.add_argument("--triggerer", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.triggerer:
        logging.basicConfig(level=logging.WARNING)
        if not args.profile:
            asyncio.run(triggerer(*args.triggerer))
            return 0
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(asyncio.run, triggerer(*args.triggerer))
        profiler.dump_stats(args.profile + ".prof")
        with open(args.profile + ".txt", "w") as text:
            stats = pstats.Stats(profiler, stream=text).sort_stats("tottime")
            stats.print_stats(25)
            stats.sort_stats("cumulative").print_stats(40)
        return 0
    if args.quick:
        # The steady window spans a few of the anchor's poll cycles (poll + one status read each),
        # so it always sees the anchor poll however loaded the machine is.
        args.waits, args.anchor_polls = [20], [2.0]
        args.warmup, args.window, args.finish, args.drain, args.change_every = 0.5, 6.0, 1.5, 8.0, 2.0

    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="triggerer-scale-home-"))
    from pathways_airflow_testing import LocalCluster

    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "settings": {k: getattr(args, k) for k in ("waits", "anchor_polls", "warmup", "window", "finish", "change_every", "quick", "gc_freeze")},
        "runs": [],
        "ratios": [],
        "targets": {},
    }
    with LocalCluster(speed=60, gcs=False, kueue=True) as cluster:
        templates = capture_templates(cluster)
        pause_controllers(cluster)
        for count in args.waits:
            rows = []
            if not args.skip_ours:
                rows.append(run_contender(cluster, templates, "ours", "pathwaysjob", 0.0, args, count))
            for poll in args.anchor_polls:
                rows.append(run_contender(cluster, templates, f"anchor-{poll:g}s", "job", poll, args, count))
            report["runs"].extend(rows)
            ours = next((r for r in rows if r["contender"] == "ours"), None)
            if ours:
                anchors = [r for r in rows if r is not ours]
                report["ratios"].extend(dict(ratios(ours, a, args.window), waits=count) for a in anchors)
                anchor10 = next((a for a in anchors if a["poll_interval_s"] == 10.0), None)
                report["targets"][str(count)] = targets(ours, anchor10, args.window)
            print_table(rows)
            for r in report["ratios"]:
                if r["waits"] == count:
                    print(f"  vs {r['anchor']}: {r['fewer_requests_x']}x fewer requests/s, CPU x{r['cpu_fraction']}, RSS/wait x{r['rss_per_wait_fraction']}, p99 reaction x{r['reaction_p99_fraction']}")
            print()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
