"""``PathwaysJobOperator``: run a program on TPU slices as a Pathways workload.

The operator gathers its (rendered) parameters, submits, waits (in the triggerer or here) and
resubmits after a disruption. Every decision — is the spec valid, what is the manifest, what a
failure means — is made by the pure ``spec`` and ``state`` packages; the operator asks and acts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowTaskTimeout, conf

from pathways_airflow import well_known
from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS
from pathways_airflow.operators.base import ClusterOperator
from pathways_airflow.exceptions import DisruptionBudgetExhausted, UserCodeError
from pathways_airflow.links import CloudLoggingLink, GkeWorkloadLink
from pathways_airflow.operators.lineage import ReportsLineage, training_rule
from pathways_airflow.operators.maintenance import MindsMaintenance
from pathways_airflow.operators.manifest import SuppliedManifest
from pathways_airflow.resources import workload_resource
from pathways_airflow.state.disruption import Classification
from pathways_airflow.state.model import Phase, WorkloadState
from pathways_airflow.run import messages, outcome, rounds
from pathways_airflow.run.annotations import in_place_written, phases_written
from pathways_airflow.run.records import Submission, WorkloadEvent
from pathways_airflow.run.result import NO_CHECKPOINT_DIR, counted_state, uid_of, workload_result
from pathways_airflow.run.submission import needs_nodes, plan_submission
from pathways_airflow.hooks.reclaim import delete_making_room
from pathways_airflow.hooks.storage import newest_committed_checkpoint
from pathways_airflow.spec.arguments import looks_templated  # noqa: F401 - also importable from here, as before
from pathways_airflow.spec.arguments import (
    RESUME_NEWEST_COMMITTED, exit_codes_problem, handed_to_program, kueue_max_exec_time, workload_placement_problems,
)
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import MAX_ATTEMPT
from pathways_airflow.spec.render import XPK_SYSTEM_EXIT_CODES
from pathways_airflow.spec.workload import CustomComponent, Workload, build_workload, checked_integer, with_resume_env

if TYPE_CHECKING:
    from airflow.sdk import Context

STATE_KEY = "pathways_workload"
"""Key of the task state store entry (and of the XCom) that names the task's workload."""

# Parameters that go straight into ``build_workload`` under the same name.
_WORKLOAD_FIELDS = (
    "machine_type",
    "tpu",
    "topology",
    "num_slices",
    "pathways_dir",
    "image",
    "command",
    "arguments",
    "env",
    "container_resources",
    "container_name",
    "image_pull_policy",
    "deployment_mode",
    "max_restarts",
    "max_slice_restarts",
    "elastic_slices",
    "pathways_version",
    "custom_components",
    "node_selector",
    "reservation",
    "spot",
    "pod_priority_class_name",
    "termination_grace_period_seconds",
    "service_account_name",
    "enable_metrics_collection",
    "queue_name",
    "priority_class",
    "max_exec_time_seconds",
    "labels",
    "annotations",
)


# Parameters named differently on the operator (BaseOperator already has ``resources``).
_BUILD_ARGUMENT = {"container_resources": "resources"}
_SPEC_PARAMETERS = ("topology", "pathways_dir", "backend", *_WORKLOAD_FIELDS)
"""What ``manifest=`` replaces: each of these given with it is refused (but ``queue_name``)."""


