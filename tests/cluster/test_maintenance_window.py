"""``expected_duration`` / ``maintenance_window`` against the local cluster's GKE maintenance.

The local cluster announces maintenance on a node pool (``scheduled-maintenance-time``), starts it
at that time or as soon as a node of the pool is labelled ``cloud.google.com/perform-maintenance=true``
(GKE's manual start), and brings the nodes back clean after it. The run is a short v6e 4x4 training
(two such slices in the cluster); its expected duration is wide because the cluster's clock runs
ahead of the wall clock.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.resources import JOBSET
from pathways_airflow.spec import TaskIdentity, build_workload, render
from pathways_airflow.triggers.slices import MaintenancePassedTrigger
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from pathways_airflow_testing.nodes import ACTIVE_MAINTENANCE_LABEL, PERFORM_MAINTENANCE_LABEL, SCHEDULED_MAINTENANCE_LABEL

from tests.support.connections import connect
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event
from tests.support.waiting import wait_for
from tests.support.workloads import LiveWorkloads

POOLS = ("tpu-v6e-4x4-0", "tpu-v6e-4x4-1")
DAY = 86_400.0
RUN_TAKES = timedelta(days=30)
SOON = 10 * DAY
"""Announced inside the run, yet hours of real time away: it begins only when started."""


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture
def clean_pools(pathways_cluster):
    """Whatever a test announced is run and over when it ends: the next test finds clean slices."""
    yield
    for pool in POOLS:
        if any(SCHEDULED_MAINTENANCE_LABEL in labels(n) for n in nodes_of(pathways_cluster, pool)):
            for node in nodes_of(pathways_cluster, pool):  # started by hand, as an operator would
                PathwaysHook().start_node_maintenance(node["metadata"]["name"])
    wait_for(lambda: all(is_clean(pathways_cluster, pool) for pool in POOLS), timeout=60)


def labels(node: dict) -> dict:
    return node["metadata"].get("labels") or {}


def nodes_of(cluster, pool: str) -> list[dict]:
    return [n for n in cluster.list("v1", "Node") if labels(n).get("cloud.google.com/gke-nodepool") == pool]


def is_clean(cluster, pool: str) -> bool:
    return all(
        not {SCHEDULED_MAINTENANCE_LABEL, ACTIVE_MAINTENANCE_LABEL, PERFORM_MAINTENANCE_LABEL} & set(labels(n))
        and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
        for n in nodes_of(cluster, pool)
    )


def training(task_id: str, **overrides) -> PathwaysJobOperator:
    run = f"window-{task_id}"
    params = dict(
        tpu="v6e", topology="4x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "base_output_directory=gs://pathways-demo/window", f"run_name={run}", "steps=4", "checkpoint_period=2"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "1"}, checkpoint_dir=f"gs://pathways-demo/window/{run}/checkpoints",
        expected_duration=RUN_TAKES, deferrable=False,
    )
    params.update(overrides)
    return PathwaysJobOperator(task_id=task_id, **params)


def occupy(cluster, pool: str, name: str) -> None:
    """Another team's workload on ``pool``: an idle program held there by a node selector."""
    workload = build_workload(
        tpu="v6e", topology="4x4", pathways_dir="gs://pathways-demo/tmp", image="python:3.11", command=["python3", "serve.py"],
        env={"PATHWAYS_TESTING_PROGRAM": "idle"}, node_selector={"cloud.google.com/gke-nodepool": pool},
    )
    cluster.apply(render(workload, backend="jobset", name=name, namespace="default"))
    wait_for(lambda: any(p["spec"].get("nodeName") in {n["metadata"]["name"] for n in nodes_of(cluster, pool)}
                         for p in cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name})), timeout=60)


def submitted_at(result: dict) -> float:
    return next(e["at"] for e in result["timeline"] if e["kind"] == "submitted")


def said(capsys) -> list[str]:
    """The operator's "before submitting" lines, as the task log prints them (the message alone)."""
    lines = capsys.readouterr().out.splitlines()
    return [line.split("] ", 1)[1].rsplit(" [airflow.task.", 1)[0] for line in lines if "] before submitting: " in line]


