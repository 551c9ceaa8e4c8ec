"""A deleted workload's pods do not keep their TPUs while a busy garbage collector takes its time.

The local cluster's collector is made late (:meth:`LocalCluster.slow_garbage_collector`): the
workload is marked deleted at once, its JobSet, Jobs and pods run on, as on a busy GKE cluster
(domain.md, "Cleanup in practice"). Once the margin is over (5 s, whatever the pods' grace
period), what the collector has not reached is deleted directly, top down, and the chips are
reported. The workloads' pods ask for a 1 s grace period: how long they take to stop once marked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget, PathwaysHook
from pathways_airflow.operators import DeletePathwaysJobOperator
from pathways_airflow.resources import JOB, JOBSET, PATHWAYSJOB, POD
from pathways_airflow.spec import build_workload, render
from pathways_airflow.hooks.reclaim import delete_left_behind
from pathways_airflow.state.reclaim import COLLECTOR_MARGIN_SECONDS, Leftovers
from pathways_airflow.triggers.deletion import deletes_in_progress
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from pathways_airflow.well_known import jobset_selector
from tests.support.waiting import wait_for

GRACE = 1
LATE_AFTER = COLLECTOR_MARGIN_SECONDS


@pytest.fixture
def late_collector(pathways_cluster):
    """A collector that would reach the dependents in about 11 days of cluster time (4.6 h real)."""
    pathways_cluster.slow_garbage_collector(1e6)
    try:
        yield pathways_cluster
    finally:
        pathways_cluster.slow_garbage_collector(0)


def running_training(name: str, backend: str) -> PathwaysHook:
    hook = PathwaysHook()
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "steps=10000"], env={"PATHWAYS_TESTING_STEP_SECONDS": "2"},
        termination_grace_period_seconds=GRACE,
    )
    hook.create(render(workload, backend=backend, name=name, namespace="default"))
    wait_for(lambda: len(running_pods(hook, name)) == 3, timeout=60, what="the head and two worker pods running")
    return hook


def running_pods(hook: PathwaysHook, name: str) -> list[dict]:
    return [p for p in hook.list(POD, "default", label_selector=jobset_selector(name)) if p["status"].get("phase") == "Running"]


def test_a_killed_tasks_workload_is_gone_even_when_the_collector_never_comes(late_collector, caplog):
    """The trigger's on_kill hands the delete to the triggerer's loop; it outlives the triggerer's
    patience, sees the collector late, and deletes the Jobs and pods itself."""
    name = "gc-late-kill"
    hook = running_training(name, "jobset")
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict())
    caplog.set_level(logging.INFO, logger="pathways_airflow")

    async def triggerer() -> list[dict]:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(trigger.on_kill(), timeout=2.0)  # the triggerer's on_kill_timeout, shortened
        await asyncio.sleep(2.0)
        marked = await AsyncPathwaysHook(ClusterTarget()).get(JOBSET, "default", name)
        still_running = running_pods(hook, name)
        for _ in range(int(LATE_AFTER * 4) + 60):  # the triggerer's loop runs on, for its other triggers
            if not deletes_in_progress():
                break
            await asyncio.sleep(0.25)
        await AsyncPathwaysHook.close_all()
        assert marked is not None and marked["metadata"].get("deletionTimestamp"), "the DELETE was accepted at once"
        return still_running

    still_running = asyncio.run(triggerer())
    assert len(still_running) == 3, "the collector is late: the pods outlived the DELETE"
    wait_for(lambda: not hook.list(POD, "default", label_selector=jobset_selector(name)), timeout=10, what="the pods gone")
    assert not hook.list(JOB, "default", label_selector=jobset_selector(name))
    # What holds no TPU is left to the collector: the marked JobSet waits for its Service and
    # Kueue Workload, as foreground deletion makes it.
    assert hook.get(JOBSET, "default", name)["metadata"]["deletionTimestamp"]
    [line] = [r.getMessage() for r in caplog.records if "garbage collector had not reached" in r.getMessage()]
    assert line.startswith(f"default/{name}: the garbage collector had not reached 2 Jobs and 3 pods ")
    assert line.endswith("reclaiming 8 TPU chips")


def test_the_delete_operator_does_the_collectors_work_down_a_pathwaysjobs_chain(late_collector, caplog):
    """PathwaysJob → JobSet → Jobs → pods: the JobSet goes first, or its controller would bring
    the Jobs back; then the Jobs, or theirs would bring the pods back."""
    name = "gc-late-delete"
    hook = running_training(name, "pathwaysjob")
    caplog.set_level(logging.INFO, logger="pathways_airflow")
    deleted = DeletePathwaysJobOperator(task_id="delete", name=name, wait_seconds=LATE_AFTER + 30).execute({})
    assert deleted is True
    assert not hook.list(POD, "default", label_selector=jobset_selector(name))
    wait_for(lambda: hook.get(PATHWAYSJOB, "default", name) is None and hook.get(JOBSET, "default", name) is None, timeout=10)
    [line] = [r.getMessage() for r in caplog.records if "garbage collector had not reached" in r.getMessage()]
    assert f"default/{name}: the garbage collector had not reached its JobSet, 2 Jobs and 3 pods " in line
    assert line.endswith("reclaiming 8 TPU chips")


def test_the_janitor_does_the_collectors_work_for_an_orphan_it_deleted(late_collector, caplog):
    """The janitor deletes an orphan in the background (the owner goes at once); the collector
    that should take its JobSet, Jobs and pods never comes, so the janitor's wait does."""
    from pathways_airflow.hooks.janitor import delete_orphans
    from pathways_airflow.state.janitor import Verdict

    name = "gc-late-orphan"
    hook = running_training(name, "pathwaysjob")
    caplog.set_level(logging.INFO, logger="pathways_airflow")
    orphan = Verdict("PathwaysJob", "default", name, "dag/run/train", "failed", True, "its task instance failed", 8)
    deleted, left = delete_orphans(hook, [orphan], wait_seconds=LATE_AFTER + 30)
    assert deleted == [orphan] and left == []
    assert not hook.list(POD, "default", label_selector=jobset_selector(name)) and hook.get(JOBSET, "default", name) is None
    [line] = [r.getMessage() for r in caplog.records if "garbage collector had not reached" in r.getMessage()]
    assert f"default/{name}: the garbage collector had not reached its JobSet, 2 Jobs and 3 pods " in line
    assert line.endswith("reclaiming 8 TPU chips")




