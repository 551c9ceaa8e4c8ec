"""Rendered manifests: valid against the real CRDs, faithful to the upstream samples and layout."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import yaml

from pathways_airflow.spec import (
    MACHINE_TYPES,
    JobSetFailurePolicy,
    TaskIdentity,
    build_workload,
    render,
    render_jobset,
)
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.render import PATHWAYSJOB_FAILURE_POLICY, XPK_SYSTEM_EXIT_CODES

BASE: dict[str, Any] = {
    "pathways_dir": "gs://my-bucket/pathways",
    "image": "us-docker.pkg.dev/project/repo/maxtext:latest",
    "command": ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml"],
}

VARIANTS: list[dict[str, Any]] = [
    {},
    {"image": None, "command": None},
    {"deployment_mode": "colocate_head_with_workers"},
    {
        "num_slices": 4,
        "elastic_slices": 1,
        "max_slice_restarts": 3,
        "max_restarts": 5,
        "pathways_version": "jax-0.5.3",
        "enable_metrics_collection": True,
        "custom_components": [
            {"component_type": "proxy_server", "image": "proxy:custom", "flags": ["--a=1"], "env": {"K": "v"}},
            {"component_type": "pathways_server", "flags": ["--b=2"]},
            {"component_type": "worker", "image": "worker:custom", "env": [{"name": "W", "value": "1"}]},
            {"component_type": "colocated_python_sidecar", "image": "sidecar:1"},
        ],
        "env": {"STEPS": "10", "TOKEN": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}},
        "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": 8}},
        "reservation": "my-reservation",
        "spot": True,
        "node_selector": {"team": "research"},
        "pod_priority_class_name": "high-priority",
        "termination_grace_period_seconds": 300,
        "service_account_name": "trainer",
        "queue_name": "multislice-queue",
        "priority_class": "high",
        "max_exec_time_seconds": 7320,
        "labels": {"team": "research"},
        "annotations": {"note": "any text at all"},
        "image_pull_policy": "Always",
        "container_name": "jax-tpu",
    },
]


def first_topology(machine_type: str) -> str:
    return sorted(MACHINE_TYPES[machine_type].topologies, key=len)[0]


CASES = [
    pytest.param(machine_type, index, backend, id=f"{machine_type}-v{index}-{backend}")
    for machine_type, index, backend in itertools.product(
        MACHINE_TYPES, range(len(VARIANTS)), ("pathwaysjob", "jobset")
    )
]


@pytest.mark.parametrize(("machine_type", "variant", "backend"), CASES)
def test_every_manifest_validates_strictly_against_its_crd(schema_validator, machine_type, variant, backend):
    workload = build_workload(
        machine_type=machine_type, topology=first_topology(machine_type), **{**BASE, **VARIANTS[variant]}
    )
    identity = TaskIdentity("a" * 200, "train", "scheduled__2026-11-22T00:00:00+00:00")
    manifest = render(
        workload,
        backend=backend,
        name=identity.workload_name(attempt=7),
        namespace="ml-team",
        labels=identity.labels(7),
        annotations=identity.annotations(),
    )
    assert schema_validator.errors(manifest) == []


def test_strict_validation_catches_a_field_the_api_server_would_prune(schema_validator):
    workload = build_workload(tpu="v5e", topology="2x4", **BASE)
    manifest = render(workload, backend="jobset", name="x", namespace="default")
    manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicyy"] = {}
    errors = schema_validator.errors(manifest)
    assert len(errors) == 1 and "podFailurePolicyy" in errors[0]


def sample(upstream_samples, filename: str) -> dict[str, Any]:
    return yaml.safe_load((upstream_samples / filename).read_text())


def test_reproduces_the_basic_upstream_sample(upstream_samples):
    expected = sample(upstream_samples, "pathways-job_v1_pathwaysjob.yaml")
    container = expected["spec"]["controller"]["template"]["spec"]["containers"][0]
    workload = build_workload(
        machine_type="ct4p-hightpu-4t",
        topology="2x2x2",
        num_slices=2,
        max_restarts=10,
        reservation="reservation-name",
        pathways_dir="gs://<test-bucket>/tmp".replace("<test-bucket>", "test-bucket"),
        container_name="main-workload",
        image="python:3.13",
        image_pull_policy="Always",
        command=container["command"],
    )
    manifest = render(workload, backend="pathwaysjob", name="pathways-trial", namespace="default")
    expected["spec"]["pathwaysDir"] = "gs://test-bucket/tmp"
    assert manifest["spec"] == expected["spec"]
    assert manifest["metadata"]["name"] == expected["metadata"]["name"]


def test_reproduces_the_elastic_upstream_sample(upstream_samples):
    expected = sample(upstream_samples, "elastic_training_example_pathwaysjob.yaml")
    container = expected["spec"]["controller"]["template"]["spec"]["containers"][0]
    workload = build_workload(
        machine_type="ct4p-hightpu-4t",
        topology="2x2x2",
        num_slices=2,
        max_restarts=0,
        max_slice_restarts=4,
        elastic_slices=1,
        pathways_dir="gs://test-bucket/tmp",
        container_name="elastic-main",
        image="python:3.13",
        image_pull_policy="Always",
        command=container["command"],
    )
    manifest = render(workload, backend="pathwaysjob", name="pathways-elastic", namespace="default")
    expected["spec"]["pathwaysDir"] = "gs://test-bucket/tmp"
    assert manifest["spec"] == expected["spec"]


def test_reproduces_the_colocated_python_upstream_sample(upstream_samples):
    expected = sample(upstream_samples, "colocated_python_example_pathwaysjob.yaml")
    container = expected["spec"]["controller"]["template"]["spec"]["containers"][0]
    workload = build_workload(
        machine_type="ct4p-hightpu-4t",
        topology="2x2x2",
        num_slices=2,
        max_restarts=0,
        custom_components=[{"component_type": "colocated_python_sidecar", "image": "sidecar:latest"}],
        pathways_dir="gs://test-bucket/tmp",
        image="python:3.13",
        image_pull_policy="Always",
        env=container["env"],
        command=container["command"],
    )
    manifest = render(workload, backend="pathwaysjob", name="pathways-colocated", namespace="default")
    expected["spec"]["pathwaysDir"] = "gs://test-bucket/tmp"
    expected["spec"]["customComponents"][0]["image"] = "sidecar:latest"
    assert manifest["spec"] == expected["spec"]


def test_reproduces_the_full_seed_with_crd_defaults(upstream_samples):
    expected = sample(upstream_samples, "seed-pathwaysjob-full.yaml")
    components = [
        {
            "component_type": c["componentType"],
            "image": c["image"].lower().replace("_", "-"),
            "flags": c["customFlags"],
            "env": c["customEnv"],
        }
        for c in expected["spec"]["customComponents"]
    ]
    container = expected["spec"]["controller"]["template"]["spec"]["containers"][0]
    workload = build_workload(
        machine_type="ct6e-standard-4t",
        topology="2x2",
        num_slices=2,
        max_restarts=3,
        max_slice_restarts=1,
        pathways_version="jax-0.5.3",
        elastic_slices=1,
        custom_components=components,
        pathways_dir="gs://bucket-name",
        image=container["image"],
        command=container["command"],
    )
    manifest = render(workload, backend="pathwaysjob", name="pathways-user", namespace="default")
    expected["spec"]["pathwaysDir"] = "gs://bucket-name"
    for component in expected["spec"]["customComponents"]:
        component["image"] = component["image"].lower().replace("_", "-")
    expected["spec"]["controller"]["mainContainerName"] = "main"  # the CRD default
    assert manifest["spec"] == expected["spec"]


# --- the jobset backend: the controller's layout ---------------------------------------------


def jobset_for(**overrides: Any) -> dict[str, Any]:
    params = {"tpu": "v6e", "topology": "4x4", "num_slices": 2, **BASE, **overrides}
    return render_jobset(build_workload(**params), name="train-abc", namespace="default")


def replicated(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in manifest["spec"]["replicatedJobs"] if r["name"] == name)


def test_jobset_layout_matches_the_pathwaysjob_controller():
    manifest = jobset_for(pathways_version="jax-0.5.3")
    assert [r["name"] for r in manifest["spec"]["replicatedJobs"]] == ["pathways-head", "worker"]
    head, worker = replicated(manifest, "pathways-head"), replicated(manifest, "worker")
    assert head["replicas"] == 1 and head["template"]["spec"]["backoffLimit"] == 0
    head_pod = head["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in head_pod["initContainers"]] == ["pathways-rm", "pathways-proxy"]
    assert all(c["restartPolicy"] == "Always" for c in head_pod["initContainers"])
    rm = head_pod["initContainers"][0]
    assert rm["image"] == "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.5.3"
    assert rm["args"] == [
        "--server_port=29001",
        "--gcs_scratch_location=gs://my-bucket/pathways",
        "--node_type=resource_manager",
        "--instance_count=2",
        "--instance_type=tpuv6e:4x4",
    ]
    main = head_pod["containers"][0]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["JAX_PLATFORMS"] == "proxy"
    assert env["JAX_BACKEND_TARGET"] == "grpc://$(PATHWAYS_HEAD):29000"
    assert head_pod["hostNetwork"] is True and head_pod["dnsPolicy"] == "ClusterFirstWithHostNet"

    job = worker["template"]["spec"]
    assert worker["replicas"] == 2
    assert job["completions"] == job["parallelism"] == 4  # 4x4 = 16 chips / 4 per VM
    assert job["backoffLimit"] == 16  # VMs × 4
    pod = job["template"]
    assert pod["metadata"]["annotations"] == {
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"
    }
    assert pod["spec"]["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    }
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"google.com/tpu": "4"}}
    assert manifest["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["pathways-head"]}
    assert manifest["spec"]["coordinator"] == {"replicatedJob": "pathways-head", "jobIndex": 0, "podIndex": 0}
    assert manifest["spec"]["startupPolicy"] == {"startupPolicyOrder": "InOrder"}


def test_eight_chip_machine_types_use_one_vm_per_2x4_slice():
    manifest = jobset_for(tpu=None, machine_type="ct6e-standard-8t", topology="2x4")
    job = replicated(manifest, "worker")["template"]["spec"]
    assert job["completions"] == 1
    assert job["template"]["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == "8"
    rm = replicated(manifest, "pathways-head")["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert "--instance_type=tpuv6e1t:2x4" in rm["args"]


def test_elastic_slices_change_worker_backoff_and_proxy_flags():
    manifest = jobset_for(elastic_slices=1, max_slice_restarts=3)
    assert replicated(manifest, "worker")["template"]["spec"]["backoffLimit"] == 12  # VMs × maxSliceRestarts
    proxy = replicated(manifest, "pathways-head")["template"]["spec"]["template"]["spec"]["initContainers"][1]
    assert proxy["args"][-1] == "--num_elastic_slices=1"


def test_custom_components_replace_images_and_append_flags_and_env():
    manifest = jobset_for(
        custom_components=[
            {"component_type": "worker", "image": "w:1", "flags": ["--w"], "env": {"WE": "1"}},
            {"component_type": "proxy_server", "flags": ["--p"]},
        ]
    )
    worker = replicated(manifest, "worker")["template"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["image"] == "w:1" and worker["args"][-1] == "--w" and worker["env"][-1] == {"name": "WE", "value": "1"}
    proxy = replicated(manifest, "pathways-head")["template"]["spec"]["template"]["spec"]["initContainers"][1]
    assert proxy["image"].endswith("/proxy_server:latest") and proxy["args"][-1] == "--p"


def test_headless_jobset_runs_pathways_servers_as_containers_and_has_no_success_policy():
    manifest = jobset_for(image=None, command=None)
    head_pod = replicated(manifest, "pathways-head")["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in head_pod["containers"]] == ["pathways-rm", "pathways-proxy"]
    assert "initContainers" not in head_pod
    assert all("restartPolicy" not in c for c in head_pod["containers"])
    assert "successPolicy" not in manifest["spec"]


def test_colocated_mode_puts_the_head_on_tpu_nodes_and_pins_workers_together():
    manifest = jobset_for(deployment_mode="colocate_head_with_workers")
    head_pod = replicated(manifest, "pathways-head")["template"]["spec"]["template"]["spec"]
    assert head_pod["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    worker_pod = replicated(manifest, "worker")["template"]["spec"]["template"]["spec"]
    affinity_terms = worker_pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity_terms[0]["labelSelector"]["matchExpressions"][0]["values"] == ["train-abc"]


def test_jobset_failure_policy_makes_maintenance_free_and_user_errors_final(upstream_samples):
    manifest = jobset_for(max_restarts=3)
    policy = manifest["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 3
    disruption, user_error = policy["rules"]
    # JobSet's documented host-maintenance model: the Job fails through its pod failure policy
    # on DisruptionTarget, and the JobSet restarts without counting it.
    model = sample(upstream_samples, "jobset-host-maintenance-event-model.yaml")
    model_rule = model["spec"]["failurePolicy"]["rules"][0]
    assert disruption["action"] == model_rule["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    assert disruption["onJobFailureReasons"] == model_rule["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert disruption["onJobFailureMessagePatterns"] == ["DisruptionTarget"]
    assert user_error["action"] == "FailJobSet" and user_error["targetReplicatedJobs"] == ["pathways-head"]

    model_pod_rule = model["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][0]
    for name in ("pathways-head", "worker"):
        job = replicated(manifest, name)["template"]["spec"]
        rule = job["podFailurePolicy"]["rules"][0]
        assert rule["action"] == model_pod_rule["action"] == "FailJob"
        assert rule["onPodConditions"][0]["type"] == "DisruptionTarget"
        assert job["template"]["spec"]["restartPolicy"] == "Never"
    exit_rule = replicated(manifest, "pathways-head")["template"]["spec"]["podFailurePolicy"]["rules"][1]
    assert exit_rule["onExitCodes"]["containerName"] == "main"
    assert exit_rule["onExitCodes"]["operator"] == "NotIn"
    assert exit_rule["onExitCodes"]["values"] == sorted(XPK_SYSTEM_EXIT_CODES)
    assert 1 not in exit_rule["onExitCodes"]["values"] and 143 in exit_rule["onExitCodes"]["values"]


def test_exit_code_policy_can_be_turned_off_or_overridden():
    workload = build_workload(tpu="v6e", topology="4x4", **BASE)
    no_user_rule = render_jobset(
        workload, name="a", namespace="d", failure_policy=JobSetFailurePolicy(system_exit_codes=None)
    )
    assert [r["name"] for r in no_user_rule["spec"]["failurePolicy"]["rules"]] == ["disruptionRestartsFree"]
    custom = render_jobset(
        workload, name="a", namespace="d", failure_policy=JobSetFailurePolicy(system_exit_codes=(3, 1))
    )
    head = replicated(custom, "pathways-head")["template"]["spec"]
    assert head["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] == [1, 3]


def test_controller_layout_without_our_policy_has_only_max_restarts():
    workload = build_workload(tpu="v6e", topology="4x4", max_restarts=4, **BASE)
    manifest = render_jobset(workload, name="a", namespace="d", failure_policy=PATHWAYSJOB_FAILURE_POLICY)
    assert manifest["spec"]["failurePolicy"] == {"maxRestarts": 4}
    for name in ("pathways-head", "worker"):
        job = replicated(manifest, name)["template"]["spec"]
        assert "podFailurePolicy" not in job and "restartPolicy" not in job["template"]["spec"]


def test_labels_and_kueue_queue_reach_the_object_metadata():
    workload = build_workload(tpu="v5e", topology="2x4", queue_name="q", labels={"team": "a"}, **BASE)
    for backend in ("pathwaysjob", "jobset"):
        manifest = render(workload, backend=backend, name="n", namespace="ns", labels={"extra": "1"})
        assert manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "q", "team": "a", "extra": "1"}
        assert manifest["metadata"]["namespace"] == "ns"


def test_unknown_backend_is_an_error():
    workload = build_workload(tpu="v5e", topology="2x4", **BASE)
    with pytest.raises(ValueError, match="backend='argo'.*pathwaysjob, jobset"):
        render(workload, backend="argo", name="n", namespace="d")


def test_rendering_shares_no_objects_between_places():
    """A shared dict would show up as a YAML anchor in kubectl output and alias later edits."""
    manifest = jobset_for(annotations={"a": "b"})
    seen: dict[int, str] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, (dict, list)):
            assert id(node) not in seen, f"{path} is the same object as {seen.get(id(node))}"
            seen[id(node)] = path
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, value in items:
                walk(value, f"{path}.{key}")

    walk(manifest, "")


def test_a_jobset_carries_its_own_deletion_backstop_and_validates(schema_validator):
    from pathways_airflow.operators import PathwaysJobOperator

    training = dict(task_id="train", tpu="v5e", topology="2x4", pathways_dir="gs://scratch-bucket/p", image="maxtext:1", command=["python3", "-m", "maxtext.trainers.pre_train.train"])
    jobset = PathwaysJobOperator(backend="jobset", **training).render_manifest()
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 86_400
    assert schema_validator.errors(jobset) == []
    assert "ttlSecondsAfterFinished" not in PathwaysJobOperator(backend="jobset", ttl_seconds_after_finished=None, **training).render_manifest()["spec"]
    assert "ttlSecondsAfterFinished" not in json.dumps(PathwaysJobOperator(**training).render_manifest()), "no such PathwaysJob field"
    for bad in (-1, "a day", 2**31):
        with pytest.raises(InvalidWorkloadSpec, match="ttl_seconds_after_finished"):
            PathwaysJobOperator(backend="jobset", ttl_seconds_after_finished=bad, **training)


def test_a_queued_workload_carries_kueues_timeout_backstop_and_validates(schema_validator):
    from datetime import timedelta

    from pathways_airflow.operators import PathwaysJobOperator

    training = dict(task_id="train", tpu="v5e", topology="2x4", pathways_dir="gs://scratch-bucket/p", image="maxtext:1")
    two_hours = timedelta(hours=2, milliseconds=1)
    for backend in ("pathwaysjob", "jobset"):
        manifest = PathwaysJobOperator(backend=backend, queue_name="q", execution_timeout=two_hours, **training).render_manifest()
        assert manifest["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "7321", "whole seconds, rounded up, plus the margin"
        assert schema_validator.errors(manifest) == []
        explicit = PathwaysJobOperator(backend=backend, queue_name="q", execution_timeout=two_hours, max_exec_time_seconds="600", **training)
        assert explicit.render_manifest()["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "600"
    for unqueued_or_untimed in (PathwaysJobOperator(execution_timeout=two_hours, **training), PathwaysJobOperator(queue_name="q", **training)):
        assert "kueue.x-k8s.io/max-exec-time-seconds" not in unqueued_or_untimed.render_manifest()["metadata"]["labels"]
    for bad in (0, -1, "an hour", 2**31, True):
        with pytest.raises(InvalidWorkloadSpec, match="max_exec_time_seconds=.*must be an integer between 1 and"):
            PathwaysJobOperator(queue_name="q", max_exec_time_seconds=bad, **training)
    with pytest.raises(InvalidWorkloadSpec, match="max_exec_time_seconds=60: is enforced by Kueue: set queue_name too"):
        PathwaysJobOperator(max_exec_time_seconds=60, **training)
