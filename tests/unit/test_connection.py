"""The cluster parameters, declared once on ClusterConnectionMixin, behave like each operator's own."""

import datetime as dt

import pytest
from airflow.sdk import DAG

from pathways_airflow.operators import CheckpointConversionOperator, DeletePathwaysJobOperator, PathwaysJanitorOperator, PathwaysJobOperator
from pathways_airflow.sensors import PathwaysJobSensor, TpuSliceReadinessSensor

TRAINING = {"topology": "2x2", "tpu": "v5e", "pathways_dir": "gs://scratch-bucket/pathways"}
CLUSTER_TASKS = [
    (PathwaysJobOperator, TRAINING),
    (DeletePathwaysJobOperator, {"name": "train-abc"}),
    (PathwaysJanitorOperator, {}),
    (PathwaysJobSensor, {"name": "train-abc"}),
    (TpuSliceReadinessSensor, {"tpu": "v5e", "topology": "2x2"}),
    (
        CheckpointConversionOperator,
        {"checkpoint_dir": "gs://ckpt-bucket/run", "output_dir": "gs://ckpt-bucket/out", "step": 100, "image": "maxtext:1"},
    ),
]


def a_dag(**default_args):
    return DAG("cluster_parameters", start_date=dt.datetime(2026, 1, 1), schedule=None, default_args=default_args)


@pytest.mark.parametrize("cls,kwargs", CLUSTER_TASKS, ids=lambda v: getattr(v, "__name__", ""))
def test_default_args_fill_the_cluster_parameters(cls, kwargs):
    with a_dag(kubernetes_conn_id="tpu_cluster", gcp_conn_id="ml_platform", use_dns_endpoint=True):
        task = cls(task_id="task", **kwargs)
    assert (task.kubernetes_conn_id, task.gcp_conn_id, task.use_dns_endpoint) == ("tpu_cluster", "ml_platform", True)


@pytest.mark.parametrize("cls,kwargs", CLUSTER_TASKS, ids=lambda v: getattr(v, "__name__", ""))
def test_an_explicit_cluster_parameter_beats_default_args_and_the_rest_keep_their_defaults(cls, kwargs):
    with a_dag(kubernetes_conn_id="tpu_cluster"):
        task = cls(task_id="task", kubernetes_conn_id=None, project_id="ml-prod", location="us-east5", cluster_name="tpu", **kwargs)
    target = task.cluster_target()
    assert (target.kubernetes_conn_id, target.project_id, target.location, target.cluster_name) == (None, "ml-prod", "us-east5", "tpu")
    assert (target.gcp_conn_id, target.impersonation_chain, target.use_dns_endpoint) == ("google_cloud_default", None, False)


def test_mapped_tasks_take_the_cluster_parameters_in_partial():
    with a_dag():
        mapped = PathwaysJobOperator.partial(task_id="train", kubernetes_conn_id="tpu_cluster", **TRAINING).expand(
            num_slices=[1, 2]
        )
    assert mapped.partial_kwargs["kubernetes_conn_id"] == "tpu_cluster"


def test_an_unknown_keyword_is_still_refused():
    with a_dag(), pytest.raises(TypeError, match="kubernetes_conn"):
        PathwaysJobOperator(task_id="train", kubernetes_conn="typo", **TRAINING)