def test_a_pathwaysjobs_jobset_comes_back_while_the_pathwaysjob_is_there_so_ours_are_deleted_in_the_background(late_collector):
    """google/pathways-job's controller creates the JobSet whenever the PathwaysJob exists without
    one, finished or not: a finished PathwaysJob whose JobSet is deleted runs again. The provider
    deletes a PathwaysJob in the background, so its JobSet has nothing left to bring it back."""
    hook = PathwaysHook()
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "steps=2"], env={"PATHWAYS_TESTING_STEP_SECONDS": "1"},
    )
    hook.create(render(workload, backend="pathwaysjob", name="gc-done", namespace="default"))
    wait_for(lambda: (hook.get(PATHWAYSJOB, "default", "gc-done") or {}).get("status", {}).get("terminalState") == "Completed",
             timeout=60, what="the PathwaysJob completed")
    first = hook.get(JOBSET, "default", "gc-done")["metadata"]["uid"]
    hook.delete(JOBSET, "default", "gc-done", propagation="Background")
    wait_for(lambda: (hook.get(JOBSET, "default", "gc-done") or {}).get("metadata", {}).get("uid") not in (None, first),
             timeout=10, what="the finished PathwaysJob's JobSet created again")
    hook.delete(PATHWAYSJOB, "default", "gc-done")

    running_training("gc-late-ours", "pathwaysjob")
    hook.delete(PATHWAYSJOB, "default", "gc-late-ours")
    assert hook.get(PATHWAYSJOB, "default", "gc-late-ours") is None, "gone at once"
    hook.delete(JOBSET, "default", "gc-late-ours", propagation="Background")  # the reclaim's step, once the collector is late
    looks = []
    for _ in range(20):
        looks.append(hook.get(JOBSET, "default", "gc-late-ours"))
        time.sleep(0.1)
    assert looks[-1] is None and all(look is None or look["metadata"].get("deletionTimestamp") for look in looks), "never created again"


