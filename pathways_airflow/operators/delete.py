"""``DeletePathwaysJobOperator``: delete a workload and wait until its pods are gone."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS, ClusterConnectionMixin
from pathways_airflow.resources import POD, workload_resource
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.names import is_dns1123_label
from pathways_airflow.spec.render import BACKENDS

if TYPE_CHECKING:
    from airflow.sdk import Context


class DeletePathwaysJobOperator(ClusterConnectionMixin, BaseOperator):
    """Delete a PathwaysJob or JobSet (foreground: dependents first) and wait for its pods to go.

    Use it as an Airflow teardown task, or to clean up a workload by name. A workload that is
    already gone is not an error.

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
        if not is_dns1123_label(self.namespace):
            problems.append(SpecProblem("namespace", self.namespace, "must be a DNS label"))
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
        deadline = time.monotonic() + self.wait_seconds
        selector = f"jobset.sigs.k8s.io/jobset-name={self.name}"
        while self.wait_seconds and time.monotonic() < deadline:
            remaining = self.hook.list(POD, self.namespace, label_selector=selector)
            if not remaining and self.hook.get(resource, self.namespace, self.name) is None:
                self.log.info("%s/%s and its pods are gone", self.namespace, self.name)
                return True
            time.sleep(2)
        if self.wait_seconds:
            self.log.warning("%s/%s: pods still terminating after %.0fs", self.namespace, self.name, self.wait_seconds)
        return True
