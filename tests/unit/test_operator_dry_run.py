"""PathwaysJobOperator: parameters, validation at parse time, templating, and the dry run."""

from __future__ import annotations

import datetime as dt

import pytest
from airflow.sdk import DAG

from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.spec import InvalidWorkloadSpec, TaskIdentity

from tests.support.task_instance import TaskInstance

PARAMS = {
    "tpu": "v5e",
    "topology": "2x4",
    "num_slices": 2,
    "pathways_dir": "gs://my-bucket/pathways",
    "image": "us-docker.pkg.dev/p/r/maxtext:latest",
    "command": ["python3", "-m", "MaxText.train"],
}


def test_bad_input_fails_at_construction_naming_every_field():
    with pytest.raises(ValueError) as caught:
        PathwaysJobOperator(task_id="train", **{**PARAMS, "topology": "3x3", "num_slices": 0}, namespace="Bad NS")
    assert isinstance(caught.value, InvalidWorkloadSpec)
    assert set(caught.value.fields) == {"topology", "num_slices", "namespace"}


def test_bad_backend_and_checkpoint_dir_fail_at_construction():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        PathwaysJobOperator(task_id="t", **PARAMS, backend="argo", checkpoint_dir="relative/dir")
    assert set(caught.value.fields) == {"backend", "checkpoint_dir"}


def test_render_manifest_without_context_uses_placeholders():
    operator = PathwaysJobOperator(task_id="train", **PARAMS)
    manifest = operator.render_manifest()
    expected_name = TaskIdentity("dry-run", "train", "dry-run").workload_name()
    assert manifest["kind"] == "PathwaysJob"
    assert manifest["metadata"]["name"] == expected_name
    assert manifest["metadata"]["labels"]["pathways-airflow/run-id"] == "dry-run"
    assert manifest["spec"]["workers"] == [{"type": "ct5lp-hightpu-4t", "topology": "2x4", "numSlices": 2}]


def test_render_manifest_in_a_dag_uses_the_task_instance_identity():
    with DAG("nightly_train", schedule=None, start_date=dt.datetime(2026, 1, 1)):
        operator = PathwaysJobOperator(task_id="train", backend="jobset", **PARAMS)

    ti = TaskInstance("nightly_train", "train", "scheduled__2026-11-22")
    manifest = operator.render_manifest({"ti": ti}, attempt=2)
    identity = TaskIdentity("nightly_train", "train", "scheduled__2026-11-22")
    assert manifest["kind"] == "JobSet"
    assert manifest["metadata"]["name"] == identity.workload_name(attempt=2)
    assert manifest["metadata"]["labels"]["pathways-airflow/task-key"] == identity.key
    assert manifest["metadata"]["annotations"]["pathways-airflow/dag-id"] == "nightly_train"
    assert operator.render_manifest({"ti": ti}, attempt=2) == manifest  # deterministic


def test_templated_values_are_checked_after_rendering_not_at_parse_time():
    with DAG("templated", schedule=None, start_date=dt.datetime(2026, 1, 1), params={"slices": "3", "topo": "4x4"}):
        operator = PathwaysJobOperator(
            task_id="train",
            **{**PARAMS, "num_slices": "{{ params.slices }}", "topology": "{{ params.topo }}"},
            env={"RUN": "{{ run_id }}"},
            queue_name="{{ params.get('queue', 'tpu-queue') }}",
        )
    # Nothing is known yet: no error at parse time, but a dry run needs rendered values.
    with pytest.raises(InvalidWorkloadSpec):
        operator.render_manifest()
    operator.render_template_fields({"params": {"slices": "3", "topo": "4x4"}, "run_id": "manual__1"})
    manifest = operator.render_manifest()
    assert manifest["spec"]["workers"][0] == {"type": "ct5lp-hightpu-4t", "topology": "4x4", "numSlices": 3}
    container = manifest["spec"]["controller"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "RUN", "value": "manual__1"}]
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-queue"


def test_a_template_that_renders_to_bad_input_is_caught_before_submission():
    operator = PathwaysJobOperator(task_id="train", **{**PARAMS, "topology": "{{ params.topo }}"})
    operator.render_template_fields({"params": {"topo": "3x3"}})
    with pytest.raises(InvalidWorkloadSpec) as caught:
        operator.validate()
    assert caught.value.fields == ("topology",)


def test_every_workload_parameter_is_templated():
    import inspect

    from pathways_airflow.operators.workload import _WORKLOAD_FIELDS

    signature = inspect.signature(PathwaysJobOperator.__init__)
    for name in _WORKLOAD_FIELDS:
        assert name in signature.parameters, name
    assert "resources" not in PathwaysJobOperator.template_fields  # BaseOperator's own field
    not_templated = {"spot", "enable_metrics_collection"}
    for name in set(_WORKLOAD_FIELDS) - not_templated:
        assert name in PathwaysJobOperator.template_fields, name


@pytest.mark.parametrize("configured", ["True", "False"])
def test_deferrable_defaults_to_the_operators_default_deferrable_setting(configured, tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "from pathways_airflow.operators import PathwaysJobOperator as Op;"
        "print(Op(task_id='t', tpu='v5e', topology='2x4', pathways_dir='gs://bkt/x').deferrable)"
    )
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": configured, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == configured


def test_resume_by_the_program_hands_no_checkpoint_over_and_newest_committed_hands_it_as_env():
    from pathways_airflow.checkpoints import Checkpoint

    newest = Checkpoint(20, "gs://my-bucket/run/checkpoints/20")

    def env_of(resume: str) -> dict[str, str]:
        manifest = PathwaysJobOperator(task_id="train", **PARAMS, resume=resume).render_manifest(attempt=1, resume_from=newest)
        main = manifest["spec"]["controller"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value") for e in main.get("env") or ()}

    assert env_of("newest_committed")["PATHWAYS_RESUME_STEP"] == "20"
    assert env_of("newest_committed")["PATHWAYS_RESUME_CHECKPOINT"] == newest.uri
    assert not {"PATHWAYS_RESUME_STEP", "PATHWAYS_RESUME_CHECKPOINT"} & set(env_of("program"))
    with pytest.raises(InvalidWorkloadSpec, match="resume"):
        PathwaysJobOperator(task_id="train", **PARAMS, resume="local")
    assert "resume" in PathwaysJobOperator.template_fields
    PathwaysJobOperator(task_id="train", **PARAMS, resume="{{ params.resume }}")  # checked once rendered
