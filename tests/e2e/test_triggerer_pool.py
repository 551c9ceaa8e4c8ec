"""Two triggerers on PostgreSQL hold a fleet of deferred waits; losing one costs no workload.

A real Airflow deployment (``tests/support/deployment.py``) on a private PostgreSQL server
(``tests/support/postgres.py``): api-server, scheduler (LocalExecutor), dag-processor and two
``airflow triggerer`` processes, against a local cluster of one-host v5e slices. The fleet DAG
(``dags/pw_triggerer_pool.py``) defers ``PATHWAYS_TRIGGERER_POOL_WAITS`` waits (default 24, for
CI's time; each costs a worker run to defer and one to resume). Airflow gives a triggerer every
unassigned trigger it has room for, so which one takes a burst of deferrals is a race; to make the
spread certain, the first triggerer runs with ``--capacity`` of half the fleet and the second,
unbounded, starts once the first is full and takes the rest. A sampler lists every PathwaysJob of
the fleet every 0.1 s: per task, which workloads were ever created and how many were live at once.

- **SIGKILL**: the bounded triggerer, holding half the waits, dies at once; while nobody watches its
  share, the user's bug in one wait in ten exits 3 and the slice of another one in ten is lost.
  The survivor takes the dead one's triggers over once its heartbeat is older than
  ``[triggerer] triggerer_health_check_threshold`` (5 s here) and judges what happened while
  nobody watched: each bug fails its task at once (no Airflow retry, one workload), each lost
  slice is resubmitted once (one workload live at a time) and succeeds, every other wait
  succeeds with its one workload; nothing is left in the cluster. The time to take over is
  printed (kill → every trigger assigned to the survivor).
- **SIGTERM**: a triggerer stopped gracefully gives its triggers back at once; the other one
  takes them over without deleting, re-creating or misjudging any workload.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from pathways_airflow.spec.names import TASK_KEY_LABEL, TaskIdentity
from pathways_airflow.well_known import JOBSET_NAME, NODEPOOL, REPLICATED_JOB
from tests.support import postgres
from tests.support.connections import cluster_environment
from tests.support.deployment import AirflowDeployment, DeploymentError, wait_until
from tests.support.gcs import gcs_bucket
from tests.support.workloads import WorkloadSampler

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.skipif(postgres.missing() is not None, reason=str(postgres.missing())),
]

WAITS = int(os.environ.get("PATHWAYS_TRIGGERER_POOL_WAITS", "24"))
DAG_FILE = Path(__file__).parent / "dags" / "pw_triggerer_pool.py"
DAG_ID, TASK_ID = "pw_triggerer_pool", "wait"
PATHWAYSJOB = ("pathways-job.pathways.domain/v1", "PathwaysJob")
GATES = "gs://pathways-demo/pool"
HEALTH_CHECK_THRESHOLD = 5
"""``[triggerer] triggerer_health_check_threshold`` (s) of the deployment (tests/support/deployment.py)."""
BOUNDED, UNBOUNDED = "triggerer", "triggerer.2"
CAPACITY = math.ceil(WAITS / 2)
"""The bounded triggerer's ``airflow triggerer --capacity``: the most triggers it runs at once."""


