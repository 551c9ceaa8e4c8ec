"""A local GKE + Pathways cluster for tests: ``LocalCluster`` and the ``pathways_cluster`` fixture.

See :mod:`pathways_airflow.testing.cluster`. Users test their own DAGs against it, as they would
test AWS code against moto.
"""

from pathways_airflow.testing.cluster import LocalCluster, SchemaChecksOff
from pathways_airflow.testing.faults import FaultRule
from pathways_airflow.testing.nodes import NodePool, default_node_pools, tpu_pool

__all__ = ["FaultRule", "LocalCluster", "NodePool", "SchemaChecksOff", "default_node_pools", "tpu_pool"]
