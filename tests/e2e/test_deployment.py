"""A real Airflow deployment against the local cluster: crash and cancel a deferred training task.

api-server, scheduler (LocalExecutor), dag-processor and triggerer run as separate processes
(``tests/support/deployment.py``). The training DAG (``dags/pw_deployment.py``) submits one deferrable
PathwaysJob per run. A sampler thread lists the task's PathwaysJobs (by its task-key label) every
few milliseconds during each scenario: never two live at once, and one created in all.

- the triggerer is killed with SIGKILL while the task is deferred, a new one is started: the
  trigger resumes there and the task succeeds in its first try, with the one workload;
- the task's worker (the task process and its supervisor) is killed right after the API server
  accepted its PathwaysJob, before the task noted or deferred anything (the test DAG holds that
  window open): the scheduler finds the task without a heartbeat, retries it, and the retry
  re-attaches to the live workload, found by its task-key label, instead of submitting another;
- the deferred task is marked failed through the REST API: the triggerer cancels the trigger and
  its ``on_kill`` deletes the workload;
- ``pathways-airflow janitor`` asks the REST API about workloads labelled for that deferred task,
  for a DAG run and a map index that do not exist: it keeps the first while the task is deferred,
  deletes the others, and deletes the first once the task is marked failed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.resources import JOBSET as JOBSET_RESOURCE, POD
from pathways_airflow.spec.names import TASK_KEY_LABEL, TaskIdentity
from tests.support.connections import cluster_environment
from tests.support.deployment import AirflowDeployment, is_running, kill_tree, wait_until
from tests.support.workloads import WorkloadSampler, labelled_workload

pytestmark = pytest.mark.airflow

DAG_ID = "pw_deployment"
TASK_ID = "train"
DAG_FILE = Path(__file__).parent / "dags" / "pw_deployment.py"
PATHWAYSJOB = ("pathways-job.pathways.domain/v1", "PathwaysJob")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")


# --- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployment(pathways_cluster, tmp_path_factory) -> Iterator[AirflowDeployment]:
    env = cluster_environment(pathways_cluster)
    airflow = AirflowDeployment(tmp_path_factory.mktemp("airflow-deployment"), [DAG_FILE], env)
    with airflow.serving(DAG_ID):
        yield airflow


class TaskSampler(WorkloadSampler[str]):
    """Lists one task's PathwaysJobs (by its task-key label) every ``interval`` seconds."""

    def __init__(self, cluster: Any, task_key: str, interval: float = 0.02):
        super().__init__(cluster, {task_key: task_key}, interval=interval, labels={TASK_KEY_LABEL: task_key})
        self.task_key = task_key

    @property
    def created(self) -> dict[str, str]:
        """uid → name of every PathwaysJob ever seen."""
        return self.created_by[self.task_key]

    @property
    def most_live(self) -> int:
        return self.most_live_by[self.task_key]

    @property
    def live_now(self) -> list[str]:
        return self.live_by.get(self.task_key, [])

    def summary(self) -> str:
        return f"{self.samples} samples; created {sorted(self.created.values())}; at most {self.most_live} live; live now {self.live_now}"


@contextlib.contextmanager
def scenario(deployment: AirflowDeployment, cluster: Any, name: str) -> Iterator[tuple[str, TaskSampler]]:
    """A fresh DAG run id and a sampler on its task key; component logs printed if the body fails."""
    run_id = f"{name}-{uuid.uuid4().hex[:8]}"
    sampler = TaskSampler(cluster, TaskIdentity(DAG_ID, TASK_ID, run_id).key)
    sampler.start()
    started = time.monotonic()
    try:
        yield run_id, sampler
    except BaseException:
        print(f"{name} failed after {time.monotonic() - started:.1f}s; sampler: {sampler.summary()}")
        with contextlib.suppress(Exception):
            ti = deployment.task_instance(DAG_ID, run_id, TASK_ID)
            print(f"task instance: state={ti['state']} try={ti['try_number']}")
            for attempt in range(1, ti["try_number"] + 1):
                print(f"----- task log, try {attempt} -----\n{deployment.task_log(DAG_ID, run_id, TASK_ID, attempt)[-6000:]}")
        print(deployment.log_tails())
        raise
    finally:
        sampler.stop()
        print(f"{name}: {time.monotonic() - started:.1f}s; {sampler.summary()}")


TRIGGER_STARTING = f"trigger {DAG_ID}/"