def kind_of(map_index: int) -> str:
    """``bug``, ``disrupted`` or ``success``: one wait in ten of each of the first two."""
    return {3: "bug", 7: "disrupted"}.get(map_index % 10, "success")


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet_cluster() -> Iterator[Any]:
    """One one-host v5e slice per wait, plus spares for the lost slices' resubmissions, and as
    many CPU nodes for the Pathways heads (a head keeps a node to itself: pod anti-affinity)."""
    from pathways_airflow_testing import LocalCluster, NodePool, tpu_pool

    slices = WAITS + math.ceil(WAITS / 10) + 2
    pools = [
        NodePool("default-pool", "n2-standard-64", nodes=slices),
        *(tpu_pool(f"tpu-v5e-2x2-{i}", "ct5lp-hightpu-4t", "2x2") for i in range(slices)),
    ]
    with LocalCluster(node_pools=pools, speed=60) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def pool(fleet_cluster, tmp_path_factory) -> Iterator[AirflowDeployment]:
    """The deployment on PostgreSQL with the bounded triggerer running; a test starts the unbounded
    one (``start_triggerer``). ``pool.triggerer_jobs`` maps each triggerer component to the id of
    its job (started one after the other to tell them apart)."""
    with postgres.PostgresServer() as database:
        airflow = AirflowDeployment(
            tmp_path_factory.mktemp("airflow-triggerer-pool"), [DAG_FILE], cluster_environment(fleet_cluster),
            database_url=database.url(), arguments={BOUNDED: ["--capacity", str(CAPACITY)]},
        )
        with airflow.serving(DAG_ID):
            airflow.triggerer_jobs = {BOUNDED: airflow.live_jobs("triggerer")[0]["id"]}  # type: ignore[attr-defined]
            yield airflow


def start_triggerer(airflow: AirflowDeployment, name: str) -> int:
    """Start one more triggerer (unless it runs) and note its job's id."""
    running = airflow.components.get(name)
    if running is not None and running.process.poll() is None:
        return int(airflow.triggerer_jobs[name])  # type: ignore[attr-defined]
    newest = max(j["id"] for j in airflow.live_jobs("triggerer")) if airflow.live_jobs("triggerer") else 0
    airflow.start(name)
    job = airflow.wait_for_new_job("triggerer", after_id=newest, timeout=90)["id"]
    airflow.triggerer_jobs[name] = job  # type: ignore[attr-defined]
    return job


# --- watching the fleet -------------------------------------------------------------------------------


def fleet_sampler(cluster: Any, run_id: str, waits: int) -> WorkloadSampler[int]:
    """The fleet's PathwaysJobs, every 0.1 s, by map index."""
    return WorkloadSampler(cluster, {TaskIdentity(DAG_ID, TASK_ID, run_id, i).key: i for i in range(waits)})


def task_instances(airflow: AirflowDeployment, run_id: str) -> dict[int, dict[str, Any]]:
    """Every mapped instance of the fleet's task, by map index (the REST API pages by 100)."""
    found: dict[int, dict[str, Any]] = {}
    while True:
        page = airflow.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", task_id=TASK_ID, limit=100, offset=len(found))
        for ti in page["task_instances"]:
            if ti["task_id"] == TASK_ID and ti["map_index"] >= 0:
                found[ti["map_index"]] = ti
        if not page["task_instances"] or len(found) >= page["total_entries"]:
            return found


def holders(tis: dict[int, dict[str, Any]]) -> Counter[int | None]:
    """How many deferred waits each triggerer job holds (None: not yet assigned)."""
    return Counter((ti.get("trigger") or {}).get("triggerer_id") for ti in tis.values() if ti["state"] == "deferred")


def worker_pool(cluster: Any, workload: str) -> str | None:
    """The node pool the slice of ``workload`` (a PathwaysJob's JobSet) runs on now."""
    labels = {JOBSET_NAME: workload, REPLICATED_JOB: "worker"}
    for pod in cluster.list("v1", "Pod", "default", labels=labels):
        node = pod["spec"].get("nodeName")
        if node and pod["status"].get("phase") == "Running":
            return str(cluster.get("v1", "Node", node, None)["metadata"]["labels"][NODEPOOL])
    return None


