"""What a checkpoint conversion is: a committed training step → MaxText's parameter-only serving checkpoint. Pure.

A server (vLLM's MaxText plugin, JetStream) loads parameters only (``load_parameters_path``), not
the full train state MaxText saves, so between training and serving sits MaxText's
``generate_param_only_checkpoint``: it reads ``<step>/items`` of a training checkpoint and
writes ``<out>/<run>/checkpoints/0/items``. This module turns the operator's (rendered) arguments
into a :class:`Conversion`, its command line, its container and batch/v1 Job manifest, and
decides whether an existing output can be reused (:func:`reuse_decision`).
``CheckpointConversionOperator`` only reads GCS, creates, waits on and deletes the Job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow.checkpoints import (
    Checkpoint,
    is_gcs,
    join,
    maxtext_checkpoint_dir,
    step_dir_of,
    step_of,
    step_uri,
)
from pathways_airflow.spec.arguments import namespace_problem, step_number, storage_dir_problem
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.maxtext import CURRENT, MaxTextLayout, maxtext_layout
from pathways_airflow.spec.names import TaskIdentity
from pathways_airflow.spec.render import container_manifest as _render_container
from pathways_airflow.spec.workload import MainContainer, is_dns_subdomain, optional_text, rendered_literal, string_mapping
from pathways_airflow.spec.workload import checked_main_container as _check_container
from pathways_airflow.resources import JOB

DEFAULT_IMAGE = "gcr.io/tpu-prod-env-multipod/maxtext_jax_stable:latest"
"""MaxText's published stable image. Pin a dated tag (or your own build) in production: the
conversion must run the MaxText version that wrote the training checkpoint."""
QUANTIZATIONS: tuple[str, ...] = ("int8",)
OUTPUT_STEP = 0
"""``generate_param_only_checkpoint`` always saves its output as step 0."""
PROVENANCE_FILE = "pathways_airflow_source.json"
CONTAINER_NAME = "convert"

# The derived paths, given to the container as environment variables so a replaced command line
# can still say ``load_full_state_path=$(PATHWAYS_CONVERSION_SOURCE)``.
SOURCE_ENV = "PATHWAYS_CONVERSION_SOURCE"
OUTPUT_DIR_ENV = "PATHWAYS_CONVERSION_OUTPUT_DIR"
RUN_NAME_ENV = "PATHWAYS_CONVERSION_RUN_NAME"


# --- pure: what to convert -----------------------------------------------------------------------


@dataclass(frozen=True)
class Conversion:
    """One conversion: which committed step, into which serving checkpoint, with which settings."""

    source: Checkpoint
    output_dir: str
    run_name: str
    quantization: str | None = None
    force_unroll: bool = True

    @property
    def output_checkpoint_dir(self) -> str:
        """``<output_dir>/<run_name>/checkpoints``: what the conversion deletes and rewrites."""
        return maxtext_checkpoint_dir(self.output_dir, self.run_name)

    @property
    def output(self) -> Checkpoint:
        return Checkpoint(OUTPUT_STEP, step_uri(self.output_checkpoint_dir, OUTPUT_STEP))

    @property
    def provenance_uri(self) -> str:
        return join(self.output.uri, PROVENANCE_FILE)

    def provenance(self) -> dict[str, Any]:
        """What the provenance file records: everything that decides the output's contents."""
        return {
            "source": self.source.as_xcom(),
            "quantization": self.quantization,
            "force_unroll": self.force_unroll,
        }

    def result(self) -> dict[str, Any]:
        """The XCom value: the serving checkpoint, where a server loads it, and where it came from."""
        return {
            "step": self.output.step,
            "uri": self.output.uri,
            "items_uri": self.output.items_uri,
            "source": self.source.as_xcom(),
            "quantization": self.quantization,
        }


def default_run_name(step: int) -> str:
    return f"serving-step-{step}"


def parse_checkpoint(value: Any, field: str = "checkpoint") -> tuple[Checkpoint | None, list[SpecProblem]]:
    """The source step from a ``{"step", "uri"}`` XCom, as a dict or as the string Jinja made of it.

    Without ``render_template_as_native_obj`` a templated dict renders to its Python ``repr``;
    with it, the dict arrives as itself. ``None`` (or ``"None"``) is what an upstream task that
    found no committed checkpoint hands on, and is refused as such.
    """
    if isinstance(value, Checkpoint):
        return value, []
    data = rendered_literal(value) if isinstance(value, str) else value
    if data is None:
        reason = "no checkpoint given (did the upstream task find no committed step?)"
        return None, [SpecProblem(field, value, reason)]
    if not isinstance(data, Mapping) or not {"step", "uri"} <= set(data):
        reason = "must be a {'step': N, 'uri': 'gs://…/N'} mapping (CheckpointSensor's XCom) or its JSON"
        return None, [SpecProblem(field, value, reason)]
    step, problem = step_number(f"{field}.step", data["step"])
    uri = data["uri"]
    problems = [problem] if problem else []
    if not isinstance(uri, str) or not is_gcs(uri):
        reason = "must be a gs://BUCKET/PATH/<step> URI: the conversion pod reads it from GCS"
        problems.append(SpecProblem(f"{field}.uri", uri, reason))
    if problems:
        return None, problems
    assert step is not None
    step_dir = step_dir_of(uri).rstrip("/")
    named = step_of(step_dir)
    if named != step:
        seen = f"step {named}" if named is not None else "no step"
        reason = f"must name the directory of step {step} (<checkpoint_dir>/{step}); it names {seen}"
        return None, [SpecProblem(f"{field}.uri", uri, reason)]
    return Checkpoint(step, step_dir), []


