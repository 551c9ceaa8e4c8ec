"""What a user's own test suite gets from the local cluster with no setup of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pathways_airflow.testing import LocalCluster


def test_the_fixture_sets_the_connections_a_checkpoint_sensor_needs(pathways_cluster, tmp_path):
    """Only the fixture: no AIRFLOW_CONN_* set by the test. The sensor reads gs:// through the
    anonymous google_cloud_default the fixture gives, and the workload hook kubernetes_default."""
    from pathways_airflow.hooks.pathways import PathwaysHook
    from pathways_airflow.sensors import CheckpointSensor

    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("pathways-demo")
    bucket.blob("user-setup/checkpoints/7/items/x").upload_from_string(b"w")
    bucket.blob("user-setup/checkpoints/7/commit_success.txt").upload_from_string(b"ok")

    sensor = CheckpointSensor(task_id="ckpt", checkpoint_dir="gs://pathways-demo/user-setup/checkpoints", deferrable=False)
    found = sensor.poke({})
    assert found.is_done and found.xcom_value["step"] == 7
    assert PathwaysHook().list_nodes()  # kubernetes_default reaches this cluster


def run_fresh_python(code: str, env_without: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """A new interpreter, as a user's test process starts: no CRD directory in its environment."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in env_without}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120)


def test_without_crds_the_cluster_says_once_that_nothing_checks_custom_resources():
    result = run_fresh_python(
        """
        import warnings
        from pathways_airflow.testing import LocalCluster, SchemaChecksOff
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            LocalCluster(gcs=False, kueue=False)
            LocalCluster(gcs=False, kueue=False)
            LocalCluster(gcs=False, kueue=False, crds=[])
        said = [str(w.message) for w in seen if issubclass(w.category, SchemaChecksOff)]
        print(len(said)); print(said[0])
        """,
        env_without=("PATHWAYS_AIRFLOW_CRDS",),
    )
    assert result.returncode == 0, result.stderr
    count, message = result.stdout.strip().splitlines()[-2:]
    assert count == "1"
    assert "LocalCluster(crds=[DIR])" in message and "$PATHWAYS_AIRFLOW_CRDS" in message and "--pathways-crds" in message


def test_with_the_crds_an_unknown_machine_type_is_refused_as_the_api_server_does(crds):
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    with LocalCluster(gcs=False, kueue=False, crds=[crds]) as cluster:
        api = client.CustomObjectsApi(config.new_client_from_config(config_file=cluster.kubeconfig))
        bad = {
            "apiVersion": "pathways-job.pathways.domain/v1",
            "kind": "PathwaysJob",
            "metadata": {"name": "bad-type"},
            "spec": {"workers": [{"type": "ct9-unknown", "topology": "2x2", "numSlices": 1}], "controller": {"deploymentMode": "default"}},
        }
        with pytest.raises(ApiException) as refused:
            api.create_namespaced_custom_object("pathways-job.pathways.domain", "v1", "default", "pathwaysjobs", bad)
    assert refused.value.status == 422 and '"reason":"Invalid"' in refused.value.body.replace(" ", "")
    assert "spec.workers[0].type" in refused.value.body

