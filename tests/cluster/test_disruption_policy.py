"""The operator riding out disruptions, run in-process against the local cluster (waiting in the worker)."""

from __future__ import annotations

import json
import re
import time

import pytest

from pathways_airflow.exceptions import DisruptionBudgetExhausted, UserCodeError
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow_testing import LocalCluster

from tests.support.connections import connect
from tests.support.task_instance import StateStore, TaskInstance
from tests.support.waiting import wait_for
from tests.support.workloads import LiveWorkloads, when_step


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


def training(task_id: str, *, steps: int = 60, step_seconds: str = "10", backend: str = "pathwaysjob", **overrides) -> PathwaysJobOperator:
    run = f"runs-{task_id}"
    params = dict(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir="gs://pathways-demo/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "base_output_directory=gs://pathways-demo/policy", f"run_name={run}", f"steps={steps}", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": step_seconds},
        checkpoint_dir=f"gs://pathways-demo/policy/{run}/checkpoints", backend=backend, deferrable=False,
    )
    params.update(overrides)
    return PathwaysJobOperator(task_id=task_id, **params)


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [("maintenance", "MAINTENANCE"), ("lose_slice", "SLICE_FAILURE")],
)
def test_a_disruption_mid_training_resumes_from_the_newest_committed_step(pathways_cluster, scenario, kind, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="pathways_airflow.triggers.watch")
    task_id = f"ride-{scenario.replace('_', '-')}"
    identity = TaskIdentity("dag", task_id, "run-1")
    trigger = when_step(pathways_cluster, identity, 25, lambda pool: getattr(pathways_cluster, scenario)(pool, **({"duration": 600} if scenario == "maintenance" else {"downtime": 600})))
    with LiveWorkloads(pathways_cluster, identity) as live:
        result = training(task_id).execute({"ti": TaskInstance("dag", task_id, "run-1")})
    trigger.join(1)
    assert live.most == 1
    assert result["state"] == "SUCCEEDED"
    assert not [r.getMessage() for r in caplog.records if r.name == "pathways_airflow.triggers.watch"], "a wait that ended is no watch failure"
    assert result["checkpoint"]["step"] == 59
    [disruption] = [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]
    assert disruption["kind"] == kind
    assert disruption["resumed_from_step"] in (20, 30) and disruption["reached_step"] >= 25
    assert disruption["steps_recomputed"] == disruption["reached_step"] - disruption["resumed_from_step"]
    assert result["disruption_summary"].startswith(f"1 disruption (1 {kind.lower().replace('_', ' ')})")
    assert result["name"] == identity.workload_name(attempt=1)
    # Where the chip time went: the parts (each rounded to 0.1 s) add up to the time held.
    goodput = result["goodput"]
    parts = ("provisioning_seconds", "productive_seconds", "lost_seconds", "cleanup_seconds")
    assert sum(goodput[p] for p in parts) == pytest.approx(goodput["held_seconds"], abs=0.25)
    assert 0 < goodput["held_seconds"] <= result["wall_time_seconds"] + 0.1 and 0 < goodput["goodput"] < 1
    assert (goodput["lost"]["recomputed_seconds"] > 0) == (disruption["steps_recomputed"] > 0)
    assert goodput["chip_hours"] == pytest.approx(goodput["chips"] * goodput["held_seconds"] / 3600, rel=0.01)
    workloads = [identity.workload_name(attempt=0), identity.workload_name(attempt=1)]
    assert [e["workload"] for e in result["timeline"] if e["kind"] == "submitted"] == workloads
    [seen] = [e for e in result["timeline"] if e["kind"] == "disruption"]
    assert seen["workload"] == workloads[0] and seen["evidence"] == disruption["evidence"]


