"""A local GKE + Pathways cluster for tests: ``LocalCluster`` and the ``pathways_cluster`` fixture.

See :mod:`pathways_airflow_testing.cluster`. Users test their own DAGs against it, as they would
test AWS code against moto. A distribution of its own (``pathways-airflow-testing``, installed by
the provider's ``testing`` extra), so that the provider alone imports and registers none of it;
``pathways_airflow.testing`` re-exports the names below.
"""

__version__ = "0.1.0"
"""Released with the provider, at the provider's version."""

from pathways_airflow_testing.cluster import LocalCluster, SchemaChecksOff
from pathways_airflow_testing.faults import FaultRule
from pathways_airflow_testing.nodes import NodePool, default_node_pools, tpu_pool

__all__ = ["FaultRule", "LocalCluster", "NodePool", "SchemaChecksOff", "default_node_pools", "tpu_pool"]