def wait_for_trigger_watching(deployment: AirflowDeployment, run_id: str) -> str:
    """The task is deferred and its trigger, in the triggerer, has seen the workload running."""
    deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"deferred"}, timeout=90)

    def watching() -> str | None:
        log = deployment.task_log(DAG_ID, run_id, TASK_ID, 1)
        if "Trigger fired event" in log:
            raise AssertionError(f"the workload finished before the scenario could act:\n{log[-3000:]}")
        return log if TRIGGER_STARTING in log and "RUNNING" in log else None

    return wait_until("the trigger watching the running workload", watching, 60, interval=0.5)


def leftovers(cluster: Any, task_key: str) -> list[str]:
    """The task's PathwaysJobs and JobSets still in the cluster."""
    return [
        f"{o['kind']}/{o['metadata']['name']}"
        for kind in (PATHWAYSJOB, JOBSET)
        for o in cluster.list(*kind, "default", labels={TASK_KEY_LABEL: task_key})
    ]


# --- scenarios -----------------------------------------------------------------------------------------


def test_triggerer_killed_while_deferred_a_new_one_finishes_the_task_with_one_workload(deployment, pathways_cluster):
    with scenario(deployment, pathways_cluster, "triggerer-kill") as (run_id, sampler):
        deployment.trigger(DAG_ID, {"steps": 60, "step_seconds": "30"}, run_id=run_id)
        wait_for_trigger_watching(deployment, run_id)
        old_job = deployment.live_jobs("triggerer")[0]["id"]
        killed = deployment.kill("triggerer")
        killed_at = time.monotonic()
        assert sampler.live_now, "the workload should still be running when the triggerer dies"
        deployment.start("triggerer")
        deployment.wait_for_new_job("triggerer", after_id=old_job, timeout=60)
        wait_until(
            "the trigger started again in the new triggerer",
            lambda: deployment.task_log(DAG_ID, run_id, TASK_ID, 1).count(TRIGGER_STARTING) >= 2, 60,
        )
        resumed = time.monotonic() - killed_at
        running_at_resume = bool(sampler.live_now)
        ti = deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"success", "failed", "up_for_retry"}, timeout=120)

        assert ti["state"] == "success", ti
        assert ti["try_number"] == 1, "the triggerer's death must not cost an Airflow retry"
        assert len(sampler.created) == 1, f"exactly one workload for the task: {sampler.summary()}"
        assert sampler.most_live == 1, sampler.summary()
        wait_until("the finished workload deleted", lambda: not leftovers(pathways_cluster, sampler.task_key), 30)
        print(f"killed triggerer pids {killed}; the trigger ran again {resumed:.1f}s later, the workload {'still running' if running_at_resume else 'already finished'}")


def test_worker_killed_right_after_submitting_the_retry_adopts_the_workload(deployment, pathways_cluster):
    with scenario(deployment, pathways_cluster, "worker-kill") as (run_id, sampler):
        # The task holds 60 s after its PathwaysJob was accepted, before it notes or defers anything.
        deployment.trigger(DAG_ID, {"steps": 60, "step_seconds": "40", "hold_after_submit": "60"}, run_id=run_id)
        ti = deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"running"}, timeout=90)
        task, supervisor = wait_until("the task's processes", lambda: deployment.task_processes(ti["id"]), 30, interval=0.02)
        wait_until("the task's PathwaysJob", sampler.jobs, 60, interval=0.02)
        alive_at_kill = is_running(task)
        kill_tree([task, supervisor])
        killed_at = time.monotonic()
        assert alive_at_kill, "the task process had already exited (deferred) before the kill"
        ti = deployment.task_instance(DAG_ID, run_id, TASK_ID)
        assert ti["state"] == "running" and ti["try_number"] == 1, f"the kill should land before the deferral: {ti['state']}"

        retried = deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"deferred", "success", "failed"}, timeout=120)
        assert retried["try_number"] == 2, retried
        noticed = time.monotonic() - killed_at
        ti = deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"success", "failed"}, timeout=120)

        assert ti["state"] == "success", ti
        assert ti["try_number"] == 2, ti
        assert len(sampler.created) == 1, f"the retry must adopt, not submit a second workload: {sampler.summary()}"
        assert sampler.most_live == 1, sampler.summary()
        retry_log = deployment.task_log(DAG_ID, run_id, TASK_ID, 2)
        assert "re-attaching to the live workload" in retry_log, retry_log[-3000:]
        assert "submitted PathwaysJob" not in retry_log
        wait_until("the finished workload deleted", lambda: not leftovers(pathways_cluster, sampler.task_key), 30)
        print(f"killed task {task} and supervisor {supervisor}; retry deferred {noticed:.1f}s later")


