"""CheckpointConversionOperator's pure parts: its arguments, command line, Job, reuse rule and failures.

What runs against a cluster (GCS checks, the Job, the trigger) is in
tests/cluster/test_conversion_operator.py.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from airflow.sdk import DAG

from pathways_airflow.run.outcome import failed_job_exception
from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.exceptions import InfrastructureError, UserCodeError
from pathways_airflow.operators import CheckpointConversionOperator
from pathways_airflow.operators.conversion import failed_pod
from pathways_airflow.spec.conversion import (
    OUTPUT_DIR_ENV,
    RUN_NAME_ENV,
    SOURCE_ENV,
    Conversion,
    conversion_command_line,
    conversion_container,
    conversion_job_manifest,
    parse_checkpoint,
    resolve_conversion,
    reuse_decision,
)
from pathways_airflow.spec import InvalidWorkloadSpec, TaskIdentity
from pathways_airflow.spec.maxtext import LEGACY
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow_testing.programs import program_name
from pathways_airflow_testing.programs.conversion import ConversionPlan
from pathways_airflow.state.jobs import job_outcome
from pathways_airflow.triggers.job import BatchJobTrigger

SOURCE = {"step": 10, "uri": "gs://ckpt/runs/train/checkpoints/10"}
OUTPUT = "gs://serving/out"


def conversion(**overrides) -> Conversion:
    return resolve_conversion(**{"checkpoint": SOURCE, "output_dir": OUTPUT, **overrides})


# --- the source step -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        SOURCE,
        json.dumps(SOURCE),  # a template rendering an XCom that was pushed as JSON
        repr(SOURCE),  # a template rendering a dict XCom without render_template_as_native_obj
        {"step": "10", "uri": SOURCE["uri"] + "/"},
        {"step": 10, "uri": SOURCE["uri"] + "/items"},
        Checkpoint(10, SOURCE["uri"]),
    ],
)
def test_the_source_step_is_read_from_every_form_an_xcom_arrives_in(value):
    assert parse_checkpoint(value) == (Checkpoint(10, SOURCE["uri"]), [])


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ("None", "checkpoint", "did the upstream task find no committed step?"),
        ("gs://ckpt/runs/train/checkpoints/10", "checkpoint", "must be a {'step': N"),
        ({"step": 10}, "checkpoint", "must be a {'step': N"),
        ({"step": -1, "uri": "gs://b/c/10"}, "checkpoint.step", "integer ≥ 0"),
        ({"step": 10, "uri": "/mnt/ckpt/10"}, "checkpoint.uri", "gs://"),
        ({"step": 10, "uri": "gs://b/c/20"}, "checkpoint.uri", "it names step 20"),
    ],
)
def test_a_checkpoint_that_is_not_one_step_on_gcs_is_refused_naming_the_field(value, field, reason):
    found, problems = parse_checkpoint(value)
    assert found is None
    assert problems[0].field == field and reason in str(problems[0])


def test_the_source_can_be_a_directory_and_a_templated_step():
    assert conversion(checkpoint=None, checkpoint_dir="gs://ckpt/runs/train/checkpoints/", step="10").source == Checkpoint(10, SOURCE["uri"])


def test_the_source_must_be_given_exactly_once():
    with pytest.raises(InvalidWorkloadSpec, match="not both"):
        conversion(checkpoint_dir="gs://ckpt/c", step=10)
    with pytest.raises(InvalidWorkloadSpec, match="no source"):
        conversion(checkpoint=None)


def test_every_bad_argument_is_reported_at_once_with_the_choices():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        resolve_conversion(checkpoint={"step": 10, "uri": "s3://x/10"}, output_dir="/local", run_name="a/b", quantization="int4", force_unroll="yes")
    assert caught.value.fields == ("checkpoint.uri", "output_dir", "run_name", "quantization", "force_unroll")
    assert "valid: None, int8" in str(caught.value)


def test_an_output_that_would_delete_the_training_checkpoints_is_refused():
    with pytest.raises(InvalidWorkloadSpec, match="would delete the training checkpoints"):
        conversion(output_dir="gs://ckpt/runs", run_name="train")


# --- what runs ---------------------------------------------------------------------------------------


def test_the_default_command_line_is_current_maxtexts_and_the_legacy_layout_is_one_word_away():
    settings = [
        "base_output_directory=gs://serving/out", "run_name=serving-step-10",
        "load_full_state_path=gs://ckpt/runs/train/checkpoints/10/items", "force_unroll=true",
        "async_checkpointing=false",
    ]
    assert conversion_command_line(conversion()) == [
        "python3", "-m", "maxtext.utils.generate_param_only_checkpoint", "src/maxtext/configs/base.yml", *settings,
    ]
    assert conversion_command_line(conversion(), layout=LEGACY) == [
        "python3", "-m", "MaxText.generate_param_only_checkpoint", "MaxText/configs/base.yml", *settings,
    ]
    legacy = conversion_container(conversion(), image="maxtext", maxtext_layout_name="legacy")
    assert legacy.command == ("python3", "-m", "MaxText.generate_param_only_checkpoint") and legacy.args[0] == "MaxText/configs/base.yml"
    with pytest.raises(InvalidWorkloadSpec, match="maxtext_layout.*'current' \\(MaxText v0.2.0 and later\\) or 'legacy'"):
        conversion_container(conversion(), image="maxtext", maxtext_layout_name="new")
    quantized = conversion_command_line(conversion(quantization="int8", force_unroll=False, run_name="r"), ["model_name=llama2-7b"])
    assert quantized[4:] == [
        "base_output_directory=gs://serving/out", "run_name=r",
        "load_full_state_path=gs://ckpt/runs/train/checkpoints/10/items", "force_unroll=false",
        "quantization=int8", "async_checkpointing=false", "model_name=llama2-7b",
    ]


def test_the_command_line_writes_where_the_result_says():
    """The local cluster's stand-in parses MaxText's flags: it must find the same source and output."""
    planned = conversion(quantization="int8")
    argv = conversion_command_line(planned)
    assert program_name(argv, {}, "maxtext") == "conversion"
    plan = ConversionPlan.from_command(argv, {})
    assert (plan.source, plan.output_step_dir, plan.quantization, plan.force_unroll) == (
        planned.source.items_uri, planned.output.uri, "int8", True,
    )
    assert planned.result() == {
        "step": 0,
        "uri": "gs://serving/out/serving-step-10/checkpoints/0",
        "items_uri": "gs://serving/out/serving-step-10/checkpoints/0/items",
        "source": SOURCE,
        "quantization": "int8",
    }


def test_the_job_runs_once_with_the_tasks_labels_and_the_derived_paths():
    identity = TaskIdentity("dag", "convert", "run-1")
    planned = conversion()
    container = conversion_container(planned, image="maxtext", env={"HF_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}, RUN_NAME_ENV: "mine"})
    job = conversion_job_manifest(name=identity.workload_name(), namespace="serving", container=container, identity=identity, service_account_name="gcs-writer")
    assert (job["apiVersion"], job["kind"], job["metadata"]["name"], job["metadata"]["namespace"]) == ("batch/v1", "Job", identity.workload_name(), "serving")
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["serviceAccountName"] == "gcs-writer"
    assert job["metadata"]["labels"][TASK_KEY_LABEL] == pod["metadata"]["labels"][TASK_KEY_LABEL] == identity.key
    [main] = pod["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in main["env"]}
    assert env == {
        "HF_TOKEN": {"secretKeyRef": {"name": "hf", "key": "t"}},
        SOURCE_ENV: planned.source.items_uri,
        OUTPUT_DIR_ENV: OUTPUT,
        RUN_NAME_ENV: "serving-step-10",
    }
    assert main["command"] + main["args"] == conversion_command_line(planned)


def test_a_replaced_command_line_keeps_the_derived_paths_in_its_environment():
    container = conversion_container(conversion(), image="maxtext", command=["bash", "-c", f"convert --from $({SOURCE_ENV})"], arguments=[])
    assert container.command == ("bash", "-c", f"convert --from $({SOURCE_ENV})") and container.args == ()
    assert {e["name"] for e in container.env} == {SOURCE_ENV, OUTPUT_DIR_ENV, RUN_NAME_ENV}


def test_bad_container_settings_are_refused_like_a_workloads():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        conversion_container(conversion(), image="", command="python3 convert.py", extra_arguments="model_name=x", env={"1BAD": "x"})
    assert set(caught.value.fields) == {"extra_arguments", "image", "command", "env"}


@pytest.mark.parametrize("extra", [7, -(2**63), {"model_name": "x"}, 1.5])
def test_extra_arguments_that_are_not_a_list_are_refused_by_name(extra):
    with pytest.raises(InvalidWorkloadSpec) as caught:
        conversion_container(conversion(), image="maxtext", extra_arguments=extra)
    assert set(caught.value.fields) == {"extra_arguments"}


# --- reuse ---------------------------------------------------------------------------------------------


def test_only_a_committed_output_converted_from_the_same_step_with_the_same_settings_is_reused():
    planned = conversion()
    recorded = {**planned.provenance(), "job": "default/convert-abc", "converted_at": "2026-01-01T00:00:00+00:00"}
    reuse, why = reuse_decision(planned, output_committed=True, provenance=json.loads(json.dumps(recorded)))
    assert reuse and why == (
        "reusing the serving checkpoint gs://serving/out/serving-step-10/checkpoints/0 converted from step 10 "
        "(gs://ckpt/runs/train/checkpoints/10)"
    )
    assert reuse_decision(planned, output_committed=False, provenance=recorded) == (False, "no committed serving checkpoint at gs://serving/out/serving-step-10/checkpoints/0 yet")
    refused = {
        "no provenance": None,
        "another step": {**recorded, "source": {"step": 20, "uri": "gs://ckpt/runs/train/checkpoints/20"}},
        "another run's step 10": {**recorded, "source": {"step": 10, "uri": "gs://ckpt/runs/other/checkpoints/10"}},
        "quantized": {**recorded, "quantization": "int8"},
        "not unrolled": {**recorded, "force_unroll": False},
    }
    for case, provenance in refused.items():
        reuse, why = reuse_decision(planned, output_committed=True, provenance=provenance)
        assert not reuse, case
        assert "converting" in why, case


# --- how the Job ended ----------------------------------------------------------------------------------


def condition(type_: str, reason: str = "", message: str = "") -> dict:
    return {"type": type_, "status": "True", "reason": reason, "message": message}


def test_only_the_terminal_conditions_end_the_wait():
    assert job_outcome(None).status == "gone"
    assert job_outcome({"metadata": {}, "status": {"active": 1}}).summary() == "running (1 active pod)"
    assert job_outcome({"metadata": {}, "status": {"conditions": [condition("FailureTarget")]}}).status == "running"
    failed = job_outcome({"metadata": {}, "status": {"conditions": [condition("FailureTarget"), condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]}})
    assert failed.finished and failed.summary() == "failed (BackoffLimitExceeded: Job has reached the specified backoff limit)"
    assert job_outcome({"metadata": {}, "status": {"conditions": [condition("SuccessCriteriaMet"), condition("Complete", "CompletionsReached")]}}).status == "complete"
    assert job_outcome({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"active": 1}}).status == "gone"


def pod(name: str, created: str, *, exit_code: int | None = None, disrupted: bool = False) -> dict:
    status: dict = {"phase": "Failed", "containerStatuses": []}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "convert", "state": {"terminated": {"exitCode": exit_code}}}]
    if disrupted:
        status["conditions"] = [condition("DisruptionTarget", "TerminationByKubelet")]
    return {"metadata": {"name": name, "creationTimestamp": created}, "status": status}


def test_the_newest_failed_pod_names_the_exit_code_and_decides_the_exception():
    assert failed_pod([pod("a", "2026-01-01T00:00:00Z", exit_code=1), pod("b", "2026-01-01T00:01:00Z", exit_code=3)]) == ("b", "convert", 3, None)
    assert failed_pod([]) == ("", None, None, None)
    name, _, code, disruption = failed_pod([pod("c", "2026-01-01T00:00:00Z", disrupted=True)])
    assert (name, code) == ("c", None) and "DisruptionTarget" in disruption


@pytest.mark.parametrize(
    ("exit_code", "disruption", "exception"),
    [
        (3, None, UserCodeError),  # the program's own exit
        (1, None, UserCodeError),
        (137, None, InfrastructureError),  # killed (preempted, out of memory)
        (42, None, InfrastructureError),
        (1, "pod c: DisruptionTarget", InfrastructureError),  # a disrupted pod's exit is no bug
        (None, None, InfrastructureError),  # gone before recording an exit code: preempted, node lost
    ],
)
def test_one_rule_decides_which_failed_job_is_retried(exit_code, disruption, exception):
    """The rule conversion and benchmark Jobs share (run.outcome)."""
    raised = failed_job_exception("m", exit_code=exit_code, disruption=disruption)
    assert type(raised) is exception
    if exception is UserCodeError:
        assert raised.exit_code == exit_code


def test_the_trigger_round_trips_through_serialize():
    trigger = BatchJobTrigger(name="convert-abc", namespace="serving", target={"kubernetes_conn_id": "k"}, poll_interval=2, deadline=1.5e9)
    path, kwargs = trigger.serialize()
    assert path == "pathways_airflow.triggers.job.BatchJobTrigger"
    assert BatchJobTrigger(**json.loads(json.dumps(kwargs))).serialize() == (path, kwargs)


# --- the operator: parse time, templates, dry run -----------------------------------------------------------


def test_literal_bad_input_fails_at_construction():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        CheckpointConversionOperator(task_id="convert", checkpoint=SOURCE, output_dir="serving", namespace="Bad NS", poll_interval=0)
    assert set(caught.value.fields) == {"output_dir", "namespace", "poll_interval"}


@pytest.mark.parametrize("native", [False, True])
def test_a_templated_checkpoint_is_checked_after_rendering_as_a_string_or_a_dict(native):
    with DAG("convert", schedule=None, start_date=dt.datetime(2026, 1, 1), render_template_as_native_obj=native):
        operator = CheckpointConversionOperator(
            task_id="convert", checkpoint="{{ params.ckpt }}", output_dir="gs://serving/{{ params.where }}", quantization="{{ params.q }}",
        )
    with pytest.raises(InvalidWorkloadSpec):
        operator.render_manifest()
    operator.render_template_fields({"params": {"ckpt": SOURCE, "where": "nightly", "q": "None"}})
    assert isinstance(operator.checkpoint, dict) is native
    assert operator.conversion() == Conversion(Checkpoint(10, SOURCE["uri"]), "gs://serving/nightly", "serving-step-10", None, True)
    manifest = operator.render_manifest()
    assert manifest["metadata"]["name"] == TaskIdentity("convert", "convert", "dry-run").workload_name()
