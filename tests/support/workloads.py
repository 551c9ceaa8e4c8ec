"""Training workloads on the local cluster without an operator, and acting when one reaches a step."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Generic, Hashable, Mapping, TypeVar

from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.spec import TaskIdentity, build_workload, render
from pathways_airflow.spec.names import TASK_KEY_LABEL


def submit_training(name: str, steps: int = 40, backend: str = "jobset") -> PathwaysHook:
    """Create a MaxText-like training of ``steps`` steps (2 simulated seconds each) named ``name``
    in ``default``, through the hook the connection points at; returns that hook."""
    hook = PathwaysHook()
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", f"steps={steps}", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2"},
    )
    hook.create(render(workload, backend=backend, name=name, namespace="default"))
    return hook


def when_step(
    cluster: Any, identity: TaskIdentity, step: int, action: Callable[[str], Any], *, container: str = "main", prefix: str | None = None,
    jobs: tuple[str, str] = ("pathways-head", "worker"),
) -> threading.Thread:
    """Run ``action(node_pool_of_the_worker)`` once the training has logged ``completed step: step``.

    Watches the head pods of every attempt of ``identity``'s workload (named with ``prefix``, if
    the task has one) for up to 60 s, in a daemon thread (returned), so a test can disrupt the
    slice a running task is on at a known step. ``container`` runs the training; ``jobs`` names
    the replicated jobs of the head and of the slices (both ``slice`` in a plain multislice JobSet).
    """
    head_job, worker_job = jobs
    pools: dict[str, str] = {}  # workload → its worker's node pool, noted while the worker is there

    def worker_pool(name: str) -> str | None:
        if name not in pools:
            labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": worker_job}
            placed = [p for p in cluster.list("v1", "Pod", "default", labels=labels) if p["spec"].get("nodeName")]
            if placed:
                node = cluster.get("v1", "Node", placed[0]["spec"]["nodeName"], namespace=None)
                pools[name] = node["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
        return pools.get(name)

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for pod in cluster.list("v1", "Pod", "default"):
                labels = pod["metadata"].get("labels") or {}
                name = labels.get("jobset.sigs.k8s.io/jobset-name", "")
                if not name.startswith(identity.workload_name(0, prefix)) or labels.get("jobset.sigs.k8s.io/replicatedjob-name") != head_job:
                    continue
                pool = worker_pool(name)
                if pool and any(f"completed step: {step}," in line for line in cluster.read_log("default", pod["metadata"]["name"], container)):
                    action(pool)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def labelled_workload(
    hook: PathwaysHook, name: str, namespace: str, identity: TaskIdentity | None, *, backend: str = "jobset", num_slices: int = 1
) -> dict[str, Any]:
    """Create an idle (headless) v5e 2x2 workload of ``num_slices`` slices, 4 chips each, labelled
    and annotated for ``identity``'s task instance as the operator would, or not at all (``None``)."""
    workload = build_workload(tpu="v5e", topology="2x2", num_slices=num_slices, pathways_dir="gs://pathways-demo/tmp")
    labels = identity.labels() if identity else None
    annotations = identity.annotations() if identity else None
    return hook.create(render(workload, backend=backend, name=name, namespace=namespace, labels=labels, annotations=annotations))


K = TypeVar("K", bound=Hashable)
PATHWAYSJOB = ("pathways-job.pathways.domain/v1", "PathwaysJob")


class WorkloadSampler(threading.Thread, Generic[K]):
    """Lists the PathwaysJobs of some tasks every ``interval`` seconds and remembers, per task
    (``keys``: task key → what the test calls that task), every workload ever created (uid →
    name), the ones seen being deleted, the most live at once and the live ones now.

    ``labels`` narrows the listing (one task: its task-key label); else the namespace is listed.
    """

    def __init__(self, cluster: Any, keys: Mapping[str, K], *, interval: float = 0.1, labels: dict[str, str] | None = None):
        super().__init__(daemon=True, name=f"sampler-{len(keys)}")
        self.cluster = cluster
        self.keys = dict(keys)
        self.interval = interval
        self.labels = labels
        self.created_by: dict[K, dict[str, str]] = {k: {} for k in self.keys.values()}
        self.deleting_by: dict[K, set[str]] = {k: set() for k in self.keys.values()}
        self.most_live_by: Counter[K] = Counter()
        self.live_by: dict[K, list[str]] = {}
        self.samples = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def jobs(self) -> list[dict[str, Any]]:
        return self.cluster.list(*PATHWAYSJOB, "default", labels=self.labels)

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                live: dict[K, list[str]] = {}
                for job in self.jobs():
                    meta = job["metadata"]
                    task = self.keys.get((meta.get("labels") or {}).get(TASK_KEY_LABEL, ""))
                    if task is None:
                        continue
                    self.created_by[task].setdefault(meta["uid"], meta["name"])
                    if meta.get("deletionTimestamp"):
                        self.deleting_by[task].add(meta["uid"])
                    else:
                        live.setdefault(task, []).append(meta["name"])
                for task, names in live.items():
                    self.most_live_by[task] = max(self.most_live_by[task], len(names))
                self.live_by = live
                self.samples += 1
                self._halt.wait(self.interval)
        except BaseException as error:  # surfaced by stop()
            self.error = error

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)
        if self.error is not None:
            raise self.error


class LiveWorkloads:
    """Samples the cluster while a task runs: how many of its workloads are alive at once, and
    each one as first seen (``seen``, by name: what was submitted)."""

    def __init__(self, cluster, identity: TaskIdentity, api="pathways-job.pathways.domain/v1", kind="PathwaysJob"):
        self.cluster, self.identity, self.api, self.kind = cluster, identity, api, kind
        self.most = 0
        self.seen: dict[str, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            items = self.cluster.list(self.api, self.kind, "default", labels={TASK_KEY_LABEL: self.identity.key})
            live = [i for i in items if not i["metadata"].get("deletionTimestamp") and not (i.get("status") or {}).get("terminalState")]
            self.most = max(self.most, len(live))
            for item in items:
                self.seen.setdefault(item["metadata"]["name"], item)
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