def test_deferred_task_marked_failed_through_the_api_deletes_its_workload(deployment, pathways_cluster):
    with scenario(deployment, pathways_cluster, "mark-failed") as (run_id, sampler):
        deployment.trigger(DAG_ID, {"steps": 60, "step_seconds": "60"}, run_id=run_id)
        wait_for_trigger_watching(deployment, run_id)
        assert sampler.live_now, "the workload should be running when the task is marked failed"

        deployment.set_task_state(DAG_ID, run_id, TASK_ID, "failed")
        marked = time.monotonic()
        wait_until("the workload deleted by the trigger's on_kill", lambda: not leftovers(pathways_cluster, sampler.task_key), 30)
        deleted_after = time.monotonic() - marked

        time.sleep(3)  # nothing comes back: no retry, no resubmission
        ti = deployment.task_instance(DAG_ID, run_id, TASK_ID)
        assert ti["state"] == "failed" and ti["try_number"] == 1, ti
        assert len(sampler.created) == 1 and not sampler.live_now, sampler.summary()
        assert not leftovers(pathways_cluster, sampler.task_key)
        log = deployment.task_log(DAG_ID, run_id, TASK_ID, 1)
        assert "Trigger fired event" not in log, "the workload finished before the task was marked failed"
        assert "the task was killed while deferred" in log, log[-3000:]
        print(f"workload deleted {deleted_after:.1f}s after the task was marked failed")


JANITOR_NAMESPACE = "janitor-rest"
JANITOR = str(Path(sys.executable).with_name("pathways-airflow"))


def janitor(deployment: AirflowDeployment, *args: str) -> str:
    """``pathways-airflow janitor`` against the deployment's REST API, as an operator of the platform runs it."""
    env = {**os.environ, "AIRFLOW_API_TOKEN": deployment.token()}
    command = [JANITOR, "janitor", "--airflow-url", deployment.url, "--namespace", JANITOR_NAMESPACE, "--grace-period", "0", *args]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert deployment.token() not in output
    return output


def test_the_janitor_command_asks_the_rest_api_and_deletes_the_workloads_of_finished_or_missing_task_instances(deployment, pathways_cluster):
    with scenario(deployment, pathways_cluster, "janitor") as (run_id, sampler):
        deployment.trigger(DAG_ID, {"steps": 60, "step_seconds": "60"}, run_id=run_id)
        deployment.wait_for_task_state(DAG_ID, run_id, TASK_ID, {"deferred"}, timeout=90)
        pathways_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": JANITOR_NAMESPACE}})
        hook = PathwaysHook()
        live = TaskIdentity(DAG_ID, TASK_ID, run_id)
        labelled_workload(hook, "live", JANITOR_NAMESPACE, live)
        labelled_workload(hook, "no-run", JANITOR_NAMESPACE, TaskIdentity(DAG_ID, TASK_ID, "manual__no-such-run"))
        labelled_workload(hook, "no-index", JANITOR_NAMESPACE, TaskIdentity(DAG_ID, TASK_ID, run_id, map_index=2))

        first = janitor(deployment, "--delete")
        assert f"JobSet {JANITOR_NAMESPACE}/live task={DAG_ID}/{run_id}/{TASK_ID} state=deferred decision=keep" in first, first
        assert f"JobSet {JANITOR_NAMESPACE}/no-run task={DAG_ID}/manual__no-such-run/{TASK_ID} state=not found decision=delete chips=4" in first
        assert f"JobSet {JANITOR_NAMESPACE}/no-index task={DAG_ID}/{run_id}/{TASK_ID}[2] state=not found decision=delete" in first
        assert "deleted 2 of 3 workloads, freeing 8 TPU chips" in first
        assert [j["metadata"]["name"] for j in hook.list(JOBSET_RESOURCE, JANITOR_NAMESPACE)] == ["live"]

        deployment.set_task_state(DAG_ID, run_id, TASK_ID, "failed")
        dry = janitor(deployment)
        assert f"JobSet {JANITOR_NAMESPACE}/live task={DAG_ID}/{run_id}/{TASK_ID} state=failed decision=would delete" in dry, dry
        assert [j["metadata"]["name"] for j in hook.list(JOBSET_RESOURCE, JANITOR_NAMESPACE)] == ["live"]
        assert "deleted 1 of 1 workloads, freeing 4 TPU chips" in janitor(deployment, "--delete")
        assert hook.list(JOBSET_RESOURCE, JANITOR_NAMESPACE) == [] and hook.list(POD, JANITOR_NAMESPACE) == []