def test_with_resume_by_the_program_a_newer_local_copy_is_restored_and_recorded_from_the_programs_log(pathways_cluster, capsys):
    """Multi-tier checkpointing (a local copy every 2 steps, GCS every 10): maintenance once step 23
    is logged, so the local copy of step 22 is saved (the program logs a step, then saves it). With ``resume="program"`` the resubmitted workload gets no ``PATHWAYS_RESUME_*`` and its
    program restores the newest local copy, newer than anything on GCS; the disruption records
    that step, as the program logged it, and only the steps after it as recomputed."""
    task_id = "ride-multi-tier"
    identity = TaskIdentity("dag", task_id, "run-1")
    multi_tier = ["enable_multi_tier_checkpointing=true", "local_checkpoint_directory=/local", "local_checkpoint_period=2"]
    operator = training(task_id, step_seconds="8", resume="program")  # steps 23 to 30 take 0.9 s at speed 60
    operator.command = [*operator.command, *multi_tier]
    trigger = when_step(pathways_cluster, identity, 23, lambda pool: pathways_cluster.maintenance(pool, duration=600))
    with LiveWorkloads(pathways_cluster, identity) as live:
        result = operator.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    trigger.join(1)
    assert live.most == 1 and result["state"] == "SUCCEEDED"
    [disruption] = [d for d in result["disruptions"] if d.get("handled_by") is None]
    reached, restored = disruption["reached_step"], disruption["resumed_from_step"]
    assert disruption["resume_source"] == "program_log"
    assert restored % 2 == 0 and restored % 10 != 0 and 20 < restored <= reached  # a local copy, newer than GCS's step 20
    assert disruption["steps_recomputed"] == reached - restored
    said = [line.split("] ", 1)[1].rsplit(" [", 1)[0] for line in capsys.readouterr().out.splitlines() if "its program restored" in line]
    assert said == [f"default/{identity.workload_name(attempt=1)}: its program restored step {restored} (its log says)"]
    resubmitted = live.seen[identity.workload_name(attempt=1)]
    env = {e["name"] for e in resubmitted["spec"]["controller"]["template"]["spec"]["containers"][0].get("env") or ()}
    assert not {"PATHWAYS_RESUME_STEP", "PATHWAYS_RESUME_CHECKPOINT"} & env


def test_a_resubmission_takes_back_the_slices_a_late_garbage_collector_leaves_to_the_last_attempt(pathways_cluster, caplog):
    """Two slices, one lost: the JobSet fails and deletes its Jobs, but the collector is late and
    their pods run on. The next attempt needs those slices: the pods are deleted directly before
    it is submitted, and the chips are reported."""
    import logging

    task_id = "ride-late-gc"
    identity = TaskIdentity("dag", task_id, "run-1")
    pathways_cluster.slow_garbage_collector(1e6)
    caplog.set_level(logging.INFO, logger="pathways_airflow")
    trigger = when_step(pathways_cluster, identity, 15, lambda pool: pathways_cluster.lose_slice(pool, downtime=600))
    try:
        with LiveWorkloads(pathways_cluster, identity) as live:
            result = training(task_id, steps=40, num_slices=2, termination_grace_period_seconds=1).execute({"ti": TaskInstance("dag", task_id, "run-1")})
    finally:
        pathways_cluster.slow_garbage_collector(0)
    trigger.join(1)
    assert live.most == 1 and result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name(attempt=1)
    [line] = [r.getMessage() for r in caplog.records if "garbage collector had not reached" in r.getMessage()]
    assert line.startswith(f"default/{identity.workload_name(attempt=0)}: the garbage collector had not reached ")
    # the healthy slice (two VMs of four chips), and the lost slice's pods if their Job re-created
    # them on the spare slice before the JobSet failed
    assert re.search(r"reclaiming (8|16) TPU chips$", line), line


def test_disruptions_beyond_the_budget_fail_the_task_with_the_list(pathways_cluster):
    task_id = "over-budget"
    identity = TaskIdentity("dag", task_id, "run-1")
    when_step(pathways_cluster, identity, 15, lambda pool: pathways_cluster.maintenance(pool, duration=600))
    with pytest.raises(DisruptionBudgetExhausted) as caught:
        training(task_id, max_disruptions=0).execute({"ti": TaskInstance("dag", task_id, "run-1")})
    message = str(caught.value)
    assert "more disruptions than max_disruptions=0" in message and "MAINTENANCE at" in message
    assert caught.value.disruptions[0]["kind"] == "MAINTENANCE"
    assert not pathways_cluster.list("pathways-job.pathways.domain/v1", "PathwaysJob", "default", labels={TASK_KEY_LABEL: identity.key})


def test_a_user_bug_fails_at_once_and_is_never_resubmitted(pathways_cluster):
    task_id = "user-bug"
    identity = TaskIdentity("dag", task_id, "run-1")
    task = training(task_id, backend="jobset", env={"PATHWAYS_TESTING_STEP_SECONDS": "1", "PATHWAYS_TESTING_FAIL_AT_STEP": "5", "PATHWAYS_TESTING_EXIT_CODE": "1"})
    with pytest.raises(UserCodeError) as caught:
        task.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    assert caught.value.exit_code == 1
    involved = {e["involvedObject"]["name"] for e in pathways_cluster.list("v1", "Event", "default")}
    assert identity.workload_name() in involved
    assert not any(name.startswith(identity.workload_name(attempt=1)) for name in involved), "never resubmitted"