class PathwaysJobOperator(ReportsLineage, SuppliedManifest, MindsMaintenance, ClusterOperator):
    """Submit a Pathways workload to TPU slices on GKE.

    :param tpu: TPU generation or machine type shorthand (``"v5e"``, ``"v6e"``, ``"v5p"``, ``"v4"``,
        ``"tpu7x"``), or set ``machine_type`` to one of the PathwaysJob machine types
        (``"ct5lp-hightpu-4t"``, ...).
    :param topology: slice topology, checked against the PathwaysJob controller's table.
    :param num_slices: number of slices (node pools), each ``topology``-shaped.
    :param pathways_dir: ``gs://`` scratch location for Pathways (must exist).
    :param image: image of the main container (the user's JAX program); ``None`` = headless.
    :param command: container command (list of strings). :param arguments: container args.
    :param env: ``{"NAME": "value"}`` or ``{"NAME": {"valueFrom": {...}}}`` or a list of EnvVar dicts.
        Put secrets in Kubernetes Secrets and reference them with ``valueFrom``.
    :param backend: ``"pathwaysjob"`` (PathwaysJob CRD, default) or ``"jobset"`` (a plain JobSet
        with the same layout plus a maintenance-aware failure policy; for clusters without the
        PathwaysJob controller).
    :param queue_name: Kueue LocalQueue; :param priority_class: Kueue WorkloadPriorityClass.
    :param max_exec_time_seconds: with ``queue_name``: Kueue stops the workload after it has run
        this long, even if Airflow is gone (label ``kueue.x-k8s.io/max-exec-time-seconds``). By
        default ``execution_timeout`` plus two minutes, so Airflow's own timeout fires first.
    :param namespace: namespace of the workload.
    :param kubernetes_conn_id: and the other cluster parameters: see
        :class:`~pathways_airflow.connection.ClusterConnectionMixin`.
    :param checkpoint_dir: where the program writes Orbax checkpoints (enables resume and the
        checkpoint in the result).
    :param name_prefix: human-readable start of the workload name (≤ 10 characters); by
        default it comes from the task id. The rest of the name is a hash of the task instance.
    :param deferrable: wait in the triggerer instead of a worker slot (default: Airflow's
        ``[operators] default_deferrable``).
    :param delete_on_finish: delete the workload once it has finished, after its result and the
        failing container's log lines have been read (default True: nothing is left behind).
    :param max_disruptions: how many times maintenance, preemption or slice loss may end the
        workload before the task fails; each time a fresh workload is submitted (next attempt
        name) and resumes from the newest committed checkpoint. Separate from Airflow ``retries``.
    :param resume: what a resubmitted workload resumes from. ``"newest_committed"`` (default): the
        newest committed checkpoint on GCS, handed to the program as ``PATHWAYS_RESUME_STEP`` /
        ``PATHWAYS_RESUME_CHECKPOINT``; ``"program"``: nothing is handed over and the program picks
        (MaxText's own run directory, multi-tier checkpointing's local and peer copies). Either way
        the disruption records the step the program logs it restored (MaxText's
        ``restoring from this run's directory step N``), with ``resume_source="program_log"``.
    :param wait_for_maintenance: when resubmitting, report which slices are still under
        maintenance; the new workload is scheduled once enough slices are back.
    :param expected_duration: how long the run takes (``timedelta`` or seconds). With it, before
        the workload is submitted, maintenance GKE announced inside that time on the slices it may
        land on (``cloud.google.com/scheduled-maintenance-time``) is handled as
        ``maintenance_window`` says.
    :param maintenance_window: ``"wait"`` (default): submit once that maintenance has passed;
        ``"start_now"``: start it now on the idle slices (GKE's manual start, label
        ``cloud.google.com/perform-maintenance=true``; slices another workload runs on are left
        alone), wait for it, then submit; ``"ignore"``: submit at once. The log and the result's
        ``maintenance`` say what was announced, started and waited for.
    :param retry_user_errors: let Airflow retry a user-code failure (default: fail at once).
    :param ttl_seconds_after_finished: ``jobset`` backend: the JobSet deletes itself this long after
        it finished (default one day), even if Airflow never comes back to delete it; long enough
        for a retry to find a success and reuse it. ``None``: never. (The PathwaysJob CRD has no
        such field.)
    :param system_exit_codes: exit codes that mean "the system failed" rather than "the program
        is wrong" (default: xpk's 42 and 127–255). The jobset backend fails its JobSet at once on
        any other non-zero exit of the main container.
    :param manifest: instead of the spec parameters, a PathwaysJob or a JobSet in the Pathways
        layout (gcluster's, xpk's): a dict, YAML or JSON text, or a ``.yaml``/``.yml``/``.json``
        file found and rendered as Airflow template files are. The provider adds what its
        guarantees need and logs each change (:mod:`pathways_airflow.spec.manifest`); only
        ``queue_name`` of the spec parameters applies with it.
    :param main_container: with ``manifest``: the container that runs the program, when the
        manifest has more than one candidate.
    """

    template_fields: Sequence[str] = (
        *_WORKLOAD_FIELDS,
        "manifest",
        "main_container",
        "namespace",
        "backend",
        "checkpoint_dir",
        "name_prefix",
        "max_disruptions",
        "ttl_seconds_after_finished",
        "expected_duration",
        "maintenance_window",
        "resume",
        *CLUSTER_TEMPLATE_FIELDS,
    )
    template_fields_renderers = {
        "manifest": "yaml",
        "env": "json",
        "command": "py",
        "arguments": "py",
        "labels": "json",
        "annotations": "json",
        "container_resources": "json",
        "node_selector": "json",
    }
    ui_color = "#c5e1a5"
    operator_extra_links = (GkeWorkloadLink(), CloudLoggingLink())
    lineage_rule = training_rule

    def __init__(
        self,
        *,
        topology: str | None = None,
        pathways_dir: str | None = None,
        tpu: str | None = None,
        machine_type: str | None = None,
        num_slices: int | str = 1,
        image: str | None = None,
        command: Sequence[str] | None = None,
        arguments: Sequence[str] | None = None,
        env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        container_resources: Mapping[str, Mapping[str, Any]] | None = None,
        container_name: str = "main",
        image_pull_policy: str | None = None,
        deployment_mode: str = "default",
        max_restarts: int | str = 0,
        max_slice_restarts: int | str | None = None,
        elastic_slices: int | str | None = None,
        pathways_version: str | None = None,
        custom_components: Sequence[CustomComponent | Mapping[str, Any]] | None = None,
        node_selector: Mapping[str, str] | None = None,
        reservation: str | None = None,
        spot: bool = False,
        pod_priority_class_name: str | None = None,
        termination_grace_period_seconds: int | str | None = None,
        service_account_name: str | None = None,
        enable_metrics_collection: bool | None = None,
        queue_name: str | None = None,
        priority_class: str | None = None,
        max_exec_time_seconds: int | str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        backend: str = "pathwaysjob",
        namespace: str = "default",
        checkpoint_dir: str | None = None,
        name_prefix: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        delete_on_finish: bool = True,
        max_disruptions: int = 3,
        wait_for_maintenance: bool = True,
        retry_user_errors: bool = False,
        system_exit_codes: Sequence[int] | None = None,
        ttl_seconds_after_finished: int | str | None = 86_400,
        manifest: Mapping[str, Any] | str | None = None,
        main_container: str | None = None,
        expected_duration: dt.timedelta | float | str | None = None,
        maintenance_window: str = "wait",
        resume: str = RESUME_NEWEST_COMMITTED,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.resume = resume
        self.expected_duration = expected_duration
        self.maintenance_window = maintenance_window
        self.manifest = manifest
        self.main_container = main_container
        self.topology = topology
        self.pathways_dir = pathways_dir
        self.tpu = tpu
        self.machine_type = machine_type
        self.num_slices = num_slices
        self.image = image
        self.command = command
        self.arguments = arguments
        self.env = env
        self.container_resources = container_resources
        self.container_name = container_name
        self.image_pull_policy = image_pull_policy
        self.deployment_mode = deployment_mode
        self.max_restarts = max_restarts
        self.max_slice_restarts = max_slice_restarts
        self.elastic_slices = elastic_slices
        self.pathways_version = pathways_version
        self.custom_components = custom_components
        self.node_selector = node_selector
        self.reservation = reservation
        self.spot = spot
        self.pod_priority_class_name = pod_priority_class_name
        self.termination_grace_period_seconds = termination_grace_period_seconds
        self.service_account_name = service_account_name
        self.enable_metrics_collection = enable_metrics_collection
        self.queue_name = queue_name
        self.priority_class = priority_class
        self.max_exec_time_seconds = max_exec_time_seconds
        self.labels = labels
        self.annotations = annotations
        self.backend = backend
        self.namespace = namespace
        self.checkpoint_dir = checkpoint_dir
        self.name_prefix = name_prefix
        self.deferrable = deferrable
        self.delete_on_finish = delete_on_finish
        self.max_disruptions = max_disruptions
        self.wait_for_maintenance = wait_for_maintenance
        self.retry_user_errors = retry_user_errors
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        # A non-list (a number, a templated string) is kept as given and refused by validate(),
        # naming the parameter, instead of failing here with a TypeError.
        self.system_exit_codes = (
            tuple(system_exit_codes)
            if isinstance(system_exit_codes, (list, tuple, set, frozenset, range))
            else XPK_SYSTEM_EXIT_CODES if system_exit_codes is None else system_exit_codes
        )
        # Fail at DAG parse time for everything already known; templated values are checked
        # again once rendered, before anything is submitted.
        self.validate(only_known=True)

    # --- pure questions, answered by the spec package -----------------------------------------

    def validate(self, *, only_known: bool = False, context: Context | None = None) -> None:
        """Raise ``InvalidWorkloadSpec`` (a ``ValueError``) for anything that must not be submitted.

        With ``only_known``, parts whose values are still templates are left for later.
        """
        problems: list[SpecProblem] = []
        placement = {
            "backend": self.backend,
            "namespace": self.namespace,
            "name_prefix": self.name_prefix,
            "checkpoint_dir": self.checkpoint_dir,
            "resume": self.resume,
        }
        if not (only_known and looks_templated(placement)):
            problems.extend(workload_placement_problems(**placement))
        if not (only_known and looks_templated(self.max_disruptions)):
            checked_integer(problems, "max_disruptions", self.max_disruptions, minimum=0, maximum=MAX_ATTEMPT - 1)
        ttl = self.ttl_seconds_after_finished
        if ttl is not None and not (only_known and looks_templated(ttl)):
            checked_integer(problems, "ttl_seconds_after_finished", ttl, minimum=0, maximum=2**31 - 1)
        problems.extend(filter(None, [exit_codes_problem("system_exit_codes", self.system_exit_codes)]))
        problems.extend(self.maintenance_problems(only_known=only_known))
        if self.manifest is not None:
            problems.extend(self.manifest_problems(_SPEC_PARAMETERS, only_known=only_known, context=context))
        elif not (only_known and looks_templated(self._workload_arguments())):
            try:
                self.workload()
            except InvalidWorkloadSpec as error:
                # build_workload calls it "resources"; on this operator it is container_resources.
                problems.extend(
                    dataclasses.replace(p, field="container_" + p.field) if p.field.split(".")[0] == "resources" else p
                    for p in error.problems
                )
        if problems:
            raise InvalidWorkloadSpec(problems)

    @property
    def disruption_budget(self) -> int:
        """Fresh workloads infrastructure failures may cost (:func:`~pathways_airflow.run.outcome.resubmissions_allowed`)."""
        return outcome.resubmissions_allowed(self.backend, int(self.max_disruptions), self.restarts_allowed())

    def _workload_arguments(self, resume_from: Checkpoint | None = None) -> dict[str, Any]:
        arguments = {_BUILD_ARGUMENT.get(name, name): getattr(self, name) for name in _WORKLOAD_FIELDS}
        arguments["max_exec_time_seconds"] = kueue_max_exec_time(self.max_exec_time_seconds, self.execution_timeout, self.queue_name)
        if resume_from is not None and self.image is not None:
            arguments["env"] = with_resume_env(arguments["env"], resume_from)
        return arguments

    def workload(self, resume_from: Checkpoint | None = None) -> Workload:
        """The validated workload from the operator's current (rendered) parameters.

        ``resume_from``: the checkpoint a resubmitted workload resumes from, handed to the
        program as ``PATHWAYS_RESUME_STEP`` / ``PATHWAYS_RESUME_CHECKPOINT``.
        """
        return self.restarting_in_place(build_workload(**self._workload_arguments(resume_from)))

    def render_manifest(
        self, context: Context | None = None, *, attempt: int = 0, resume_from: Checkpoint | None = None
    ) -> dict[str, Any]:
        """Exactly what would be applied: the PathwaysJob or JobSet manifest (a dry run).

        Works without a context (placeholder run id); inside a task it uses the task instance,
        so the name matches the one ``execute`` submits.
        """
        self.validate(context=context)
        return self.rendered(context, attempt, handed_to_program(self.resume, resume_from))

    # --- running: submit, wait, report ----------------------------------------------------------

    def execute(self, context: Context, maintenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.validate(context=context)
        identity = self.task_identity(context)
        resource = workload_resource(self.backend)
        store = context.get("task_state_store")
        recorded = rounds.record_of_this_round(_store_get(store), identity.first_try) or {}
        if recorded.get("result"):
            self.log.info("%s already succeeded in an earlier try; returning its result", recorded["result"]["name"])
            return self.reported(recorded["result"])

        existing = self.hook.task_workloads(resource, self.namespace, identity.key)
        plan = plan_submission(existing, recorded.get("attempt"), self.hook.nodes_if_permitted() if needs_nodes(existing) else None, identity.first_try)
        if plan.reason:
            self.log.info("%s", plan.reason)
        for stale in plan.delete:  # their pods stop before anything new is submitted: never two at once
            delete_making_room(self.hook, resource, self.namespace, stale)
        if plan.user_error is not None and not self.retry_user_errors:
            raise UserCodeError(
                f"{plan.reason}. A deterministic bug is not resubmitted (retry_user_errors=False); "
                "fix the program and clear the task."
            )
        name = identity.workload_name(plan.attempt, self.name_prefix)
        earlier = Submission.from_dict(recorded, namespace=self.namespace, backend=self.backend)
        fresh = plan.reuse is None and plan.adopt is None
        # Nothing of this task runs: mind announced maintenance first, unless this is the
        # resubmission after a disruption an earlier try could not make (it resumes at once).
        minds = fresh and not plan.after_a_disruption
        maintenance = self.maintenance_before_submitting(context, maintenance or earlier.maintenance) if minds else earlier.maintenance
        record = Submission(name, self.namespace, self.backend, plan.attempt, time.time(), earlier.disruptions, identity.first_try, runs=earlier.runs, maintenance=maintenance)
        if fresh:
            resume_from = self._newest_checkpoint(context) if rounds.carries_on(plan.attempt, getattr(context["ti"], "try_number", None), identity.first_try) else None
            manifest = self.render_manifest(context, attempt=plan.attempt, resume_from=resume_from)
            self.raise_if_stopped()  # killed while it prepared: submit nothing
            adoption = self.hook.create_or_adopt(manifest, identity.key)
            verb = "submitted" if adoption.created else "adopted the existing"
            self.log.info("%s %s %s/%s (%s)", verb, resource.kind, self.namespace, name, self._kubectl_hint(name))
        if plan.reuse is not None:
            self._remember(context, record := record.found_finished(phases_written(plan.reuse), in_place_written(plan.reuse)))
            return self._complete(context, record, WorkloadState(Phase.SUCCEEDED, "succeeded in an earlier try"))
        return self._wait(context, record)

    def _remember(self, context: Context, record: Submission) -> None:
        """Note the submission where a kill, a retry and the links will look for it."""
        self.holding(workload_resource(self.backend), record.namespace, record.name)
        _store_set(context.get("task_state_store"), record.to_dict())
        context["ti"].xcom_push(key=STATE_KEY, value={**record.to_dict(), **self._link_fields()})

    def _wait(self, context: Context, record: Submission) -> dict[str, Any]:
        """Wait for ``record``'s workload to finish: in the triggerer, or here."""
        self._remember(context, record)
        if self.deferrable:
            trigger = self._trigger(context, record)
            self.defer(trigger=trigger, method_name="execute_complete", kwargs={"record": record.to_dict()})
        return self._wait_here(context, record)

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, record: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Back from the triggerer: act on the one event it sent.

        With no event (``airflow tasks test`` of a task a killed run left deferred), the task
        looks again, as a retry does: it re-attaches to its live workload, never submits a second.
        """
        if event is None:  # resumed with no event (a task left deferred, run again by hand): look again
            return self.execute(context)
        self.validate(context=context)  # a manifest's kind, namespace and name, read again in this process
        finished = WorkloadEvent.from_payload(event)
        submission = self._recorded(context, record, finished)
        self.holding(workload_resource(self.backend), submission.namespace, submission.name)
        if finished.status == "timeout":
            raise AirflowTaskTimeout(
                f"{submission.name} did not finish within execution_timeout ({self.execution_timeout}); "
                f"it was {'deleted' if finished.deleted else 'already gone'}. Last state: "
                f"{finished.state.summary() if finished.state else 'unknown'}"
            )
        if finished.status != "finished" or finished.state is None:
            if finished.forbidden:  # no try can watch it without the permission: hold no slice for it
                self.finished_with(workload_resource(self.backend), submission.namespace, submission.name, delete=True)
            raise outcome.lost_track(submission.name, finished, self._kubectl_hint(submission.name))
        submission = outcome.with_resume_logged(submission, finished.resumed_from)
        submission = submission.with_disruptions(*finished.restarts).ended(finished.phases, time.time(), finished.queued)
        if outcome.next_step(finished.state, finished.classification) is outcome.NextStep.RESUBMIT:
            return self._resubmit_after_disruption(context, submission, finished)
        return self._complete(context, submission, finished.state, finished.failure, finished.classification)

    def _recorded(self, context: Context, record: dict[str, Any] | None, event: WorkloadEvent) -> Submission:
        """The submission record: carried by the resume, else from the task state store or XCom."""
        if record is None:
            record = _store_get(context.get("task_state_store"))
        if record is None:
            record = context["ti"].xcom_pull(task_ids=self.task_id, key=STATE_KEY) or {}
        submission = Submission.from_dict(record, namespace=self.namespace, backend=self.backend)
        return dataclasses.replace(submission, name=event.name or submission.name)

    def _trigger(self, context: Context, record: Submission) -> Any:
        """The wait on ``record``'s workload; after a resubmission it reads where the program resumed."""
        from pathways_airflow.triggers.workload import PathwaysJobTrigger

        return PathwaysJobTrigger(
            name=record.name, namespace=self.namespace, backend=self.backend, target=self.hook.resolved_target().to_dict(),
            deadline=self.deadline(context), reads_resume=record.attempt > 0, checkpoint_dir=self.checkpoint_dir or None,
            gcp_conn_id=self.gcp_conn_id,
        )

    def _wait_here(self, context: Context, record: Submission) -> dict[str, Any]:
        """Wait in the worker (not deferring) with the same trigger, its log captured alike."""
        return self.execute_complete(context, self.wait_here(self._trigger(context, record)), record.to_dict())

    def _newest_checkpoint(self, context: Context) -> Checkpoint | None:  # GCS outages: waited out until the deadline
        deadline = self.deadline(context)
        return newest_committed_checkpoint(self.checkpoint_dir, gcp_conn_id=self.gcp_conn_id, deadline=deadline) if self.checkpoint_dir else None

    def _resubmit_after_disruption(self, context: Context, submission: Submission, event: WorkloadEvent) -> dict[str, Any]:
        """Maintenance, preemption or slice loss ended the workload: submit a fresh one that resumes.

        Runs inside this try: Airflow's retries are not spent, and the old workload is deleted
        before the next one exists, so there is never more than one.
        """
        assert event.classification is not None
        checkpoint = self._newest_checkpoint(context)
        disruption = outcome.disruption_of(
            event.classification,
            workload=submission.name,
            reached_step=event.last_step,
            resumed_from_step=checkpoint.step if checkpoint else None,
            now=time.time(), running_since=event.running_since or submission.started, earlier=submission.disruptions,
        )
        attempt, identity = submission.attempt + 1, self.task_identity(context)
        next_name = identity.workload_name(attempt, self.name_prefix)
        submission = outcome.with_disruption_resubmitted(submission, disruption, next_name, self.disruption_budget)
        exhausted = outcome.over_budget(submission, self.disruption_budget)
        self.log.warning("%s/%s ended by %s (%s); %d of %d disruptions used", self.namespace, submission.name, disruption.kind,
                         "; ".join(disruption.evidence[:3]), submission.resubmissions, self.disruption_budget)
        if not exhausted:  # recorded before the old workload goes: a worker that dies in between leaves
            # the next try the attempt to submit, the checkpoint to resume from, and this disruption
            self._remember(context, submission.next_attempt(next_name))
        delete_making_room(self.hook, workload_resource(self.backend), self.namespace, submission.name)
        self.released(workload_resource(self.backend), self.namespace, submission.name)
        submission = submission.deleted(time.time())
        if exhausted:
            raise DisruptionBudgetExhausted(
                messages.budget_exhausted_message(submission, self.disruption_budget),
                disruptions=[d.to_dict() for d in submission.disruptions],
            )
        manifest = self.render_manifest(context, attempt=attempt, resume_from=checkpoint)
        self.hook.create_or_adopt(manifest, identity.key)
        submission = submission.next_attempt(manifest["metadata"]["name"], submitted=time.time())
        self.log.info("submitted %s (attempt %d), %s", submission.name, attempt, messages.resume_line(self.resume, checkpoint))
        if self.wait_for_maintenance:
            self.report_slices()
        return self._wait(context, submission)

    def _complete(
        self,
        context: Context,
        record: Submission,
        state: WorkloadState,
        failure: Mapping[str, Any] | None = None,
        classification: Classification | None = None,
    ) -> dict[str, Any]:
        name = record.name
        observation = self.hook.observe(self.backend, name, self.namespace)
        if state.phase is Phase.SUCCEEDED:
            self._log_main_container_tail(observation)
            checkpoint = self._newest_checkpoint(context)
            # Kept before the deletion, so a retry after a crash returns it instead of resubmitting.
            _store_set(context.get("task_state_store"), {**record.to_dict(), "result": self._result(record, state, checkpoint, observation)})
            self.finished_with(workload_resource(self.backend), self.namespace, name, delete=self.delete_on_finish)
            result = self._result(record.deleted(time.time()) if self.delete_on_finish else record, state, checkpoint, observation)
            _store_set(context.get("task_state_store"), {**record.to_dict(), "result": result})
            self.log.info("%s: %s; %s", name, result["disruption_summary"], result["goodput_summary"])
            return self.reported(result)
        message = self._failure_message(observation, state, failure)
        self.log.error("%s", message)
        self.finished_with(workload_resource(self.backend), self.namespace, name, delete=self.delete_on_finish)
        raise outcome.workload_failure(state, message, classification, retry_user_errors=self.retry_user_errors)

    def _result(self, record: Submission, state: WorkloadState, checkpoint: Checkpoint | None, observation: Any) -> dict[str, Any]:
        found = (checkpoint.as_xcom() if checkpoint else None) if self.checkpoint_dir else NO_CHECKPOINT_DIR
        return workload_result(record, counted_state(state, observation), checkpoint=found, tpu=self.tpu_held(), uid=uid_of(observation), now=time.time())

    def _log_main_container_tail(self, observation: Any) -> None:
        from pathways_airflow.state.workload_parts import head_pod

        pod = head_pod(observation)
        container = self.main_container_name()
        if pod is None or container is None:
            return
        lines = self.hook.read_log_tail(self.namespace, pod["metadata"]["name"], container)
        if lines:
            self.log.info("last lines of %s/%s:\n%s", pod["metadata"]["name"], container, "\n".join(lines))

    def _failure_message(self, observation: Any, state: WorkloadState, failure: Mapping[str, Any] | None) -> str:
        failing = messages.failing_container(observation, state, failure)
        lines = (failure or {}).get("log_tail")
        if not lines and failing:
            lines = self.hook.read_log_tail(self.namespace, failing[0], failing[1])
        where, hint = f"{observation.backend} {self.namespace}/{observation.name}", self._kubectl_hint(observation.name)
        return messages.workload_failure_message(where, state, failing, lines or [], cloud_logging=bool(self.cluster_name), hint=hint)

    def _kubectl_hint(self, name: str) -> str:
        kind = "pathwaysjob" if self.backend == "pathwaysjob" else "jobset"
        return (f"Look further with: kubectl -n {self.namespace} describe {kind} {name}; "
                f"kubectl -n {self.namespace} get pods -l {well_known.jobset_selector(name)}")

    def _link_fields(self) -> dict[str, Any]:
        return {"project_id": self.project_id, "location": self.location, "cluster_name": self.cluster_name}



def _store_get(store: Any) -> dict[str, Any] | None:
    """The task's record in Airflow 3.3's task state store (absent on older versions)."""
    if store is None:
        return None
    value = store.get(STATE_KEY)
    return value if isinstance(value, dict) else None


def _store_set(store: Any, record: dict[str, Any]) -> None:
    if store is not None:
        store.set(STATE_KEY, record)