def source_checkpoint(
    checkpoint: Any, checkpoint_dir: Any, step: Any
) -> tuple[Checkpoint | None, list[SpecProblem]]:
    """The source step from exactly one of ``checkpoint`` or ``checkpoint_dir`` + ``step``."""
    by_dir = checkpoint_dir is not None or step is not None
    if checkpoint is not None and by_dir:
        reason = "give either checkpoint or checkpoint_dir + step, not both"
        return None, [SpecProblem("checkpoint", checkpoint, reason)]
    if checkpoint is not None:
        return parse_checkpoint(checkpoint)
    if not by_dir:
        reason = "no source: give checkpoint ({'step', 'uri'}) or checkpoint_dir + step"
        return None, [SpecProblem("checkpoint", None, reason)]
    problems = []
    reason = "must be a gs://BUCKET/PATH URI (MaxText's <base_output_directory>/<run_name>/checkpoints)"
    directory_problem = storage_dir_problem("checkpoint_dir", checkpoint_dir, local=False, reason=reason)
    if directory_problem:
        problems.append(directory_problem)
    number, problem = step_number("step", step)
    if problem:
        problems.append(problem)
    if problems:
        return None, problems
    assert number is not None
    return Checkpoint(number, step_uri(checkpoint_dir, number)), []


def _is_path_segment(value: Any) -> bool:
    return isinstance(value, str) and value.strip() == value and value not in ("", ".", "..") and "/" not in value


def resolve_conversion(
    *,
    checkpoint: Any = None,
    checkpoint_dir: Any = None,
    step: Any = None,
    output_dir: Any,
    run_name: Any = None,
    quantization: Any = None,
    force_unroll: Any = True,
) -> Conversion:
    """Check every argument and return the :class:`Conversion`.

    Raises one ``InvalidWorkloadSpec`` listing every problem, each naming its field.
    """
    source, problems = source_checkpoint(checkpoint, optional_text(checkpoint_dir), optional_text(step))
    reason = "must be a gs://BUCKET[/PATH] URI (MaxText's base_output_directory for the serving checkpoint)"
    output_problem = storage_dir_problem("output_dir", output_dir, local=False, reason=reason)
    if output_problem:
        problems.append(output_problem)
    name = optional_text(run_name)
    if name is None and source is not None:
        name = default_run_name(source.step)
    if name is not None and not _is_path_segment(name):
        reason = "must be one path segment (no '/', no surrounding spaces)"
        problems.append(SpecProblem("run_name", run_name, reason))
    quant = optional_text(quantization)
    if quant is not None and quant not in QUANTIZATIONS:
        problems.append(SpecProblem("quantization", quantization, "unknown quantization", ("None", *QUANTIZATIONS)))
    if not isinstance(force_unroll, bool):
        problems.append(SpecProblem("force_unroll", force_unroll, "must be True or False"))
    raise_if_any(problems)
    assert source is not None and isinstance(name, str)
    conversion = Conversion(source, output_dir.rstrip("/"), name, quant, force_unroll)
    if (source.uri + "/").startswith(conversion.output_checkpoint_dir + "/"):
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    "output_dir",
                    output_dir,
                    f"with run_name={name!r} the output directory {conversion.output_checkpoint_dir} holds the source "
                    f"{source.uri}; the conversion deletes its output directory before writing, so it would delete "
                    "the training checkpoints. Choose another output_dir or run_name",
                )
            ]
        )
    return conversion


def conversion_arguments(conversion: Conversion, extra: Sequence[str] = (), layout: MaxTextLayout = CURRENT) -> list[str]:
    """MaxText's arguments for ``generate_param_only_checkpoint``: the layout's base config, then
    ``key=value`` settings (maxtext ``src/maxtext/utils/generate_param_only_checkpoint.py`` reads
    ``load_full_state_path`` and saves to ``<base_output_directory>/<run_name>/checkpoints``).

    ``async_checkpointing=false``: the program exits right after saving; an asynchronous save
    could still be in flight when the pod ends, leaving the output without its commit marker.
    """
    arguments = [
        layout.base_config,
        f"base_output_directory={conversion.output_dir}",
        f"run_name={conversion.run_name}",
        f"load_full_state_path={conversion.source.items_uri}",
        f"force_unroll={str(conversion.force_unroll).lower()}",
    ]
    if conversion.quantization:
        arguments.append(f"quantization={conversion.quantization}")
    arguments.append("async_checkpointing=false")
    return [*arguments, *extra]