def test_a_kueue_eviction_waits_instead_of_failing(pathways_cluster):
    task_id = "evicted"
    identity = TaskIdentity("dag", task_id, "run-1")

    def evict(_pool):
        pathways_cluster.evict_workload("default", jobset=identity.workload_name(), requeue_after=60)

    when_step(pathways_cluster, identity, 12, evict)
    result = training(task_id, backend="jobset", steps=30, queue_name="multislice-queue").execute({"ti": TaskInstance("dag", task_id, "run-1")})
    assert result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name()
    assert not [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]


def test_with_execution_attempts_counted_a_kueue_readmission_is_the_second_execution_of_one_workload(crds, monkeypatch):
    """JobSet 0.13's ``ExecutionAttemptsTracking`` on (KEP-1282): Kueue evicts the workload and
    admits it again; ``restart-attempt`` stays 0, the pods after the resume carry execution 1, the
    task rides it out on the same workload and says it ran twice."""
    task_id = "evicted-counted"
    identity = TaskIdentity("dag", task_id, "run-1")
    with LocalCluster(crds=[crds], speed=60, jobset_feature_gates=("ExecutionAttemptsTracking",)) as counted:
        connect(monkeypatch, counted)
        when_step(counted, identity, 6, lambda _pool: counted.evict_workload("default", jobset=identity.workload_name(), requeue_after=30))
        task = training(task_id, backend="jobset", steps=20, queue_name="multislice-queue")
        result = task.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    assert result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name(), "no resubmission"
    assert result["execution_attempts"] == 1 and result["restarts"] == 0
    assert not [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]


def test_the_result_checkpoint_is_read_with_the_tasks_own_google_connection(pathways_cluster, monkeypatch):
    """With only a non-default Google connection, a finished run reports its checkpoint instead
    of failing on the missing google_cloud_default."""
    monkeypatch.delenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT")
    monkeypatch.setenv("AIRFLOW_CONN_MY_GCP", json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}))
    task = training("own-gcp", steps=12, step_seconds="1", gcp_conn_id="my_gcp")
    result = task.execute({"ti": TaskInstance("dag", "own-gcp", "run-1")})
    assert result["state"] == "SUCCEEDED" and result["checkpoint"]["step"] == 11  # MaxText saves the last step too


@pytest.mark.parametrize("store", [StateStore(), None], ids=["airflow-3.3-state-store", "no-state-store"])
def test_a_worker_dying_between_delete_and_create_leaves_the_retry_what_it_needs(pathways_cluster, store):
    """With Airflow 3.3's task state store the retry submits the next attempt with the disruption;
    without one (3.1, 3.2) the attempt number and the disruption are gone with the workload, but the
    retry still resumes from the newest committed step."""
    task_id = "crash-in-between" if store is not None else "crash-no-store"
    identity = TaskIdentity("dag", task_id, "run-1")
    when_step(pathways_cluster, identity, 25, lambda pool: pathways_cluster.maintenance(pool, duration=600))
    first_try = training(task_id)
    submit = first_try.hook.create_or_adopt

    def dies_before_the_next_attempt(manifest, task_key):
        if manifest["metadata"]["name"] == identity.workload_name(attempt=1):
            raise SystemExit("the worker died")
        return submit(manifest, task_key)

    first_try.hook.create_or_adopt = dies_before_the_next_attempt
    stored = {} if store is None else {"task_state_store": store}
    with pytest.raises(SystemExit):
        first_try.execute({"ti": TaskInstance("dag", task_id, "run-1", max_tries=0), **stored})
    assert not pathways_cluster.list("pathways-job.pathways.domain/v1", "PathwaysJob", "default", labels={TASK_KEY_LABEL: identity.key})

    retry = training(task_id)
    resumed = []
    submit_again = retry.hook.create_or_adopt
    retry.hook.create_or_adopt = lambda manifest, key: resumed.append(manifest) or submit_again(manifest, key)
    result = retry.execute({"ti": TaskInstance("dag", task_id, "run-1", try_number=2, max_tries=0), **stored})
    env = {e["name"]: e.get("value") for e in resumed[0]["spec"]["controller"]["template"]["spec"]["containers"][0].get("env", [])}
    assert env.get("PATHWAYS_RESUME_STEP") in ("20", "30"), env
    if store is None:
        assert result["name"] == identity.workload_name(attempt=0), "nothing kept the attempt number"
        assert not [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]
        return
    assert result["name"] == identity.workload_name(attempt=1), "the retry submits the next attempt, not attempt 0's name"
    [disruption] = [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]
    assert disruption["kind"] == "MAINTENANCE" and disruption["workload"] == identity.workload_name()


