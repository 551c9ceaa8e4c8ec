"""``hooks.changes.wait_until_changed``: a worker's wait ends when the object changes, not a poll later.

Against the local cluster's API server (a real watch with ``fieldSelector`` and
``resourceVersion``), driven by the real ``kubernetes`` client.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from pathways_airflow.hooks.api import object_path
from pathways_airflow.hooks.changes import version_of, wait_until_changed
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.resources import JOB, Resource

NAMESPACE = "default"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": pathways_cluster.kubeconfig}}),
    )


def suspended_job(hook: PathwaysHook, name: str) -> dict:
    """A Job that runs nothing (suspended), so only this test changes it."""
    return hook.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "bash", "command": ["true"]}]}},
            },
        }
    )


def settled(hook: PathwaysHook, name: str) -> dict:
    """The Job once its controller has stopped changing it (a second without a change)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        job = hook.get(JOB, NAMESPACE, name)
        if not wait_until_changed(hook, JOB, NAMESPACE, name, version_of(job), 1.0):
            return job
    raise AssertionError(f"Job {name} kept changing for 20 s")


def annotate_later(hook: PathwaysHook, name: str, after: float) -> threading.Thread:
    def annotate() -> None:
        time.sleep(after)
        hook.request(
            "PATCH",
            object_path(JOB, NAMESPACE, name),
            body={"metadata": {"annotations": {"example.com/touched": "yes"}}},
            content_type="application/merge-patch+json",
        )

    thread = threading.Thread(target=annotate)
    thread.start()
    return thread


def timed_wait(hook: PathwaysHook, resource: Resource, name: str, since: str | None, timeout: float) -> tuple[bool, float]:
    started = time.monotonic()
    changed = wait_until_changed(hook, resource, NAMESPACE, name, since, timeout)
    return changed, time.monotonic() - started


def test_a_change_ends_the_wait_at_once_and_a_quiet_object_waits_the_whole_interval():
    hook = PathwaysHook()
    suspended_job(hook, "wait-change")
    try:
        job = settled(hook, "wait-change")
        thread = annotate_later(hook, "wait-change", after=0.5)
        changed, took = timed_wait(hook, JOB, "wait-change", version_of(job), timeout=20)
        thread.join()
        assert changed and 0.4 < took < 5, took

        current = hook.get(JOB, NAMESPACE, "wait-change")
        assert version_of(current) != version_of(job)
        changed, took = timed_wait(hook, JOB, "wait-change", version_of(current), timeout=2)
        assert not changed and took >= 1.9, took
    finally:
        hook.delete(JOB, NAMESPACE, "wait-change")


def test_a_change_made_between_the_read_and_the_wait_is_not_missed():
    hook = PathwaysHook()
    suspended_job(hook, "wait-missed")
    try:
        job = settled(hook, "wait-missed")
        annotate_later(hook, "wait-missed", after=0).join()
        changed, took = timed_wait(hook, JOB, "wait-missed", version_of(job), timeout=20)
        assert changed and took < 5, took
    finally:
        hook.delete(JOB, NAMESPACE, "wait-missed")


def test_a_deletion_ends_the_wait():
    hook = PathwaysHook()
    suspended_job(hook, "wait-deleted")
    job = settled(hook, "wait-deleted")
    deleter = threading.Thread(target=lambda: (time.sleep(0.5), hook.delete(JOB, NAMESPACE, "wait-deleted")))
    deleter.start()
    changed, took = timed_wait(hook, JOB, "wait-deleted", version_of(job), timeout=20)
    deleter.join()
    assert changed and took < 5, took


def test_a_watch_the_api_refuses_falls_back_to_waiting_out_the_interval():
    hook = PathwaysHook()
    not_served = Resource("example.com", "v1", "widgets", "Widget")
    changed, took = timed_wait(hook, not_served, "anything", "1", timeout=1.5)
    assert not changed and took >= 1.4, took


def test_a_deferred_job_wait_sees_the_job_finish_at_once_not_a_poll_interval_later(pathways_cluster):
    import asyncio

    from pathways_airflow import well_known
    from pathways_airflow.hooks.pathways import AsyncPathwaysHook
    from pathways_airflow.resources import POD
    from pathways_airflow.spec.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
    from pathways_airflow.triggers.job import BatchJobTrigger

    hook = PathwaysHook()
    hook.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "wait-job-done", "namespace": NAMESPACE, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "bash", "command": ["sleep", "3600"]}]}},
            },
        }
    )
    trigger = BatchJobTrigger(name="wait-job-done", namespace=NAMESPACE, target={"kubernetes_conn_id": "kubernetes_default"}, poll_interval=120)

    def finish_the_program() -> None:
        pods = hook.list(POD, NAMESPACE, label_selector=f"{well_known.JOB_NAME}=wait-job-done")
        assert pods and pathways_cluster.fail_pod(NAMESPACE, pods[0]["metadata"]["name"], exit_code=0)

    async def first() -> tuple[dict, float]:
        events = trigger.run()
        waiting = asyncio.ensure_future(events.__anext__())
        try:
            await asyncio.sleep(3)  # the trigger has read the Job running and waits its 120 s
            assert not waiting.done()
            started = time.monotonic()
            await asyncio.to_thread(finish_the_program)
            return (await asyncio.wait_for(waiting, 60)).payload, time.monotonic() - started
        finally:
            waiting.cancel()
            await events.aclose()
            await AsyncPathwaysHook.close_all()

    try:
        payload, took = asyncio.run(first())
        assert payload["status"] == "complete" and took < 10, (payload, took)
    finally:
        hook.delete(JOB, NAMESPACE, "wait-job-done")


def test_a_job_wait_whose_reads_fail_waits_its_interval_between_them_however_often_the_job_changes(pathways_cluster):
    """The watch's wake-ups are for a working API: while the reads of the Job fail, each next read
    waits the interval, so a busy Job cannot use up ``max_failures`` in a fraction of a second."""
    from pathways_airflow.spec.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
    from pathways_airflow.triggers.job import BatchJobTrigger
    from pathways_airflow_testing.faults import FaultRule

    from tests.support.triggers import first_event

    hook = PathwaysHook()
    name = "wait-job-refused"
    suspended_job(hook, name)
    hook.request(
        "PATCH", object_path(JOB, NAMESPACE, name), body={"metadata": {"labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}},
        content_type="application/merge-patch+json",
    )
    pathways_cluster.faults.add(FaultRule(rf"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}$", status=403, count=1000, methods=("GET",), watch=False))
    stop = threading.Event()

    def keep_changing() -> None:
        for index in range(200):
            if stop.wait(0.2):
                return
            hook.request(
                "PATCH", object_path(JOB, NAMESPACE, name), body={"metadata": {"annotations": {"example.com/touch": str(index)}}},
                content_type="application/merge-patch+json",
            )

    changer = threading.Thread(target=keep_changing)
    changer.start()
    trigger = BatchJobTrigger(name=name, namespace=NAMESPACE, target={"kubernetes_conn_id": "kubernetes_default"}, poll_interval=2, max_failures=3)
    try:
        started = time.monotonic()
        payload = first_event(trigger, timeout=60)
        took = time.monotonic() - started
        assert payload["status"] == "error" and "3 reads in a row failed" in payload["message"], payload
        assert took >= 2 * 2 * 0.75, took  # two waits between three reads, each at least the interval less its spread
    finally:
        stop.set()
        changer.join()
        pathways_cluster.clear_faults()
        hook.delete(JOB, NAMESPACE, name)
