"""No credential ever leaks: not in logs, XCom, trigger kwargs, manifests or exception messages.

A sentinel bearer token is the only credential of the kubeconfig the provider uses (as a file
path, and as inline content in the connection), and a second sentinel sits in a Kubernetes
Secret that the workload's env references with ``valueFrom``. The operator flows run against
the local cluster with every logger at DEBUG; then nothing they produced may contain either
sentinel, nor the kubeconfig's text.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import UserCodeError
from pathways_airflow.operators import CheckpointConversionOperator, PathwaysJobOperator
from pathways_airflow.sensors import PathwaysJobSensor, TpuSliceReadinessSensor
from pathways_airflow_testing.rbac import UserInfo

from tests.cluster.test_workload_operator import TaskInstance
from tests.cluster.triggers import first_event

TOKEN = f"sentinel-token-{uuid.uuid4().hex}"
SECRET_VALUE = f"sentinel-secret-{uuid.uuid4().hex}"
BUCKET = "pathways-demo"


@pytest.fixture(scope="module")
def kubeconfig_text(pathways_cluster) -> str:
    pathways_cluster.authorizer.tokens[TOKEN] = UserInfo("sentinel-user", ("system:masters", "system:authenticated"))
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": pathways_cluster.server}}],
        "users": [{"name": "sentinel-user", "user": {"token": TOKEN}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "sentinel-user", "namespace": "default"}}],
        "current-context": "local",
    }
    return yaml.safe_dump(config)


@pytest.fixture(params=["kube_config_path", "kube_config"])
def connection(request, pathways_cluster, kubeconfig_text, tmp_path: Path, monkeypatch) -> str:
    """The Kubernetes connection with the sentinel kubeconfig, as a path or as inline content."""
    if request.param == "kube_config_path":
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig_text)
        extra = {"kube_config_path": str(path)}
    else:
        extra = {"kube_config": kubeconfig_text}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "test"}}))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", pathways_cluster.gcs_endpoint)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return request.param


@pytest.fixture(scope="module")
def secret(pathways_cluster) -> dict:
    pathways_cluster.apply(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": "default"}, "stringData": {"token": SECRET_VALUE}, "data": {}}
    )
    return {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}


def serialized_and_first_event(trigger, timeout: float = 60.0) -> tuple[dict, dict]:
    """The trigger's serialized kwargs and its first event, run as the triggerer runs it."""
    return trigger.serialize()[1], first_event(trigger, timeout)