def test_a_retry_returns_the_stored_result_and_a_clear_runs_the_task_again(pathways_cluster):
    """Airflow's numbers for a task with retries=2: a retry keeps max_tries at 2; a clear after try
    1 sets it to 1 + 2 (clear_task_instances). The user who clears expects a run, not a replay."""
    task_id, store = "cleared", StateStore()

    def tried(try_number: int, max_tries: int) -> tuple[dict, list[dict]]:
        task = training(task_id, steps=12, step_seconds="1", retries=2)
        submitted: list[dict] = []
        submit = task.hook.create_or_adopt
        task.hook.create_or_adopt = lambda manifest, key: submitted.append(manifest) or submit(manifest, key)
        ti = TaskInstance("dag", task_id, "run-1", try_number=try_number, max_tries=max_tries)
        return task.execute({"ti": ti, "task_state_store": store}), submitted

    first, submitted = tried(1, 2)
    assert first["state"] == "SUCCEEDED" and len(submitted) == 1
    assert submitted[0]["metadata"]["annotations"]["pathways-airflow/first-try"] == "1"
    replayed, submitted = tried(2, 2)
    assert replayed == first and not submitted, "a retry after a crash that followed success returns the result"
    rerun, submitted = tried(2, 1 + 2)
    assert len(submitted) == 1 and submitted[0]["metadata"]["annotations"]["pathways-airflow/first-try"] == "2"
    assert rerun["state"] == "SUCCEEDED" and store.get("pathways_workload")["first_try"] == 2, "the new round's result replaces the old"



def test_the_next_attempt_is_not_kept_in_its_queue_by_the_last_attempts_workload(pathways_cluster):
    """A queue with room for one attempt's slice and a collector that never comes: the deleted
    attempt's Workload is finished (its JobSet failed, or is being deleted: ``OwnerNotFound``), so
    its quota is back when the next attempt arrives, not when the collector reaches the Workload."""
    import datetime as dt

    from pathways_airflow_testing.kueue_setup import CLUSTER_QUEUE, LOCAL_QUEUE

    task_id = "ride-full-queue"
    identity = TaskIdentity("dag", task_id, "run-1")
    flavor, whole = "tpu-v5-lite-podslice-2x4", 24
    pathways_cluster.set_quota(CLUSTER_QUEUE, flavor, 8)
    pathways_cluster.slow_garbage_collector(1e6)
    trigger = when_step(pathways_cluster, identity, 10, lambda pool: pathways_cluster.lose_slice(pool, downtime=600))
    try:
        with LiveWorkloads(pathways_cluster, identity) as live:
            task = training(task_id, steps=24, step_seconds="2", queue_name=LOCAL_QUEUE, termination_grace_period_seconds=1,
                            execution_timeout=dt.timedelta(seconds=120))  # a next attempt kept queued fails the test here
            result = task.execute({"ti": TaskInstance("dag", task_id, "run-1", start_date=dt.datetime.now(dt.timezone.utc))})
        [old] = [w for w in pathways_cluster.list("kueue.x-k8s.io/v1beta2", "Workload", "default")
                 if w["metadata"]["ownerReferences"][0]["name"] == identity.workload_name(attempt=0)]
    finally:
        pathways_cluster.slow_garbage_collector(0)
        pathways_cluster.set_quota(CLUSTER_QUEUE, flavor, whole)
    trigger.join(1)
    assert live.most == 1 and result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name(attempt=1)
    finished = next(c for c in old["status"]["conditions"] if c["type"] == "Finished")
    assert finished["status"] == "True" and finished["reason"] in ("Failed", "OwnerNotFound")
    assert result["goodput"]["queued_seconds"] < 5, "the next attempt was admitted at once"


def slice_jobset(name: str, queue: str) -> dict:
    """A JobSet holding one v5e 2x4 slice (two hosts of 4 chips) in ``queue`` until it is deleted."""
    pod = {"nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "2x4"},
           "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"], "resources": {"limits": {"google.com/tpu": "4"}}}]}
    job = {"parallelism": 2, "completions": 2, "backoffLimit": 0, "template": {"spec": pod}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"replicatedJobs": [{"name": "worker", "replicas": 1, "template": {"spec": job}}]}}


