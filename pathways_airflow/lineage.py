"""OpenLineage objects for a task's :class:`~pathways_airflow.run.lineage.Lineage`.

The OpenLineage provider is optional (``pip install 'pathways-airflow[openlineage]'``; Cloud
Composer preinstalls it). Its listener asks an operator for ``get_openlineage_facets_on_complete``
only when it is installed and enabled, and only then is this module imported: without it nothing
changes and nothing of OpenLineage is loaded. Datasets and facets come from the provider's public
modules (``airflow.providers.openlineage.extractors.OperatorLineage``, and the OpenLineage client's
facets through ``airflow.providers.common.compat.openlineage.facet``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pathways_airflow.run.lineage import Lineage, dataset_name


@cache
def _facet_class(name: str, keys: tuple[str, ...]) -> type:
    """A run facet class whose fields are ``keys``: OpenLineage serialises a facet by its attributes."""
    import attr
    from airflow.providers.common.compat.openlineage.facet import RunFacet

    title = "".join(part.title() for part in name.split("_")) + "RunFacet"
    return attr.make_class(title, {key: attr.ib(default=None, kw_only=True) for key in keys}, bases=(RunFacet,))


def run_facet(name: str, data: Mapping[str, Any]) -> Any:
    """The run facet ``name`` holding ``data`` (JSON-shaped: numbers, strings, lists, dicts)."""
    return _facet_class(name, tuple(data))(**dict(data))


def operator_lineage(lineage: Lineage) -> Any:
    """The provider's ``OperatorLineage`` for ``lineage``."""
    from airflow.providers.common.compat.openlineage.facet import InputDataset, OutputDataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(
        inputs=[InputDataset(*dataset_name(uri)) for uri in lineage.inputs],
        outputs=[OutputDataset(*dataset_name(uri)) for uri in lineage.outputs],
        run_facets={name: run_facet(name, data) for name, data in lineage.run_facets.items()},
    )


__all__ = ["operator_lineage", "run_facet"]
