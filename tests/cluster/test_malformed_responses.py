"""Malformed API responses never crash a trigger.

The local API server answers the triggers' list, watch and get requests with what broken proxies
and half-upgraded servers send: an HTML page with status 200, non-JSON text, a watch stream cut
in the middle of a line, events of unknown types, objects without ``status``, conditions of
unknown types or with fields missing. Each trigger must keep going (relist, re-watch, poll
again) and still report the real end — or, at worst, end with one clean ``error`` event. It must
never raise out of ``run()``.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from pathways_airflow.hooks.pathways import ClusterTarget, PathwaysHook
from pathways_airflow.resources import JOB, JOBSET
from pathways_airflow_testing.faults import FaultRule
from pathways_airflow.triggers.job import BatchJobTrigger
from pathways_airflow.triggers.slices import TpuSliceReadinessTrigger
from pathways_airflow.triggers.workload import PathwaysJobTrigger

from tests.support.connections import connect
from tests.support.triggers import first_event
from tests.support.workloads import submit_training

HTML = b"<html><head><title>502 Bad Gateway</title></head><body>upstream reset</body></html>"


@pytest.fixture(autouse=True)
def kubernetes_connection(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)
    yield
    pathways_cluster.clear_faults()


def admin_get(cluster, path: str, query: str = "") -> tuple[int, str, bytes]:
    token = next(u["user"]["token"] for u in __import__("yaml").safe_load(open(cluster.kubeconfig))["users"])
    request = urllib.request.Request(f"{cluster.server}{path}{query}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def garbage(path: str, body: bytes, *, count: int = 1, watch: bool | None = False, content_type: str = "text/html") -> FaultRule:
    return FaultRule(path, status=200, count=count, methods=("GET",), watch=watch, body=body, content_type=content_type)


def corrupt_watch(path: str, *lines: bytes, count: int = 1) -> FaultRule:
    return FaultRule(path, status=200, count=count, methods=("GET",), watch=True, watch_lines=lines)


# --- the faults themselves ------------------------------------------------------------------------


def test_a_garbage_body_fault_answers_once_with_its_bytes_then_the_api_serves_again(pathways_cluster):
    pathways_cluster.faults.add(garbage(r"/api/v1/namespaces/default/configmaps$", HTML))
    status, content_type, body = admin_get(pathways_cluster, "/api/v1/namespaces/default/configmaps")
    assert (status, content_type, body) == (200, "text/html", HTML)
    status, content_type, body = admin_get(pathways_cluster, "/api/v1/namespaces/default/configmaps")
    assert status == 200 and json.loads(body)["kind"] == "ConfigMapList"


def test_a_corrupted_watch_fault_streams_its_lines_and_ends(pathways_cluster):
    lines = (b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n', b"not json\n", b'{"type":"MODIFIED","obj')
    pathways_cluster.faults.add(corrupt_watch(r"/api/v1/namespaces/default/configmaps$", *lines))
    _, _, body = admin_get(pathways_cluster, "/api/v1/namespaces/default/configmaps", "?watch=true&timeoutSeconds=5")
    assert body == b"".join(lines)
    # Only watches match it: a list on the same path is served as usual.
    pathways_cluster.faults.add(corrupt_watch(r"/api/v1/namespaces/default/configmaps$", b"x"))
    _, _, body = admin_get(pathways_cluster, "/api/v1/namespaces/default/configmaps")
    assert json.loads(body)["kind"] == "ConfigMapList"


# --- PathwaysJobTrigger ---------------------------------------------------------------------------


def test_the_workload_trigger_rides_out_garbage_lists_and_corrupted_watches_and_reports_the_end(pathways_cluster):
    name = f"garbage-{uuid.uuid4().hex[:5]}"
    submit_training(name, steps=150)  # long enough that the corrupted watch is served before the end
    jobsets = r"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets$"
    pods = r"/api/v1/namespaces/default/pods$"
    workloads = r"/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads$"
    weird = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1", "uid": "u"},
        "status": {
            "conditions": [{"type": "SomethingNew", "status": "True"}, {"status": "True"}, {"type": "Completed"}, {}],
            "replicatedJobsStatus": [{}],
        },
    }
    no_status = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": "default"}}
    rules = [
        garbage(jobsets, HTML),  # the first list: an HTML page with 200
        garbage(jobsets, b'{"kind": "JobSetList", "items": "not a list"}', content_type="application/json"),
        garbage(pods, b"\x00\xff garbage", content_type="application/octet-stream"),
        garbage(workloads, b"[1, 2, 3]", content_type="application/json"),
        corrupt_watch(
            jobsets,
            json.dumps({"type": "ADDED", "object": no_status}).encode() + b"\n",
            json.dumps({"type": "MODIFIED", "object": weird}).encode() + b"\n",
            b'{"type": "SOMETHING_NEW", "object": {"metadata": {"name": "x"}}}\n',
            b'{"type": "MODIFIED", "object": null}\n',
            b'"just a string"\n',
            b"<html>not json</html>\n",
            b'{"type": "MODIFIED", "object": {"metadata": {"name": "' + name.encode() + b'", "namesp',
        ),
        corrupt_watch(pods, b'{"type": "ADDED", "object": {"kind": "Pod"}}\n', b'{"type":"BOOKMARK"}\n', b"{{{{\n"),
    ]
    for rule in rules:
        pathways_cluster.faults.add(rule)
    trigger = PathwaysJobTrigger(name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=2)
    payload = first_event(trigger, timeout=90)
    assert not [r for r in rules if r.served < r.count], "every fault was served"
    assert payload["status"] == "finished", payload
    assert payload["state"]["phase"] == "SUCCEEDED"
    PathwaysHook().delete(JOBSET, "default", name)


def test_the_workload_trigger_never_raises_when_every_answer_is_garbage(pathways_cluster):
    """Nothing readable at all: the trigger keeps retrying for its API outage limit, then ends with
    one clean error event."""
    name = f"nothing-{uuid.uuid4().hex[:5]}"
    pathways_cluster.faults.add(garbage(r"/namespaces/default/(jobsets|pods|workloads)$", HTML, count=10_000))
    trigger = PathwaysJobTrigger(
        name=name, namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=0.2, api_outage_seconds=3.0
    )
    payload = first_event(trigger, timeout=60)
    pathways_cluster.clear_faults()
    assert payload["status"] == "error" and payload["name"] == name
    assert isinstance(payload["message"], str) and payload["message"]


# --- BatchJobTrigger ------------------------------------------------------------------------------


def a_job(name: str, command: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", command]}]}},
        },
    }


def test_the_job_trigger_polls_through_html_and_odd_statuses_and_reports_the_end(pathways_cluster):
    name = f"odd-{uuid.uuid4().hex[:5]}"
    hook = PathwaysHook()
    hook.create(a_job(name, "sleep 1; exit 0"))
    path = rf"/apis/batch/v1/namespaces/default/jobs/{name}$"
    for body in (
        HTML,
        b"",
        b"not json",
        json.dumps({"kind": "Job", "metadata": {"name": name}}).encode(),  # no status
        json.dumps({"kind": "Job", "metadata": {"name": name}, "status": {"conditions": [{"type": "Mystery", "status": "True"}, {}, {"status": "True"}]}}).encode(),
        json.dumps({"kind": "Job", "metadata": {"name": name}, "status": {"conditions": [{"type": "Complete"}]}}).encode(),  # no status field: not complete
    ):
        pathways_cluster.faults.add(garbage(path, body, content_type="application/json"))
    trigger = BatchJobTrigger(name=name, namespace="default", target=ClusterTarget().to_dict(), poll_interval=0.1)
    payload = first_event(trigger, timeout=60)
    assert payload["status"] == "complete", payload
    hook.delete(JOB, "default", name)


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind": "Job", "metadata": {"name": "x"}, "status": "Running"}',
        b'{"kind": "Job", "metadata": {"name": "x"}, "status": {"conditions": "none"}}',
        b'{"kind": "Job", "metadata": {"name": "x"}, "status": {"active": "two"}}',
        b'["a", "list"]',
    ],
)
def test_one_wrongly_typed_job_never_raises_out_of_the_trigger(pathways_cluster, body):
    """A body of the wrong shape ends in at most a clean error event (see the proposed patch for riding it out)."""
    name = f"typed-{uuid.uuid4().hex[:5]}"
    hook = PathwaysHook()
    hook.create(a_job(name, "sleep 2; exit 0"))
    pathways_cluster.faults.add(garbage(rf"/apis/batch/v1/namespaces/default/jobs/{name}$", body, content_type="application/json"))
    trigger = BatchJobTrigger(name=name, namespace="default", target=ClusterTarget().to_dict(), poll_interval=0.1)
    payload = first_event(trigger, timeout=60)
    assert payload["status"] in ("complete", "error"), payload
    assert payload["name"] == name
    hook.delete(JOB, "default", name)


# --- TpuSliceReadinessTrigger ---------------------------------------------------------------------


def test_the_slice_trigger_rides_out_garbage_node_lists_and_watches(pathways_cluster):
    nodes = r"/api/v1/nodes$"
    lists = [garbage(nodes, HTML), garbage(nodes, b'{"items": [{"kind": "Node"}, 7, null]}', content_type="application/json")]
    for rule in (
        *lists,
        garbage(nodes, b'{"items": [{"kind": "Node"}, 7, null]}', content_type="application/json"),
        corrupt_watch(
            nodes,
            b'{"type": "ADDED", "object": {"kind": "Node", "metadata": {"name": "ghost", "labels": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}}}}\n',
            b'{"type": "DELETED", "object": {}}\n',
            b'{"type": "ERROR", "object": {"code": 500, "message": "etcd hiccup"}}\n',
        ),
    ):
        pathways_cluster.faults.add(rule)
    trigger = TpuSliceReadinessTrigger(target=ClusterTarget().to_dict(), machine_type="ct5lp-hightpu-4t", topology="2x4", num_slices=1, poll_interval=0.5)
    payload = first_event(trigger, timeout=60)
    assert all(r.served == r.count for r in lists), "both garbage lists were served"
    pathways_cluster.clear_faults()
    assert payload["status"] == "ready", payload
    assert len(payload["ready"]) >= 1


# --- the sync hook: a non-JSON answer is an API error, not a JSONDecodeError ----------------------


def test_the_sync_hook_reports_a_non_json_answer_as_an_api_error(pathways_cluster):
    from pathways_airflow.exceptions import KubernetesApiError
    from pathways_airflow.resources import POD

    pathways_cluster.faults.add(garbage(r"/api/v1/namespaces/default/pods$", HTML))
    with pytest.raises(KubernetesApiError, match="not JSON") as raised:
        PathwaysHook().list(POD, "default")
    assert "502 Bad Gateway" in str(raised.value)
    time.sleep(0)