def conversion_command_line(conversion: Conversion, extra: Sequence[str] = (), layout: MaxTextLayout = CURRENT) -> list[str]:
    """The whole default command line (``command`` + ``args`` of the Job's container)."""
    return [*layout.convert_command, *conversion_arguments(conversion, extra, layout)]


def conversion_env(conversion: Conversion, env: Any) -> Any:
    """The user's ``env`` plus the derived paths (ours win a name clash: they must match the job)."""
    derived = {
        SOURCE_ENV: conversion.source.items_uri,
        OUTPUT_DIR_ENV: conversion.output_dir,
        RUN_NAME_ENV: conversion.run_name,
    }
    if not env:
        return derived
    if isinstance(env, Mapping):
        return {**{k: v for k, v in env.items() if k not in derived}, **derived}
    if isinstance(env, (list, tuple)):
        kept = [e for e in env if not (isinstance(e, Mapping) and e.get("name") in derived)]
        return [*kept, *({"name": k, "value": v} for k, v in derived.items())]
    return env


def conversion_container(
    conversion: Conversion,
    *,
    image: Any,
    command: Any = None,
    arguments: Any = None,
    extra_arguments: Any = None,
    env: Any = None,
    container_resources: Any = None,
    maxtext_layout_name: Any = CURRENT.name,
) -> MainContainer:
    """The Job's one container, checked like a workload's main container (same messages); the
    default command line is the MaxText layout's (:mod:`pathways_airflow.spec.maxtext`)."""
    layout, problem = maxtext_layout(maxtext_layout_name)
    problems: list[SpecProblem] = [problem] if problem else []
    extra = extra_arguments or ()
    if not isinstance(extra, (list, tuple)) or not all(isinstance(item, str) for item in extra):
        reason = "must be a list of strings such as ['model_name=llama2-7b']"
        problems.append(SpecProblem("extra_arguments", extra_arguments, reason))
        extra = ()
    container = _check_container(
        problems,
        image,
        CONTAINER_NAME,
        list(layout.convert_command) if command is None else command,
        conversion_arguments(conversion, tuple(extra), layout) if arguments is None else arguments,
        conversion_env(conversion, env),
        container_resources,
        None,
        resources_field="container_resources",
    )
    raise_if_any(problems)
    assert container is not None
    return container


def conversion_job_manifest(
    *,
    name: str,
    namespace: str,
    container: MainContainer,
    identity: TaskIdentity,
    node_selector: Mapping[str, str] | None = None,
    service_account_name: str | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job running ``container`` once.

    ``backoffLimit: 0`` and ``restartPolicy: Never``: a failed conversion is reported with its
    exit code and log, not rerun in place (a rerun deletes the output again). Airflow's retries
    decide whether to try again. The pod carries the task's labels too, so ``kubectl -l`` finds it.
    """
    labels = identity.labels()
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_render_container(container)]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if service_account_name:
        pod_spec["serviceAccountName"] = service_account_name
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": identity.annotations(),
        },
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def placement_problems(*, namespace: Any, node_selector: Any, service_account_name: Any) -> list[SpecProblem]:
    """Where the pod runs, checked before the API server would refuse the Job (or accept a pod that never starts)."""
    problems: list[SpecProblem] = []
    problems.extend(filter(None, [namespace_problem(namespace)]))
    dict(string_mapping(problems, "node_selector", node_selector if node_selector is not None else {}, labels_like=True))
    account = service_account_name
    if account is not None and not (isinstance(account, str) and is_dns_subdomain(account)):
        problems.append(SpecProblem("service_account_name", account, "must be a DNS subdomain name"))
    return problems


def reuse_decision(conversion: Conversion, *, output_committed: bool, provenance: Any) -> tuple[bool, str]:
    """May the existing output stand in for this conversion? ``(reuse, why)`` for the task log.

    Only a committed output whose provenance records this very source step and the same
    settings: a committed output without provenance was not written by this operator (or its
    provenance write was cut off), and one from another source or quantization would serve the
    wrong weights.
    """
    output, wanted = conversion.output.uri, conversion.source
    if not output_committed:
        return False, f"no committed serving checkpoint at {output} yet"
    if not isinstance(provenance, Mapping):
        return False, f"{output} is committed but has no {PROVENANCE_FILE} saying what it came from; converting again"
    expected = conversion.provenance()
    if {key: provenance.get(key) for key in expected} == expected:
        return True, f"reusing the serving checkpoint {output} converted from step {wanted.step} ({wanted.uri})"
    had = provenance.get("source") or {}
    return False, (
        f"{output} was converted from step {had.get('step')} ({had.get('uri')}, "
        f"quantization={provenance.get('quantization')}, force_unroll={provenance.get('force_unroll')}); "
        f"converting step {wanted.step} ({wanted.uri}, quantization={conversion.quantization}, "
        f"force_unroll={conversion.force_unroll}) over it"
    )