def release(cluster: Any, uri: str) -> None:
    """Write the gate object the waits' programs run until (``PATHWAYS_TESTING_EXIT_WHEN``)."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    with gcs_bucket(cluster, bucket) as gcs:
        gcs.blob(name).upload_from_string(b"")


@contextlib.contextmanager
def fleet(airflow: AirflowDeployment, cluster: Any, name: str, waits: int) -> Iterator[tuple[str, WorkloadSampler[int], str]]:
    """A fleet run of ``waits`` waits, its sampler and its gate prefix; logs printed on failure."""
    run_id = f"{name}-{uuid.uuid4().hex[:8]}"
    gate = f"{GATES}/{run_id}"
    sampler = fleet_sampler(cluster, run_id, waits)
    sampler.start()
    started = time.monotonic()
    try:
        airflow.trigger(DAG_ID, {"kinds": [kind_of(i) for i in range(waits)], "gate": gate}, run_id=run_id)
        yield run_id, sampler, gate
    except BaseException:
        print(f"{name} failed after {time.monotonic() - started:.1f}s")
        with contextlib.suppress(Exception):
            print(Counter(ti["state"] for ti in task_instances(airflow, run_id).values()))
        print(airflow.log_tails(80))
        raise
    finally:
        sampler.stop()
        print(f"{name}: {time.monotonic() - started:.1f}s")


def all_deferred_and_watching(airflow: AirflowDeployment, cluster: Any, run_id: str, sampler: WorkloadSampler[int], waits: int, timeout: float) -> dict[int, dict[str, Any]]:
    """Every wait deferred, its trigger assigned to a live triggerer, its workload live."""

    def ready() -> dict[int, dict[str, Any]] | None:
        tis = task_instances(airflow, run_id)
        deferred = [ti for ti in tis.values() if ti["state"] == "deferred" and (ti.get("trigger") or {}).get("triggerer_id")]
        ended = {i: ti["state"] for i, ti in tis.items() if ti["state"] not in ("deferred", "running", "queued", "scheduled", None)}
        if ended:
            raise DeploymentError(f"waits ended before the scenario could act: {ended}")
        return tis if len(deferred) == waits and len(sampler.live_by) == waits else None

    return wait_until(f"{waits} waits deferred and assigned", ready, timeout, interval=1.0)


def all_ended(airflow: AirflowDeployment, run_id: str, timeout: float) -> dict[int, dict[str, Any]]:
    def ended() -> dict[int, dict[str, Any]] | None:
        tis = task_instances(airflow, run_id)
        return tis if all(ti["state"] in ("success", "failed") for ti in tis.values()) else None

    return wait_until("every wait ended", ended, timeout, interval=1.0)


def leftovers(cluster: Any, sampler: WorkloadSampler[int]) -> list[str]:
    return [
        job["metadata"]["name"]
        for job in cluster.list(*PATHWAYSJOB, "default")
        if (job["metadata"].get("labels") or {}).get(TASK_KEY_LABEL) in sampler.keys
    ]


# --- scenarios ----------------------------------------------------------------------------------------


def test_a_triggerer_killed_mid_wait_costs_no_workload_and_misjudges_nothing(pool, fleet_cluster):
    budget = 120 + 3 * WAITS
    if (second := pool.components.get(UNBOUNDED)) is not None and second.process.poll() is None:
        second.process.terminate()  # the bounded triggerer must take its share first
        second.process.wait(timeout=60)
    with fleet(pool, fleet_cluster, "sigkill", WAITS) as (run_id, sampler, gate):
        jobs = pool.triggerer_jobs  # type: ignore[attr-defined]
        wait_until(
            f"{BOUNDED} holding {CAPACITY} waits, its capacity",
            lambda: holders(task_instances(pool, run_id))[jobs[BOUNDED]] == CAPACITY, budget, interval=1.0,
        )
        start_triggerer(pool, UNBOUNDED)
        tis = all_deferred_and_watching(pool, fleet_cluster, run_id, sampler, WAITS, budget)
        held = holders(tis)
        assert all(held[job] > 0 for job in jobs.values()), f"the waits should be spread over both triggerers: {held}"
        victim, survivor = BOUNDED, UNBOUNDED
        disrupted = [i for i in range(WAITS) if kind_of(i) == "disrupted"]
        pools = wait_until(
            "the slices of the waits to disrupt running",
            lambda: (lambda found: found if all(found.values()) else None)({i: worker_pool(fleet_cluster, sampler.live_by[i][0]) for i in disrupted}),
            60,
        )

        pool.kill(victim)
        killed_at = time.monotonic()
        release(fleet_cluster, f"{gate}/bugs")
        for node_pool in pools.values():
            fleet_cluster.lose_slice(node_pool, downtime=120.0, wait=False)

        def taken_over() -> bool:
            return holders(task_instances(pool, run_id)).get(jobs[victim], 0) == 0

        wait_until(f"{survivor} holding every wait of {victim}", taken_over, 60, interval=0.5)
        takeover = time.monotonic() - killed_at
        bugs = [i for i in range(WAITS) if kind_of(i) == "bug"]
        wait_until(
            "every bug's task failed",
            lambda: all(task_instances(pool, run_id)[i]["state"] == "failed" for i in bugs), budget,
        )
        wait_until("every lost slice's wait resubmitted", lambda: all(len(sampler.created_by[i]) == 2 for i in disrupted), budget)
        release(fleet_cluster, f"{gate}/all")
        tis = all_ended(pool, run_id, budget)

        states = {i: (tis[i]["state"], tis[i]["try_number"]) for i in range(WAITS)}
        expected = {i: ("failed" if kind_of(i) == "bug" else "success", 1) for i in range(WAITS)}
        assert states == expected, {i: s for i, s in states.items() if s != expected[i]}
        created = {i: len(sampler.created_by[i]) for i in range(WAITS)}
        assert created == {i: 2 if kind_of(i) == "disrupted" else 1 for i in range(WAITS)}, created
        assert max(sampler.most_live_by.values()) == 1, "never two live workloads for one wait"
        wait_until("every finished workload deleted", lambda: not leftovers(fleet_cluster, sampler), 60)
        print(
            f"{WAITS} waits on {len(jobs)} triggerers {dict(held)}; killed {victim} (pid tree) holding {held[jobs[victim]]}; "
            f"{survivor} held them all {takeover:.1f}s later (health check threshold {HEALTH_CHECK_THRESHOLD}s)"
        )
    start_triggerer(pool, victim)


def test_a_triggerer_stopped_gracefully_hands_its_waits_over_without_touching_a_workload(pool, fleet_cluster):
    waits = min(max(10, WAITS // 3), CAPACITY)  # the bounded one has room for all if the other leaves
    budget = 120 + 3 * waits
    for name in (BOUNDED, UNBOUNDED):
        start_triggerer(pool, name)
    with fleet(pool, fleet_cluster, "sigterm", waits) as (run_id, sampler, gate):
        tis = all_deferred_and_watching(pool, fleet_cluster, run_id, sampler, waits, budget)
        held = holders(tis)
        jobs = pool.triggerer_jobs  # type: ignore[attr-defined]
        leaving = max(jobs, key=lambda name: held[jobs[name]])
        assert held[jobs[leaving]] > 0, held
        stopping = pool.components[leaving]
        stopping.process.terminate()
        stopped_at = time.monotonic()
        stopping.process.wait(timeout=60)
        exited = time.monotonic() - stopped_at

        wait_until(
            "the other triggerer holding every wait",
            lambda: holders(task_instances(pool, run_id)).get(jobs[leaving], 0) == 0, 60, interval=0.5,
        )
        handover = time.monotonic() - stopped_at
        assert not any(sampler.deleting_by.values()), f"a graceful stop must delete no workload: {sampler.deleting_by}"
        release(fleet_cluster, f"{gate}/bugs")
        release(fleet_cluster, f"{gate}/all")
        tis = all_ended(pool, run_id, budget)

        states = {i: (ti["state"], ti["try_number"]) for i, ti in tis.items()}
        expected = {i: ("failed" if kind_of(i) == "bug" else "success", 1) for i in range(waits)}
        assert states == expected, {i: s for i, s in states.items() if s != expected[i]}
        assert {i: len(sampler.created_by[i]) for i in range(waits)} == {i: 1 for i in range(waits)}
        wait_until("every finished workload deleted", lambda: not leftovers(fleet_cluster, sampler), 60)
        print(f"{waits} waits {dict(held)}; {leaving} exited {exited:.1f}s after SIGTERM, its waits held by the other {handover:.1f}s after")
    start_triggerer(pool, leaving)
