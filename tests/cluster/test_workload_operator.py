"""PathwaysJobOperator, PathwaysJobTrigger and PathwaysHook against the local cluster, in-process.

DAG-level behaviour (real Airflow running the task) is in tests/e2e; here the operator's
execute() is called directly so a test can stop it where a worker crash would.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import ForeignWorkloadError, UserCodeError
from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.resources import JOBSET, PATHWAYSJOB, POD
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow.triggers.workload import PathwaysJobTrigger

from tests.support.connections import connect
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event
from tests.support.waiting import wait_for
from tests.support.workloads import submit_training


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


def operator(task_id: str, **overrides) -> PathwaysJobOperator:
    params = dict(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir="gs://pathways-demo/tmp", image="python:3.11",
        command=["python3", "serve.py"], env={"PATHWAYS_TESTING_PROGRAM": "idle"}, deferrable=True,
    )
    params.update(overrides)
    return PathwaysJobOperator(task_id=task_id, **params)


def ours(hook: PathwaysHook, resource, identity: TaskIdentity) -> list[dict]:
    return hook.list(resource, "default", label_selector=f"{TASK_KEY_LABEL}={identity.key}")


def test_a_retry_after_a_crash_between_submit_and_defer_reattaches(pathways_cluster):
    hook = PathwaysHook()
    ti = TaskInstance("dag", "reattach", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    with pytest.raises(TaskDeferred) as first:
        operator("reattach").execute({"ti": ti})
    submitted = ours(hook, PATHWAYSJOB, identity)
    assert [o["metadata"]["name"] for o in submitted] == [identity.workload_name()]
    # The worker dies here; Airflow retries the task on another worker.
    retry_ti = TaskInstance("dag", "reattach", "run-1")
    with pytest.raises(TaskDeferred) as second:
        operator("reattach").execute({"ti": retry_ti})
    again = ours(hook, PATHWAYSJOB, identity)
    assert [o["metadata"]["uid"] for o in again] == [submitted[0]["metadata"]["uid"]]
    assert first.value.trigger.serialize() == second.value.trigger.serialize()
    hook.delete(PATHWAYSJOB, "default", identity.workload_name())


def test_resumed_with_no_event_the_task_reattaches_instead_of_crashing(pathways_cluster):
    """``airflow tasks test`` of a task a killed run left deferred calls execute_complete with no
    event: the task looks again and re-attaches to its live workload."""
    hook = PathwaysHook()
    ti = TaskInstance("dag", "no-event", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    with pytest.raises(TaskDeferred) as deferred:
        operator("no-event").execute({"ti": ti})
    submitted = ours(hook, PATHWAYSJOB, identity)
    with pytest.raises(TaskDeferred) as again:
        operator("no-event").execute_complete({"ti": TaskInstance("dag", "no-event", "run-1")})
    assert [o["metadata"]["uid"] for o in ours(hook, PATHWAYSJOB, identity)] == [submitted[0]["metadata"]["uid"]]
    assert again.value.trigger.serialize() == deferred.value.trigger.serialize()
    hook.delete(PATHWAYSJOB, "default", identity.workload_name())


def test_a_failed_earlier_attempt_is_replaced_by_a_new_name_and_deleted(pathways_cluster):
    hook = PathwaysHook()
    ti = TaskInstance("dag", "replace", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    # Exit 42 is the system's (xpk's code for a lost host), so the JobSet fails by running out of
    # restarts and a retry may run it again; exit 3 would be the user's bug, never resubmitted.
    failing = operator("replace", backend="jobset", env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "42"}, command=["bash", "-c", "exit 42"])
    with pytest.raises(TaskDeferred):
        failing.execute({"ti": ti})
    wait_for(lambda: (js := hook.get(JOBSET, "default", identity.workload_name())) and js.get("status", {}).get("terminalState") == "Failed")
    with pytest.raises(TaskDeferred) as retried:
        operator("replace", backend="jobset").execute({"ti": TaskInstance("dag", "replace", "run-1")})
    names = [o["metadata"]["name"] for o in ours(hook, JOBSET, identity) if not o["metadata"].get("deletionTimestamp")]
    assert names == [identity.workload_name(attempt=1)]
    assert retried.value.trigger.name == identity.workload_name(attempt=1)
    hook.delete(JOBSET, "default", identity.workload_name(attempt=1))


def test_a_bug_that_failed_an_unwatched_attempt_is_not_resubmitted_by_the_retry(pathways_cluster):
    hook = PathwaysHook()
    ti = TaskInstance("dag", "unwatched", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    failing = operator("unwatched", backend="jobset", env={"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "3"}, command=["bash", "-c", "exit 3"])
    with pytest.raises(TaskDeferred):
        failing.execute({"ti": ti})  # the trigger is never run: nobody watches the bug strike
    wait_for(lambda: (js := hook.get(JOBSET, "default", identity.workload_name())) and js.get("status", {}).get("terminalState") == "Failed")
    with pytest.raises(UserCodeError, match="userErrorFailsJobSet"):
        operator("unwatched", backend="jobset").execute({"ti": TaskInstance("dag", "unwatched", "run-1")})
    assert hook.get(JOBSET, "default", identity.workload_name(attempt=1)) is None
    wait_for(lambda: not [o for o in ours(hook, JOBSET, identity) if not o["metadata"].get("deletionTimestamp")])


def test_409_adopts_our_object_and_refuses_a_foreign_one(pathways_cluster):
    hook = PathwaysHook()
    identity = TaskIdentity("dag", "conflict", "run-1")
    foreign = operator("conflict").render_manifest({"ti": TaskInstance("dag", "conflict", "run-1")})
    foreign["metadata"]["labels"] = {"team": "someone-else"}
    hook.create(foreign)
    with pytest.raises(ForeignWorkloadError, match="refusing to adopt"):
        operator("conflict").execute({"ti": TaskInstance("dag", "conflict", "run-1")})
    hook.delete(PATHWAYSJOB, "default", identity.workload_name())
    wait_for(lambda: hook.get(PATHWAYSJOB, "default", identity.workload_name()) is None)
    ours_manifest = operator("conflict").render_manifest({"ti": TaskInstance("dag", "conflict", "run-1")})
    adoption = hook.create_or_adopt(ours_manifest, identity.key)
    assert adoption.created
    again = hook.create_or_adopt(ours_manifest, identity.key)
    assert not again.created and again.obj["metadata"]["uid"] == adoption.obj["metadata"]["uid"]
    hook.delete(PATHWAYSJOB, "default", identity.workload_name())


def test_the_trigger_survives_dropped_watches_410_and_500s_and_reports_the_end(pathways_cluster):
    submit_training("robust")

    def chaos():
        pathways_cluster.drop_watches()
        pathways_cluster.compact()
        pathways_cluster.inject_fault(r"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets$", status=500, count=4, methods=["GET"])
        time.sleep(0.3)
        pathways_cluster.drop_watches()

    trigger = PathwaysJobTrigger(name="robust", namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=5)
    payload = first_event(trigger, during=chaos)
    assert payload["status"] == "finished" and payload["state"]["phase"] == "SUCCEEDED"
    PathwaysHook().delete(JOBSET, "default", "robust")


def test_the_trigger_deletes_the_workload_when_the_task_times_out(pathways_cluster):
    hook = submit_training("timeout", steps=10_000)
    trigger = PathwaysJobTrigger(name="timeout", namespace="default", backend="jobset", target=ClusterTarget().to_dict(), deadline=time.time() + 2)
    payload = first_event(trigger)
    assert payload["status"] == "timeout" and payload["deleted"] is True
    wait_for(lambda: hook.get(JOBSET, "default", "timeout") is None)


def test_trigger_on_kill_deletes_the_workload(pathways_cluster):
    hook = submit_training("killed", steps=10_000)
    trigger = PathwaysJobTrigger(name="killed", namespace="default", backend="jobset", target=ClusterTarget().to_dict())
    asyncio.run(trigger.on_kill())
    wait_for(lambda: hook.get(JOBSET, "default", "killed") is None)
    wait_for(lambda: not pathways_cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": "killed"}))


def test_operator_on_kill_deletes_what_it_submitted(pathways_cluster):
    hook = PathwaysHook()
    ti = TaskInstance("dag", "onkill", "run-1")
    task = operator("onkill")
    with pytest.raises(TaskDeferred):
        task.execute({"ti": ti})
    task.on_kill()
    name = TaskIdentity("dag", "onkill", "run-1").workload_name()
    wait_for(lambda: hook.get(PATHWAYSJOB, "default", name) is None)


def test_a_wait_in_the_worker_ends_as_soon_as_its_task_is_killed(pathways_cluster):
    """Airflow's SIGTERM handler runs ``on_kill`` and returns: the wait in the worker must not go on
    judging the workload the kill deletes (it would fail it as deleted by someone else, or wait out
    an outage) until the supervisor's SIGKILL."""
    import threading

    from pathways_airflow.exceptions import PathwaysError
    from pathways_airflow.operators.base import STOP_CHECK_SECONDS

    ti = TaskInstance("dag", "onkill-inline", "run-1")
    task = operator("onkill-inline", deferrable=False)
    name = TaskIdentity("dag", "onkill-inline", "run-1").workload_name()
    hook = PathwaysHook()
    killed_at: list[float] = []

    def kill_once_running() -> None:
        wait_for(lambda: hook.get(PATHWAYSJOB, "default", name), timeout=60, what="the submitted PathwaysJob")
        task.on_kill()
        killed_at.append(time.monotonic())

    killer = threading.Thread(target=kill_once_running, daemon=True)
    killer.start()
    with pytest.raises(PathwaysError, match="was stopped"):
        task.execute({"ti": ti})
    assert killed_at and time.monotonic() - killed_at[0] < 5 * STOP_CHECK_SECONDS + 1
    wait_for(lambda: hook.get(PATHWAYSJOB, "default", name) is None)