def test_a_queued_workload_says_where_it_stands_in_kueues_queue_as_that_changes(pathways_cluster, capsys, monkeypatch):
    """Quota for one slice, held by one JobSet with another queued before ours: the wait reads
    Kueue's visibility API and says, as it changes, how many wait ahead and how much of the quota
    is in use; the result keeps the last place seen."""
    import threading

    from pathways_airflow.run import wait_memory
    from pathways_airflow_testing.kueue_setup import CLUSTER_QUEUE, LOCAL_QUEUE

    monkeypatch.setattr(wait_memory, "CHECK_EVERY_SECONDS", 0.5)
    printed: list[str] = []  # the task log, as the worker prints it
    flavor, whole = "tpu-v5-lite-podslice-2x4", 24
    blockers = ("queue-holder", "queue-ahead")
    pathways_cluster.set_quota(CLUSTER_QUEUE, flavor, 8)
    outcome: dict = {}
    try:
        for name in blockers:
            pathways_cluster.apply(slice_jobset(name, LOCAL_QUEUE))
            time.sleep(0.3)  # created in this order: the second waits first in line
        task = training("queued-behind", steps=6, step_seconds="1", backend="jobset", queue_name=LOCAL_QUEUE)
        running = threading.Thread(target=lambda: outcome.update(result=task.execute({"ti": TaskInstance("dag", "queued-behind", "run-1")})), daemon=True)
        running.start()

        def said(text: str) -> bool:
            printed.extend(capsys.readouterr().out.splitlines())
            return any(text in line for line in printed)

        wait_for(lambda: said(f"queued: 1 ahead in ClusterQueue {CLUSTER_QUEUE}, 1 of them in LocalQueue {LOCAL_QUEUE}; {flavor}: 8/8 chips in use, tpu-v6e-slice-4x4: 0/32 chips in use"), timeout=60)
        # the holder finishes: the one ahead is admitted, ours is next
        delete_jobset(pathways_cluster, blockers[0])
        wait_for(lambda: said(f"queued: 0 ahead in ClusterQueue {CLUSTER_QUEUE}, 0 of them in LocalQueue {LOCAL_QUEUE}; {flavor}: 8/8 chips in use, tpu-v6e-slice-4x4: 0/32 chips in use"), timeout=60)
        delete_jobset(pathways_cluster, blockers[1])
        running.join(120)
    finally:
        for name in blockers:
            delete_jobset(pathways_cluster, name)
        pathways_cluster.set_quota(CLUSTER_QUEUE, flavor, whole)
    result = outcome["result"]
    assert result["state"] == "SUCCEEDED"
    assert result["queued"] == {"local_queue": LOCAL_QUEUE, "cluster_queue": CLUSTER_QUEUE, "ahead_in_cluster_queue": 0, "ahead_in_local_queue": 0,
                                "quota": [{"flavor": flavor, "used": 8, "nominal": 8}, {"flavor": "tpu-v6e-slice-4x4", "used": 0, "nominal": 32}]}
    said("")
    lines = [line for line in printed if ": queued: " in line]
    assert len(lines) == 2, lines  # said when it changed, not at every look


def delete_jobset(cluster, name: str) -> None:
    from pathways_airflow.hooks.pathways import PathwaysHook
    from pathways_airflow.resources import JOBSET

    PathwaysHook().delete(JOBSET, "default", name)


def test_waits_queued_in_one_local_queue_share_one_read_of_it(pathways_cluster):
    """However many waits are queued in a LocalQueue, one check period reads it once: the
    LocalQueue, its pending workloads and its ClusterQueue, three requests for all of them."""
    import asyncio

    from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
    from pathways_airflow.triggers.workload import shared_queue_view
    from pathways_airflow_testing.kueue_setup import CLUSTER_QUEUE, LOCAL_QUEUE

    async def fleet() -> list:
        target = ClusterTarget()
        hook = AsyncPathwaysHook(target)
        return await asyncio.gather(*(shared_queue_view(hook, target, "default", LOCAL_QUEUE) for _ in range(50)))

    before = pathways_cluster.request_counts.get("GET", 0)
    views = asyncio.run(fleet())
    assert pathways_cluster.request_counts.get("GET", 0) - before == 3
    local, pending, cluster_queue = views[0]
    assert all(view is views[0] for view in views)
    assert local["spec"]["clusterQueue"] == CLUSTER_QUEUE == cluster_queue["metadata"]["name"]
    assert pending["kind"] == "PendingWorkloadsSummary"


