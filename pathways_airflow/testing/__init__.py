"""``LocalCluster`` and its companions, one import away: re-exported from ``pathways-airflow-testing``.

The local cluster, its stand-in programs and its pytest plugin are a distribution of their own
(``pathways_airflow_testing``), installed by the ``testing`` extra, so that the provider alone
imports and registers none of them. This module is the provider's only import of it; without the
distribution, importing it says which extra to install.
"""

from __future__ import annotations

from pathways_airflow.extensions import INSTALL_HINT

try:
    from pathways_airflow_testing import (
        FaultRule,
        LocalCluster,
        NodePool,
        SchemaChecksOff,
        default_node_pools,
        tpu_pool,
    )
except ModuleNotFoundError as error:
    if error.name != "pathways_airflow_testing":
        raise
    raise ImportError(
        f"pathways_airflow.testing needs the pathways-airflow-testing distribution: {INSTALL_HINT}",
        name=__name__,
    ) from error

__all__ = ["FaultRule", "LocalCluster", "NodePool", "SchemaChecksOff", "default_node_pools", "tpu_pool"]
