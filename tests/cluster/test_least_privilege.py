"""``docker/rbac.yaml`` is sufficient and minimal: every flow of the provider passes as its
ServiceAccount with RBAC enforced, every verb it grants is used by those flows, and removing a
verb breaks a flow.

One local cluster with RBAC on; ``docker/rbac.yaml`` is applied by the admin, and the provider
runs with a kubeconfig of the ``pathways-airflow`` ServiceAccount. Every authorisation decision
the API server makes for that account is recorded, so the test knows exactly which
(group, resource, verb) each flow used, and that none was denied.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from airflow.providers.common.compat.sdk import TaskDeferred
from airflow.sdk.module_loading import import_string
from kubernetes import client, config

from pathways_airflow.exceptions import PermissionMissingError, UserCodeError
from pathways_airflow.operators import (
    CheckpointConversionOperator,
    DeletePathwaysJobOperator,
    DeployInferenceServerOperator,
    InferenceBenchmarkOperator,
    PathwaysJobOperator,
    TeardownInferenceServerOperator,
)
from pathways_airflow.sensors import CheckpointSensor, PathwaysJobSensor, TpuSliceReadinessSensor
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.testing import LocalCluster

from tests.support.connections import connect
from tests.support.gcs import gcs_bucket
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event
from tests.support.waiting import wait_for
from tests.support.workloads import when_step

REPO = Path(__file__).resolve().parents[2]
RBAC_YAML = REPO / "docker" / "rbac.yaml"
BUCKET = "pathways-demo"
SA = "system:serviceaccount:default:pathways-airflow"
RUN = {"id": "run-1"}
"""The DAG run the flows run in; each removal run uses a fresh one (nothing to re-attach to or reuse)."""


def ti_for(task_id: str) -> TaskInstance:
    return TaskInstance("dag", task_id, RUN["id"])

# --- the cluster, the policy, the audit ------------------------------------------------------------


def rbac_documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d]


def granted() -> set[tuple[str, str, str]]:
    """``(apiGroup, resource, verb)`` the policy grants."""
    found = set()
    for document in rbac_documents():
        for rule in document.get("rules") or ():
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        found.add((group, resource, verb))
    return found


class Audit:
    """Every authorisation decision for the ServiceAccount: (group, resource, verb) → allowed?"""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, str, str]] = set()
        self.denied: list[tuple[str, str, str, str | None, str | None]] = []
        self.lock = threading.Lock()

    def wrap(self, authorize: Callable[..., None]) -> Callable[..., None]:
        def recorded(user, verb, kind, namespace, name, subresource):
            resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
            try:
                authorize(user, verb, kind, namespace, name, subresource)
            except Exception:
                if user.name == SA:
                    with self.lock:
                        self.denied.append((kind.group, resource, verb, namespace, name))
                raise
            if user.name == SA:
                with self.lock:
                    self.allowed.add((kind.group, resource, verb))

        return recorded


@pytest.fixture(scope="module")
def audit() -> Audit:
    return Audit()


@pytest.fixture(scope="module")
def cluster(crds, audit):
    with LocalCluster(crds=[crds], speed=60, rbac=True) as local:
        local.authorizer.authorize = audit.wrap(local.authorizer.authorize)
        admin = config.new_client_from_config(local.kubeconfig)
        from kubernetes import utils

        for document in rbac_documents():
            utils.create_from_dict(admin, document)
        local.sa_kubeconfig = local.service_account_kubeconfig("default", "pathways-airflow")
        local.admin = admin
        yield local


@pytest.fixture(autouse=True)
def as_the_service_account(cluster, monkeypatch):
    connect(monkeypatch, cluster, cluster.sa_kubeconfig)


@pytest.fixture(scope="module")
def bucket(cluster):
    with gcs_bucket(cluster, BUCKET) as bucket:
        yield bucket


def training(task_id: str, *, steps: int = 20, backend: str = "pathwaysjob", env: dict | None = None, **overrides) -> PathwaysJobOperator:
    run = f"runs-{task_id}"
    params = dict(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir=f"gs://{BUCKET}/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", f"base_output_directory=gs://{BUCKET}/rbac", f"run_name={run}", f"steps={steps}", "checkpoint_period=10"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "2", **(env or {})},
        checkpoint_dir=f"gs://{BUCKET}/rbac/{run}/checkpoints", backend=backend, deferrable=False,
    )
    params.update(overrides)
    return PathwaysJobOperator(task_id=task_id, **params)


def workloads_of(cluster, task_id: str) -> list[dict]:
    key = TaskIdentity("dag", task_id, RUN["id"]).key
    return [
        *cluster.list("pathways-job.pathways.domain/v1", "PathwaysJob", "default", labels={"pathways-airflow/task-key": key}),
        *cluster.list("jobset.x-k8s.io/v1alpha2", "JobSet", "default", labels={"pathways-airflow/task-key": key}),
    ]


# --- the flows -------------------------------------------------------------------------------------


def flow_training_deferred(cluster, bucket) -> None:
    ti = ti_for("train-deferred")
    task = training("train-deferred", deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    event = first_event(deferred.value.trigger, 90)
    result = training("train-deferred", deferrable=True).execute_complete({"ti": ti}, event, **deferred.value.kwargs)
    assert result["state"] == "SUCCEEDED" and result["checkpoint"]["step"] == 19
    wait_for(lambda: not workloads_of(cluster, "train-deferred"))


def flow_training_in_the_worker(cluster, bucket) -> None:
    result = training("train-sync", backend="jobset").execute({"ti": ti_for("train-sync")})
    assert result["state"] == "SUCCEEDED"


def flow_disruption_resubmission(cluster, bucket) -> None:
    identity = TaskIdentity("dag", "ride", RUN["id"])
    when_step(cluster, identity, 15, lambda pool: cluster.maintenance(pool, duration=600))
    result = training("ride", steps=40).execute({"ti": ti_for("ride")})
    assert result["state"] == "SUCCEEDED" and result["name"] == identity.workload_name(attempt=1)
    assert [d["kind"] for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"] == ["MAINTENANCE"]


def flow_user_failure(cluster, bucket) -> None:
    task = training("user-bug", backend="jobset", env={"PATHWAYS_TESTING_STEP_SECONDS": "1", "PATHWAYS_TESTING_FAIL_AT_STEP": "5", "PATHWAYS_TESTING_EXIT_CODE": "1"})
    with pytest.raises(UserCodeError) as failed:
        task.execute({"ti": ti_for("user-bug")})
    assert failed.value.exit_code == 1
    assert "log lines" in str(failed.value), "the failing container's log is in the message (pods/log)"


def flow_conversion(cluster, bucket) -> None:
    prefix = f"rbac-conversion/{uuid.uuid4().hex[:6]}/checkpoints"
    for name in ("_CHECKPOINT_METADATA", "items/_METADATA", "items/x", "commit_success.txt"):
        bucket.blob(f"{prefix}/7/{name}").upload_from_string(b"{}")
    source = {"step": 7, "uri": f"gs://{BUCKET}/{prefix}/7"}
    for deferrable in (False, True):
        task_id = f"convert-{'deferred' if deferrable else 'worker'}"
        ti = ti_for(task_id)
        params = dict(checkpoint=source, output_dir=f"gs://{BUCKET}/rbac-serving-{task_id}-{RUN['id']}", image="maxtext", poll_interval=0.1, deferrable=deferrable)
        task = CheckpointConversionOperator(task_id=task_id, **params)
        if deferrable:
            with pytest.raises(TaskDeferred) as deferred:
                task.execute({"ti": ti})
            result = task.execute_complete({"ti": ti}, first_event(deferred.value.trigger, 90))
        else:
            result = task.execute({"ti": ti})
        assert result["source"] == source and result["uri"].endswith("/checkpoints/0")


def serving_checkpoint(bucket) -> dict:
    step = "rbac-inference/converted/checkpoints/0"
    bucket.blob(f"{step}/items/params.bin").upload_from_string(b"weights")
    bucket.blob(f"{step}/commit_success.txt").upload_from_string(b"")
    return {"uri": f"gs://{BUCKET}/{step}", "items_uri": f"gs://{BUCKET}/{step}/items"}


def server_params(bucket) -> dict:
    return dict(
        engine="jetstream", checkpoint=serving_checkpoint(bucket), model_name="llama2-7b", tpu="v5e", topology="2x4", pathways_dir=f"gs://{BUCKET}/tmp",
        env={"PATHWAYS_TESTING_WARMUP_SECONDS": "30", "PATHWAYS_TESTING_TTFT_MS": "2", "PATHWAYS_TESTING_TPOT_MS": "1"},
        startup_timeout=120, poll_interval=1.0, cleanup_timeout=20,  # ≥ 1 s: the start-up wait watches the LeaderWorkerSet
    )


def flow_inference_benchmark(cluster, bucket) -> None:
    task = InferenceBenchmarkOperator(
        task_id="bench", num_prompts=4, request_rate="inf", max_output_length=8, dataset="test",
        results_uri=f"gs://{BUCKET}/rbac-results/", **server_params(bucket),
    )
    result = task.execute({"ti": ti_for("bench")})
    assert result["completed"] == 4


def flow_deploy_and_teardown(cluster, bucket) -> None:
    ti = ti_for("deploy")
    server = DeployInferenceServerOperator(task_id="deploy", **server_params(bucket)).execute({"ti": ti})
    deleted = TeardownInferenceServerOperator(task_id="teardown", deploy_task_id="deploy", cleanup_timeout=20).execute(
        {"ti": ti_for("teardown")}
    )
    assert f"LeaderWorkerSet/{server['name']}" in deleted


def flow_sensors(cluster, bucket) -> None:
    # CheckpointSensor reads GCS only; it is here so the flow list is the provider's whole surface.
    prefix = f"rbac-sensor/{uuid.uuid4().hex[:6]}/checkpoints"
    bucket.blob(f"{prefix}/3/commit_success.txt").upload_from_string(b"ok")
    assert CheckpointSensor(task_id="ckpt", checkpoint_dir=f"gs://{BUCKET}/{prefix}").poke({}).xcom_value["step"] == 3

    slices = TpuSliceReadinessSensor(task_id="slices", tpu="v5e", topology="2x4", num_slices=1, deferrable=True)
    assert slices.poke({}).is_done
    waiting = TpuSliceReadinessSensor(task_id="slices", tpu="v5e", topology="2x4", num_slices=3, deferrable=True, poke_interval=0.1)
    busy = training("occupy", steps=200, deferrable=True)
    ti = ti_for("occupy")
    with pytest.raises(TaskDeferred) as occupied:
        busy.execute({"ti": ti})
    try:
        name = occupied.value.trigger.name
        watcher = PathwaysJobSensor(task_id="running", name=name, deferrable=True, poke_interval=0.1)
        try:
            first = watcher.execute({})
        except TaskDeferred as deferred:
            first = watcher.execute_complete({}, first_event(deferred.trigger, 90))
        assert first["phase"] == "RUNNING"
        # Three v5e 2x4 slices exist and one is busy: the slice sensor defers, then sees them ready
        # once the occupying workload is gone.
        with pytest.raises(TaskDeferred) as deferred:
            waiting.execute({})
        event = first_event(deferred.value.trigger, 90, during=busy.on_kill, during_after=0.3)
        assert waiting.execute_complete({}, event) and len(event["ready"]) == 3
    finally:
        busy.on_kill()


def flow_delete_and_on_kill(cluster, bucket) -> None:
    # The operator's on_kill (covered above) and the trigger's on_kill, then the delete operator.
    ti = ti_for("killed")
    task = training("killed", steps=10_000, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    path, kwargs = deferred.value.trigger.serialize()
    asyncio.run(import_string(path)(**kwargs).on_kill())
    wait_for(lambda: not workloads_of(cluster, "killed"), timeout=30)

    ti = ti_for("to-delete")
    task = training("to-delete", steps=10_000, deferrable=True, backend="jobset")
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    name = deferred.value.trigger.name
    deleted = DeletePathwaysJobOperator(task_id="delete", name=name, backend="jobset", wait_seconds=30).execute({})
    assert deleted is True and not workloads_of(cluster, "to-delete")


def flow_workload_sensor_in_the_worker(cluster, bucket) -> None:
    task = training("watched", steps=10_000, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti_for("watched")})
    try:
        sensor = PathwaysJobSensor(task_id="watched-sensor", name=deferred.value.trigger.name, poke_interval=0.1)
        wait_for(lambda: sensor.poke({}).is_done, timeout=30)
    finally:
        task.on_kill()


def flow_refused_worker_job(cluster, bucket) -> None:
    """A quota lets the head Job in and refuses the worker's: the wait reads the JobSet's events."""
    from pathways_airflow.exceptions import BadSpecError

    core = client.CoreV1Api(cluster.admin)
    jobs = len(client.BatchV1Api(cluster.admin).list_namespaced_job("default").items)
    quota = {"metadata": {"name": "one-more-job"}, "spec": {"hard": {"count/jobs.batch": str(jobs + 1)}}}
    core.create_namespaced_resource_quota("default", quota)
    try:
        with pytest.raises(BadSpecError, match="rejected child Job: .* exceeded quota: one-more-job"):
            training("refused-job", backend="jobset").execute({"ti": ti_for("refused-job")})
        wait_for(lambda: not workloads_of(cluster, "refused-job"))
    finally:
        core.delete_namespaced_resource_quota("one-more-job", "default")


def flow_late_garbage_collector(cluster, bucket) -> None:
    """The collector never comes: the delete operator deletes the JobSet, Jobs and pods itself."""
    with pytest.raises(TaskDeferred) as deferred:
        training("late-gc", steps=10_000, deferrable=True, termination_grace_period_seconds=1).execute({"ti": ti_for("late-gc")})
    name = deferred.value.trigger.name
    wait_for(lambda: len(cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name})) == 3, timeout=60)
    cluster.slow_garbage_collector(1e6)
    try:
        assert DeletePathwaysJobOperator(task_id="delete-late", name=name, wait_seconds=60).execute({}) is True
    finally:
        cluster.slow_garbage_collector(0)
    assert not cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": name})


FLOWS: dict[str, Callable[..., None]] = {
    "training, deferred": flow_training_deferred,
    "training, in the worker": flow_training_in_the_worker,
    "disruption resubmission": flow_disruption_resubmission,
    "user failure": flow_user_failure,
    "conversion": flow_conversion,
    "inference benchmark": flow_inference_benchmark,
    "deploy and teardown": flow_deploy_and_teardown,
    "sensors": flow_sensors,
    "delete and on_kill": flow_delete_and_on_kill,
    "workload sensor, in the worker": flow_workload_sensor_in_the_worker,
    "refused worker Job": flow_refused_worker_job,
    "late garbage collector": flow_late_garbage_collector,
}


def run_flow(name: str, cluster, bucket) -> None:
    FLOWS[name](cluster, bucket)


@pytest.mark.parametrize("flow", list(FLOWS))
def test_every_flow_passes_as_the_service_account(flow, cluster, bucket, audit):
    before = len(audit.denied)
    run_flow(flow, cluster, bucket)
    assert audit.denied[before:] == [], f"{flow}: the policy denied {audit.denied[before:]}"


def test_every_granted_verb_is_used_by_a_flow(audit):
    """Nothing granted that the flows did not need (run after the flows)."""
    assert audit.allowed, "the flows ran first"
    unused = granted() - audit.allowed
    assert not unused, f"granted but never used: {sorted(unused)}"
    assert audit.allowed <= granted()


# --- removing one verb breaks a flow --------------------------------------------------------------

# (rule resource, verb) → the flow it breaks. A representative sample: one per resource, chosen
# where the failure is immediate (every verb is shown used above, so each is needed by a flow).
REMOVALS = [
    ("pathwaysjobs", "create", "training, deferred"),
    ("jobsets", "get", "training, in the worker"),
    ("jobs", "create", "conversion"),
    ("pods/log", "get", "user failure"),
    ("services/proxy", "get", "deploy and teardown"),
    ("leaderworkersets", "list", "deploy and teardown"),
    ("workloads", "list", "workload sensor, in the worker"),
    ("nodes", "list", "sensors"),
    ("events", "list", "refused worker Job"),
    ("pods", "delete", "late garbage collector"),
]


def without_verb(document: dict, resource: str, verb: str) -> dict:
    changed = copy.deepcopy(document)
    for rule in changed["rules"]:
        if resource in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return changed


@pytest.mark.parametrize(("resource", "verb", "flow"), REMOVALS, ids=[f"{r}-{v}" for r, v, _ in REMOVALS])
def test_removing_a_verb_breaks_a_flow(resource, verb, flow, cluster, bucket, audit):
    rbac = client.RbacAuthorizationV1Api(cluster.admin)
    [role] = [d for d in rbac_documents() if d["kind"] == ("ClusterRole" if resource == "nodes" else "Role")]
    reduced = without_verb(role, resource, verb)
    replace = rbac.replace_cluster_role if resource == "nodes" else (lambda n, body: rbac.replace_namespaced_role(n, "default", body))
    replace(role["metadata"]["name"], reduced)
    before = len(audit.denied)
    RUN["id"] = f"without-{resource.replace('/', '-')}-{verb}"
    try:
        with pytest.raises(BaseException) as broken:
            run_flow(flow, cluster, bucket)
        assert not isinstance(broken.value, KeyboardInterrupt)
        denied = {(r, v) for _, r, v, *_ in audit.denied[before:]}
        assert (resource, verb) in denied, f"the flow failed ({broken.value!r}) but not for want of {resource} {verb}"
    finally:
        RUN["id"] = "run-1"
        replace(role["metadata"]["name"], role)
        time.sleep(0.5)
        cleanup(cluster)


def cleanup(cluster) -> None:
    """What a broken flow left behind (the admin's view), so the next flow starts clean."""
    admin = client.CustomObjectsApi(cluster.admin)
    for group, version, plural in (("pathways-job.pathways.domain", "v1", "pathwaysjobs"), ("jobset.x-k8s.io", "v1alpha2", "jobsets"), ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")):
        try:
            for item in admin.list_namespaced_custom_object(group, version, "default", plural)["items"]:
                admin.delete_namespaced_custom_object(group, version, "default", plural, item["metadata"]["name"])
        except client.ApiException:
            pass
    batch = client.BatchV1Api(cluster.admin)
    for job in batch.list_namespaced_job("default").items:
        batch.delete_namespaced_job(job.metadata.name, "default", propagation_policy="Foreground")
    core = client.CoreV1Api(cluster.admin)
    for service in core.list_namespaced_service("default").items:
        if (service.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "pathways-airflow":
            core.delete_namespaced_service(service.metadata.name, "default")
    wait_for(lambda: not [p for p in core.list_namespaced_pod("default").items], timeout=30)


def test_a_refused_watch_fails_the_task_at_once_naming_it_and_leaves_no_workload(cluster, bucket, audit):
    rbac = client.RbacAuthorizationV1Api(cluster.admin)
    [role] = [d for d in rbac_documents() if d["kind"] == "Role"]
    rbac.replace_namespaced_role(role["metadata"]["name"], "default", without_verb(role, "pods", "watch"))
    RUN["id"] = "without-pods-watch-deferred"
    try:
        ti = ti_for("refused")
        with pytest.raises(TaskDeferred) as deferred:
            training("refused", deferrable=True).execute({"ti": ti})
        started = time.monotonic()
        event = first_event(deferred.value.trigger, 60)
        assert event["status"] == "error" and event.get("forbidden") is True
        assert time.monotonic() - started < 15, "a refused verb fails at once, not after the API-failure budget"
        with pytest.raises(PermissionMissingError, match='cannot watch resource "pods"') as refused:
            training("refused", deferrable=True).execute_complete({"ti": ti}, event, **deferred.value.kwargs)
        assert "was deleted" in str(refused.value)
        wait_for(lambda: not workloads_of(cluster, "refused"))
    finally:
        RUN["id"] = "run-1"
        rbac.replace_namespaced_role(role["metadata"]["name"], "default", role)
        time.sleep(0.5)
        cleanup(cluster)