class Seen:
    """Everything the flows produced that a user or another system could read."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []

    def add(self, where: str, value: Any) -> Any:
        self.items.append((where, value))
        return value

    def leaks(self, needles: list[str]) -> list[str]:
        found = []
        for where, value in self.items:
            text = value if isinstance(value, str) else json.dumps(value, default=repr)
            found += [f"{where}: {needle[:24]}…" for needle in needles if needle in text]
        return found


def training(task_id: str, secret: dict, **overrides) -> PathwaysJobOperator:
    params = dict(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir=f"gs://{BUCKET}/tmp", image="maxtext",
        command=["python3", "-m", "MaxText.train", "steps=10", "checkpoint_period=5", f"base_output_directory=gs://{BUCKET}/secrets", f"run_name={task_id}"],
        env={"PATHWAYS_TESTING_STEP_SECONDS": "1", "HF_TOKEN": secret},
        checkpoint_dir=f"gs://{BUCKET}/secrets/{task_id}/checkpoints", deferrable=True,
    )
    params.update(overrides)
    return PathwaysJobOperator(task_id=task_id, **params)


def test_no_credential_reaches_logs_xcom_trigger_kwargs_manifests_or_errors(
    connection, secret, kubeconfig_text, pathways_cluster, bucket_step, caplog, capsys
):
    caplog.set_level(logging.DEBUG)
    for name in ("kubernetes", "kubernetes_asyncio", "urllib3", "aiohttp", "airflow", "pathways_airflow"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    seen = Seen()
    run = f"run-{connection}"

    # Training, deferred: manifest, trigger kwargs, events, XCom, result.
    ti = TaskInstance("dag", "secret-train", run)
    task = training("secret-train", secret)
    seen.add("manifest", task.render_manifest())
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    kwargs, event = serialized_and_first_event(deferred.value.trigger)
    seen.add("trigger kwargs", kwargs)
    seen.add("trigger event", event)
    seen.add("method kwargs", deferred.value.kwargs)
    result = training("secret-train", secret).execute_complete({"ti": ti}, event, **deferred.value.kwargs)
    seen.add("result", result)
    assert result["state"] == "SUCCEEDED"

    # A failure: its exception message and the log tail it quotes.
    ti = TaskInstance("dag", "secret-fail", run)
    failing = training("secret-fail", secret, backend="jobset", deferrable=False, env={"PATHWAYS_TESTING_FAIL_AT_STEP": "2", "PATHWAYS_TESTING_EXIT_CODE": "1", "HF_TOKEN": secret})
    with pytest.raises(UserCodeError) as failed:
        failing.execute({"ti": ti})
    seen.add("exception", str(failed.value))
    seen.add("xcom", ti.xcoms)

    # Conversion, deferred: its Job manifest and trigger.
    ti = TaskInstance("dag", "secret-convert", run)
    convert = CheckpointConversionOperator(
        task_id="secret-convert", checkpoint=bucket_step, output_dir=f"gs://{BUCKET}/secrets-serving-{connection}",
        image="maxtext", env={"HF_TOKEN": secret}, poll_interval=0.1, deferrable=True,
    )
    seen.add("conversion manifest", convert.render_manifest())
    with pytest.raises(TaskDeferred) as deferred:
        convert.execute({"ti": ti})
    kwargs, event = serialized_and_first_event(deferred.value.trigger)
    seen.add("conversion trigger kwargs", kwargs)
    seen.add("conversion result", convert.execute_complete({"ti": ti}, event))

    # The sensors' triggers carry connection ids, never what they resolve to.
    slices = TpuSliceReadinessSensor(task_id="secret-slices", tpu="v5e", topology="2x4", num_slices=4, deferrable=True, poke_interval=0.1)
    busy = training("secret-busy", secret, command=["python3", "-m", "MaxText.train", "steps=100000"], checkpoint_dir=None)
    with pytest.raises(TaskDeferred) as occupied:
        busy.execute({"ti": TaskInstance("dag", "secret-busy", run)})
    try:
        with pytest.raises(TaskDeferred) as deferred:
            slices.execute({})
        seen.add("slice trigger kwargs", deferred.value.trigger.serialize())
        watcher = PathwaysJobSensor(task_id="secret-watch", name=occupied.value.trigger.name, phase="SUCCEEDED", deferrable=True)
        with pytest.raises(TaskDeferred) as deferred:
            watcher.execute({})
        seen.add("sensor trigger kwargs", deferred.value.trigger.serialize())
    finally:
        busy.on_kill()

    captured = capsys.readouterr()
    seen.add("stdout", captured.out)
    seen.add("stderr", captured.err)
    seen.add("log records", "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records))
    assert seen.items and caplog.records, "the flows produced output to check"
    leaks = seen.leaks([TOKEN, SECRET_VALUE, kubeconfig_text.strip()])
    assert not leaks, f"credentials leaked: {leaks}"
    # The env reference itself is fine to show: it names the Secret, not its value.
    assert "secretKeyRef" in json.dumps(seen.items[0][1])


@pytest.fixture
def bucket_step(pathways_cluster) -> dict:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    gcs = storage.Client(project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": pathways_cluster.gcs_endpoint})
    prefix = f"secrets/{uuid.uuid4().hex[:6]}/checkpoints"
    for name in ("_CHECKPOINT_METADATA", "items/_METADATA", "items/x", "commit_success.txt"):
        gcs.bucket(BUCKET).blob(f"{prefix}/4/{name}").upload_from_string(b"{}")
    gcs.close()
    return {"step": 4, "uri": f"gs://{BUCKET}/{prefix}/4"}


def test_a_refused_connection_names_no_credential(pathways_cluster, kubeconfig_text, tmp_path, monkeypatch, caplog):
    """An API error (401 with a wrong token) is reported without the token that was sent."""
    from pathways_airflow.hooks.pathways import PathwaysHook
    from pathways_airflow.resources import POD

    wrong = kubeconfig_text.replace(TOKEN, TOKEN + "-revoked")
    path = tmp_path / "kubeconfig"
    path.write_text(wrong)
    pathways_cluster.authorizer.enforce_rbac = True
    try:
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(path)}}))
        with pytest.raises(Exception) as refused:
            PathwaysHook().list(POD, "default")
    finally:
        pathways_cluster.authorizer.enforce_rbac = False
    text = f"{refused.value!r} {refused.value} " + "\n".join(r.getMessage() for r in caplog.records)
    assert "401" in text or "Unauthorized" in text
    assert TOKEN not in text
