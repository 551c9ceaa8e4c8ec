"""Deleting a server that ``DeployInferenceServerOperator`` deployed: the teardown task of a
setup/teardown pair. Engine-agnostic: what it deletes is found by the deploy task's label and the
server's deterministic names, never by what runs inside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS
from pathways_airflow.hooks.serving import ServingHook
from pathways_airflow.operators.base import ClusterOperator
from pathways_airflow.resources import JOB, LEADERWORKERSET, SERVICE, Resource
from pathways_airflow.spec.arguments import looks_templated, namespace_problem
from pathways_airflow.spec.engines import engine_named
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TASK_KEY_LABEL, TaskIdentity
from pathways_airflow.spec.serving import names_for
from pathways_airflow.spec.workload import optional_text

if TYPE_CHECKING:
    from airflow.sdk import Context


class TeardownInferenceServerOperator(ClusterOperator):
    """Delete a server deployed by :class:`~pathways_airflow.operators.inference.DeployInferenceServerOperator` (an Airflow teardown task).

    Finds what to delete without needing the setup's XCom: every LeaderWorkerSet, Service and Job
    labelled with the deploy task's key (computed from ``deploy_task_id`` and this run), plus the
    deterministic names of ``server`` when given (the deploy task's return value or the
    LeaderWorkerSet name) if pathways-airflow created them. Waits until their pods are gone.
    Nothing to delete is not an error. What it deletes is the same whatever the engine; ``engine``
    is accepted (and checked) so that a DAG can hand all three operators the same parameters.
    """

    template_fields: Sequence[str] = ("deploy_task_id", "server", "engine", "namespace", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        deploy_task_id: str | None = None,
        server: Mapping[str, Any] | str | None = None,
        engine: str | None = None,
        namespace: str = "default",
        cleanup_timeout: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deploy_task_id = deploy_task_id
        self.server = server
        self.engine = engine
        self.namespace = namespace
        self.cleanup_timeout = cleanup_timeout
        self.validate(only_known=True)

    def validate(self, *, only_known: bool = False) -> None:
        """Refuse what cannot name this task's server, before any API call (``InvalidWorkloadSpec``)."""
        problems: list[SpecProblem] = []
        if self.deploy_task_id is None and self.server is None:
            problems.append(
                SpecProblem("deploy_task_id", None, "set deploy_task_id (the setup task) or server (its return value)")
            )
        if self.deploy_task_id is not None and not (
            isinstance(self.deploy_task_id, str) and self.deploy_task_id.strip()
        ):
            problems.append(SpecProblem("deploy_task_id", self.deploy_task_id, "must be the setup task's task_id"))
        if not (only_known and looks_templated(self.namespace)):
            problems.extend(filter(None, [namespace_problem(self.namespace)]))
        if optional_text(self.engine) is not None and not (only_known and looks_templated(self.engine)):
            try:
                engine_named(self.engine)
            except InvalidWorkloadSpec as error:
                problems.extend(error.problems)
        if self.server and not (only_known and looks_templated(self.server)):
            name = self.server.get("name") if isinstance(self.server, Mapping) else self.server
            try:
                names_for(name if isinstance(name, str) else "")
            except InvalidWorkloadSpec:
                problems.append(
                    SpecProblem(
                        "server",
                        self.server,
                        "must be the deploy task's return value or its LeaderWorkerSet name (a DNS label)",
                    )
                )
        if problems:
            raise InvalidWorkloadSpec(problems)

    def targets(self, context: Context) -> list[tuple[Resource, str]]:
        """``(resource, name)`` of everything to delete, found by label and by name."""
        found: dict[tuple[str, str], Resource] = {}
        if self.deploy_task_id:
            ti = context["ti"]
            map_index = getattr(ti, "map_index", None)
            key = TaskIdentity(
                ti.dag_id, self.deploy_task_id, ti.run_id, -1 if map_index is None else map_index
            ).key
            for resource in (JOB, SERVICE, LEADERWORKERSET):
                for obj in self.hook.list(resource, self.namespace, label_selector=f"{TASK_KEY_LABEL}={key}"):
                    found[(resource.kind, obj["metadata"]["name"])] = resource
        if self.server:
            name = self.server.get("name") if isinstance(self.server, Mapping) else self.server
            names = names_for(str(name))
            for resource, item in ((JOB, names.job), (SERVICE, names.service), (LEADERWORKERSET, names.lws)):
                obj = self.hook.get(resource, self.namespace, item)
                labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
                if obj is None or labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE:
                    found.setdefault((resource.kind, item), resource)
                else:
                    self.log.warning(
                        "not deleting %s %s/%s: pathways-airflow did not create it",
                        resource.kind,
                        self.namespace,
                        item,
                    )
        return [(resource, name) for (_, name), resource in found.items()]

    def execute(self, context: Context) -> list[str]:
        self.validate()
        targets = self.targets(context)
        deleted = self.delete_each((resource, self.namespace, name) for resource, name in targets)
        if deleted:
            ServingHook(self.hook, self.namespace, log=self.log).wait_gone(targets, timeout=self.cleanup_timeout)
        else:
            self.log.info("nothing to delete: the server is already gone")
        return deleted


__all__ = ["TeardownInferenceServerOperator"]
