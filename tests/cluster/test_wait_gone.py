"""``PathwaysHook.wait_gone``, the one wait for deleted objects and their pods, against the local cluster."""

from __future__ import annotations

import json
import time

import pytest

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.resources import JOB, POD


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": pathways_cluster.kubeconfig}}),
    )


def sleeping_job(hook: PathwaysHook, name: str) -> str:
    hook.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "bash", "command": ["bash", "-c", "sleep 3600"]}],
                    }
                },
            },
        }
    )
    selector = f"{well_known.JOB_NAME}={name}"
    deadline = time.monotonic() + 20
    while not hook.list(POD, "default", label_selector=selector):
        assert time.monotonic() < deadline, "the Job's pod never appeared"
        time.sleep(0.05)
    return selector


def test_wait_gone_names_what_is_left_when_time_runs_out_and_returns_empty_once_all_is_gone():
    hook = PathwaysHook()
    selector = sleeping_job(hook, "wait-gone")
    try:
        left = hook.wait_gone("default", [(JOB, "wait-gone")], [selector], timeout=0.2, poll=0.05)
        assert left[0] == "Job/wait-gone" and [x for x in left[1:] if x.startswith("Pod/wait-gone-")]

        assert hook.delete(JOB, "default", "wait-gone")
        started = time.monotonic()
        assert hook.wait_gone("default", [(JOB, "wait-gone")], [selector], timeout=20, poll=0.05) == []
        assert time.monotonic() - started < 20
        assert hook.get(JOB, "default", "wait-gone") is None
        assert hook.list(POD, "default", label_selector=selector) == []
    finally:
        hook.delete(JOB, "default", "wait-gone")


def test_wait_gone_on_nothing_returns_at_once():
    started = time.monotonic()
    assert PathwaysHook().wait_gone("default", [(JOB, "never-created")], [f"{well_known.JOB_NAME}=never-created"], timeout=30) == []
    assert time.monotonic() - started < 5