@pytest.mark.parametrize("deferrable", [False, True], ids=["in-the-worker", "deferred"])
def test_a_slice_loss_the_program_rides_out_with_elastic_slices_is_recorded_and_not_resubmitted(pathways_cluster, deferrable):
    """Two slices, ``elastic_slices=1`` and MaxText's ``elastic_enabled``: one slice goes into
    maintenance at step 25. Pathways keeps the head running; the program waits until the worker Job
    has the slice's pods running again (on the spare slice) and restores step 20, in the same pod.
    The task records the maintenance as ridden out by the program, with the step reached and the
    time the slices were down; nothing is resubmitted (``max_disruptions=0``: none to spend)."""
    from pathways_airflow.hooks.pathways import PathwaysHook
    from pathways_airflow.resources import PATHWAYSJOB

    task_id = f"elastic-{int(deferrable)}"
    identity = TaskIdentity("dag", task_id, "run-1")
    trigger = when_step(pathways_cluster, identity, 25, lambda pool: pathways_cluster.maintenance(pool, duration=600))
    task = training(
        task_id, steps=40, num_slices=2, elastic_slices=1, deferrable=deferrable, delete_on_finish=False, max_disruptions=0,
        command=["python3", "-m", "MaxText.train", "base_output_directory=gs://pathways-demo/policy", f"run_name=runs-{task_id}", "steps=40",
                 "checkpoint_period=10", "elastic_enabled=true"],
    )
    ti = TaskInstance("dag", task_id, "run-1")
    try:
        with LiveWorkloads(pathways_cluster, identity) as live:
            if deferrable:
                from airflow.providers.common.compat.sdk import TaskDeferred

                from tests.support.triggers import first_event

                with pytest.raises(TaskDeferred) as waiting:
                    task.execute({"ti": ti})
                result = task.execute_complete({"ti": ti}, first_event(waiting.value.trigger, timeout=90), **waiting.value.kwargs)
            else:
                result = task.execute({"ti": ti})
        trigger.join(1)
        assert live.most == 1 and result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name(attempt=0)
        [ridden] = result["disruptions"]
        assert ridden["kind"] == "MAINTENANCE" and ridden["handled_by"] == "the program (elastic slices)", ridden
        assert ridden["reached_step"] >= 25  # the head's log, read when the loss was seen
        # how long the slices were down (here the worker Job re-created the pods on the spare slice at once)
        assert ridden["seconds_lost"] >= 0 and result["goodput"]["lost"]["restart_seconds"] >= ridden["seconds_lost"] - 0.5
        assert result["disruption_summary"].startswith("1 disruption (1 maintenance)")
        assert result["checkpoint"]["step"] == 39
        [event] = [e for e in result["timeline"] if e["kind"] == "disruption"]
        assert event["label"].startswith("maintenance: the program rode it out (elastic slices)"), event
        # one head pod, never restarted: the program rode it out in-process
        [head] = pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": result["name"], "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"})
        log = pathways_cluster.read_log("default", head["metadata"]["name"], "main")
        assert "Elastic utils: Checking for incomplete checkpoint after an elastic event..." in log
        assert [line for line in log if line.startswith("restoring from this run's directory step")] == ["restoring from this run's directory step 20"]
        # What outlives the pods to say the program got past the loss: the node controller's
        # NodeNotReady events, and when the save of its newest committed step began.
        from pathways_airflow.hooks.storage import newest_save_began_at
        from pathways_airflow.resources import EVENT
        from pathways_airflow.state.api_time import from_unix
        from pathways_airflow.state.ran_on import NODE_EVENTS_NAMESPACE, NODE_NOT_READY_SELECTOR, went_not_ready

        marked = went_not_ready(PathwaysHook().list(EVENT, NODE_EVENTS_NAMESPACE, field_selector=NODE_NOT_READY_SELECTOR))
        began = newest_save_began_at(f"gs://pathways-demo/policy/runs-{task_id}/checkpoints")
        assert marked and began is not None, (marked, began)
        assert min(min(times) for times in marked.values()) < from_unix(began), "the save of step 39 began after the maintenance"
    finally:
        PathwaysHook().delete(PATHWAYSJOB, "default", identity.workload_name(attempt=0))
