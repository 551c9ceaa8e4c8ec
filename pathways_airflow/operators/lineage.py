"""``ReportsLineage``: what the OpenLineage listener asks an operator once its task has succeeded.

Each operator names its rule (``lineage_rule``, a function of the operator and its result, in
:mod:`pathways_airflow.run.lineage`) and hands its result to :meth:`ReportsLineage.reported` on
the way out; the listener then gets the datasets and run facets. The result is kept on the
operator rather than read back from XCom: the listener runs in the same task process, right after
the task returned, also after a deferral (``execute_complete`` runs on the same instance).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pathways_airflow.run.lineage import (
    Lineage,
    benchmark_lineage,
    conversion_lineage,
    regression_lineage,
    training_lineage,
)


def cluster_of(operator: Any) -> str:
    """The cluster the task ran on, as the run facet names it: the GKE cluster, else the connection."""
    parts = [getattr(operator, name, None) for name in ("project_id", "location", "cluster_name")]
    if parts[2]:
        return "/".join(str(p) for p in parts if p)
    return f"kubernetes_conn_id={getattr(operator, 'kubernetes_conn_id', None)}"


class ReportsLineage:
    """Mixed into an operator: its datasets and run facets for OpenLineage, from the result it returned."""

    lineage_rule: ClassVar[Callable[[Any, Mapping[str, Any]], Lineage] | None] = None
    _reported: Mapping[str, Any] | None = None

    def reported(self, result: dict[str, Any]) -> dict[str, Any]:
        """Keep ``result`` for the lineage and return it: ``return self.reported(result)``."""
        self._reported = result
        return result

    def lineage(self) -> Lineage | None:
        """The task's lineage as plain data (``None`` before it has a result)."""
        rule = type(self).lineage_rule
        return None if rule is None or self._reported is None else rule(self, self._reported)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Called by the OpenLineage provider's listener (only where it is installed)."""
        from pathways_airflow.lineage import operator_lineage

        lineage = self.lineage()
        return None if lineage is None else operator_lineage(lineage)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """A task that failed after writing (a regression is recorded, then fails) reports what it wrote."""
        return self.get_openlineage_facets_on_complete(task_instance)


def training_rule(operator: Any, result: Mapping[str, Any]) -> Lineage:
    return training_lineage(result, checkpoint_dir=operator.checkpoint_dir, cluster=cluster_of(operator))


def conversion_rule(operator: Any, result: Mapping[str, Any]) -> Lineage:
    return conversion_lineage(result, cluster=cluster_of(operator))


def benchmark_rule(operator: Any, result: Mapping[str, Any]) -> Lineage:
    server = operator.server()  # the rendered, validated parameters, as the task ran them
    return benchmark_lineage(result, checkpoint=server.load_parameters_path, hf_model=server.hf_model, cluster=cluster_of(operator))


def regression_rule(operator: Any, result: Mapping[str, Any]) -> Lineage:
    return regression_lineage(result, results_uri=operator.check().metrics.get("result_uri"))


__all__ = ["ReportsLineage", "benchmark_rule", "cluster_of", "conversion_rule", "regression_rule", "training_rule"]
