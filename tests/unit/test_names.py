"""Deterministic names: stable across retries, distinct across runs, within every derived limit."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pathways_airflow.spec import InvalidWorkloadSpec, TaskIdentity
from pathways_airflow.spec.names import (
    MAX_WORKLOAD_NAME,
    TASK_KEY_LABEL,
    label_value,
    name_problem,
    slugify,
)

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def derived_names(name: str, num_slices: int = 999, vms: int = 2048) -> dict[str, str]:
    """Every name and label value the JobSet and Kueue controllers derive from a workload name."""
    return {
        "jobset": name,
        "head job": f"{name}-pathways-head-0",
        "last worker job": f"{name}-worker-{num_slices - 1}",
        "head pod hostname": f"{name}-pathways-head-0-0",
        "last worker pod hostname": f"{name}-worker-{num_slices - 1}-{vms - 1}",
        "coordinator label": f"{name}-pathways-head-0-0.{name}",
    }


def test_name_is_stable_across_calls_and_retries():
    identity = TaskIdentity("train_dag", "train", "scheduled__2026-11-22T00:00:00+00:00")
    assert identity.workload_name() == TaskIdentity(*vars(identity).values()).workload_name()
    assert identity.workload_name().startswith("train-")


def test_runs_tasks_map_indexes_and_attempts_get_distinct_names():
    base = TaskIdentity("dag", "train", "run-1")
    names = {
        base.workload_name(),
        TaskIdentity("dag", "train", "run-2").workload_name(),
        TaskIdentity("dag2", "train", "run-1").workload_name(),
        TaskIdentity("dag", "train2", "run-1").workload_name(),
        TaskIdentity("dag", "train", "run-1", map_index=0).workload_name(),
        TaskIdentity("dag", "train", "run-1", map_index=1).workload_name(),
        base.workload_name(attempt=1),
        base.workload_name(attempt=99),
    }
    assert len(names) == 8
    assert base.workload_name(attempt=3) == f"{base.workload_name()}-3"


@settings(max_examples=300, deadline=None)
@given(
    dag_id=st.text(min_size=1, max_size=250),
    task_id=st.text(min_size=1, max_size=250),
    run_id=st.text(min_size=1, max_size=250),
    map_index=st.integers(min_value=-1, max_value=100_000),
    attempt=st.integers(min_value=0, max_value=99),
)
def test_every_derived_name_fits_for_any_identity(dag_id, task_id, run_id, map_index, attempt):
    identity = TaskIdentity(dag_id, task_id, run_id, map_index)
    name = identity.workload_name(attempt)
    assert DNS_1035.match(name) and len(name) <= MAX_WORKLOAD_NAME
    assert name_problem(name) is None
    for what, derived in derived_names(name).items():
        assert len(derived) <= 63, (what, derived)
    for key, value in identity.labels(attempt).items():
        assert LABEL_VALUE.match(value) and len(value) <= 63, (key, value)


def test_200_character_ids_stay_within_limits():
    identity = TaskIdentity("d" * 200, "t" * 200, "r" * 200)
    name = identity.workload_name(attempt=99)
    assert len(name) == MAX_WORKLOAD_NAME
    assert max(len(v) for v in derived_names(name).values()) == 63  # the coordinator label binds
    assert identity.annotations()["pathways-airflow/dag-id"] == "d" * 200


def test_long_label_values_that_differ_only_at_the_end_stay_distinct():
    a, b = "x" * 100 + "a", "x" * 100 + "b"
    assert label_value(a) != label_value(b)
    assert len(label_value(a)) == 63


def test_label_values_replace_invalid_characters():
    assert label_value("manual__2026-11-22T06:41:12.123+00:00") == "manual__2026-11-22T06_41_12.123_00_00"
    assert label_value("-_weird_-") == "weird"


def test_labels_prove_ownership_and_find_the_task():
    identity = TaskIdentity("dag", "train", "run-1", 3)
    labels = identity.labels(attempt=2)
    assert labels[TASK_KEY_LABEL] == identity.key
    assert labels["pathways-airflow/attempt"] == "2"
    assert labels["pathways-airflow/map-index"] == "3"
    assert labels["app.kubernetes.io/managed-by"] == "pathways-airflow"
    assert TaskIdentity("dag", "train", "run-2", 3).key != identity.key


@pytest.mark.parametrize(
    ("task_id", "slug"),
    [("train", "train"), ("Train_Model.v2", "train-mode"), ("123abc", "p-123abc"), ("___", "pw"), ("日本", "pw")],
)
def test_slugs_are_dns_labels_starting_with_a_letter(task_id, slug):
    assert slugify(task_id) == slug


def test_name_prefix_replaces_the_slug():
    identity = TaskIdentity("dag", "train", "run")
    assert identity.workload_name(prefix="llama") .startswith("llama-")
    for bad in ("Llama", "toolongprefix", "9x", "a-"):
        with pytest.raises(InvalidWorkloadSpec) as caught:
            identity.workload_name(prefix=bad)
        assert caught.value.fields == ("name_prefix",)


def test_attempt_out_of_range_is_an_error():
    with pytest.raises(InvalidWorkloadSpec, match="attempt"):
        TaskIdentity("d", "t", "r").workload_name(attempt=100)


def test_name_problem_explains_the_budget():
    problem = name_problem("a" * 23)
    assert problem is not None and "22" in problem.reason and "coordinator" in problem.reason
    assert name_problem("Upper") is not None
    assert name_problem("ok-name") is None