def test_a_kill_that_races_the_submission_still_deletes_the_workload(pathways_cluster):
    """The kill lands after the create request left but before the task held what it made: the kill
    found nothing to delete, so the task deletes it itself before it stops."""
    from pathways_airflow.exceptions import PathwaysError

    ti = TaskInstance("dag", "onkill-race", "run-1")
    task = operator("onkill-race", deferrable=False)
    name = TaskIdentity("dag", "onkill-race", "run-1").workload_name()
    create_or_adopt = task.hook.create_or_adopt

    def created_then_killed(*args, **kwargs):
        adoption = create_or_adopt(*args, **kwargs)
        assert task.hook.get(PATHWAYSJOB, "default", name) is not None
        task.on_kill()
        return adoption

    task.hook.create_or_adopt = created_then_killed
    with pytest.raises(PathwaysError, match="was stopped"):
        task.execute({"ti": ti})
    wait_for(lambda: task.hook.get(PATHWAYSJOB, "default", name) is None, what="the raced PathwaysJob's deletion")


def test_a_task_killed_before_it_submits_submits_nothing(pathways_cluster):
    """The kill lands while the task still prepares (maintenance, the checkpoint to resume from):
    nothing is submitted for the kill to miss."""
    from pathways_airflow.exceptions import PathwaysError

    task = operator("onkill-early", deferrable=False)
    creates: list[object] = []
    create_or_adopt = task.hook.create_or_adopt

    def counted(*args, **kwargs):
        creates.append(args)
        return create_or_adopt(*args, **kwargs)

    task.hook.create_or_adopt = counted
    task.on_kill()
    with pytest.raises(PathwaysError, match="was stopped"):
        task.execute({"ti": TaskInstance("dag", "onkill-early", "run-1")})
    assert creates == []
    assert task.hook.get(PATHWAYSJOB, "default", TaskIdentity("dag", "onkill-early", "run-1").workload_name()) is None