def test_a_jobsets_restart_in_place_does_not_wait_for_a_late_collector(late_collector, capsys):
    """Maintenance on the workers' slice: the JobSet restarts in place, deleting the attempt's Jobs
    in the foreground and creating the next attempt's once they are gone. The collector would take
    days to reach the old pods; the trigger waiting on the workload deletes the Jobs again in the
    background and their pods directly once the margin is over, and the next attempt runs."""
    from tests.support.triggers import first_event

    cluster, name = late_collector, "gc-late-restart"
    hook = running_training(name, "jobset")
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=1)
    timings: dict[str, float] = {}
    first_jobs: dict[str, str] = {}  # the last attempt's Jobs, by name: their uids

    def of_attempt(attempt: str) -> list[dict]:
        return [p for p in running_pods(hook, name) if p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == attempt]

    def maintenance_then_restarted() -> None:
        nodes = {n["metadata"]["name"]: n for n in cluster.list("v1", "Node")}
        worker = next(p for p in running_pods(hook, name) if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker")
        started = time.monotonic()
        first_jobs.update({j["metadata"]["name"]: j["metadata"]["uid"] for j in hook.list(JOB, "default", label_selector=jobset_selector(name))})
        cluster.maintenance(nodes[worker["spec"]["nodeName"]]["metadata"]["labels"]["cloud.google.com/gke-nodepool"], duration=600)
        wait_for(lambda: (hook.get(JOBSET, "default", name) or {}).get("status", {}).get("restarts") == 1, timeout=30, what="the JobSet restarting")
        wait_for(lambda: len(of_attempt("1")) == 3, timeout=LATE_AFTER * 4 + 30, what="the next attempt's head and workers running")
        timings["restarted"] = time.monotonic() - started

    with pytest.raises(TimeoutError):  # the training runs on: the wait has nothing to report
        first_event(trigger, timeout=1, during=maintenance_then_restarted, during_after=0.2)
    # The next attempt's Jobs carry the last attempt's names. A delete from a look made before they
    # were re-created (chaos 1040388: a failed delete tried again at the next look) names the uids
    # it saw, and takes nothing of the next attempt: its workers run on, its head is not failed.
    assert first_jobs
    now = {j["metadata"]["name"]: j["metadata"]["uid"] for j in hook.list(JOB, "default", label_selector=jobset_selector(name))}
    assert set(now) == set(first_jobs) and not set(now.values()) & set(first_jobs.values())
    stale = Leftovers(0, 0, jobs=tuple(first_jobs), uids=first_jobs)
    asyncio.run(delete_left_behind(AsyncPathwaysHook(), "default", stale))
    time.sleep(0.5)
    assert {j["metadata"]["name"]: j["metadata"]["uid"] for j in hook.list(JOB, "default", label_selector=jobset_selector(name))} == now
    assert len(of_attempt("1")) == 3
    hook.delete(JOBSET, "default", name, propagation="Background")
    said = [line for line in capsys.readouterr().out.splitlines() if "its JobSet's restart waited on the garbage collector" in line]
    assert len(said) == 1 and "the last attempt's 2 Jobs and 3 pods" in said[0], said
    assert timings["restarted"] < LATE_AFTER * 4 + 30, "days of cluster time, without the trigger"
