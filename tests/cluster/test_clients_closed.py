"""A deferred wait leaves no aiohttp session open behind it, however it ends.

Each trigger here runs as Airflow runs one outside the triggerer (``dag.test``, ``airflow tasks
test``): on a loop of its own, under ``asyncio.run``, with nothing closing clients for it
afterwards. A session left open is reported when the garbage collector finds it ("Unclosed
client session", "Unclosed connector"), on the ``asyncio`` logger and as a ``ResourceWarning``;
one still referenced would be reported only when the process exits, so it counts as well.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from typing import Any, Callable

import pytest

from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
from pathways_airflow.resources import JOB, JOBSET
from pathways_airflow.triggers.job import BatchJobTrigger
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from tests.support.triggers import cancelled_like_a_triggerer
from tests.support.workloads import submit_training


def open_sessions() -> set[int]:
    """The aiohttp sessions alive and not closed (only a process's exit would report them)."""
    import aiohttp

    return {id(o) for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession) and not o.closed}


def left_open(caplog: pytest.LogCaptureFixture, run: Callable[[], Any]) -> list[str]:
    """What ``run()`` left open: sessions the garbage collector reports, or still holds."""
    gc.collect()
    before = open_sessions()
    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, logger="asyncio"):
        warnings.simplefilter("always", ResourceWarning)
        run()
        gc.collect()
    said = [record.getMessage() for record in caplog.records] + [str(warning.message) for warning in caught]
    still_open = open_sessions() - before
    return [line for line in said if "Unclosed" in line] + [f"{len(still_open)} session(s) still open"] * bool(still_open)


def first_event_as_dag_test_runs_it(trigger: Any) -> Any:
    """The first event, as Airflow's in-process trigger run takes it (and nothing more)."""

    async def first() -> Any:
        return await asyncio.wait_for(anext(trigger.run(), None), 60)

    return asyncio.run(first())


def test_a_trigger_run_to_its_event_leaves_no_session_open(pathways_cluster, caplog):
    submit_training("closed-finished", steps=1)
    trigger = PathwaysJobTrigger(name="closed-finished", namespace="default", backend="jobset", target=ClusterTarget().to_dict())
    events: list[Any] = []

    assert left_open(caplog, lambda: events.append(first_event_as_dag_test_runs_it(trigger))) == []
    assert events[0].payload["status"] == "finished"
    PathwaysHook().delete(JOBSET, "default", "closed-finished")


def test_a_trigger_that_ends_in_an_error_leaves_no_session_open(pathways_cluster, caplog):
    pathways_cluster.inject_fault(r"/jobs/closed-refused$", status=403, count=5, methods=["GET"])
    trigger = BatchJobTrigger(name="closed-refused", namespace="default", target=ClusterTarget().to_dict(), max_failures=1)
    events: list[Any] = []

    try:
        assert left_open(caplog, lambda: events.append(first_event_as_dag_test_runs_it(trigger))) == []
    finally:
        pathways_cluster.clear_faults()
    assert events[0].payload["status"] == "error"


def test_a_cancelled_trigger_leaves_no_session_open(pathways_cluster, caplog):
    submit_training("closed-cancelled", steps=10_000)
    trigger = PathwaysJobTrigger(name="closed-cancelled", namespace="default", backend="jobset", target=ClusterTarget().to_dict())

    try:
        assert left_open(caplog, lambda: cancelled_like_a_triggerer(trigger, 1.0, close_clients=False)) == []
    finally:
        PathwaysHook().delete(JOBSET, "default", "closed-cancelled")


def test_a_polling_trigger_cancelled_between_polls_leaves_no_session_open(pathways_cluster, caplog):
    trigger = BatchJobTrigger(name="closed-never-made", namespace="default", target=ClusterTarget().to_dict(), poll_interval=0.2)

    assert left_open(caplog, lambda: cancelled_like_a_triggerer(trigger, 1.0, close_clients=False)) == []
    assert PathwaysHook().get(JOB, "default", "closed-never-made") is None


def test_a_sync_hook_closes_its_connections_when_closed_or_collected(pathways_cluster):
    closed, collected = PathwaysHook(), PathwaysHook()
    pools = []
    for hook in (closed, collected):
        hook.get(JOB, "default", "closed-nothing")
        pools.append(hook.api_client.rest_client.pool_manager)
    assert all(len(pool.pools) == 1 for pool in pools)

    closed.close()
    del hook, collected
    gc.collect()

    assert [len(pool.pools) for pool in pools] == [0, 0]
