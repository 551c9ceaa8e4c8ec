"""``PathwaysJobOperator``: run a program on TPU slices as a Pathways workload.

This module holds the operator's parameters, templating and dry run. Every decision — is the
spec valid, what is the name, what is the manifest — is made by the pure ``spec`` package; the
operator only gathers its (rendered) parameters and asks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf

from pathways_airflow.spec import render
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import TaskIdentity, check_name_prefix, is_dns1123_label
from pathways_airflow.spec.render import BACKENDS
from pathways_airflow.spec.workload import CustomComponent, Workload, build_workload

if TYPE_CHECKING:
    from airflow.sdk import Context

DRY_RUN_RUN_ID = "dry-run"
"""The run id ``render_manifest()`` uses without a context, so a dry run never names a real run."""

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
    "resources",
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
    "labels",
    "annotations",
)


def looks_templated(value: Any) -> bool:
    """True if ``value`` (or anything inside it) will only be known after Jinja or XCom resolution."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(looks_templated(k) or looks_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(looks_templated(v) for v in value)
    # XComArg and other lazy values resolve at run time.
    return hasattr(value, "resolve") or hasattr(value, "iter_references")


class PathwaysJobOperator(BaseOperator):
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
    :param namespace: namespace of the workload.
    :param kubernetes_conn_id: Airflow connection to the cluster, or GKE via ``project_id`` +
        ``location`` + ``cluster_name`` + ``gcp_conn_id``.
    :param checkpoint_dir: where the program writes Orbax checkpoints (enables resume and the
        checkpoint in the result).
    :param name_prefix: human-readable start of the workload name (≤ 10 characters); by
        default it comes from the task id. The rest of the name is a hash of the task instance.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param delete_on_finish: delete the workload once it has finished.
    """

    template_fields: Sequence[str] = (
        *_WORKLOAD_FIELDS,
        "namespace",
        "backend",
        "checkpoint_dir",
        "name_prefix",
        "kubernetes_conn_id",
        "project_id",
        "location",
        "cluster_name",
        "gcp_conn_id",
    )
    template_fields_renderers = {
        "env": "json",
        "command": "py",
        "arguments": "py",
        "labels": "json",
        "annotations": "json",
        "resources": "json",
        "node_selector": "json",
    }
    ui_color = "#c5e1a5"

    def __init__(
        self,
        *,
        topology: str,
        pathways_dir: str,
        tpu: str | None = None,
        machine_type: str | None = None,
        num_slices: int | str = 1,
        image: str | None = None,
        command: Sequence[str] | None = None,
        arguments: Sequence[str] | None = None,
        env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        resources: Mapping[str, Mapping[str, Any]] | None = None,
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
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        backend: str = "pathwaysjob",
        namespace: str = "default",
        kubernetes_conn_id: str | None = "kubernetes_default",
        project_id: str | None = None,
        location: str | None = None,
        cluster_name: str | None = None,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        use_dns_endpoint: bool = False,
        checkpoint_dir: str | None = None,
        name_prefix: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        delete_on_finish: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topology = topology
        self.pathways_dir = pathways_dir
        self.tpu = tpu
        self.machine_type = machine_type
        self.num_slices = num_slices
        self.image = image
        self.command = command
        self.arguments = arguments
        self.env = env
        self.resources = resources
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
        self.labels = labels
        self.annotations = annotations
        self.backend = backend
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.project_id = project_id
        self.location = location
        self.cluster_name = cluster_name
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.use_dns_endpoint = use_dns_endpoint
        self.checkpoint_dir = checkpoint_dir
        self.name_prefix = name_prefix
        self.deferrable = deferrable
        self.delete_on_finish = delete_on_finish
        # Fail at DAG parse time for everything already known; templated values are checked
        # again once rendered, before anything is submitted.
        self.validate(only_known=True)

    # --- pure questions, answered by the spec package -----------------------------------------

    def validate(self, *, only_known: bool = False) -> None:
        """Raise ``InvalidWorkloadSpec`` (a ``ValueError``) for anything that must not be submitted.

        With ``only_known``, parts whose values are still templates are left for later.
        """
        problems: list[SpecProblem] = []
        placement = {
            "backend": self.backend,
            "namespace": self.namespace,
            "name_prefix": self.name_prefix,
            "checkpoint_dir": self.checkpoint_dir,
        }
        if not (only_known and looks_templated(placement)):
            problems.extend(_placement_problems(**placement))
        if not (only_known and looks_templated(self._workload_arguments())):
            try:
                self.workload()
            except InvalidWorkloadSpec as error:
                problems.extend(error.problems)
        if problems:
            raise InvalidWorkloadSpec(problems)

    def _workload_arguments(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _WORKLOAD_FIELDS}

    def workload(self) -> Workload:
        """The validated workload from the operator's current (rendered) parameters."""
        return build_workload(**self._workload_arguments())

    def task_identity(self, context: Context | None = None) -> TaskIdentity:
        """Which task instance the workload belongs to; placeholders for a dry run."""
        dag_id = self.dag_id if self.has_dag() else "dry-run"
        if context is None:
            return TaskIdentity(dag_id, self.task_id, DRY_RUN_RUN_ID)
        ti = context["ti"]
        map_index = getattr(ti, "map_index", None)
        return TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else map_index)

    def render_manifest(self, context: Context | None = None, *, attempt: int = 0) -> dict[str, Any]:
        """Exactly what would be applied: the PathwaysJob or JobSet manifest (a dry run).

        Works without a context (placeholder run id); inside a task it uses the task instance,
        so the name matches the one ``execute`` submits.
        """
        self.validate()
        identity = self.task_identity(context)
        return render(
            self.workload(),
            backend=self.backend,
            name=identity.workload_name(attempt, self.name_prefix),
            namespace=self.namespace,
            labels=identity.labels(attempt),
            annotations=identity.annotations(),
        )


def _placement_problems(
    *, backend: Any, namespace: Any, name_prefix: Any, checkpoint_dir: Any
) -> list[SpecProblem]:
    problems = []
    if backend not in BACKENDS:
        problems.append(SpecProblem("backend", backend, "unknown backend", BACKENDS))
    if not isinstance(namespace, str) or not is_dns1123_label(namespace):
        problems.append(SpecProblem("namespace", namespace, "must be a DNS label (≤ 63 of [a-z0-9-])"))
    try:
        check_name_prefix(name_prefix)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
    if checkpoint_dir is not None and not (
        isinstance(checkpoint_dir, str) and (checkpoint_dir.startswith("gs://") or checkpoint_dir.startswith("/"))
    ):
        problems.append(
            SpecProblem("checkpoint_dir", checkpoint_dir, "must be a gs:// path or an absolute local path")
        )
    return problems