def test_a_user_bug_on_the_pathwaysjob_backend_is_reported_with_its_exit_code_and_log(pathways_cluster):
    """The failed head pod is deleted with its Job; the trigger keeps what it saw of it."""
    from pathways_airflow.spec import build_workload, render

    hook = PathwaysHook()
    workload = build_workload(
        tpu="v5e", topology="2x4", pathways_dir="gs://pathways-demo/tmp", image="maxtext", max_restarts=0,
        command=["python3", "-m", "MaxText.train", "steps=50", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_FAIL_AT_STEP": "5", "PATHWAYS_TESTING_EXIT_CODE": "3", "PATHWAYS_TESTING_STEP_SECONDS": "20"},
    )
    hook.create(render(workload, backend="pathwaysjob", name="userbug-pj", namespace="default"))
    trigger = PathwaysJobTrigger(name="userbug-pj", namespace="default", backend="pathwaysjob", target=ClusterTarget().to_dict())
    payload = first_event(trigger)
    state = payload["state"]
    assert (state["phase"], state["cause"], state["exit_code"]) == ("FAILED", "USER_CODE", 3)
    failure = payload["failure"]
    assert failure["exit_code"] == 3 and failure["container"] == "main"
    # The Job controller deletes the failed head pod at once, and its log with it: the trigger
    # reads the log when it can, and the message says where to look when it cannot.
    assert isinstance(failure["log_tail"], list)
    hook.delete(PATHWAYSJOB, "default", "userbug-pj")


def test_a_finished_jobset_deletes_itself_when_airflow_never_comes_back(pathways_cluster):
    hook = PathwaysHook()
    done = {"PATHWAYS_TESTING_PROGRAM": "exit", "PATHWAYS_TESTING_EXIT_CODE": "0"}
    names = {}
    for task_id, ttl in (("abandoned", 1), ("kept", None)):
        ti = TaskInstance("dag", task_id, "run-1")
        with pytest.raises(TaskDeferred):  # the task defers, and nobody ever resumes it
            operator(task_id, backend="jobset", env=done, ttl_seconds_after_finished=ttl).execute({"ti": ti})
        names[task_id] = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id).workload_name()
    wait_for(lambda: (js := hook.get(JOBSET, "default", names["kept"])) is not None and js["status"].get("terminalState") == "Completed")
    selector = f"jobset.sigs.k8s.io/jobset-name={names['abandoned']}"
    wait_for(lambda: hook.get(JOBSET, "default", names["abandoned"]) is None and not hook.list(POD, "default", label_selector=selector))
    assert hook.get(JOBSET, "default", names["kept"]) is not None, "without a TTL a finished JobSet stays for the task to read"
    hook.delete(JOBSET, "default", names["kept"])