@pytest.mark.parametrize("deferrable", [False, True], ids=["in-the-worker", "deferred"])
def test_start_now_starts_the_maintenance_of_the_idle_slice_waits_for_it_then_submits(pathways_cluster, clean_pools, capsys, deferrable):
    """Maintenance announced on both v6e slices, one of them busy with another workload: the task
    starts it on the idle one only, submits nothing until it has passed, then runs there."""
    cluster = pathways_cluster
    busy, idle = POOLS
    occupy(cluster, busy, f"other-team-{int(deferrable)}")
    for pool in POOLS:
        cluster.maintenance(pool, notice=SOON, duration=240, wait=False)
    wait_for(lambda: all(SCHEDULED_MAINTENANCE_LABEL in labels(n) for p in POOLS for n in nodes_of(cluster, p)))
    task_id = f"start-now-{int(deferrable)}"
    ti = TaskInstance("dag", task_id, "run-1")
    task = training(task_id, maintenance_window="start_now", deferrable=deferrable)
    started = time.time()
    try:
        with LiveWorkloads(cluster, TaskIdentity("dag", task_id, "run-1")) as live:
            if deferrable:
                with pytest.raises(TaskDeferred) as waiting:
                    task.execute({"ti": ti})
                assert isinstance(waiting.value.trigger, MaintenancePassedTrigger) and waiting.value.trigger.pools == [idle]
                assert live.most == 0  # nothing submitted while the maintenance runs
                event = first_event(waiting.value.trigger, timeout=60)
                assert event == {"status": "passed", "pools": [idle]}
                with pytest.raises(TaskDeferred) as running:
                    task.execute_after_maintenance({"ti": ti}, event, **waiting.value.kwargs)
                assert isinstance(running.value.trigger, PathwaysJobTrigger)
                result = task.execute_complete({"ti": ti}, first_event(running.value.trigger, timeout=60), **running.value.kwargs)
            else:
                result = task.execute({"ti": ti})
    finally:
        PathwaysHook().delete(JOBSET, "default", f"other-team-{int(deferrable)}")
    assert live.most == 1 and result["state"] == "SUCCEEDED"
    maintenance = result["maintenance"]
    assert maintenance["policy"] == "start_now" and maintenance["busy"] == [busy] and maintenance["waited_for"] == [idle]
    assert maintenance["started_on"] == sorted(n["metadata"]["name"] for n in nodes_of(cluster, idle))
    assert set(maintenance["announced"]) == {idle}
    # it waited for the maintenance (240 simulated seconds: 4 s here) and only then submitted
    assert maintenance["waited_seconds"] >= 3
    assert submitted_at(result) >= started + maintenance["waited_seconds"] - 0.5
    # the busy slice was left alone: its maintenance is still only announced
    assert all(PERFORM_MAINTENANCE_LABEL not in labels(n) and SCHEDULED_MAINTENANCE_LABEL in labels(n) for n in nodes_of(cluster, busy))
    lines = said(capsys)
    assert lines[0].startswith(f"before submitting: {idle}: maintenance in ") and "starting the maintenance of 4 idle node(s) now" in lines[0]
    assert lines[0].endswith(f"left alone (busy): {busy}")


def test_wait_submits_once_the_announced_maintenance_has_passed(pathways_cluster, clean_pools, capsys):
    """Deferred: maintenance announced to begin shortly; the task defers until it is over."""
    cluster = pathways_cluster
    pool = POOLS[1]
    cluster.maintenance(pool, notice=120, duration=240, wait=False)
    wait_for(lambda: all(SCHEDULED_MAINTENANCE_LABEL in labels(n) for n in nodes_of(cluster, pool)))
    ti = TaskInstance("dag", "wait-window", "run-1")
    task = training("wait-window", maintenance_window="wait", deferrable=True)
    with LiveWorkloads(cluster, TaskIdentity("dag", "wait-window", "run-1")) as live:
        with pytest.raises(TaskDeferred) as waiting:
            task.execute({"ti": ti})
        assert waiting.value.trigger.pools == [pool] and live.most == 0
        assert waiting.value.timeout is None  # no execution_timeout: the wait is bounded by nothing else
        event = first_event(waiting.value.trigger, timeout=60)
        assert is_clean(cluster, pool)  # it started by itself at its time, and is over
        with pytest.raises(TaskDeferred) as running:
            task.execute_after_maintenance({"ti": ti}, event, **waiting.value.kwargs)
        result = task.execute_complete({"ti": ti}, first_event(running.value.trigger, timeout=60), **running.value.kwargs)
    assert live.most == 1 and result["state"] == "SUCCEEDED"
    assert result["maintenance"]["policy"] == "wait" and result["maintenance"]["started_on"] == []
    assert result["maintenance"]["waited_for"] == [pool] and result["maintenance"]["waited_seconds"] >= 3
    lines = said(capsys)
    assert lines[0].endswith("— submitting once it has passed")
    assert lines[-1] == "before submitting: no maintenance announced on the slices this run may land on, within its expected duration"


def test_ignore_submits_at_once_and_says_what_it_goes_ahead_of(pathways_cluster, clean_pools, capsys):
    cluster = pathways_cluster
    cluster.maintenance(POOLS[0], notice=SOON, duration=60, wait=False)
    wait_for(lambda: all(SCHEDULED_MAINTENANCE_LABEL in labels(n) for n in nodes_of(cluster, POOLS[0])))
    result = training("ignore-window", maintenance_window="ignore").execute({"ti": TaskInstance("dag", "ignore-window", "run-1")})
    assert result["state"] == "SUCCEEDED"
    assert result["maintenance"]["policy"] == "ignore" and result["maintenance"]["waited_for"] == []
    assert result["maintenance"]["started_on"] == [] and list(result["maintenance"]["announced"]) == [POOLS[0]]
    [line] = said(capsys)
    assert line.startswith(f"before submitting: {POOLS[0]}: maintenance in ") and line.endswith("— submitting anyway (maintenance_window='ignore')")
    # still announced, never started for it
    assert all(PERFORM_MAINTENANCE_LABEL not in labels(n) for n in nodes_of(cluster, POOLS[0]))


def test_maintenance_announced_after_the_run_is_no_reason_to_wait(pathways_cluster, clean_pools):
    cluster = pathways_cluster
    cluster.maintenance(POOLS[0], notice=365 * DAY, duration=60, wait=False)
    wait_for(lambda: all(SCHEDULED_MAINTENANCE_LABEL in labels(n) for n in nodes_of(cluster, POOLS[0])))
    result = training("after-run", maintenance_window="start_now", expected_duration=timedelta(days=60)).execute(
        {"ti": TaskInstance("dag", "after-run", "run-1")}
    )
    assert result["state"] == "SUCCEEDED" and result["maintenance"]["announced"] == {} and result["maintenance"]["started_on"] == []
