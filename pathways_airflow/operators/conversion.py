"""``CheckpointConversionOperator``: a committed training checkpoint → a serving checkpoint.

A server (vLLM's MaxText plugin, JetStream) loads parameters only (``load_parameters_path``), not
the full train state MaxText saves, so between training and serving sits MaxText's
``generate_param_only_checkpoint``: it reads ``<step>/items`` of a training checkpoint and writes ``<out>/<run>/checkpoints/0/items``.
This operator runs it as a plain batch/v1 Job (one pod, no retries of its own) and guards the
two ways it wastes time or serves garbage:

* **Never from a partial step.** The source step must be committed (``commit_success.txt`` on
  ``gs://``) before anything is created; a step cut off by maintenance is refused, naming it.
* **Never twice for the same source.** After a conversion succeeds, a small provenance file
  (``pathways_airflow_source.json``) is written next to the output's commit marker. A later run
  whose output is committed and whose provenance names the same source step and settings
  returns the existing checkpoint without creating a Job. ``generate_param_only_checkpoint``
  deletes its output directory before writing, so a conversion from another source also
  removes the old provenance: it can never vouch for files it did not see written.

What to convert, the command line, the Job manifest and the reuse decision are the pure
:mod:`pathways_airflow.spec.conversion`; the GCS reads and writes are :mod:`pathways_airflow.hooks.storage`.
The operator only reads and writes GCS, creates, waits on and deletes the Job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import conf

from pathways_airflow import well_known
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS, TASK_LIMIT, deletion_poll, looks_templated, poll_interval_problem
from pathways_airflow.checkpoints import COMMIT_MARKER, Checkpoint, commit_marker_uri
from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS
from pathways_airflow.operators.base import ClusterOperator
from pathways_airflow.run.messages import quoted_log
from pathways_airflow.exceptions import BadSpecError
from pathways_airflow.resources import JOB, POD
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.maxtext import DEFAULT_LAYOUT
from pathways_airflow.operators.lineage import ReportsLineage, conversion_rule
from pathways_airflow.spec.workload import MainContainer
from pathways_airflow.spec.conversion import (
    CONTAINER_NAME,
    DEFAULT_IMAGE,
    OUTPUT_DIR_ENV,
    RUN_NAME_ENV,
    Conversion,
    conversion_container,
    conversion_job_manifest,
    placement_problems,
    resolve_conversion,
    reuse_decision,
)
from pathways_airflow.hooks.storage import gcs_exists, gcs_has_objects, gcs_read_json, gcs_write_json, opened_storage
from pathways_airflow.run.outcome import failed_job_exception, job_end_exception
from pathways_airflow.state.disruption import main_exit, pod_disruption
from pathways_airflow.state.jobs import FAILED, JobEvent, JobOutcome

if TYPE_CHECKING:
    from airflow.sdk import Context

DELETE_WAIT_SECONDS = 120.0

def failed_pod(pods: Sequence[Mapping[str, Any]]) -> tuple[str, str | None, int | None, str | None]:
    """``(pod, container, exit code, disruption)`` of the pod that ended the Job, newest first.

    ``container`` and ``exit code`` are ``None`` when no container ended non-zero (the pod was
    evicted, or never started); ``disruption`` is the pod's sign of having been stopped by the
    infrastructure, if any.
    """
    ordered = sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True)
    for pod in ordered:
        ended = main_exit(pod)
        disruption = pod_disruption(pod)
        if ended or disruption:
            name = (pod.get("metadata") or {}).get("name", "?")
            return name, ended[0] if ended else None, ended[1] if ended else None, disruption
    if ordered:
        return (ordered[0].get("metadata") or {}).get("name", "?"), None, None, None
    return "", None, None, None


# --- the operator --------------------------------------------------------------------------------


class CheckpointConversionOperator(ReportsLineage, ClusterOperator):
    """Convert a committed training checkpoint into a parameter-only serving checkpoint (for vLLM's MaxText plugin or JetStream).

    :param checkpoint: the source step as ``{"step": N, "uri": "<checkpoint_dir>/<N>"}``, the XCom of
        ``CheckpointSensor`` or ``PathwaysJobOperator``'s ``result["checkpoint"]``; a dict, or the
        JSON / Python-literal string a template renders it to.
    :param checkpoint_dir: instead of ``checkpoint``: MaxText's ``<base>/<run>/checkpoints`` ...
    :param step: ... and the step in it.
    :param output_dir: ``gs://`` base of the serving checkpoint (MaxText's ``base_output_directory``).
    :param run_name: the serving checkpoint's run name (default ``serving-step-<N>``); the output
        is ``<output_dir>/<run_name>/checkpoints/0``, and that directory is replaced.
    :param quantization: ``None`` or ``"int8"``.
    :param force_unroll: unroll scanned layers (what JetStream and vLLM's MaxText plugin expect:
        MaxText's ``inference/vllm.yml`` says scanned layers are not supported; default True).
    :param image: the MaxText image; use the MaxText version that wrote the checkpoint.
    :param maxtext_layout: where the image keeps MaxText: ``"current"`` (MaxText v0.2.0 and later,
        the default: ``python3 -m maxtext.utils.generate_param_only_checkpoint
        src/maxtext/configs/base.yml``) or ``"legacy"`` (older images: ``python3 -m
        MaxText.generate_param_only_checkpoint MaxText/configs/base.yml``). Never guessed: the
        wrong one fails in the pod with "No module named".
    :param command: container command (default: the layout's ``python3 -m ...generate_param_only_checkpoint``).
    :param arguments: container args (default: the layout's config file and the settings above). A
        replaced command line can use ``$(PATHWAYS_CONVERSION_SOURCE)``,
        ``$(PATHWAYS_CONVERSION_OUTPUT_DIR)`` and ``$(PATHWAYS_CONVERSION_RUN_NAME)``; it must
        still write the output where the result says, or the task fails.
    :param extra_arguments: MaxText settings appended to the default arguments, such as
        ``["model_name=llama2-7b", "scan_layers=true"]`` (they must match the training run's).
    :param env: ``{"NAME": "value" | {"valueFrom": ...}}`` or a list of EnvVar dicts.
    :param container_resources: ``{"requests": {...}, "limits": {...}}``: a large model's full
        state must fit in memory.
    :param node_selector: where the pod may run; :param service_account_name: its Kubernetes
        service account (on GKE, the one Workload Identity lets read and write the buckets).
    :param namespace: namespace of the Job.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param poll_interval: seconds between looks at the Job.
    :param delete_on_finish: delete the Job once its result and log are read (default True).

    With ``outlets=[Asset(...)]``, the result is also the extra of each outlet asset's event, so
    DAGs scheduled on (or reading) the asset find the serving checkpoint in it.

    Returns ``{"step": 0, "uri": ".../checkpoints/0", "items_uri": ".../checkpoints/0/items",
    "source": {"step": N, "uri": ...}, "quantization": ...}``; ``items_uri`` is what a server's
    ``load_parameters_path`` takes.
    """

    template_fields: Sequence[str] = (
        "checkpoint",
        "checkpoint_dir",
        "step",
        "output_dir",
        "run_name",
        "quantization",
        "image",
        "maxtext_layout",
        "command",
        "arguments",
        "extra_arguments",
        "env",
        "namespace",
        *CLUSTER_TEMPLATE_FIELDS,
    )
    template_fields_renderers = {
        "checkpoint": "py",
        "command": "py",
        "arguments": "py",
        "extra_arguments": "py",
        "env": "json",
    }
    ui_color = "#b3e5fc"
    lineage_rule = conversion_rule

    def __init__(
        self,
        *,
        output_dir: str,
        checkpoint: Mapping[str, Any] | str | None = None,
        checkpoint_dir: str | None = None,
        step: int | str | None = None,
        run_name: str | None = None,
        quantization: str | None = None,
        force_unroll: bool = True,
        image: str = DEFAULT_IMAGE,
        maxtext_layout: str = DEFAULT_LAYOUT,
        command: Sequence[str] | None = None,
        arguments: Sequence[str] | None = None,
        extra_arguments: Sequence[str] | None = None,
        env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        container_resources: Mapping[str, Mapping[str, Any]] | None = None,
        node_selector: Mapping[str, str] | None = None,
        service_account_name: str | None = None,
        namespace: str = "default",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = POLL_INTERVAL_SECONDS["job"],
        delete_on_finish: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.checkpoint = checkpoint
        self.checkpoint_dir = checkpoint_dir
        self.step = step
        self.output_dir = output_dir
        self.run_name = run_name
        self.quantization = quantization
        self.force_unroll = force_unroll
        self.image = image
        self.maxtext_layout = maxtext_layout
        self.command = command
        self.arguments = arguments
        self.extra_arguments = extra_arguments
        self.env = env
        self.container_resources = container_resources
        self.node_selector = node_selector
        self.service_account_name = service_account_name
        self.namespace = namespace
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.delete_on_finish = delete_on_finish
        self.validate(only_known=True)

    # --- pure questions -------------------------------------------------------------------------

    def _conversion_arguments(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "checkpoint_dir": self.checkpoint_dir,
            "step": self.step,
            "output_dir": self.output_dir,
            "run_name": self.run_name,
            "quantization": self.quantization,
            "force_unroll": self.force_unroll,
        }

    def _container_arguments(self) -> dict[str, Any]:
        names = ("image", "command", "arguments", "extra_arguments", "env", "container_resources")
        return {"maxtext_layout_name": self.maxtext_layout, **{name: getattr(self, name) for name in names}}

    def validate(self, *, only_known: bool = False) -> None:
        """Raise ``InvalidWorkloadSpec`` for anything that must not run; with ``only_known``, templates wait."""

        problems: list[SpecProblem] = []
        placement = {
            "namespace": self.namespace,
            "node_selector": self.node_selector,
            "service_account_name": self.service_account_name,
        }
        if not (only_known and looks_templated(placement)):
            problems.extend(placement_problems(**placement))
        problems.extend(filter(None, [poll_interval_problem(self.poll_interval)]))
        if not (only_known and looks_templated([self._conversion_arguments(), self._container_arguments()])):
            try:
                self.container(self.conversion())
            except InvalidWorkloadSpec as error:
                problems.extend(error.problems)
        raise_if_any(problems)

    def conversion(self) -> Conversion:
        """What to convert, from the operator's current (rendered) parameters."""
        return resolve_conversion(**self._conversion_arguments())

    def container(self, conversion: Conversion) -> MainContainer:
        return conversion_container(conversion, **self._container_arguments())

    def render_manifest(self, context: Context | None = None) -> dict[str, Any]:
        """Exactly the Job that would be created (a dry run; works without a context)."""
        self.validate()
        identity = self.task_identity(context)
        return conversion_job_manifest(
            name=identity.workload_name(),
            namespace=self.namespace,
            container=self.container(self.conversion()),
            identity=identity,
            node_selector=self.node_selector,
            service_account_name=self.service_account_name,
        )

    # --- running --------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        self.validate()
        conversion = self.conversion()
        with opened_storage(self.gcp_conn_id) as client:
            reuse, why = reuse_decision(
                conversion,
                output_committed=gcs_exists(client, commit_marker_uri(conversion.output.uri)),
                provenance=gcs_read_json(client, conversion.provenance_uri),
            )
            self.log.info("%s", why)
            if reuse:
                return self._announced(context, conversion.result())
            self._require_committed(client, conversion.source)
        manifest = self.render_manifest(context)
        name = manifest["metadata"]["name"]
        self._submit(manifest, self.task_identity(context).key)
        from pathways_airflow.triggers.job import BatchJobTrigger

        trigger = BatchJobTrigger(
            name=name,
            namespace=self.namespace,
            target=self.hook.resolved_target().to_dict(),
            poll_interval=self.poll_interval,
            deadline=self.deadline(context),
        )
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return self.execute_complete(context, self.wait_here(trigger))

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Act on how the Job ended: verify and record the output, or report the failure."""
        if event is None:  # resumed with no event (a task left deferred, run again by hand): look again
            return self.execute(context)
        ended = JobEvent.from_payload(event)
        name = ended.name
        self.holding(JOB, self.namespace, name)
        failure = self._failure(name, ended.outcome) if ended.status == FAILED else None
        error = job_end_exception(
            ended, f"Job {self.namespace}/{name}", limit=f"{TASK_LIMIT} ({self.execution_timeout})", failure=failure,
            lost_hint=f"The Job was left running; a retry of this task re-attaches to it. {self._kubectl_hint(name)}",
        )
        if error is not None:  # a failed Job may go once its pods were read; any other end leaves it as it is
            if failure is not None:
                self.log.error("%s", failure)
            self.finished_with(JOB, self.namespace, name, delete=failure is not None and self.delete_on_finish)
            raise error
        conversion = self.conversion()
        self._log_tail(name)
        with opened_storage(self.gcp_conn_id) as client:
            if not gcs_exists(client, commit_marker_uri(conversion.output.uri)):
                self.finished_with(JOB, self.namespace, name, delete=self.delete_on_finish)
                raise BadSpecError(
                    f"Job {self.namespace}/{name} completed but {conversion.output.uri} has no {COMMIT_MARKER}: "
                    "the serving checkpoint is missing or partial and is not reported. A replaced command line "
                    f"must write base_output_directory=$({OUTPUT_DIR_ENV}) run_name=$({RUN_NAME_ENV})."
                )
            record = {
                **conversion.provenance(),
                "job": f"{self.namespace}/{name}",
                "converted_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            }
            gcs_write_json(client, conversion.provenance_uri, record)
        self.log.info(
            "converted step %d (%s) into the serving checkpoint %s",
            conversion.source.step,
            conversion.source.uri,
            conversion.output.uri,
        )
        self.finished_with(JOB, self.namespace, name, delete=self.delete_on_finish)
        return self._announced(context, conversion.result())

    def _announced(self, context: Context, result: dict[str, Any]) -> dict[str, Any]:
        """Put the serving checkpoint in the extra of each outlet asset's event.

        A DAG scheduled on the asset, or reading it as an inlet, then finds the checkpoint to
        serve in the newest event (``extra["items_uri"]`` is the server's load path), whichever
        DAG converted it.
        """
        from airflow.sdk import Asset

        events = context.get("outlet_events")
        for outlet in self.outlets:
            if isinstance(outlet, Asset) and events is not None:
                events[outlet].extra = dict(result)
        return self.reported(result)

    def _require_committed(self, client: Any, source: Checkpoint) -> None:
        """Refuse a source step without its commit marker: MaxText fails on it, or converts half of it."""
        if gcs_exists(client, commit_marker_uri(source.uri)):
            return
        why = (
            f"it has no {COMMIT_MARKER} (a save in progress, or one cut off by maintenance)"
            if gcs_has_objects(client, source.uri)
            else "it does not exist"
        )
        raise BadSpecError(
            f"not converting step {source.step} at {source.uri}: {why}. Only a committed step can be converted."
        )

    def _submit(self, manifest: dict[str, Any], task_key: str) -> None:
        """Create the Job, or re-attach to the one an earlier try of this task created (one that
        failed is run again: :meth:`~pathways_airflow.hooks.pathways.PathwaysHook.create_job_or_adopt`)."""
        name = manifest["metadata"]["name"]
        self.holding(JOB, self.namespace, name)
        poll = deletion_poll(self.poll_interval)
        adoption = self.hook.create_job_or_adopt(manifest, task_key, timeout=DELETE_WAIT_SECONDS, poll=poll)
        self.holding(JOB, self.namespace, name)  # again: a kill that raced the create deletes what it made
        verb = "created" if adoption.created else "re-attached to the existing"
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        command_line = " ".join([*container.get("command", ()), *container.get("args", ())])
        self.log.info("%s Job %s/%s: %s", verb, self.namespace, name, command_line)

    def _pods(self, name: str) -> list[dict[str, Any]]:
        return self.hook.list(POD, self.namespace, label_selector=f"{well_known.JOB_NAME}={name}")

    def _failure(self, name: str, outcome: JobOutcome) -> Exception:
        """The failed Job's exception: its cause, the exit code, the last log lines, where to look."""
        pod, container, exit_code, disruption = failed_pod(self._pods(name))
        parts = [f"the checkpoint conversion Job {self.namespace}/{name} {outcome.summary()}."]
        if disruption:
            parts.append(f"The infrastructure stopped it: {disruption}.")
        if pod and exit_code is not None:
            parts.append(f"Container {container} of pod {pod} exited with code {exit_code}.")
        if pod:
            lines = self.hook.read_log_tail(self.namespace, pod, container or CONTAINER_NAME)
            if lines:
                parts.append(quoted_log(lines))
        else:
            parts.append("No pod of it was found.")
        if not self.delete_on_finish:
            parts.append(self._kubectl_hint(name))
        return failed_job_exception("\n".join(parts), exit_code=exit_code, disruption=disruption)

    def _log_tail(self, name: str) -> None:
        for pod in self._pods(name)[-1:]:
            lines = self.hook.read_log_tail(self.namespace, pod["metadata"]["name"], CONTAINER_NAME)
            if lines:
                self.log.info("last lines of %s:\n%s", pod["metadata"]["name"], "\n".join(lines))

    def _kubectl_hint(self, name: str) -> str:
        return (
            f"Look further with: kubectl -n {self.namespace} describe job {name}; "
            f"kubectl -n {self.namespace} logs -l {well_known.JOB_NAME}={name}"
        )
