"""A deferred task killed on Airflow 3.1/3.2 (no ``BaseTrigger.on_kill``) still deletes its workload.

The trigger is cancelled and cleaned up as those triggerers do (``run_trigger``: cancel, then
``cleanup()``). Its question about the task instance goes through the Task SDK's real
``RuntimeTaskInstance.get_task_states`` to a stand-in of the supervisor's channel, which answers
with the Execution API's own ``TaskStatesResult``. The real triggerer, supervisor and API server
answer it in ``tests/e2e/test_deployment.py`` (mark failed through the REST API).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

import pytest

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import JOBSET
from pathways_airflow.hooks.airflow_states import killed_while_deferred, this_task_state
from pathways_airflow.triggers.kill import NATIVE_ON_KILL
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from tests.support.triggers import cancelled_like_a_triggerer
from tests.support.waiting import wait_for
from tests.support.workloads import submit_training

TI = SimpleNamespace(dag_id="dag", task_id="train", run_id="run-1", map_index=-1)


class SupervisorChannel:
    """Answers as the triggerer's supervisor does: the task's state for ``GetTaskStates`` (and
    records the question); "not found" for a connection, so the hook falls back to the kubeconfig."""

    def __init__(self, state: str | None) -> None:
        self.state = state
        self.asked: list[object] = []

    def send(self, message: object) -> object:
        from airflow.sdk.exceptions import ErrorType
        from airflow.sdk.execution_time.comms import ErrorResponse, TaskStatesResult

        if type(message).__name__ != "GetTaskStates":
            return ErrorResponse(error=ErrorType.CONNECTION_NOT_FOUND, detail={"message": repr(message)})
        self.asked.append(message)
        return TaskStatesResult(task_states={TI.run_id: {TI.task_id: self.state}})


@pytest.mark.parametrize("state", ["failed", "success", None, "deferred"])
def test_a_cancelled_trigger_deletes_the_workload_only_when_its_task_was_killed(pathways_cluster, monkeypatch, state):
    import airflow.sdk.execution_time.task_runner as task_runner

    name = f"kill-{state or 'cleared'}"
    hook = submit_training(name, steps=10_000)
    channel = SupervisorChannel(state)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", channel, raising=False)
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict())
    trigger.task_instance = TI

    cancelled_like_a_triggerer(trigger)

    if NATIVE_ON_KILL or state == "deferred":
        # 3.3 calls on_kill itself and cleanup() must not; a task still deferred was not killed
        # (triggerer restart or hand-over): the workload runs on for the next triggerer.
        assert hook.get(JOBSET, "default", name) is not None
        assert len(channel.asked) == (0 if NATIVE_ON_KILL else 1)
    else:
        wait_for(lambda: hook.get(JOBSET, "default", name) is None)
        (question,) = channel.asked
        assert (question.dag_id, question.task_ids, question.run_ids) == ("dag", ["train"], ["run-1"])
    hook.delete(JOBSET, "default", name)


def test_a_trigger_that_cannot_ask_airflow_deletes_nothing(pathways_cluster, monkeypatch):
    """No supervisor (the triggerer is going away): leave the workload for the next triggerer."""
    import airflow.sdk.execution_time.task_runner as task_runner

    hook = submit_training("kill-unknown", steps=10_000)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", None, raising=False)
    trigger = PathwaysJobTrigger(name="kill-unknown", namespace="default", backend="jobset", target=ClusterTarget().to_dict())
    trigger.task_instance = TI
    cancelled_like_a_triggerer(trigger)
    assert hook.get(JOBSET, "default", "kill-unknown") is not None
    hook.delete(JOBSET, "default", "kill-unknown")


def test_the_task_states_answer_is_read_as_the_execution_api_writes_it():
    answer = {"run-1": {"train": "failed", "convert_3": "deferred"}}
    assert this_task_state(answer, "run-1", "train", -1) == (True, "failed")
    assert this_task_state(answer, "run-1", "convert", 3) == (True, "deferred")
    assert this_task_state(answer, "run-2", "train", None) == (False, None)
    assert killed_while_deferred(True, "failed") and killed_while_deferred(True, None)
    assert not killed_while_deferred(True, "deferred") and not killed_while_deferred(False, None)


TRIGGERER_ON_KILL_TIMEOUT = 2.0
"""How long the triggerer in these tests gives ``on_kill`` before moving on (Airflow's is 30 s)."""


@pytest.mark.parametrize(
    "trouble",
    [{"status": 503, "count": 6}, {"status": 429, "count": 1, "retry_after": 6}],
    ids=["503x6", "429-retry-after"],
)
def test_a_task_killed_during_api_trouble_still_has_its_workload_deleted(pathways_cluster, trouble):
    """The DELETE is held up longer than the triggerer waits for ``on_kill``: it goes on after the
    triggerer moved on, on the triggerer's loop, until the workload is gone."""
    from pathways_airflow.triggers.deletion import deletes_in_progress

    name = f"kill-trouble-{trouble['status']}"
    hook = submit_training(name, steps=10_000)
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict())

    async def triggerer() -> None:
        events = trigger.run()
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(1.0)
        pathways_cluster.inject_fault(f"/jobsets/{name}$", methods=["DELETE"], **trouble)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await waiting
        await events.aclose()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(trigger.on_kill(), timeout=TRIGGERER_ON_KILL_TIMEOUT)
        assert hook.get(JOBSET, "default", name) is not None, "the trouble outlasts the triggerer's patience"
        for _ in range(240):  # the triggerer's loop runs on, as it does for its other triggers
            if not deletes_in_progress():
                break
            await asyncio.sleep(0.25)
        await AsyncPathwaysHook.close_all()

    asyncio.run(triggerer())
    wait_for(lambda: hook.get(JOBSET, "default", name) is None)


def test_a_delete_outlives_the_wait_that_started_it_but_not_silently_its_loop(pathways_cluster, caplog):
    """A worker's own loop (a task that does not defer, ``dag.test``) waits for a running delete
    before it ends; a loop that ends under one (a triggerer shutting down) says what is left."""
    from pathways_airflow.triggers.deletion import delete_in_background, deletes_done

    target = ClusterTarget()
    for name, waits in (("slow-delete-waited", True), ("slow-delete-dropped", False)):
        submit_training(name, steps=400)
        # the first DELETE is refused with Retry-After: 2 (the retry comes after the loop below ends)
        pathways_cluster.inject_fault(rf"/jobsets/{name}$", status=503, count=1, methods=["DELETE"], retry_after=2)

        async def delete() -> None:
            delete_in_background(target, JOBSET, "default", name, "the task was killed")
            await asyncio.sleep(0.5)
            if waits:
                await deletes_done()
            await AsyncPathwaysHook.close_all()

        with caplog.at_level("INFO", logger="pathways_airflow.triggers.deletion"):
            asyncio.run(delete())
        if waits:
            wait_for(lambda: pathways_cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name) is None, timeout=30)
        else:
            assert pathways_cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", name) is not None
            assert f"the delete of JobSet default/{name} (the task was killed) was stopped before it was done" in caplog.text
            assert f"kubectl -n default delete jobsets {name}" in caplog.text
            from pathways_airflow.hooks.pathways import PathwaysHook

            PathwaysHook().delete(JOBSET, "default", name)
