"""``DeletePathwaysJobOperator``: delete a workload and wait until its pods are gone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS, ClusterConnectionMixin
from pathways_airflow.hooks.reclaim import wait_reclaimed
from pathways_airflow.resources import workload_resource
from pathways_airflow.spec.arguments import namespace_problem
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import is_dns1123_label
from pathways_airflow.spec.render import BACKENDS

if TYPE_CHECKING:
    from airflow.sdk import Context


class DeletePathwaysJobOperator(ClusterConnectionMixin, BaseOperator):
    """Delete a PathwaysJob or JobSet (foreground: dependents first) and wait for its pods to go.

    Use it as an Airflow teardown task, or to clean up a workload by name. A workload that is
    already gone is not an error. Pods the cluster's garbage collector has not reached once their
    grace period is over are deleted directly (:mod:`pathways_airflow.state.reclaim`).

    :param name: workload name (often ``{{ ti.xcom_pull('train')['name'] }}``).
    :param wait_seconds: how long to wait for the pods to terminate (0: do not wait).
    """

    template_fields: Sequence[str] = ("name", "namespace", "backend", *CLUSTER_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        name: str,
        namespace: str = "default",
        backend: str = "pathwaysjob",
        wait_seconds: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.namespace = namespace
        self.backend = backend
        self.wait_seconds = wait_seconds

    def execute(self, context: Context) -> bool:
        problems = []
        if self.backend not in BACKENDS:
            problems.append(SpecProblem("backend", self.backend, "unknown backend", BACKENDS))
        problems.extend(filter(None, [namespace_problem(self.namespace)]))
        if not isinstance(self.name, str) or not is_dns1123_label(self.name):
            # A PathwaysJob or JobSet name is a DNS label: "..", "a/b" or "" would address
            # something else than one workload.
            problems.append(SpecProblem("name", self.name, "must name the workload to delete (a DNS label)"))
        if problems:
            raise InvalidWorkloadSpec(problems)
        resource = workload_resource(self.backend)
        deleted = self.hook.delete(resource, self.namespace, self.name)
        if not deleted:
            self.log.info("%s %s/%s is already gone", resource.kind, self.namespace, self.name)
            return False
        self.log.info("deleting %s %s/%s", resource.kind, self.namespace, self.name)
        if not self.wait_seconds:
            return True
        left = wait_reclaimed(self.hook, self.namespace, self.name, timeout=self.wait_seconds)
        if left.gone:
            self.log.info("%s/%s and its pods are gone", self.namespace, self.name)
        else:
            self.log.warning("%s/%s: %d pods still terminating after %.0fs", self.namespace, self.name, left.holding, self.wait_seconds)
        return True
