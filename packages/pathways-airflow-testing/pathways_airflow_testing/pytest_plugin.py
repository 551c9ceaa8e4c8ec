"""pytest plugin (entry point ``pytest11``): the ``pathways_cluster`` fixture.

``pathways_cluster`` is one :class:`~pathways_airflow_testing.LocalCluster` per test session,
with its :meth:`~pathways_airflow_testing.LocalCluster.client_environment` set while it runs
(``KUBECONFIG``, ``STORAGE_EMULATOR_HOST``, and the ``kubernetes_default`` and anonymous
``google_cloud_default`` Airflow connections), so the ``kubernetes`` clients, ``kubectl``,
``google-cloud-storage`` and the provider's operators and sensors find it without configuration. Options: ``--pathways-crds DIR`` (CRD schemas to
validate against; default ``$PATHWAYS_AIRFLOW_CRDS``) and ``--pathways-speed N`` (simulated
seconds per real second).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from pathways_airflow_testing import LocalCluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pathways-airflow")
    group.addoption("--pathways-crds", default=None, help="CRD YAML directory for the local cluster's schema checks")
    group.addoption("--pathways-speed", type=float, default=60.0, help="simulated seconds per real second (default 60)")


@pytest.fixture(scope="session")
def pathways_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    from pathways_airflow_testing import LocalCluster

    crds = request.config.getoption("--pathways-crds") or os.environ.get("PATHWAYS_AIRFLOW_CRDS")
    cluster = LocalCluster(crds=[crds] if crds else None, speed=request.config.getoption("--pathways-speed"))
    with cluster, cluster.client_environment_set():
        yield cluster
