"""Every class of bad input is a ValueError naming the field, the value and the choices."""

from __future__ import annotations

from typing import Any

import pytest

from pathways_airflow.spec import InvalidWorkloadSpec, build_workload

VALID: dict[str, Any] = {
    "tpu": "v5e",
    "topology": "2x4",
    "num_slices": 2,
    "pathways_dir": "gs://my-bucket/pathways",
    "image": "us-docker.pkg.dev/project/repo/maxtext:latest",
    "command": ["python3", "-m", "MaxText.train"],
}


def problems_for(**overrides: Any) -> InvalidWorkloadSpec:
    with pytest.raises(InvalidWorkloadSpec) as caught:
        build_workload(**{**VALID, **overrides})
    assert isinstance(caught.value, ValueError)
    return caught.value


def test_valid_spec_builds():
    workload = build_workload(**VALID)
    assert workload.shape.vms == 2 and workload.total_chips == 16


@pytest.mark.parametrize(
    ("overrides", "field", "value", "choice"),
    [
        ({"tpu": None, "machine_type": "ct9-huge"}, "machine_type", "ct9-huge", "ct6e-standard-4t"),
        ({"tpu": "v9"}, "tpu", "v9", "v6e"),
        ({"topology": "3x3"}, "topology", "3x3", "2x4"),
        ({"tpu": "v6e", "topology": "2x2x2"}, "topology", "2x2x2", "4x4"),
        ({"deployment_mode": "sideways"}, "deployment_mode", "sideways", "colocate_head_with_workers"),
        (
            {"custom_components": [{"component_type": "gpu_server"}]},
            "custom_components[0].component_type",
            "gpu_server",
            "pathways_server",
        ),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy", "Sometimes", "IfNotPresent"),
        ({"elastic_slices": 2}, "elastic_slices", 2, "1"),
    ],
)
def test_closed_choices_are_listed(overrides, field, value, choice):
    error = problems_for(**overrides)
    problem = next(p for p in error.problems if p.field == field)
    assert problem.value == value
    assert choice in problem.choices
    assert field in str(error) and repr(value) in str(error) and "valid:" in str(error)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"num_slices": 0}, "num_slices"),
        ({"num_slices": -1}, "num_slices"),
        ({"num_slices": 1000}, "num_slices"),
        ({"num_slices": "two"}, "num_slices"),
        ({"num_slices": True}, "num_slices"),
        ({"num_slices": 2.5}, "num_slices"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"max_slice_restarts": 0}, "max_slice_restarts"),
        ({"elastic_slices": -1}, "elastic_slices"),
        ({"termination_grace_period_seconds": -5}, "termination_grace_period_seconds"),
        ({"pathways_dir": "/local/path"}, "pathways_dir"),
        ({"pathways_dir": "s3://bucket/x"}, "pathways_dir"),
        ({"pathways_dir": "gs://"}, "pathways_dir"),
        ({"pathways_dir": "gs://UPPER/x"}, "pathways_dir"),
        ({"pathways_version": "jax 0.5"}, "pathways_version"),
        ({"image": ""}, "image"),
        ({"image": "   "}, "image"),
        ({"image": "python 3"}, "image"),
        ({"command": "python train.py"}, "command"),
        ({"arguments": ["--steps", 100]}, "arguments"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"BAD NAME": "x"}}, "env"),
        ({"env": {"STEPS": 100}}, "env.STEPS"),
        ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "env.A"),
        ({"env": [{"name": "A", "value": "1", "valueFrom": {}}]}, "env.A"),
        ({"env": "A=1"}, "env"),
        ({"container_name": "pathways-rm"}, "container_name"),
        ({"container_name": "Main"}, "container_name"),
        ({"resources": {"limit": {"cpu": "1"}}}, "resources"),
        ({"resources": {"limits": {"cpu": True}}}, "resources.limits"),
        ({"node_selector": {"bad key!": "x"}}, "node_selector"),
        ({"node_selector": {"pool": "has space"}}, "node_selector.pool"),
        ({"labels": {"team": "a" * 64}}, "labels.team"),
        ({"annotations": {"note": 5}}, "annotations.note"),
        ({"queue_name": "Not_A_Queue"}, "queue_name"),
        ({"priority_class": ""}, "priority_class"),
        ({"service_account_name": "Bad_SA"}, "service_account_name"),
        ({"pod_priority_class_name": "Bad Class"}, "pod_priority_class_name"),
        ({"reservation": "bad reservation"}, "reservation"),
        ({"enable_metrics_collection": "yes"}, "enable_metrics_collection"),
        ({"image": None, "command": ["python"]}, "command"),
        (
            {"custom_components": [{"component_type": "worker"}, {"component_type": "worker"}]},
            "custom_components[1].component_type",
        ),
        ({"custom_components": [{"component_type": "worker", "image": ""}]}, "custom_components[0].image"),
        ({"custom_components": [{"component_type": "worker", "flag": ["--x"]}]}, "custom_components[0]"),
        ({"custom_components": [{"component_type": "worker", "flags": "--x=1"}]}, "custom_components[0].flags"),
        (
            {"custom_components": [{"component_type": t} for t in ("worker", "proxy_server", "pathways_server", "colocated_python_sidecar", "worker")]},
            "custom_components",
        ),
    ],
)
def test_bad_values_name_their_field(overrides, field):
    error = problems_for(**overrides)
    assert field in error.fields, str(error)
    assert field in str(error)


def test_every_problem_is_reported_at_once():
    error = problems_for(topology="3x3", num_slices=0, pathways_dir="s3://x", image="")
    assert set(error.fields) == {"topology", "num_slices", "pathways_dir", "image"}
    assert str(error).startswith("invalid workload spec (4 problems):")


def test_templated_integers_arrive_as_strings_and_are_accepted():
    workload = build_workload(**{**VALID, "num_slices": "3", "max_restarts": " 2 "})
    assert (workload.num_slices, workload.max_restarts) == (3, 2)


def test_env_forms_normalise_to_kubernetes_envvars():
    secret = {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    workload = build_workload(**{**VALID, "env": {"STEPS": "100", "HF_TOKEN": secret}})
    assert workload.main.env == (
        {"name": "STEPS", "value": "100"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
    )


def test_headless_workload_has_no_main_container():
    workload = build_workload(**{**VALID, "image": None, "command": None})
    assert workload.main is None


def test_reservation_spot_and_kueue_become_selectors_and_labels():
    workload = build_workload(**{**VALID, "reservation": "res-1", "spot": True, "queue_name": "tpu-queue", "priority_class": "high"})
    assert workload.node_selector == {
        "cloud.google.com/reservation-name": "res-1",
        "cloud.google.com/gke-spot": "true",
    }
    assert workload.labels == {"kueue.x-k8s.io/queue-name": "tpu-queue", "kueue.x-k8s.io/priority-class": "high"}
    assert workload.queue_name == "tpu-queue"
