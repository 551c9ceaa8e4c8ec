"""One rule per kind of argument, shared by every operator and sensor that takes one."""

import pytest

from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.sensors import CheckpointSensor
from pathways_airflow.spec import InvalidWorkloadSpec
from pathways_airflow.spec.arguments import namespace_problem, step_number, storage_dir_problem

TRAINING = {"topology": "2x2", "tpu": "v5e", "pathways_dir": "gs://scratch-bucket/pathways"}


@pytest.mark.parametrize("checkpoint_dir", ["gs://", "gs:///runs", "relative/dir", "", "gs://bucket/run-*"])
def test_a_checkpoint_dir_the_sensor_refuses_is_refused_by_the_operator_too(checkpoint_dir):
    with pytest.raises(InvalidWorkloadSpec, match="checkpoint_dir"):
        CheckpointSensor(task_id="wait", checkpoint_dir=checkpoint_dir)
    with pytest.raises(InvalidWorkloadSpec, match="checkpoint_dir"):
        PathwaysJobOperator(task_id="train", checkpoint_dir=checkpoint_dir, **TRAINING)


@pytest.mark.parametrize("checkpoint_dir", ["gs://ckpt-bucket", "gs://ckpt-bucket/runs/a/checkpoints", "/mnt/checkpoints"])
def test_both_take_a_bucket_or_an_absolute_path(checkpoint_dir):
    assert CheckpointSensor(task_id="wait", checkpoint_dir=checkpoint_dir).checkpoint_dir == checkpoint_dir
    assert PathwaysJobOperator(task_id="train", checkpoint_dir=checkpoint_dir, **TRAINING).checkpoint_dir == checkpoint_dir


@pytest.mark.parametrize(
    "value,required,expected",
    [(80, True, 80), ("80", True, 80), (" 7 ", False, 7), (0, True, 0), (None, False, None), ("None", False, None), ("", False, None)],
)
def test_a_step_number_from_an_int_or_its_rendered_string(value, required, expected):
    assert step_number("step", value, required=required) == (expected, None)


@pytest.mark.parametrize("value", [None, "None", "", -1, True, "1.5", "²", "12 34"])
def test_a_required_step_refuses_what_is_not_one(value):
    number, problem = step_number("step", value)
    assert number is None and problem.field == "step" and "step number" in problem.reason


def test_storage_dirs_that_must_be_in_gcs_refuse_local_paths():
    assert storage_dir_problem("output_dir", "/mnt/out", local=False) is not None
    assert storage_dir_problem("output_dir", "gs://serving/out", local=False) is None


@pytest.mark.parametrize("namespace,ok", [("default", True), ("ml-prod", True), ("ML", False), ("a.b", False), ("", False), (3, False)])
def test_a_namespace_is_a_dns_label(namespace, ok):
    assert (namespace_problem(namespace) is None) is ok