def test_a_worker_job_the_api_refuses_fails_the_task_at_once_with_the_apis_message(pathways_cluster):
    """The head runs, the API refuses the worker Job (an object-count quota): no hang, nothing left."""
    from pathways_airflow.exceptions import BadSpecError
    from pathways_airflow.resources import JOB

    pathways_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "refused"}})
    pathways_cluster.apply(
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-job", "namespace": "refused"},
         "spec": {"hard": {"count/jobs.batch": "1"}}},
        namespace="refused",
    )
    ti = TaskInstance("dag", "refused", "run-1")
    started = time.monotonic()
    with pytest.raises(BadSpecError) as raised:
        operator("refused", backend="jobset", namespace="refused", deferrable=False).execute({"ti": ti})
    assert time.monotonic() - started < 30
    name = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id).workload_name()
    assert f'rejected child Job: job "{name}-worker-0" creation failed with error: jobs.batch "{name}-worker-0" is forbidden: exceeded quota: one-job' in str(raised.value)
    hook = PathwaysHook()
    wait_for(lambda: not hook.list(JOBSET, "refused") and not hook.list(JOB, "refused") and not hook.list(POD, "refused"))


def test_a_retry_that_re_attaches_reports_the_chip_time_from_the_submission(pathways_cluster):
    """The first try's wait writes the phases it sees on the workload, then its worker dies; the
    retry re-attaches and reports goodput and chip-hours from the submission, not from its arrival."""
    training = dict(image="maxtext", command=["python3", "-m", "MaxText.train", "run_name=reattach-goodput", "steps=300"], env={"PATHWAYS_TESTING_STEP_SECONDS": "2"})
    with pytest.raises(TaskDeferred) as first:
        operator("reattach-goodput", **training).execute({"ti": TaskInstance("dag", "reattach-goodput", "run-1")})
    submitted_at = time.time()
    with pytest.raises(TimeoutError):
        first_event(first.value.trigger, timeout=5)  # the first try's wait sees it run, then goes away
    result = operator("reattach-goodput", deferrable=False, **training).execute({"ti": TaskInstance("dag", "reattach-goodput", "run-1")})
    finished_at = time.time()
    assert result["state"] == "SUCCEEDED" and "never admitted" not in result["goodput_summary"], result["goodput_summary"]
    # Held from admission (right after the submission) to the deletion: all but the 5 s before the retry would be missing.
    assert result["goodput"]["held_seconds"] >= finished_at - submitted_at - 2.0, result["goodput"]
